"""Running a ``kind: train`` pipeline: the ``data: split`` step; what a failed run leaves; its files checked
before any work."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from helpers import call_near_fifos

from dsvm.app._pipeline import run_pipeline
from dsvm.app._pipeline_spec import load_pipeline
from dsvm.app._report_files import MARKER_TEXT, OUTPUT_MARKER, check_output_folder
from dsvm.exceptions import NotDsvmOutputError, PipelineError
from dsvm.io import Dataset, open_dataset


def _spec(tmp_path, split):
    return load_pipeline({
        "name": "split",
        "output": str(tmp_path / "out"),
        "data": {"train": {"generate": {"n_samples": 3000, "n_features": 5, "random_state": 0}}, "split": split},
        "model": {"params": {"n_components": 40, "random_state": 0}},
        "report": {"plots": False},
    })


def test_split_step_writes_both_parts_without_loading_the_dataset(tmp_path, monkeypatch):
    def no_load(self):
        raise AssertionError(f"{self.path} was loaded into memory")

    monkeypatch.setattr(Dataset, "load", no_load)
    report = run_pipeline(_spec(tmp_path, {"test_fraction": 0.25, "random_state": 3}))
    data = tmp_path / "out" / "data"
    train, test, whole = (open_dataset(data / name) for name in ("train_split.zarr", "test_split.zarr", "train.zarr"))
    assert report["data"]["n_train"] == train.n_samples and report["data"]["test"] == test.path
    assert 0.5 < report["evaluation"]["accuracy"] <= 1.0
    np.testing.assert_array_equal(test.class_counts, np.rint(0.25 * whole.class_counts))
    assert train.attrs["split"] == {"of": whole.path, "part": "train", "test_fraction": 0.25, "seed": 3}


def test_split_leaving_a_part_empty_is_a_pipeline_error(tmp_path):
    spec = _spec(tmp_path, {"test_fraction": 0.0001})
    with pytest.raises(PipelineError, match=r"data\.split: .* leaves the test part empty"):
        run_pipeline(spec)


def test_a_pipeline_can_let_the_fit_choose_k_and_its_report_shows_the_path_and_the_gap(tmp_path, monkeypatch):
    import json

    from dsvm.svm import _auto_k

    monkeypatch.setattr(_auto_k, "K_START", 8)
    monkeypatch.setattr(_auto_k, "K_MAX", 32)
    spec = _tiny(tmp_path, n_train=600, model={"params": {"n_components": "auto", "k_tol": 0.0, "random_state": 0}})
    report = run_pipeline(spec)
    model = report["model"]
    assert [p["k"] for p in model["k_path"]][:2] == [8, 16] and model["n_components"] in (8, 16, 32)
    assert 0.0 <= model["duality_gap"] < 1e-2  # a converged fit's certificate
    saved = json.loads((tmp_path / "out" / "report.json").read_text(),
                       parse_constant=lambda c: pytest.fail(f"report.json holds {c}"))
    assert saved["model"]["k_path"] == model["k_path"]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## Choosing k" in text and f"chose **k = {model['n_components']}**" in text and "duality gap" in text


def test_a_pipeline_search_with_auto_k_searches_k_per_point(tmp_path, monkeypatch):
    from dsvm.svm import _auto_k

    monkeypatch.setattr(_auto_k, "K_START", 8)
    monkeypatch.setattr(_auto_k, "K_MAX", 16)
    spec = _tiny(tmp_path, model={"params": {"n_components": "auto", "random_state": 0},
                                  "search": {"grid": {"C": [1, 10]}, "cv": 2}})
    report = run_pipeline(spec)
    points = {(row["C"], row["n_components"]) for row in report["cv_results"]}
    assert {(1.0, 8), (10.0, 8)} <= points and points <= {(c, k) for c in (1.0, 10.0) for k in (8, 16)}
    assert report["model"]["n_components"] == report["model"]["params"]["n_components"] in (8, 16)


# --------------------------------------------------------------------------- a failed run, and the files it writes
def _tiny(tmp_path, n_train=300, **changes):
    spec = {"name": "tiny", "output": str(tmp_path / "out"),
            "data": {"train": {"generate": {"n_samples": n_train, "n_features": 5, "random_state": 0}},
                     "test": {"generate": {"n_samples": 100, "n_features": 5, "random_state": 1}}},
            "model": {"params": {"n_components": 20, "random_state": 0}}, "report": {"plots": False}}
    return load_pipeline({**spec, **changes})


def test_a_failed_run_keeps_the_marker_of_the_folder_it_made_and_a_rerun_writes_there(tmp_path):
    """`dsvm demo --n-train 1` failed after writing data/: the clean-up removed the marker of the folder the run
    had made, then could not remove the folder, and every later run refused it ("no .dsvm-output marker")."""
    with pytest.raises(ValueError, match="1 class"):
        run_pipeline(_tiny(tmp_path, n_train=1))
    out = tmp_path / "out"
    assert (out / OUTPUT_MARKER).is_file() and (out / "data" / "train.zarr").is_dir()
    assert check_output_folder(out, "pipeline output folder", overwrite=True) == out
    report = run_pipeline(_tiny(tmp_path))
    assert report["data"]["n_train"] == 300 and (out / "report.md").is_file()


def test_the_marker_goes_only_with_its_folder(tmp_path, monkeypatch):
    """A file written into the folder between the clean-up's look and its rmdir keeps the folder, and the marker."""
    from dsvm.app import _pipeline as pipeline

    out = tmp_path / "out"
    real_rmdir = os.rmdir

    def rmdir_after_a_write(path, *args, **kwargs):
        if Path(path) == out:
            (out / "late.txt").write_text("x")
        return real_rmdir(path, *args, **kwargs)

    def fail(*args, **kwargs):
        raise RuntimeError("ingest failed")

    monkeypatch.setattr(pipeline, "materialise_dataset", fail)
    monkeypatch.setattr(os, "rmdir", rmdir_after_a_write)
    with pytest.raises(RuntimeError, match="ingest failed"):
        run_pipeline(_tiny(tmp_path))
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "late.txt"]


@pytest.mark.parametrize("name, kind", [("report.json", "fifo"), ("report.md", "folder"), ("model.npz", "text"),
                                        ("data/test.zarr", "text"), ("convergence.png", "symlink")])
def test_the_files_a_run_writes_are_checked_before_any_work(tmp_path, monkeypatch, name, kind):
    """A FIFO at out/report.json was found only after the fit, when the report was written."""
    from dsvm.app import _pipeline as pipeline

    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    (out / OUTPUT_MARKER).write_text(MARKER_TEXT)
    target = out / name
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "text":
        target.write_text("precious\n")
    else:
        target.symlink_to(tmp_path / "elsewhere.png")
    monkeypatch.setattr(pipeline, "materialise_dataset", lambda *a, **k: pytest.fail("the run started its work"))
    spec = _tiny(tmp_path, report={"plots": True})
    exc = call_near_fifos(lambda: run_pipeline(spec), *([target] if kind == "fifo" else []))
    assert isinstance(exc, NotDsvmOutputError), exc
    assert str(exc).startswith(f"{target} exists and is not a ") and "written by dsvm" in str(exc)
    if kind == "text":
        assert target.read_text() == "precious\n"
