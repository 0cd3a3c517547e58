"""dsvm clean and the sweep of stale folders remove only dsvm's own temporary folders."""

import json
import os
import subprocess
import sys
import time

import pytest

from dsvm.app.cli import main
from dsvm.blocks import OWNER_FILE, find_leftovers, make_temporary_folder, mark_owner, read_owner, remove_leftover
from dsvm.io import replacing


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _mark_as_dead(folder, kind="features") -> None:
    mark_owner(folder, kind)
    marker = json.loads((folder / OWNER_FILE).read_text())
    (folder / OWNER_FILE).write_text(json.dumps({**marker, "pid": _dead_pid()}))


def test_clean_keeps_a_users_files_and_folders_named_like_old_temporaries(tmp_path, capsys):
    # the reproduction: a hidden folder and a hidden file named .NAME.tmp-<digits>, hours old
    project = tmp_path / "proj"
    (project / ".backup.tmp-99999" / "sub").mkdir(parents=True)
    thesis = project / ".backup.tmp-99999" / "sub" / "thesis.tex"
    thesis.write_text("x")
    notes = project / ".notes.tmp-31337"
    notes.write_text("my notes")
    for path in (project / ".backup.tmp-99999", notes):
        _age(path, 7200)
    assert main(["-q", "clean", str(project)]) == 0
    assert thesis.read_text() == "x" and notes.read_text() == "my notes"
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("name", ["dsvm-features-1-a.zarr", ".m.npz.abc.dsvm-tmp", "dsvm-train-7-x"])
def test_a_folder_named_like_dsvms_without_its_marker_is_kept(tmp_path, name):
    folder = tmp_path / name
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "precious").write_text("x")
    (folder / OWNER_FILE).write_text('{"format": "something else", "pid": 1, "host": "h", "process_started": 0}')
    [item] = find_leftovers(tmp_path)
    assert not item.stale
    with pytest.raises(ValueError, match="not a stale"):
        remove_leftover(item)
    assert (folder / "data" / "precious").exists()


def test_a_marked_folder_with_another_name_is_not_touched(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    _mark_as_dead(folder)
    assert find_leftovers(tmp_path) == []
    make_temporary_folder(tmp_path, "features")  # sweeps stale folders next to it
    assert folder.exists()


def test_a_fifo_in_place_of_the_marker_does_not_block(tmp_path):
    folder = tmp_path / "dsvm-features-1-a.zarr"
    folder.mkdir()
    os.mkfifo(folder / OWNER_FILE)
    assert read_owner(folder) is None
    [item] = find_leftovers(tmp_path)
    assert not item.stale


def test_the_staging_folder_of_a_write_killed_outright_is_removed_by_clean(tmp_path, capsys):
    target = tmp_path / "out.bin"
    code = ("import os, signal, sys\nfrom dsvm.io import replacing\n"
            "with replacing(sys.argv[1], overwrite=False, ours=lambda p: None, what='model') as staged:\n"
            "    staged.path.write_bytes(b'half')\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(target)])
    assert proc.returncode == -9
    [staging] = [p for p in tmp_path.iterdir()]
    assert staging.name.endswith(".dsvm-tmp") and read_owner(staging)["kind"] == "model"
    assert main(["-q", "clean", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []
    assert f"removed  {staging}" in capsys.readouterr().out
