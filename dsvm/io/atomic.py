"""Write a dataset under a temporary name and rename it into place at the end.

:func:`atomic_target` yields a hidden working directory next to the target
(``.NAME.XXXX.dsvm-tmp``, same filesystem).  The dataset is written to
``<work>/store`` (scratch files go elsewhere in ``<work>``); on success the
store is renamed to the target, on any error (or ``KeyboardInterrupt``) the
working directory is removed and the target is left as it was.  A process
killed outright can leave a ``.*.dsvm-tmp`` directory behind, never a
half-written dataset under the target name; such directories may be deleted.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["atomic_target", "check_target"]

TMP_SUFFIX = ".dsvm-tmp"


def check_target(target: str | os.PathLike, overwrite: bool) -> Path:
    """The target as an absolute path; ``FileExistsError`` if it exists and ``overwrite`` is False."""
    path = Path(target).expanduser().absolute()
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (on the command line: --overwrite) to replace it")
    return path


@contextmanager
def atomic_target(target: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a working directory whose ``store`` subdirectory becomes ``target`` on success."""
    path = check_target(target, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent))
    try:
        yield work
        store = work / "store"
        if not store.exists():
            raise RuntimeError("nothing was written")
        _commit(store, path, overwrite, work)
        logger.info("wrote %s", path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _commit(store: Path, path: Path, overwrite: bool, work: Path) -> None:
    previous = None
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise FileExistsError(f"{path} appeared while it was being written; pass overwrite=True (on the command line: --overwrite) to replace it")
        previous = work / "previous"
        os.rename(path, previous)
    try:
        os.rename(store, path)
    except BaseException:
        if previous is not None:
            os.rename(previous, path)
        raise
