"""Write a dataset under a temporary name and rename it into place at the end.

:func:`atomic_target` is :func:`dsvm.io._replace.replacing` for datasets: it
yields a private working directory next to the target (``.NAME.XXXX.dsvm-tmp``,
same file system).  The dataset is written to ``<work>/store`` (scratch files
go elsewhere in ``<work>``); on success the store is renamed to the target, on
any error (or ``KeyboardInterrupt``) the working directory is removed and the
target is left as it was.  An existing target is replaced only with
``overwrite=True`` and only if it is a dsvm dataset (its zarr attributes say
``format: dsvm-dataset``) holding nothing else (a user's file put inside
would be removed with it); any other file or folder is refused.  A process
killed outright can leave a ``.*.dsvm-tmp`` directory behind, never a
half-written dataset under the target name; ``dsvm clean`` removes such a
directory once its owner process is gone.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ._layout import DATASET_ENTRIES, FORMAT_NAME
from ._replace import TMP_SUFFIX, check_replaceable, foreign_entry, replacing

__all__ = ["atomic_target", "check_target", "dataset_problem", "TMP_SUFFIX"]

MAX_ZARR_JSON = 64 * 2**20  # a dataset's group metadata: attributes with the class list


def dataset_problem(path: str | os.PathLike) -> str | None:
    """None if ``path`` is a dsvm dataset (by its format marker) holding nothing but what dsvm writes there
    (:data:`dsvm.io._layout.DATASET_ENTRIES`, walked down to the array folders), else why it is not."""
    path = Path(path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    try:
        fd = os.open(path / "zarr.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return "it has no zarr.json: not a zarr store"
    except OSError as exc:
        return f"its zarr.json cannot be read ({exc.strerror})"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ZARR_JSON:
            return "its zarr.json is not a small regular file"
        try:
            meta = json.loads(f.read())
        except (ValueError, RecursionError):
            return "its zarr.json is not valid JSON"
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    found = attrs.get("format") if isinstance(attrs, dict) else None
    if found != FORMAT_NAME:
        return f"its zarr attributes have format={found!r}, not {FORMAT_NAME!r}"
    foreign = foreign_entry(path, DATASET_ENTRIES)
    if foreign is not None:
        return f"it holds {foreign!r}, which is no part of a dataset dsvm writes"
    return None


def check_target(target: str | os.PathLike, overwrite: bool) -> Path:
    """The target as an absolute path, if a dataset may be written there.

    Raises ``FileExistsError`` (:class:`dsvm.exceptions.NotDsvmOutputError`) if it
    exists and ``overwrite`` is False, or if it is not a dsvm dataset.
    """
    return check_replaceable(target, overwrite, dataset_problem, "dataset")


@contextmanager
def atomic_target(target: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a working directory whose ``store`` subdirectory becomes ``target`` on success."""
    with replacing(target, overwrite=overwrite, ours=dataset_problem, what="dataset", make_parents=True) as staged:
        yield staged.work
