"""Opening the files a user names, for reading: regular files (or folders) only, whole reads bounded.

Every file dsvm reads on a user's behalf — data files, label files, pipelines,
cluster specs, scheduler files, a dataset's metadata — is checked here before
it is read:

* only a regular file is opened (a folder only where a folder is expected).
  A FIFO would make the reader wait for a writer for ever, a device such as
  ``/dev/zero`` never ends, and a socket cannot be read at all; each is refused
  at once with one line naming the path and what it is.  A symbolic link is
  followed: what counts is the file it points to.  :func:`open_user_file` opens
  without waiting (``O_NONBLOCK``) and checks the descriptor it got, so a path
  swapped for a FIFO between a check and the open is still refused;
* a file read whole (YAML, JSON) is read only up to a bound given by the
  caller (:func:`read_user_file`), so a huge or endless file cannot exhaust
  memory.

A missing path is the ordinary ``FileNotFoundError``.  The caller chooses the
error type of a refusal (``error``), as this module imports nothing of dsvm.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["path_problem", "check_user_path", "open_user_file", "read_user_file"]

FILE, FOLDER, EITHER = "file", "folder", "either"


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "neither a file nor a folder"


def _problem(mode: int, expect: str) -> str | None:
    if stat.S_ISREG(mode) and expect in (FILE, EITHER):
        return None
    if stat.S_ISDIR(mode) and expect in (FOLDER, EITHER):
        return None
    wanted = {FILE: "a regular file", FOLDER: "a folder", EITHER: "a regular file or a folder"}[expect]
    return f"it is {_kind(mode)}, not {wanted}"


def path_problem(path: str | os.PathLike, expect: str = FILE) -> str | None:
    """None if ``path`` (a link's target) is what a reader may open, else why not (a short phrase).

    ``expect``: ``"file"`` (a regular file), ``"folder"`` or ``"either"``.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file or folder"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    return _problem(mode, expect)


def check_user_path(path: str | os.PathLike, what: str, error: type[Exception], expect: str = FILE) -> Path:
    """``path``, after checking that it is a regular file (or a folder, see :func:`path_problem`).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    error
        ``"<path>: it is a FIFO (named pipe), not a regular file; a <what> must be ..."`` for anything else.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path)) from None
    reason = _problem(mode, expect)
    if reason is not None:
        raise error(_refusal(path, reason, what, expect))
    return Path(path)


def _refusal(path, reason: str, what: str, expect: str = FILE) -> str:
    kind = {FILE: "a regular file", FOLDER: "a folder", EITHER: "a regular file or a folder"}[expect]
    return f"{path}: {reason}; a {what} must be {kind}"


def open_user_file(path: str | os.PathLike, what: str, error: type[Exception]) -> BinaryIO:
    """``path`` opened for reading bytes, refused before any read unless it is a regular file.

    The open itself never waits (``O_NONBLOCK``: a FIFO without a writer would
    block it); the descriptor is checked, then set back to blocking reads.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # what opening a socket gives
            raise error(_refusal(path, "it is a socket, not a regular file", what)) from None
        raise
    try:
        reason = _problem(os.fstat(fd).st_mode, FILE)
        if reason is not None:
            raise error(_refusal(path, reason, what))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_user_file(path: str | os.PathLike, what: str, error: type[Exception], max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (:func:`open_user_file`); ``error`` if larger."""
    with open_user_file(path, what, error) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise error(f"{path}: larger than {_size(max_bytes)}; a {what} is a small text file")
    return data


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"
