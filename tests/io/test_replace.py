"""The one routine every output goes through (dsvm.io._replace): dsvm replaces only what it wrote,
temporaries cannot be hijacked, the old output stays until the new one is complete, a full disk
is one clear error."""

from __future__ import annotations

import errno
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import make_circles_problem

import dsvm
from dsvm import load_model, save_model
from dsvm.app import _predictions as predictions
from dsvm.app import _report_files as report_files
from dsvm.app._predictions import write_predictions
from dsvm.io import _replace as replace


@pytest.fixture(scope="module")
def model():
    X, y = make_circles_problem(n=200, seed=4)
    return dsvm.NystroemSVC(n_components=20, gamma=0.3, random_state=0).fit(X, y), X


@pytest.fixture
def libsvm_file(tmp_path):
    path = tmp_path / "a.libsvm"
    path.write_text("+1 1:0.5 2:1\n-1 1:0.1 3:1\n+1 2:0.7\n-1 3:0.2\n")
    return path


@pytest.fixture
def dsvm_cli(monkeypatch, capsys):
    """The dsvm command in-process, run in a folder: ``(exit status, stderr)``."""
    from dsvm.app.cli import main

    def run(*args, cwd: Path):
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        status = main(["-q", *map(str, args), *(["--workers", "1"] if args[0] == "run" else [])])
        return status, capsys.readouterr().err

    return run


def _one_line_error(result, command: str) -> str:
    status, stderr = result
    assert status == 1, (status, stderr)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"dsvm {command}: error: "), stderr
    return lines[0]


def _keeps_extended_attributes(folder: Path) -> bool:
    probe = folder / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.dsvm.probe", b"1")
        return True
    except (OSError, AttributeError):
        return False
    finally:
        probe.unlink()


def _user_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README").write_text("precious\n")
    return path


# --------------------------------------------------------------------------- only dsvm's own outputs are replaced

def test_ingest_overwrite_refuses_to_delete_a_folder_that_is_not_a_dataset(tmp_path, libsvm_file, dsvm_cli):
    somedir = _user_folder(tmp_path / "somedir")
    line = _one_line_error(dsvm_cli("ingest", libsvm_file, somedir, "--overwrite", cwd=tmp_path), "ingest")
    assert str(somedir) in line and "not a dataset written by dsvm" in line and "zarr.json" in line
    assert (somedir / "README").read_text() == "precious\n"
    # a dsvm dataset is replaced
    assert dsvm_cli("ingest", libsvm_file, tmp_path / "d.zarr", cwd=tmp_path)[0] == 0
    assert dsvm_cli("ingest", libsvm_file, tmp_path / "d.zarr", "--overwrite", cwd=tmp_path)[0] == 0
    assert dsvm.open_dataset(tmp_path / "d.zarr").n_samples == 4


