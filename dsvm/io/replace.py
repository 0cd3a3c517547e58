"""Writing an output safely: the one routine every file and folder dsvm writes goes through.

:func:`replacing` stages the new output in a private temporary folder next to
the target (``.NAME.XXXXXXXX.dsvm-tmp``, made by :func:`tempfile.mkdtemp`:
an unpredictable name, created exclusively, mode 0700, on the target's file
system) and moves it into place only when it is complete, so

- a crash or an error leaves the old output as it was, never a half-written
  one under the target name (a process killed outright can leave a
  ``.*.dsvm-tmp`` folder behind, which may be deleted);
- a symbolic link planted at some temporary name cannot redirect the write:
  nothing is ever opened under a predictable name, and files are created
  with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (:func:`create_exclusive`);
- an existing target is replaced only with ``overwrite=True`` **and** only
  when it is what dsvm wrote, as recognised by its format marker (the
  ``ours`` test each writer passes: a dataset's zarr attributes, a model's or
  checkpoint's metadata, a report folder's marker file, ...).  Anything else,
  a symbolic link included, is refused with :class:`NotDsvmOutputError`
  naming the path and the reason;
- a full disk ends in :class:`NoSpaceError` naming the target and, where
  known, the space needed.

Report folders (a pipeline's ``output``, a CV report) are not replaced but
written into: dsvm writes only into a new or empty folder, or one holding its
marker file ``.dsvm-output`` (:func:`claim_output_folder`), and each file in
it goes through :func:`replacing` too.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

logger = logging.getLogger(__name__)

__all__ = ["NotDsvmOutputError", "NoSpaceError", "Staged", "replacing", "write_file", "check_replaceable",
           "create_exclusive", "regular_file_problem", "TMP_SUFFIX", "OUTPUT_MARKER", "check_output_folder",
           "claim_output_folder", "write_report_file", "save_figure"]

TMP_SUFFIX = ".dsvm-tmp"
# ours(path) -> None when ``path`` is an output dsvm wrote, else why it is not (a short phrase)
Recogniser = Callable[[Path], "str | None"]


class NotDsvmOutputError(FileExistsError):
    """The target exists and is not an output dsvm wrote (or ``overwrite`` was not given)."""


class NoSpaceError(OSError):
    """The file system ran out of space (or quota) while an output was written."""

    def __init__(self, path: Path, needed: int | None = None):
        free = _free_bytes(path.parent)
        need = f"needs about {_size(needed)}, " if needed else ""
        have = f"{_size(free)} free" if free is not None else "free space unknown"
        super().__init__(errno.ENOSPC, f"{path}: no space left on the device ({need}{have}); "
                                       "nothing was replaced")
        self.filename = str(path)

    def __str__(self) -> str:
        return self.strerror


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)  # pragma: no cover


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def regular_file_problem(path: Path) -> str | None:
    """None if ``path`` itself (not a link's target) is a regular file, else what it is instead."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "it does not exist"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "it is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    return None


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def check_replaceable(target: str | os.PathLike, overwrite: bool, ours: Recogniser, what: str) -> Path:
    """The target as an absolute path, if it may be written (see the module docstring).

    Raises
    ------
    NotDsvmOutputError
        ``target`` exists and ``overwrite`` is False, or it is not a ``what`` dsvm wrote.
    """
    path = Path(target).expanduser().absolute()
    if not _exists(path):
        return path
    reason = ours(path)
    if reason is not None:
        raise NotDsvmOutputError(f"{path} exists and is not a {what} written by dsvm ({reason}); dsvm replaces only "
                                 f"its own outputs: move it away or choose another path")
    if not overwrite:
        raise NotDsvmOutputError(f"{path} already exists; pass overwrite=True (on the command line: --overwrite) "
                                 "to replace it")
    return path


@dataclass(frozen=True)
class Staged:
    """Where a new output is written: ``path`` (create it there), inside the private folder ``work``.

    Scratch files may go anywhere else in ``work``; it is removed at the end.
    """

    work: Path
    path: Path


@contextmanager
def replacing(target: str | os.PathLike, *, overwrite: bool, ours: Recogniser, what: str,
              make_parents: bool = False, needed: int | None = None) -> Iterator[Staged]:
    """Stage a new output for ``target`` and move it into place when the ``with`` block succeeds.

    Parameters
    ----------
    target : path-like
        The file or folder to write.
    overwrite : bool
        Whether an existing ``target`` may be replaced (only if ``ours`` accepts it).
    ours : callable
        ``ours(path)`` returns None for an output dsvm wrote, else the reason it is not one.
    what : str
        What is written ("model", "dataset", ...), for messages.
    make_parents : bool
        Create missing parent folders (otherwise a missing folder is an error).
    needed : int, optional
        Bytes the output will take, if known (named when the disk is full).

    Yields
    ------
    Staged
        Write the new output to ``staged.path``.
    """
    path = check_replaceable(target, overwrite, ours, what)
    _check_parents(path, make_parents)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent))
    except OSError as exc:
        _raise_for_os_error(exc, path, needed)
    try:
        staged = Staged(work, work / "store")
        yield staged
        if not _exists(staged.path):
            raise RuntimeError(f"{path}: nothing was written")
        _commit(staged.path, check_replaceable(path, overwrite, ours, what), work)
        logger.debug("wrote %s", path)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)  # first: the free space reported is what is really left
        _raise_for_os_error(exc, path, needed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_parents(path: Path, may_create: bool) -> None:
    """The nearest existing ancestor of ``path`` must be a folder (and be the parent unless ``may_create``)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        if not may_create:
            raise FileNotFoundError(errno.ENOENT, f"folder {folder} does not exist", str(path))
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{folder} is not a folder", str(path))


def _raise_for_os_error(exc: OSError, path: Path, needed: int | None):
    from .io.errors import DiskFullError  # deferred: dsvm.io imports this module

    if isinstance(exc, (NoSpaceError, DiskFullError)):  # already names what filled up
        raise exc
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise NoSpaceError(path, needed) from exc
    raise exc


def _commit(new: Path, path: Path, work: Path) -> None:
    """Move ``new`` to ``path``; an old output is kept aside until the new one is in place."""
    if not _exists(path) or not new.is_dir():
        os.replace(new, path)  # a file replaces a file atomically
        return
    previous = work / "previous"
    os.rename(path, previous)
    try:
        os.rename(new, path)
    except BaseException:
        os.rename(previous, path)
        raise


def create_exclusive(path: Path) -> BinaryIO:
    """Open a new file for writing: never an existing one, never through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666)
    return os.fdopen(fd, "wb")


