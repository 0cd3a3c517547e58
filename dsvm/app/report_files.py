"""Report folders and the files in them: Markdown, JSON, CSV and PNG figures.

Report folders (a pipeline's ``output``, a CV report) are not replaced but
written into: dsvm writes only into a new or empty folder, or one holding its
marker file ``.dsvm-output`` (:func:`claim_output_folder`), and each file in
it goes through the safe-replace routine (:func:`dsvm.io.write_file`).  The
command line checks first, with ``overwrite=False`` unless ``--overwrite`` is
given, that the folder holds no earlier output, as for every other output.
Figures need matplotlib, an optional dependency: :func:`pyplot` returns it
(Agg backend) or None with a warning, and the report is written without them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..exceptions import NotDsvmOutputError
from ..io import create_exclusive, regular_file_problem, write_file

__all__ = ["OUTPUT_MARKER", "output_folder_problem", "check_output_folder", "claim_output_folder",
           "mark_output_folder", "report_file_problem", "write_report_file", "save_figure", "pyplot"]

OUTPUT_MARKER = ".dsvm-output"
MARKER_TEXT = '{"format": "dsvm-output"}\n'


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


def report_file_problem(path: Path) -> str | None:
    """None if ``path`` is a file of a report folder dsvm may replace, else why not (the rule of
    :func:`write_report_file`, so that a run can check its files before its work)."""
    return regular_file_problem(path)


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
    return write_file(path, write, overwrite=True, ours=report_file_problem, what="report file")


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
