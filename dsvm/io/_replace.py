"""Writing an output safely: the one routine every file and folder dsvm writes goes through.

:func:`replacing` stages the new output in a private temporary folder next to
the target (``.NAME.XXXXXXXX.dsvm-tmp``, made by :func:`tempfile.mkdtemp`:
an unpredictable name, created exclusively, mode 0700, on the target's file
system) and moves it into place only when it is complete, so

- a crash or an error leaves the old output as it was, never a half-written
  one under the target name (a process killed outright can leave a
  ``.*.dsvm-tmp`` folder behind, marked with its owner: ``dsvm clean``
  removes it once that process is gone);
- a symbolic link planted at some temporary name cannot redirect the write:
  nothing is ever opened under a predictable name, and files are created
  with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (:func:`create_exclusive`);
- an existing target is replaced only with ``overwrite=True`` **and** only
  when it is what dsvm wrote, as recognised by its format marker (the
  ``ours`` test each writer passes: a dataset's zarr attributes, a model's or
  checkpoint's metadata, a report folder's marker file, ...).  Anything else,
  a symbolic link included, is refused with :class:`NotDsvmOutputError`
  naming the path and the reason;
- a full disk ends in :class:`~dsvm.exceptions.DiskFullError` naming the
  target and, where known, the space needed;
- a URL target (``memory://``, ``s3://``, ...) is refused with a one-line
  ``ValueError`` (``file://`` URLs are local paths): fsspec stores have no
  atomic rename and no exclusive create, so neither "an old output survives a
  failed write" nor "only dsvm's own outputs are replaced" could be kept.
  Outputs are written to a local or mounted folder; readers such as
  :func:`dsvm.io.open_dataset` do accept URLs.

A folder output (a dataset, a prediction ``.zarr``) is replaced whole, so
its recogniser also refuses a folder holding anything dsvm does not write
there (:func:`foreign_entry`: a user's notes, the input file of the very
command), and a command refuses, before any work, an input that is its
target or lies inside it (:func:`check_inputs_outside`).  Report folders (a
pipeline's ``output``, a CV report) are not replaced but written into
(:mod:`dsvm.app._report_files`); each file in them goes through
:func:`replacing` too.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..blocks import claim_folder, remove_temporary_folder
from ..exceptions import DiskFullError, NotDsvmOutputError, disk_full_error, is_disk_full

logger = logging.getLogger(__name__)

__all__ = ["NotDsvmOutputError", "Staged", "replacing", "write_file", "check_replaceable", "create_exclusive",
           "regular_file_problem", "local_target", "TMP_SUFFIX", "Recogniser", "mark_output",
           "marked_output_problem", "ENTRY_FILE", "ENTRY_FOLDER", "foreign_entry", "input_inside",
           "check_inputs_outside"]

TMP_SUFFIX = ".dsvm-tmp"
# the extended attribute that records which of dsvm's formats a file without an inner marker holds
OUTPUT_XATTR = "user.dsvm.format"
# ours(path) -> None when ``path`` is an output dsvm wrote, else why it is not (a short phrase)
Recogniser = Callable[[Path], "str | None"]


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


def mark_output(path: Path, fmt: str) -> bool:
    """Record on ``path`` that dsvm wrote it as ``fmt``, for formats that hold no marker of their own
    (``.npy``, ``.csv``); False where the file system keeps no extended attributes."""
    try:
        os.setxattr(path, OUTPUT_XATTR, fmt.encode(), follow_symlinks=False)
    except (OSError, AttributeError):  # ENOTSUP and friends; AttributeError: no xattrs on this OS
        logger.debug("%s: the file system keeps no extended attributes; it cannot be marked as dsvm's", path)
        return False
    return True


def marked_output_problem(path: Path, fmt: str) -> str | None:
    """None if ``path`` is a regular file :func:`mark_output` marked as ``fmt``, else why it is not."""
    reason = regular_file_problem(path)
    if reason is not None:
        return reason
    try:
        found = os.getxattr(path, OUTPUT_XATTR, follow_symlinks=False)
    except (OSError, AttributeError):
        return ("it carries no dsvm marker: dsvm marks the .npy and .csv files it writes with an extended attribute, "
                "which files of earlier dsvm versions, copies and some file systems lack; remove it yourself to "
                "write there")
    return None if found == fmt.encode() else f"it is marked as {found[:40]!r}, not as a {fmt} file"


# the layout of a folder output, for foreign_entry: name -> ENTRY_FILE (a regular file), ENTRY_FOLDER (a folder,
# not walked), a dict (a folder holding only these entries) or a list of dicts (a folder matching one of them)
ENTRY_FILE = "file"
ENTRY_FOLDER = "folder"


def foreign_entry(folder: str | os.PathLike, layout: dict[str, Any] | list[dict[str, Any]]) -> str | None:
    """The first entry under ``folder`` that ``layout`` does not name (as ``"a/b"``), or None if all fit.

    An entry fits when its name is in the layout and it is what the layout
    says (a regular file, or a folder; never a symbolic link); a folder given
    as a dict is walked too.  This is how a recogniser tells a folder dsvm
    wrote from one that also holds a user's files: replacing it would remove
    them.
    """
    options = layout if isinstance(layout, list) else [layout]
    found = []
    for option in options:
        entry = _foreign_in(Path(folder), option)
        if entry is None:
            return None
        found.append(entry)
    return max(found, key=lambda entry: entry.count("/"))  # of the layout the folder follows furthest


def _foreign_in(folder: Path, layout: dict[str, Any]) -> str | None:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        return f"(unreadable: {exc.strerror})"
    for entry in entries:
        want = layout.get(entry.name)
        if want is None:
            return entry.name
        if want == ENTRY_FILE:
            if not entry.is_file(follow_symlinks=False):
                return entry.name
            continue
        if not entry.is_dir(follow_symlinks=False):
            return entry.name
        if want != ENTRY_FOLDER:
            inner = foreign_entry(entry.path, want)
            if inner is not None:
                return f"{entry.name}/{inner}"
    return None


def input_inside(target: str | os.PathLike, source: str | os.PathLike) -> bool:
    """True if ``source`` is ``target`` or lies inside it (links resolved; a hard link of a file counts):
    replacing ``target`` would remove it."""
    t, s = Path(os.path.realpath(target)), Path(os.path.realpath(source))
    if s == t or t in s.parents:
        return True
    try:
        return os.path.samefile(target, source)
    except (OSError, ValueError):  # either is missing: not one file
        return False


def check_inputs_outside(target: str | os.PathLike, inputs: dict[str, Any], what: str) -> None:
    """Refuse, before any work, to write ``target`` when one of a command's ``inputs`` (``{role: path or
    None}``; anything that is not a path is skipped) is ``target`` or lies inside it.

    Raises
    ------
    NotDsvmOutputError
        Naming the input and the target.
    """
    for role, source in inputs.items():
        if isinstance(source, (str, os.PathLike)) and input_inside(target, source):
            where = "is" if os.path.realpath(target) == os.path.realpath(source) else "lies inside"
            raise NotDsvmOutputError(f"{role} {os.fspath(source)} {where} the {what} to write, {os.fspath(target)}: "
                                     f"writing it would remove its own input; write the {what} elsewhere")


def local_target(target: str | os.PathLike) -> Path:
    """``target`` as an absolute local path; ``file://`` URLs are local paths, any other URL is refused.

    Raises
    ------
    ValueError
        For a URL with another scheme (see the module docstring for why).
    """
    text = os.fspath(target)
    if isinstance(text, str) and "://" in text:
        parsed = urllib.parse.urlsplit(text)
        if parsed.scheme != "file":
            raise ValueError(
                f"{text}: dsvm writes outputs to local or mounted folders only; a {parsed.scheme}:// target cannot "
                "keep the guarantees of a write (an old output intact after a failure, only dsvm's own outputs "
                "replaced), which need an atomic rename that fsspec stores lack. Write it to a local path and copy "
                "it there (readers such as open_dataset accept URLs)")
        text = urllib.request.url2pathname(parsed.path)
    return Path(text).expanduser().absolute()


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def check_replaceable(target: str | os.PathLike, overwrite: bool, ours: Recogniser, what: str) -> Path:
    """The target as an absolute path, if it may be written (see the module docstring).

    Raises
    ------
    NotDsvmOutputError
        ``target`` exists and ``overwrite`` is False, or it is not a ``what`` dsvm wrote.
    """
    path = local_target(target)
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
        _raise_for_os_error(exc, path, what, needed)
    try:
        claim_folder(work, what)  # marked, so that dsvm clean may remove it after a kill -9
        staged = Staged(work, work / "store")
        yield staged
        if not _exists(staged.path):
            raise RuntimeError(f"{path}: nothing was written")
        _commit(staged.path, check_replaceable(path, overwrite, ours, what), work)
        logger.debug("wrote %s", path)
    except OSError as exc:
        remove_temporary_folder(work)  # first: the free space reported is what is really left
        _raise_for_os_error(exc, path, what, needed)
    finally:
        remove_temporary_folder(work)  # marker last: a worker still writing cannot leave it unmarked


def _check_parents(path: Path, may_create: bool) -> None:
    """The nearest existing ancestor of ``path`` must be a folder (and be the parent unless ``may_create``)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        if not may_create:
            raise FileNotFoundError(errno.ENOENT, f"folder {folder} does not exist", str(path))
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{folder} is not a folder", str(path))


def _raise_for_os_error(exc: OSError, path: Path, what: str, needed: int | None):
    if isinstance(exc, DiskFullError) or not is_disk_full(exc):  # a DiskFullError names what filled up already
        raise exc
    raise disk_full_error(exc, path, f"the {what}", needed=needed, hint="nothing was replaced") from exc


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
    return local_target(target)
