"""The errors of reading input files and writing datasets, each naming what and where.

* :class:`InputFileError` — an input file (LIBSVM, CSV, ``.npy``, compressed
  or not) that cannot be read as data: a malformed line (named by file and
  line), a truncated or corrupted gzip / xz / bzip2 stream, an ``.npy``
  array of the wrong kind;
* :class:`DiskFullError` — the disk filled while dsvm wrote a dataset or a
  scratch store; names the path, what was written and what was free.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "InputFileError", "DiskFullError", "is_disk_full", "disk_full_error", "disk_full_names", "format_bytes",
    "tree_bytes",
]

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class InputFileError(ValueError):
    """An input file cannot be read as data; the message names the file (and the line)."""


class DiskFullError(OSError):
    """The disk (or the quota) filled while dsvm was writing; nothing half-written is left."""

    def __str__(self) -> str:
        return str(self.strerror)


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def tree_bytes(path: str | os.PathLike) -> int:
    """Bytes of the files under ``path`` (0 if it does not exist)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def disk_full_error(
    exc: OSError, target: str | os.PathLike, what: str, written: int | None = None, needed: float | None = None,
    hint: str = "free some space or choose another place",
) -> DiskFullError:
    """A :class:`DiskFullError` for ``exc`` (an ``ENOSPC`` / ``EDQUOT`` error) while writing ``what`` at ``target``."""
    folder = Path(target)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = f"{format_bytes(shutil.disk_usage(folder).free)} free"
    except OSError:
        free = "free space unknown"
    facts = [free]
    if written is not None:
        facts.insert(0, f"{format_bytes(written)} written before it filled")
    if needed is not None:
        facts.append(f"{what} needs about {format_bytes(needed)}")
    reason = "the disk quota is exhausted" if exc.errno == errno.EDQUOT else "no space left on the device"
    return DiskFullError(exc.errno, f"{target}: {reason} while writing {what} ({'; '.join(facts)}); {hint}")


@dataclass
class SpaceNeeded:
    """What :func:`disk_full_names` reports as needed, once the writer knows it."""

    bytes: float | None = None


@contextmanager
def disk_full_names(target: str | os.PathLike, work: str | os.PathLike, what: str) -> Iterator[SpaceNeeded]:
    """Turn a disk-full ``OSError`` raised inside into a :class:`DiskFullError` naming ``target``.

    ``work`` is the temporary folder being written (its size is reported);
    set ``.bytes`` of the yielded object when the space needed is known.
    """
    needed = SpaceNeeded()
    try:
        yield needed
    except OSError as exc:
        if not is_disk_full(exc) or isinstance(exc, DiskFullError):
            raise
        raise disk_full_error(exc, target, what, written=tree_bytes(work), needed=needed.bytes,
                              hint="free some space or choose another target; nothing was written") from None
