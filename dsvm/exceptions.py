"""The package's error types, importable without loading anything else of dsvm.

Every error a user can cause is one of these (or a plain ``ValueError`` /
``OSError``) and its message names what is wrong and where (file, line,
row, path), so the ``dsvm`` command prints it as one line.  The sub-packages
re-export the types they raise.

Disk full: :class:`DiskFullError` is the one error for a file system that
ran out of space or quota, whatever was being written (a dataset, a scratch
store, a model, a report); :func:`disk_full_error` and
:func:`disk_full_names` build it with the path, what was written and what
was free.
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
    "UserError", "NoWorkersError", "WorkerMemoryError", "WorkersPausedError", "InvalidDatasetError", "InputFileError",
    "ModelFileError", "CheckpointMismatchError", "ClusterSpecError", "SchedulerUnreachableError", "PipelineError",
    "NotDsvmOutputError", "DiskFullError", "NonFiniteError", "DenseLandmarksError", "MixedScalesWarning",
    "OneClassFitWarning",
    "is_disk_full", "disk_full_error", "disk_full_names", "format_bytes", "tree_bytes",
]

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class UserError(ValueError):
    """A command-line option or argument the user can fix (the ``dsvm`` command prints it as one line)."""


class NoWorkersError(RuntimeError):
    """The distributed cluster has had no worker for longer than ``dsvm.no-worker-timeout``.

    Examples
    --------
    >>> from dsvm import NoWorkersError
    >>> issubclass(NoWorkersError, RuntimeError)
    True
    """


class WorkerMemoryError(MemoryError):
    """A task needs more memory than the Dask workers have: found before the work, or workers kept dying on
    the same task (``distributed.KilledWorker``)."""


class WorkersPausedError(MemoryError):
    """The Dask workers a computation waits on stayed paused for lack of memory (``dsvm.paused-timeout``)."""


class InvalidDatasetError(ValueError):
    """A path is not a readable dsvm dataset, or a chunk of it is corrupted.

    Examples
    --------
    >>> import tempfile
    >>> from dsvm import InvalidDatasetError, open_dataset
    >>> try:
    ...     open_dataset(tempfile.mkdtemp())  # an empty folder
    ... except InvalidDatasetError:
    ...     print("not a dsvm dataset")
    not a dsvm dataset
    """


class InputFileError(ValueError):
    """An input file cannot be read as data; the message names the file (and the line).

    Examples
    --------
    >>> import os, tempfile
    >>> from dsvm import InputFileError, ingest
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "bad.libsvm"), "w") as f:
    ...     _ = f.write("+1 1:0.5\\n-1 2:abc\\n")
    >>> try:
    ...     ingest(os.path.join(folder, "bad.libsvm"), os.path.join(folder, "bad.zarr"))
    ... except InputFileError as error:
    ...     print(error)
    bad.libsvm:2: cannot parse '2:abc' in line '-1 2:abc'
    """


class ModelFileError(ValueError):
    """A model or checkpoint file is missing, corrupted, foreign or inconsistent.

    Examples
    --------
    >>> import os, tempfile
    >>> from dsvm import ModelFileError, load_model
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> with open(path, "w") as f:
    ...     _ = f.write("not a model")
    >>> try:
    ...     load_model(path)
    ... except ModelFileError:
    ...     print("refused")
    refused
    """


class CheckpointMismatchError(ValueError):
    """The checkpoint belongs to other data or other parameters, or cannot be read or written.

    Examples
    --------
    >>> from dsvm import CheckpointMismatchError
    >>> issubclass(CheckpointMismatchError, ValueError)
    True
    """


class ClusterSpecError(ValueError):
    """A cluster spec file is missing, malformed or names a class or argument that is not allowed."""


class SchedulerUnreachableError(ConnectionError):
    """The Dask scheduler named by an address or a scheduler file does not answer."""


class PipelineError(ValueError):
    """A pipeline file is malformed."""


class NotDsvmOutputError(FileExistsError):
    """The target exists and is not an output dsvm wrote (or ``overwrite`` was not given): dsvm never
    replaces or deletes a file or folder it did not write.

    Examples
    --------
    >>> from dsvm import NotDsvmOutputError
    >>> issubclass(NotDsvmOutputError, FileExistsError)
    True
    """


class NonFiniteError(ValueError):
    """A computation gave NaN or infinity from finite input: a kernel block, the Nyström map, a solver's
    objective or gradient, or decision values.  The message names where it arose (the rows, the stage, the
    iteration) and what to change; nothing is labelled or saved from it.

    Every error a user can cause is one of dsvm's error types (or a plain
    ``ValueError`` / ``OSError``), each a subclass of the built-in error it
    refines, so ``except ValueError`` still catches it.

    Examples
    --------
    >>> from dsvm import NonFiniteError
    >>> try:
    ...     raise NonFiniteError("kernel block of rows 0-99: NaN; scale the features")
    ... except ValueError as error:
    ...     print(type(error).__name__, "-", error)
    NonFiniteError - kernel block of rows 0-99: NaN; scale the features
    """


class DenseLandmarksError(MemoryError):
    """The landmarks, kept dense (``k x n_features``), would need more memory than there is; refused before
    anything of that size is allocated.

    Examples
    --------
    >>> from dsvm import DenseLandmarksError
    >>> issubclass(DenseLandmarksError, MemoryError)
    True
    """


class MixedScalesWarning(UserWarning):
    """The columns of X have scales orders of magnitude apart and no ``scale=`` was chosen: a kernel with one
    ``gamma`` then sees only the widest columns.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from dsvm import MixedScalesWarning, NystroemSVC
    >>> X = np.random.RandomState(0).normal(size=(200, 2)) * [1.0, 1e4]
    >>> y = (X[:, 0] > 0).astype(int)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = NystroemSVC(n_components=20, random_state=0).fit(X, y)
    >>> any(issubclass(w.category, MixedScalesWarning) for w in caught)
    True
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = NystroemSVC(n_components=20, scale="standard", random_state=0).fit(X, y)
    >>> any(issubclass(w.category, MixedScalesWarning) for w in caught)
    False
    """


class OneClassFitWarning(UserWarning):
    """A fitted classifier predicts one class for every training row (the model has learnt nothing but the
    class balance).

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from dsvm import NystroemSVC, OneClassFitWarning
    >>> X = np.random.RandomState(0).normal(size=(200, 2))
    >>> y = np.r_[np.zeros(190, int), np.ones(10, int)]
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = NystroemSVC(n_components=20, C=1e-4, random_state=0).fit(X, y)
    >>> any(issubclass(w.category, OneClassFitWarning) for w in caught)
    True
    """


class DiskFullError(OSError):
    """The disk (or the quota) filled while dsvm was writing; nothing half-written is left.

    Examples
    --------
    >>> from dsvm import DiskFullError
    >>> issubclass(DiskFullError, OSError)
    True
    """

    def __str__(self) -> str:
        return str(self.strerror)


def is_disk_full(exc: BaseException) -> bool:
    """True for an ``OSError`` that says the disk or the quota is full."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def format_bytes(n: float) -> str:
    """``n`` bytes for a message, in binary units (``"1.5 GiB"``)."""
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
