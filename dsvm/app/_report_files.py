"""Report folders and the files in them: Markdown, JSON, CSV and PNG figures.

Report folders (a pipeline's ``output``, a CV report) are not replaced but
written into: dsvm writes only into a new or empty folder, or one holding its
marker file ``.dsvm-output`` (:func:`claim_output_folder`), and each file in
it goes through the safe-replace routine (:func:`dsvm.io.write_file`).  The
marker records every file dsvm wrote there (its inode, size and modification
time, :func:`report_file_problem`): an existing file is replaced only when it
is one of them, unchanged since, so a user's file of the same name (copied
in, or edited) is never replaced, nor are the report files of versions that
kept no record.  The command line checks first, with ``overwrite=False``
unless ``--overwrite`` is given, that the folder holds no earlier output, as
for every other output.
Figures need matplotlib, an optional dependency: :func:`pyplot` returns it
(Agg backend) or None with a warning, and the report is written without them.
"""

from __future__ import annotations

import json
import os
import stat
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..exceptions import NotDsvmOutputError
from ..io import create_exclusive, regular_file_problem, write_file

__all__ = ["OUTPUT_MARKER", "output_folder_problem", "check_output_folder", "claim_output_folder",
           "mark_output_folder", "report_file_problem", "write_report_file", "save_figure", "pyplot"]

OUTPUT_MARKER = ".dsvm-output"
MARKER_FORMAT = "dsvm-output"
MARKER_TEXT = '{"format": "dsvm-output"}\n'
MAX_MARKER_BYTES = 2**20  # a marker records a report's few dozen files


def output_folder_problem(folder: str | os.PathLike) -> str | None:
    """None if dsvm may write into ``folder`` (absent, empty, or holding its marker), else why not."""
    folder = Path(folder)
    if not (folder.exists() or folder.is_symlink()):
        return None
    if not folder.is_dir():
        return "it is not a folder"
    marker = folder / OUTPUT_MARKER
    if marker.is_file() and not marker.is_symlink():
        return None
    if any(folder.iterdir()):
        return f"it is not empty and has no {OUTPUT_MARKER} marker"
    return None


def check_output_folder(folder: str | os.PathLike, what: str = "output folder", overwrite: bool = True) -> Path:
    """``folder`` as a path if dsvm may write into it; :class:`NotDsvmOutputError` otherwise.

    With ``overwrite=False`` a dsvm output folder that already holds files
    (an earlier run's) is refused too.
    """
    folder = Path(folder)
    reason = output_folder_problem(folder)
    if reason is not None:
        raise NotDsvmOutputError(f"{folder} is not a dsvm {what} ({reason}); dsvm writes only into new, empty or "
                                 "its own output folders: choose another output folder or empty this one")
    if not overwrite and folder.is_dir() and any(p.name != OUTPUT_MARKER for p in folder.iterdir()):
        raise NotDsvmOutputError(f"{folder} already holds the files of an earlier run (a dsvm {what}); pass "
                                 "--overwrite to replace them, or choose another folder")
    return folder


def claim_output_folder(folder: str | os.PathLike, what: str = "output folder") -> Path:
    """Create ``folder`` (or accept an empty or dsvm-written one) and mark it as dsvm's output folder."""
    folder = check_output_folder(folder, what)
    folder.mkdir(parents=True, exist_ok=True)
    mark_output_folder(folder)
    return folder


def mark_output_folder(folder: str | os.PathLike) -> None:
    """Write dsvm's marker into ``folder`` (one dsvm made or claimed), unless it is there already."""
    marker = Path(folder) / OUTPUT_MARKER
    if not marker.is_file():
        try:
            with create_exclusive(marker) as f:
                f.write(MARKER_TEXT.encode())
        except FileExistsError:
            pass


def _marker(folder: Path) -> dict:
    """The JSON of ``folder``'s marker (a small regular file, not followed through a link), or {}."""
    try:
        fd = os.open(folder / OUTPUT_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return {}
        raw = f.read(MAX_MARKER_BYTES + 1)
    try:
        meta = json.loads(raw) if len(raw) <= MAX_MARKER_BYTES else None
    except (ValueError, RecursionError):
        meta = None
    return meta if isinstance(meta, dict) and meta.get("format") == MARKER_FORMAT else {}


def _identity(path: Path) -> list[int]:
    """What tells the file dsvm wrote from another one put at its name: inode, size, modification time."""
    st = os.lstat(path)
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def report_file_problem(path: Path) -> str | None:
    """None if ``path`` is a file of a report folder dsvm may replace, else why not (the rule of
    :func:`write_report_file`, so that a run can check its files before its work).

    It must be a regular file that the folder's marker records as written by dsvm, unchanged since.
    """
    path = Path(path)
    reason = regular_file_problem(path)
    if reason is not None:
        return reason
    files = _marker(path.parent).get("files")
    if not isinstance(files, dict) or files.get(path.name) != _identity(path):
        return (f"the {OUTPUT_MARKER} marker of its folder does not record it as a file dsvm wrote there, unchanged "
                "since: a file of yours (or of an earlier dsvm version) is never replaced; move it away")
    return None


def _marker_problem(path: Path) -> str | None:
    reason = regular_file_problem(path)
    return reason if reason is not None or _marker(path.parent) else f"it is not dsvm's {OUTPUT_MARKER} marker"


def _record(path: Path) -> None:
    """Record in the marker of ``path``'s folder that dsvm wrote ``path`` (see :func:`report_file_problem`)."""
    files = _marker(path.parent).get("files")
    files = dict(files) if isinstance(files, dict) else {}
    files[path.name] = _identity(path)
    text = json.dumps({"format": MARKER_FORMAT, "files": files}, indent=1) + "\n"
    write_file(path.parent / OUTPUT_MARKER, lambda f: f.write(text.encode()), overwrite=True, ours=_marker_problem,
               what="output folder marker")


def write_report_file(path: str | os.PathLike, content: str | bytes | Callable[[BinaryIO], None]) -> Path:
    """Write one file of a report folder (text, bytes, or ``content(f)`` for e.g. a figure).

    The folder must be a dsvm output folder (:func:`claim_output_folder`); an
    existing file of that name is replaced only if dsvm wrote it (:func:`report_file_problem`),
    and the new one is recorded in the folder's marker.
    """
    path = Path(path)
    check_output_folder(path.parent)
    if callable(content):
        write = content
    else:
        data = content.encode("utf-8") if isinstance(content, str) else content

        def write(f):
            f.write(data)
    written = write_file(path, write, overwrite=True, ours=report_file_problem, what="report file")
    _record(path)
    return written


def save_figure(fig, path: str | os.PathLike, **savefig_kwargs) -> Path:
    """A matplotlib figure, laid out tight, as a PNG file of a report folder (see :func:`write_report_file`);
    the figure is closed afterwards (pyplot keeps every open figure in memory)."""
    import matplotlib.pyplot as plt  # loaded already: the figure was made with it

    fig.tight_layout()
    try:
        return write_report_file(path, lambda f: fig.savefig(f, format="png", **savefig_kwargs))
    finally:
        plt.close(fig)


def pyplot(what: str = "the plots"):
    """``matplotlib.pyplot`` with the non-interactive Agg backend, or None (with a warning naming
    ``what`` is skipped) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn(f"matplotlib is not installed; skipping {what} (pip install matplotlib)", UserWarning,
                      stacklevel=3)
        return None
    return plt