def write_file(target: str | os.PathLike, write: Callable[[BinaryIO], None], *, overwrite: bool,
               ours: Recogniser, what: str, needed: int | None = None) -> Path:
    """Write one file through :func:`replacing`: ``write(f)`` fills it, then it is synced and moved into place."""
    with replacing(target, overwrite=overwrite, ours=ours, what=what, needed=needed) as staged:
        with create_exclusive(staged.path) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    return Path(target).expanduser().absolute()


# --------------------------------------------------------------------------- report folders
OUTPUT_MARKER = ".dsvm-output"
MARKER_TEXT = '{"format": "dsvm-output"}\n'


def output_folder_problem(folder: str | os.PathLike) -> str | None:
    """None if dsvm may write into ``folder`` (absent, empty, or holding its marker), else why not."""
    folder = Path(folder)
    if not _exists(folder):
        return None
    if not folder.is_dir():
        return "it is not a folder"
    marker = folder / OUTPUT_MARKER
    if marker.is_file() and not marker.is_symlink():
        return None
    if any(folder.iterdir()):
        return f"it is not empty and has no {OUTPUT_MARKER} marker"
    return None


def check_output_folder(folder: str | os.PathLike, what: str = "output folder") -> Path:
    """``folder`` as a path if dsvm may write into it; :class:`NotDsvmOutputError` otherwise."""
    folder = Path(folder)
    reason = output_folder_problem(folder)
    if reason is not None:
        raise NotDsvmOutputError(f"{folder} is not a dsvm {what} ({reason}); dsvm writes only into new, empty or "
                                 "its own output folders: choose another output folder or empty this one")
    return folder


def claim_output_folder(folder: str | os.PathLike, what: str = "output folder") -> Path:
    """Create ``folder`` (or accept an empty or dsvm-written one) and mark it as dsvm's output folder."""
    folder = check_output_folder(folder, what)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / OUTPUT_MARKER
    if not marker.is_file():
        try:
            with create_exclusive(marker) as f:
                f.write(MARKER_TEXT.encode())
        except FileExistsError:
            pass
    return folder


def write_report_file(path: str | os.PathLike, content: str | bytes | Callable[[BinaryIO], None]) -> Path:
    """Write one file of a report folder (text, bytes, or ``content(f)`` for e.g. a figure).

    The folder must be a dsvm output folder (:func:`claim_output_folder`); an
    existing file of that name is replaced if it is a regular file.
    """
    path = Path(path)
    check_output_folder(path.parent)
    if callable(content):
        write = content
    else:
        data = content.encode("utf-8") if isinstance(content, str) else content

        def write(f):
            f.write(data)
    return write_file(path, write, overwrite=True, ours=regular_file_problem, what="report file")


def save_figure(fig, path: str | os.PathLike, **savefig_kwargs) -> Path:
    """A matplotlib figure as a PNG file of a report folder (see :func:`write_report_file`)."""
    return write_report_file(path, lambda f: fig.savefig(f, format="png", **savefig_kwargs))
