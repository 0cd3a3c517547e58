"""dsvm clean and the sweep of stale folders remove only dsvm's own temporary folders."""

import json
import os
import subprocess
import sys
import time

import pytest

from dsvm.app.cli import main
from dsvm.blocks import find_leftovers, make_temporary_folder, remove_leftover
from dsvm.blocks._scratch import OWNER_FILE, mark_owner, read_owner


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


# --------------------------------------------------------------------------- removal while workers still write


def _write_after_the_marker_goes(monkeypatch, folder, times):
    """os.unlink as a worker's task would race it: right after the owner marker is removed, a block file
    appears in the folder (``times`` times)."""
    import numpy as np

    from dsvm.blocks._raw_files import ALIGN, write_raw

    real_unlink = os.unlink
    written = []

    def unlink(path, *args, **kwargs):
        real_unlink(path, *args, **kwargs)
        if os.path.basename(os.fsdecode(path)) == OWNER_FILE and len(written) < times:
            written.append(folder / f"block-{len(written) + 1}.raw")
            write_raw(str(written[-1]), np.zeros(ALIGN, np.uint8), direct=False)

    monkeypatch.setattr(os, "unlink", unlink)
    return written


def test_a_folder_written_into_while_it_is_removed_is_removed_marker_last(tmp_path, monkeypatch):
    """SIGTERM during a SLURM fit: a worker wrote a block after the client's removal had taken the marker, the
    folder stayed (237 MB of block-*.raw) without a marker, and `dsvm clean` kept it ("no dsvm owner marker")."""
    from dsvm.blocks import temporary_folder

    with temporary_folder(tmp_path, "features") as folder:
        (folder / "block-0.raw").write_bytes(b"x" * 4096)
        written = _write_after_the_marker_goes(monkeypatch, folder, times=2)
    assert not folder.exists(), f"left {sorted(os.listdir(folder))} with marker {read_owner(folder)}"
    assert os.listdir(tmp_path) == [] and len(written) == 2


def test_a_folder_still_written_into_keeps_its_marker_for_clean(tmp_path, monkeypatch, capsys):
    import dsvm.blocks._scratch as scratch
    from dsvm.blocks import remove_temporary_folder

    monkeypatch.setattr(scratch, "REMOVE_ATTEMPTS", 3)
    monkeypatch.setattr(scratch, "REMOVE_PAUSE_SECONDS", 0.0)
    folder = make_temporary_folder(tmp_path, "features")
    written = _write_after_the_marker_goes(monkeypatch, folder, times=10)
    assert remove_temporary_folder(folder) is False and len(written) == 3
    assert read_owner(folder)["pid"] == os.getpid()
    monkeypatch.undo()
    (item,) = find_leftovers(tmp_path)
    assert item.path == folder and item.reason.endswith("is still running")


def test_a_worker_never_makes_a_removed_folder_again(tmp_path):
    import numpy as np

    from dsvm.blocks import remove_temporary_folder
    from dsvm.blocks._raw_files import ALIGN, write_raw

    folder = make_temporary_folder(tmp_path, "features")
    assert remove_temporary_folder(folder)
    with pytest.raises(FileNotFoundError):
        write_raw(str(folder / "block-7.raw"), np.zeros(ALIGN, np.uint8))
    assert not folder.exists()


def test_a_leftover_another_run_removed_meanwhile_counts_as_removed(tmp_path, caplog):
    """Two runs sweeping the same folder: the second found it gone and raised ValueError, which neither the
    sweep nor dsvm clean caught."""
    folder = tmp_path / "dsvm-features-1-a.zarr"
    (folder / "block-0").mkdir(parents=True)
    _mark_as_dead(folder)
    [item] = find_leftovers(tmp_path)
    import shutil

    shutil.rmtree(folder)  # the other run
    assert remove_leftover(item) is True
    # a stale folder the sweep cannot judge any more (its marker went meanwhile) is a logged warning, not an error
    (folder / "block-0").mkdir(parents=True)
    _mark_as_dead(folder)
    from dsvm.blocks import _scratch as scratch

    real = scratch._examine_folder
    calls = []

    def marker_gone_on_second_look(path):
        calls.append(path)
        if len(calls) > 1:
            (path / OWNER_FILE).unlink(missing_ok=True)
        return real(path)

    import pytest as _pytest

    with _pytest.MonkeyPatch.context() as mp:
        mp.setattr(scratch, "_examine_folder", marker_gone_on_second_look)
        assert scratch.sweep_stale(tmp_path) == []
    assert folder.exists() and "could not remove the stale" in caplog.text


def test_clean_removes_the_marker_last(tmp_path, monkeypatch):
    """An interrupted clean must not leave an unmarked folder that every later clean keeps."""
    folder = tmp_path / "dsvm-features-1-a.zarr"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "block-0.raw").write_bytes(b"x")
    _mark_as_dead(folder)
    [item] = find_leftovers(tmp_path)
    seen = []
    real_rmdir = os.rmdir

    def interrupted(path, *args, **kwargs):
        seen.append((str(path), (folder / OWNER_FILE).exists()))
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", interrupted)
    assert remove_leftover(item) and not folder.exists()
    assert all(marker for path, marker in seen if path != str(folder))  # sub-folders went while it was there


@pytest.mark.parametrize("change", [{"pid": True}, {"pid": 0}, {"pid": -1}, {"pid": 2**40}, {"pid": 1.5},
                                    {"process_started": float("nan")}, {"process_started": True},
                                    {"process_started": -3.0}, {"host": ""}],
                         ids=lambda c: f"{next(iter(c))}={next(iter(c.values()))!r}")
def test_a_forged_or_invalid_marker_keeps_the_folder(tmp_path, capsys, change):
    """pid true, pid 0, a NaN start time made a folder stale, so clean removed it with its contents; pid -1
    aborted the whole clean."""
    folder = tmp_path / "dsvm-features-7-x.zarr"
    folder.mkdir()
    (folder / "thesis.tex").write_text("x")
    mark_owner(folder, "features")
    marker = json.loads((folder / OWNER_FILE).read_text())
    marker.update(change)
    (folder / OWNER_FILE).write_text(json.dumps(marker))  # NaN is written as JSON's NaN, as a forger would
    other = tmp_path / "dsvm-features-8-y.zarr"  # a real stale folder next to it is still removed
    other.mkdir()
    _mark_as_dead(other)
    assert main(["-q", "clean", str(tmp_path)]) == 0
    assert (folder / "thesis.tex").read_text() == "x" and not other.exists()
    assert "no dsvm owner marker" in capsys.readouterr().out