def _pipeline(tmp_path: Path, libsvm_file: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: p
        output: out
        data:
          train: {{source: {libsvm_file}, format: libsvm}}
        model:
          params: {{n_components: 3, gamma: 1.0, random_state: 0}}
        report: {{plots: false}}
        """))
    return path


def test_pipeline_does_not_replace_a_user_folder_in_its_output(tmp_path, libsvm_file, dsvm_cli):
    """`dsvm run p.yaml --set output=proj` with the user's proj/data/train.zarr/README."""
    proj = tmp_path / "proj"
    user = _user_folder(proj / "data" / "train.zarr")
    line = _one_line_error(dsvm_cli("run", _pipeline(tmp_path, libsvm_file), "--set", "output=proj", cwd=tmp_path), "run")
    assert "proj" in line and "not a dsvm pipeline output folder" in line
    assert (user / "README").read_text() == "precious\n"
    assert sorted(p.name for p in proj.rglob("*")) == ["README", "data", "train.zarr"]


def test_a_dsvm_output_folder_still_keeps_a_user_folder_at_a_dataset_path(tmp_path, libsvm_file, dsvm_cli):
    proj = tmp_path / "proj"
    user = _user_folder(proj / "data" / "train.zarr")
    (proj / report_files.OUTPUT_MARKER).write_text(report_files.MARKER_TEXT)
    line = _one_line_error(dsvm_cli("run", _pipeline(tmp_path, libsvm_file), "--set", "output=proj", cwd=tmp_path), "run")
    assert "already holds the files of an earlier run (a dsvm pipeline output folder); pass --overwrite" in line
    line = _one_line_error(dsvm_cli("run", _pipeline(tmp_path, libsvm_file), "--set", "output=proj", "--overwrite",
                                    cwd=tmp_path), "run")
    assert f"{user} exists and is not a dataset written by dsvm" in line
    assert (user / "README").read_text() == "precious\n"


def test_pipeline_reruns_into_its_own_output_folder(tmp_path, libsvm_file, monkeypatch):
    from dsvm.app._pipeline import run_pipeline
    from dsvm.app._pipeline_spec import load_pipeline

    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        run_pipeline(load_pipeline(_pipeline(tmp_path, libsvm_file)))
    out = tmp_path / "out"
    assert (out / report_files.OUTPUT_MARKER).is_file() and load_model(out / "model.npz").n_features_in_ == 3
    assert not [p for p in out.rglob("*") if p.name.endswith(replace.TMP_SUFFIX)]


@pytest.mark.parametrize("foreign", ["directory", "text", "symlink"])
def test_predictions_never_replace_what_dsvm_did_not_write(tmp_path, model, foreign):
    clf, X = model
    out = tmp_path / "p.csv"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    if foreign == "directory":
        _user_folder(out)
    elif foreign == "text":
        out.write_text("my notes, not predictions\n")
    else:
        out.symlink_to(victim)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(FileExistsError, match="is not a prediction file written by dsvm"):
        write_predictions(clf, X, out, overwrite=True)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("suffix", [".csv", ".npy", ".zarr"])
def test_predictions_replace_their_own_file(tmp_path, model, suffix):
    if suffix != ".zarr" and not _keeps_extended_attributes(tmp_path):
        pytest.skip("this file system keeps no extended attributes: dsvm cannot mark its .npy/.csv outputs here")
    clf, X = model
    out = tmp_path / f"p{suffix}"
    write_predictions(clf, X[:50], out)
    with pytest.raises(FileExistsError, match="--overwrite"):
        write_predictions(clf, X, out)
    write_predictions(clf, X, out, overwrite=True)
    if suffix == ".npy":
        np.testing.assert_array_equal(np.load(out), clf.predict(X))
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_save_model_replaces_only_a_model_file(tmp_path, model):
    clf, _ = model
    path = save_model(clf, tmp_path / "m.npz")
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        save_model(clf, path)
    save_model(clf, path, overwrite=True)
    np.savez(tmp_path / "other.npz", a=np.ones(3))
    with pytest.raises(FileExistsError, match="not a model written by dsvm .*no __meta__"):
        save_model(clf, tmp_path / "other.npz", overwrite=True)
    checkpoint = _checkpoint_file(tmp_path / "ck.npz")
    with pytest.raises(FileExistsError, match="not a model written by dsvm .*format='dsvm-checkpoint'"):
        save_model(clf, checkpoint, overwrite=True)


def _checkpoint_file(path: Path) -> Path:
    from dsvm.io import meta_array
    from dsvm.svm._checkpoint import FORMAT

    np.savez(path, __meta__=meta_array({"format": FORMAT, "format_version": 1}))
    return path


# --------------------------------------------------------------------------- temporaries

def _writers(clf, X):
    from dsvm.svm._checkpoint import Checkpoint

    def checkpoint(path):
        ck = Checkpoint(path, {"n_components": 20}, np.zeros(3))
        ck.save(clf.feature_map_, None, clf.gamma_, [], 0, None)

    return {
        "model": lambda path: save_model(clf, path),
        "checkpoint": checkpoint,
        "predictions-csv": lambda path: write_predictions(clf, X, path.with_suffix(".csv")),
        "predictions-npy": lambda path: write_predictions(clf, X, path.with_suffix(".npy")),
    }


@pytest.mark.parametrize("kind", ["model", "checkpoint", "predictions-csv", "predictions-npy"])
def test_a_symlink_planted_at_the_old_temporary_name_does_not_redirect_the_write(tmp_path, model, kind):
    clf, X = model
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / "out.npz"
    for name in ("out.npz", "out.csv", "out.npy"):
        # the names dsvm used to write to: .{name}.tmp-{pid}
        (tmp_path / f".{name}.tmp-{os.getpid()}").symlink_to(victim)
    _writers(clf, X)[kind](target)
    assert victim.read_text() == "precious\n"
    written = [p for p in tmp_path.iterdir() if p.name.startswith("out.")]
    assert len(written) == 1 and written[0].is_file() and not written[0].is_symlink()


def test_temporaries_are_private_and_exclusive(tmp_path):
    seen = {}
    with replace.replacing(tmp_path / "x.bin", overwrite=False, ours=replace.regular_file_problem,
                           what="file") as staged:
        seen["mode"] = staged.work.stat().st_mode & 0o777
        seen["name"] = staged.work.name
        with replace.create_exclusive(staged.path) as f:
            f.write(b"new")
        with pytest.raises(FileExistsError):
            replace.create_exclusive(staged.path)
    assert seen["mode"] == 0o700 and seen["name"].startswith(".x.bin.") and seen["name"].endswith(".dsvm-tmp")
    assert (tmp_path / "x.bin").read_bytes() == b"new" and sorted(os.listdir(tmp_path)) == ["x.bin"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "x.bin")
    with pytest.raises(OSError) as info:
        replace.create_exclusive(link)
    assert info.value.errno == errno.EEXIST  # O_EXCL | O_NOFOLLOW: never through a link
    assert (tmp_path / "x.bin").read_bytes() == b"new"


# --------------------------------------------------------------------------- a full disk

class _FullDisk:
    """A file that takes ``room`` bytes, then fails like a full file system."""

    def __init__(self, f, room: int):
        self._f, self._room = f, room

    def write(self, data) -> int:
        n = len(memoryview(data).cast("B"))
        if n > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= n
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def fill_disk_after(monkeypatch, room: int = 100) -> None:
    """Every file dsvm creates for an output runs out of space after ``room`` bytes."""
    real = replace.create_exclusive

    def create(path):
        return _FullDisk(real(path), room)

    monkeypatch.setattr(replace, "create_exclusive", create)
    monkeypatch.setattr(predictions, "create_exclusive", create)


@pytest.mark.parametrize("kind", ["model", "checkpoint", "predictions-csv", "predictions-npy"])
def test_disk_full_names_the_path_and_keeps_the_old_file(tmp_path, model, monkeypatch, kind):
    clf, X = model
    target = tmp_path / "out.npz"
    path = target if kind in ("model", "checkpoint") else target.with_suffix("." + kind.split("-")[1])
    old = b""
    if kind == "model":
        save_model(clf, path)
        old = path.read_bytes()
    fill_disk_after(monkeypatch)
    with pytest.raises(dsvm.DiskFullError) as info:
        _writers(clf, X)[kind](target) if kind != "model" else save_model(clf, path, overwrite=True)
    message = str(info.value)
    assert message.startswith(f"{path}: no space left on the device") and "\n" not in message
    if kind in ("model", "checkpoint"):
        assert "needs about" in message  # the arrays' size is known before writing
    assert sorted(os.listdir(tmp_path)) == ([path.name] if old else [])  # no temporary left
    if old:
        assert path.read_bytes() == old


@pytest.mark.parametrize("url", ["memory://a9a.zarr", "s3://bucket/a9a.zarr", "gcs://b/x.zarr"])
def test_url_targets_are_refused_before_anything_is_written(tmp_path, model, monkeypatch, url):
    """``ingest(..., "memory://a9a.zarr")`` wrote a local folder ``memory:/a9a.zarr``: a URL cannot keep the
    replace routine's guarantees (no atomic rename on object stores), so every writer refuses it in one line."""
    clf, X = model
    monkeypatch.chdir(tmp_path)
    for write in (lambda: dsvm.ingest((X, clf.predict(X)), url), lambda: dsvm.write_dataset(url, X, clf.predict(X)),
                  lambda: save_model(clf, url), lambda: write_predictions(clf, X, url + ".csv")):
        with pytest.raises(ValueError, match=r"://.*dsvm writes outputs to local or mounted folders only.*atomic "
                                             r"rename.*open_dataset accept URLs"):
            write()
    assert os.listdir(tmp_path) == []


def test_file_urls_are_local_paths(tmp_path, model):
    clf, X = model
    ds = dsvm.ingest((X, clf.predict(X)), (tmp_path / "d.zarr").as_uri())
    assert Path(ds.path) == tmp_path / "d.zarr" and ds.n_samples == X.shape[0]
    save_model(clf, (tmp_path / "m.npz").as_uri())
    assert (tmp_path / "m.npz").is_file()


@pytest.mark.parametrize("content", ["npy", "csv-prediction", "csv-proba"])
def test_overwrite_never_replaces_a_users_file_that_looks_like_predictions(tmp_path, model, content):
    # any NumPy file, or a CSV whose first line is dsvm's header, counted as a prediction file dsvm wrote
    clf, X = model
    out = tmp_path / ("mine.npy" if content == "npy" else "mine.csv")
    if content == "npy":
        np.save(out, np.arange(5.0))
    else:
        out.write_text("prediction\n1\n" if content == "csv-prediction" else "proba_0,proba_1\n0.2,0.8\n")
    before = out.read_bytes()
    with pytest.raises(FileExistsError, match="is not a prediction file written by dsvm .*no dsvm marker"):
        write_predictions(clf, X, out, overwrite=True)
    assert out.read_bytes() == before


def test_predict_refuses_to_write_over_its_own_inputs(tmp_path, model, dsvm_cli):
    if not _keeps_extended_attributes(tmp_path):
        pytest.skip("this file system keeps no extended attributes: an input cannot pass for dsvm's output here")
    clf, X = model
    save_model(clf, tmp_path / "m.npz")
    features, labels = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(features, X)
    np.save(labels, clf.predict(X))
    for out, flag in ((features, "DATA"), (labels, "--labels")):
        replace.mark_output(out, predictions.FORMAT)  # as if dsvm had written it: only the input guard refuses
        before = out.read_bytes()
        line = _one_line_error(dsvm_cli("predict", "m.npz", features, "--labels", labels, "--out", out, "--overwrite",
                                        cwd=tmp_path), "predict")
        assert f"is the command's own input ({flag} " in line
        assert out.read_bytes() == before


# --------------------------------------------------------------------------- a folder output holding a user's files

def _csv_source(path: Path) -> Path:
    path.write_text("label,a,b\n1,0.5,1\n-1,0.1,2\n1,0.7,3\n-1,0.2,4\n")
    return path


def test_ingest_overwrite_keeps_a_dataset_holding_a_users_file_and_its_own_input(tmp_path, dsvm_cli):
    """The dataset folder was moved aside and removed whole: the source put inside it and the notes went too."""
    target = tmp_path / "train.zarr"
    assert dsvm_cli("ingest", _csv_source(tmp_path / "d.csv"), target, cwd=tmp_path)[0] == 0
    source = target / "source.csv"
    os.rename(tmp_path / "d.csv", source)
    (target / "NOTES.txt").write_text("notes\n")
    line = _one_line_error(dsvm_cli("ingest", source, target, "--overwrite", cwd=tmp_path), "ingest")
    assert f"the source {source} lies inside the dataset to write, {target}" in line
    with pytest.raises(dsvm.exceptions.NotDsvmOutputError, match="the source .* lies inside the dataset to write"):
        dsvm.ingest(source, target, overwrite=True)
    # the same with the source elsewhere: the user's notes make it no dataset dsvm may replace
    other = _csv_source(tmp_path / "other.csv")
    line = _one_line_error(dsvm_cli("ingest", other, target, "--overwrite", cwd=tmp_path), "ingest")
    assert "is not a dataset written by dsvm (it holds 'NOTES.txt', which is no part of a dataset" in line
    assert source.is_file() and (target / "NOTES.txt").read_text() == "notes\n"
    # a file planted in an array folder counts too; a plain dataset is still replaced
    (target / "NOTES.txt").unlink()
    source.rename(tmp_path / "back.csv")
    (target / "X" / "mine.txt").write_text("x\n")
    with pytest.raises(dsvm.exceptions.NotDsvmOutputError, match="it holds 'X/mine.txt'"):
        dsvm.ingest(other, target, overwrite=True)
    (target / "X" / "mine.txt").unlink()
    assert dsvm.ingest(other, target, overwrite=True).n_samples == 4


def test_the_layout_walk_accepts_every_dataset_dsvm_writes(tmp_path):
    import scipy.sparse as sp

    X, y = make_circles_problem(n=40, seed=1)
    written = [dsvm.write_dataset(tmp_path / "dense.zarr", X, y, chunk_rows=10),
               dsvm.write_dataset(tmp_path / "sparse.zarr", sp.csr_matrix(X), y, dense=False, chunk_rows=10),
               dsvm.write_dataset(tmp_path / "names.zarr", X, np.where(y > 0, "a", "b"), chunk_rows=10),
               dsvm.make_classification_zarr(tmp_path / "gen.zarr", n_samples=50, n_features=6)]
    for ds in written:
        assert dsvm.io._dataset_target.dataset_problem(ds.path) is None
    for name in ("csv_header.zarr", "libsvm_sparse.zarr"):  # datasets of the previous format
        assert dsvm.io._dataset_target.dataset_problem(Path(__file__).resolve().parents[1] / "data" / "datasets-v2" / name) is None
    (tmp_path / "sparse.zarr" / "X" / "indptr" / "extra").mkdir()
    assert "X/indptr/extra" in dsvm.io._dataset_target.dataset_problem(tmp_path / "sparse.zarr")
    os.symlink(tmp_path / "dense.zarr" / "y", tmp_path / "names.zarr" / "y2")
    assert "'y2'" in dsvm.io._dataset_target.dataset_problem(tmp_path / "names.zarr")


def test_split_refuses_targets_that_are_or_hold_its_input(tmp_path):
    X, y = make_circles_problem(n=60, seed=2)
    ds = dsvm.write_dataset(tmp_path / "all.zarr", X, y, chunk_rows=20)
    with pytest.raises(dsvm.exceptions.NotDsvmOutputError, match="the dataset split .* is the dataset to write"):
        dsvm.io.split_dataset(ds, tmp_path / "all.zarr", tmp_path / "test.zarr", overwrite=True)
    with pytest.raises(ValueError, match="need paths of their own"):
        dsvm.io.split_dataset(ds, tmp_path / "p.zarr", tmp_path / "p.zarr", overwrite=True)
    assert dsvm.open_dataset(tmp_path / "all.zarr").n_samples == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.zarr"]


def test_prediction_zarr_overwrite_keeps_a_model_put_inside_it(tmp_path, model, dsvm_cli):
    """`cp m.npz p.zarr/mymodel.npz; dsvm predict p.zarr/mymodel.npz d --out p.zarr --overwrite` deleted the model."""
    clf, X = model
    out = tmp_path / "p.zarr"
    write_predictions(clf, X, out)
    assert predictions.prediction_problem(out) is None
    save_model(clf, out / "mymodel.npz")
    np.save(tmp_path / "x.npy", X)
    line = _one_line_error(dsvm_cli("predict", out / "mymodel.npz", "x.npy", "--out", out, "--overwrite",
                                    cwd=tmp_path), "predict")
    assert f"--out {out} holds the command's own input (MODEL {out / 'mymodel.npz'})" in line
    # the model elsewhere: the file inside still makes the folder no prediction output dsvm may replace
    save_model(clf, tmp_path / "m.npz")
    line = _one_line_error(dsvm_cli("predict", "m.npz", "x.npy", "--out", out, "--overwrite", cwd=tmp_path),
                           "predict")
    assert "is not a prediction file written by dsvm (it holds 'mymodel.npz'" in line
    with pytest.raises(FileExistsError, match="it holds 'mymodel.npz'"):
        write_predictions(clf, X, out, overwrite=True)
    assert load_model(out / "mymodel.npz").n_features_in_ == X.shape[1]
    # a dataset inside the prediction folder, from Python
    ds = dsvm.write_dataset(out / "d.zarr", X, clf.predict(X))
    (out / "mymodel.npz").unlink()
    with pytest.raises(FileExistsError, match="the data .* lies inside the prediction file to write"):
        write_predictions(clf, ds, out, overwrite=True)
    assert dsvm.open_dataset(out / "d.zarr").n_samples == X.shape[0]


def test_pipeline_overwrite_keeps_a_users_file_at_a_report_name(tmp_path, libsvm_file, dsvm_cli):
    """`dsvm run p.yaml --overwrite` replaced any regular file named report.md in its (marked) output folder."""
    pipeline = _pipeline(tmp_path, libsvm_file)
    assert dsvm_cli("run", pipeline, cwd=tmp_path)[0] == 0
    assert dsvm_cli("run", pipeline, "--overwrite", cwd=tmp_path)[0] == 0  # its own report is replaced
    report = tmp_path / "out" / "report.md"
    (tmp_path / "mine.md").write_text("my notes\n")
    os.replace(tmp_path / "mine.md", report)
    line = _one_line_error(dsvm_cli("run", pipeline, "--overwrite", cwd=tmp_path), "run")
    assert f"{report} exists and is not a report file written by dsvm" in line
    assert report.read_text() == "my notes\n"
