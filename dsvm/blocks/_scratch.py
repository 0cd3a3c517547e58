"""Temporary folders dsvm makes, marked with their owner, and what killed runs leave behind.

Every temporary folder dsvm makes (a scratch feature store ``dsvm-features-PID-*.zarr``,
the temporary dataset of ``dsvm train FILE`` ``dsvm-train-PID-*`` (of ``dsvm evaluate`` / ``predict``:
``dsvm-input-PID-*``), the staging folder ``.NAME.*.dsvm-tmp`` of every output
being written (see :mod:`dsvm.io._replace`: a dataset, model, checkpoint, prediction
or report file) holds an owner marker, ``.dsvm-owner.json``::

    {"format": "dsvm-temporary", "kind": "features", "pid": 4242, "host": "node7",
     "process_started": 1767193200.42, "created_at": "...", "created_by": "dsvm 0.1.0"}

A run removes its folders when it ends, also on an exception, Ctrl-C or SIGTERM
(see :mod:`dsvm.signals`).  Only ``kill -9`` (or a crash of the machine) leaves
them; such a folder is *stale* when its owner process is gone: the marker names
this host and no process with that PID and start time runs.  A new scratch
folder sweeps the stale ones next to it (:func:`sweep_stale`), and ``dsvm clean``
lists and removes what :func:`find_leftovers` finds under a folder.

A folder is removed only when both its name has the form of one of dsvm's
temporary folders and it holds a valid owner marker whose process is gone.  A
name alone proves nothing (a user's ``.backup.tmp-99999`` or ``dsvm-train-old``
is theirs), so folders of another host, folders without a marker and files are
never removed.
"""

from __future__ import annotations

import datetime
import errno
import json
import logging
import math
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

__all__ = [
    "OWNER_FILE", "make_temporary_folder", "temporary_folder", "claim_folder", "mark_owner", "read_owner",
    "Leftover", "find_leftovers", "sweep_stale", "remove_leftover", "remove_temporary_folder",
]

OWNER_FILE = ".dsvm-owner.json"
MARKER_FORMAT = "dsvm-temporary"
FOLDER_PREFIX = "dsvm-"
# the names of dsvm's temporary folders (with or without a marker: older versions wrote none)
DSVM_FOLDER = re.compile(r"^dsvm-(?:features|train|input)-.+|.+\.dsvm-tmp$")
MAX_MARKER_BYTES = 4096  # a marker is one short JSON line; anything larger is not one
_START_TOLERANCE = 1.0  # seconds: process start times are rounded to clock ticks


def _dsvm_version() -> str:
    try:
        return f"dsvm {version('dsvm')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "dsvm"


def mark_owner(folder: str | os.PathLike, kind: str) -> None:
    """Write the owner marker of this process into ``folder``."""
    marker = {
        "format": MARKER_FORMAT,
        "kind": kind,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "process_started": psutil.Process().create_time(),
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "created_by": _dsvm_version(),
    }
    Path(folder, OWNER_FILE).write_text(json.dumps(marker))


