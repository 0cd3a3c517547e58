"""Report folders are written into, file by file: a file there is replaced only if dsvm wrote it (its folder's
marker records it, unchanged since), never a user's file of the same name."""

from __future__ import annotations

import os
import shutil

import pytest

from dsvm.app import _report_files as report_files
from dsvm.app._report_files import OUTPUT_MARKER, claim_output_folder, report_file_problem, write_report_file
from dsvm.exceptions import NotDsvmOutputError


def test_a_report_file_dsvm_wrote_is_replaced(tmp_path):
    out = claim_output_folder(tmp_path / "out")
    write_report_file(out / "report.md", "# one\n")
    assert report_file_problem(out / "report.md") is None
    write_report_file(out / "report.md", "# two\n")
    assert (out / "report.md").read_text() == "# two\n"
    write_report_file(out / "figure.png", lambda f: f.write(b"\x89PNG"))
    assert report_file_problem(out / "report.md") is None and report_file_problem(out / "figure.png") is None
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "figure.png", "report.md"]


@pytest.mark.parametrize("how", ["copied over", "edited", "replaced", "new"])
def test_a_users_file_at_a_report_name_is_never_replaced(tmp_path, how):
    """A marked folder's report.md: any regular file there was replaced, whoever wrote it."""
    out = claim_output_folder(tmp_path / "out")
    if how != "new":
        write_report_file(out / "report.md", "# dsvm's report\n")
    mine = tmp_path / "mine.md"
    mine.write_text("my notes, to keep\n")
    if how == "copied over":
        shutil.copyfile(mine, out / "report.md")  # the same inode, other contents and time
    elif how == "edited":
        with open(out / "report.md", "a") as f:
            f.write("my notes, to keep\n")
        os.utime(out / "report.md", ns=(1, 1))
    else:  # a new file at the name (mv mine.md out/report.md), or one where dsvm never wrote
        os.replace(shutil.copy(mine, tmp_path / "copy.md"), out / "report.md")
    before = (out / "report.md").read_bytes()
    assert "does not record it as a file dsvm wrote there" in report_file_problem(out / "report.md")
    with pytest.raises(NotDsvmOutputError, match=r"report\.md exists and is not a report file written by dsvm"):
        write_report_file(out / "report.md", "# a new report\n")
    assert (out / "report.md").read_bytes() == before


def test_report_files_of_a_folder_marked_without_a_record_are_kept(tmp_path):
    """A marker of an earlier version records no file: its report files are left to the user."""
    out = tmp_path / "out"
    out.mkdir()
    (out / OUTPUT_MARKER).write_text(report_files.MARKER_TEXT)
    (out / "report.json").write_text("{}\n")
    with pytest.raises(NotDsvmOutputError, match="does not record it"):
        write_report_file(out / "report.json", "{}\n")
    write_report_file(out / "other.json", "[]\n")  # a new name is written, and recorded
    assert report_file_problem(out / "other.json") is None


def test_a_marker_that_is_not_dsvms_records_nothing(tmp_path):
    out = claim_output_folder(tmp_path / "out")
    write_report_file(out / "report.md", "# one\n")
    (out / OUTPUT_MARKER).write_text('{"format": "other", "files": {}}\n')
    assert "does not record it" in report_file_problem(out / "report.md")
    (out / OUTPUT_MARKER).write_text("[" * 100_000)  # not JSON dsvm can read: no record
    assert "does not record it" in report_file_problem(out / "report.md")