def read_owner(folder: str | os.PathLike) -> dict | None:
    """The owner marker of ``folder``, or None if it has none (or not a valid one).

    The marker is read only if it is a small regular file (never through a link, never a FIFO).
    """
    try:
        fd = os.open(Path(folder, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MARKER_BYTES:
            return None
        try:
            marker = json.loads(f.read(MAX_MARKER_BYTES))
        except (OSError, ValueError, RecursionError):
            return None
    return marker if _valid_marker(marker) else None


def _valid_marker(marker) -> bool:
    """What :func:`mark_owner` writes: a positive PID (not a bool), a host name, a finite positive start time;
    anything else is not a marker, and a folder holding it is kept."""
    if not (isinstance(marker, dict) and marker.get("format") == MARKER_FORMAT):
        return False
    pid, host, started = marker.get("pid"), marker.get("host"), marker.get("process_started")
    return (type(pid) is int and 0 < pid < 2**31 and isinstance(host, str) and bool(host)
            and type(started) in (int, float) and math.isfinite(started) and started > 0)


def _process_running(pid: int, started: float | None = None) -> bool:
    """True if process ``pid`` runs on this host (and, given ``started``, is the one started then)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(proc.create_time() - started) < _START_TOLERANCE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def owner_state(marker: dict) -> str:
    """``"running"``, ``"gone"`` (stale) or ``"other host"`` for an owner marker."""
    if marker["host"] != socket.gethostname():
        return "other host"
    return "running" if _process_running(marker["pid"], marker["process_started"]) else "gone"


def make_temporary_folder(base: str | os.PathLike, kind: str, suffix: str = "") -> Path:
    """A new marked folder ``dsvm-KIND-PID-XXXX<suffix>`` in ``base``, after sweeping stale ones there."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    sweep_stale(base)
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{kind}-{os.getpid()}-", suffix=suffix, dir=base))
    try:
        mark_owner(folder, kind)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def claim_folder(folder: str | os.PathLike, kind: str) -> None:
    """Mark a temporary folder made elsewhere (an ingest's working folder) as this process's, after
    sweeping the stale folders next to it."""
    sweep_stale(Path(folder).parent)
    mark_owner(folder, kind)


@contextmanager
def temporary_folder(base: str | os.PathLike | None, kind: str) -> Iterator[Path]:
    """:func:`make_temporary_folder` (default ``base``: the system temporary folder), removed on exit
    (:func:`remove_temporary_folder`)."""
    folder = make_temporary_folder(base or tempfile.gettempdir(), kind)
    try:
        yield folder
    finally:
        remove_temporary_folder(folder)


#: how often :func:`remove_temporary_folder` starts over when files keep appearing, and the pause between
REMOVE_ATTEMPTS = 20
REMOVE_PAUSE_SECONDS = 0.1


def _remove_all_but(folder: Path, keep: str) -> None:
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name == keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:  # gone already, or busy: the next attempt sees it again
                pass


def remove_temporary_folder(folder: str | os.PathLike) -> bool:
    """Remove a temporary folder of this process with its owner marker last; True when it is gone.

    When a run stops (an error, Ctrl-C, SIGTERM), tasks already running on the
    workers may still write files into its folders: distributed cannot stop a
    running task.  (The feature store's tasks never make a folder: they open
    files in an existing one.  zarr, writing an ingest's chunks on workers,
    does make the folders of a chunk: a write landing after the removal can
    leave part of a staging folder without its marker.)  ``shutil.rmtree`` lost that race: the marker went with the
    rest, a worker wrote one more block, the folder stayed without a marker,
    and nothing would ever remove it.  Here the marker goes last, and when the
    folder is not empty after all it is written back and the removal starts
    over; a folder still written into after :data:`REMOVE_ATTEMPTS` keeps its
    marker, so the next run's sweep or ``dsvm clean`` removes it once this
    process is gone.
    """
    folder = Path(folder)
    marker = read_owner(folder)
    for _ in range(REMOVE_ATTEMPTS):
        _remove_all_but(folder, OWNER_FILE)
        try:
            Path(folder, OWNER_FILE).unlink(missing_ok=True)
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                logger.warning("could not remove the temporary folder %s (%s)", folder, exc.strerror or exc)
                _write_marker_back(folder, marker)
                return False
        _write_marker_back(folder, marker)  # a file appeared after the marker went: keep the folder findable
        time.sleep(REMOVE_PAUSE_SECONDS)
    logger.warning("the temporary folder %s could not be removed (still written into); it keeps its owner marker, "
                   "so the next run or `dsvm clean` removes it once its process is gone", folder)
    return False


def _write_marker_back(folder: Path, marker: dict | None) -> None:
    """Put the owner marker back into a folder that could not be removed (never raises: this runs while an
    error or a signal is being handled, which must not be masked)."""
    if marker is None or not folder.is_dir() or read_owner(folder) is not None:
        return
    try:
        Path(folder, OWNER_FILE).write_text(json.dumps(marker))
    except OSError as exc:
        logger.warning("the temporary folder %s lost its owner marker (%s); remove it by hand", folder, exc)


@dataclass(frozen=True)
class Leftover:
    """A temporary folder dsvm made, found by :func:`find_leftovers`.

    ``stale`` is True when its owner is gone (it may be removed); ``reason``
    says who owns it.
    """

    path: Path
    kind: str
    stale: bool
    reason: str


def _looks_like_dsvm_folder(name: str) -> bool:
    return DSVM_FOLDER.match(name) is not None


def _examine_folder(path: Path) -> Leftover | None:
    """A leftover if ``path`` is named like one of dsvm's temporary folders, else None (not dsvm's)."""
    if not _looks_like_dsvm_folder(path.name) or path.is_symlink():
        return None
    marker = read_owner(path)
    if marker is None:
        return Leftover(path, "unknown", False, "no dsvm owner marker (an older dsvm's, or not dsvm's): kept")
    state = owner_state(marker)
    who = f"pid {marker['pid']} on {marker['host']}"
    reason = {"gone": f"{who} is gone", "running": f"{who} is still running",
              "other host": f"{who}: another host, kept"}[state]
    return Leftover(path, str(marker.get("kind", "?")), state == "gone", reason)


def find_leftovers(root: str | os.PathLike, recursive: bool = True) -> list[Leftover]:
    """dsvm's temporary folders under ``root`` (not inside them, nor inside zarr stores or ``.git``)."""
    found: list[Leftover] = []
    for folder, dirs, _files in os.walk(root):
        keep_walking = []
        for name in sorted(dirs):
            path = Path(folder, name)
            item = _examine_folder(path)
            if item is not None:
                found.append(item)
            elif recursive and name != ".git" and not path.is_symlink() and not (path / "zarr.json").exists():
                keep_walking.append(name)
        dirs[:] = keep_walking
        if not recursive:
            break
    return found


def remove_leftover(item: Leftover) -> bool:
    """Remove a stale leftover folder with everything in it, its owner marker last; True when it is gone.

    The marker is checked once more first: a folder another process removed meanwhile counts as removed,
    one whose owner runs again (or that lost its marker) is refused with ``ValueError``.
    """
    if not os.path.lexists(item.path):
        return True
    again = _examine_folder(item.path)
    if again is None or not again.stale:
        reason = again.reason if again is not None else "it is no longer one of dsvm's temporary folders"
        raise ValueError(f"{item.path} is not a stale dsvm folder ({reason})")
    return remove_temporary_folder(item.path)


def sweep_stale(base: str | os.PathLike) -> list[Path]:
    """Remove the stale marked folders directly in ``base`` (what killed runs left); returns them."""
    removed = []
    try:
        names = [n for n in os.listdir(base) if _looks_like_dsvm_folder(n)]
    except OSError:
        return removed
    for name in names:
        item = _examine_folder(Path(base, name))
        if item is not None and item.stale:
            try:
                if not remove_leftover(item):
                    continue
            except (OSError, ValueError) as exc:  # another run's sweep got there first, or it is not stale now
                logger.warning("could not remove the stale %s folder %s (%s)", item.kind, item.path, exc)
                continue
            logger.info("removed the stale %s folder %s (%s)", item.kind, item.path, item.reason)
            removed.append(item.path)
    return removed
