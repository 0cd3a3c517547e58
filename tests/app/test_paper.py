"""The ``kind: paper`` and ``data: split:`` pipelines end to end (dsvm.app._paper, dsvm.app._pipeline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DATA_DIR, REPO

from dsvm import experiments as ex
from dsvm.app._pipeline import run_pipeline
from dsvm.app._pipeline_spec import PipelineError, load_pipeline
from dsvm.experiments._linear import REACH_RTOL


def test_paper_pipeline_file_loads_with_overrides():
    spec = load_pipeline(REPO / "pipelines" / "paper.yaml", ["repeats=2", "quick=true", "datasets=[splice]",
                                                             "output=/tmp/x"])
    assert spec["kind"] == "paper" and spec["output"] == "/tmp/x"
    cfg = ex.paper_config(spec)
    assert cfg["repeats"] == 2 and cfg["quick"] is True and cfg["datasets"] == ["splice"]
    # a single string is one item (or a comma list), not its letters
    cfg = ex.paper_config(load_pipeline(REPO / "pipelines" / "paper.yaml", ["parts=table3", "datasets=a9a,w8a"]))
    assert cfg["parts"] == ["table3"] and cfg["datasets"] == ["a9a", "w8a"]
    with pytest.raises(PipelineError, match="kind"):
        load_pipeline({"kind": "papers"})


@pytest.mark.parametrize("name", ["a9a", "w8a", "ijcnn1", "mushrooms", "splice"])
def test_single_dataset_pipelines_load(name):
    spec = load_pipeline(REPO / "pipelines" / f"{name}.yaml")
    assert spec["kind"] == "train" and spec["name"] == name
    assert spec["model"]["params"]["gamma"] == ex.PAPER_DATASETS[name].gamma
    assert ("split" in spec["data"]) == (ex.PAPER_DATASETS[name].test is None)


def test_pipeline_split_option(tmp_path):
    spec = load_pipeline({
        "name": "split", "output": str(tmp_path / "out"),
        "data": {"train": {"generate": {"n_samples": 2000, "n_features": 5, "random_state": 0}},
                 "split": {"test_fraction": 0.25, "random_state": 1}},
        "model": {"params": {"C": 10, "n_components": 50, "random_state": 0}},
        "report": {"plots": False},
    })
    report = run_pipeline(spec)
    assert report["data"]["n_train"] == 1500 and report["evaluation"]["n_test"] == 500
    assert report["data"]["split"] == {"test_fraction": 0.25, "random_state": 1}
    bad = dict(spec, data={**spec["data"], "test": {"generate": {"n_samples": 10, "n_features": 5}}})
    with pytest.raises(PipelineError, match="either"):
        run_pipeline(bad)


@pytest.mark.data
def test_quick_paper_pipeline_end_to_end(tmp_path):
    for f in ("splice.train", "splice.test", "mushrooms.all"):
        if not (DATA_DIR / f"{f}.xz").exists():
            pytest.skip(f"benchmark data {DATA_DIR / f}.xz not found")
    out = tmp_path / "paper"
    spec = load_pipeline(REPO / "pipelines" / "paper.yaml", [
        "quick=true", "repeats=2", f"output={out}", f"data_dir={DATA_DIR}", "datasets=[splice,mushrooms]"])
    # Table 4 with its own landmarks on one data set; Table 3 keeps uniform ones at k
    spec["experiments"]["paper"]["dataset_options"] = {"splice": {"table4_k": 60, "table4_landmarks": "kmeans"}}
    report = run_pipeline(spec)
    assert (out / "report.md").exists() and (out / "report.json").exists()
    for png in ("table3_t_linear.png", "table4_lasn_vs_libsvm.png", "sensitivity.png", "structure.png"):
        assert (out / png).stat().st_size > 1000, png
        assert png in report["plots"]
    saved = json.loads((out / "report.json").read_text())
    assert [t["dataset"] for t in saved["table3"]] == ["splice", "mushrooms"]
    assert [t["dataset"] for t in saved["table4"]] == ["splice", "mushrooms"]
    t4 = {t["dataset"]: t for t in saved["table4"]}
    assert (t4["splice"]["k"], t4["splice"]["landmarks"]) == (60, "kmeans")
    assert (t4["mushrooms"]["k"], t4["mushrooms"]["landmarks"]) == (ex.QUICK["k_max"], "uniform")
    assert saved["table3"][0]["k"] == min(ex.PAPER_DATASETS["splice"].k, ex.QUICK["k_max"])
    assert saved["datasets"]["mushrooms"]["split"] == {"test_fraction": 0.2, "random_state": 0, "stratified": True}
    assert saved["structure"]["dataset"] == "splice"  # a9a is not among the quick run's data sets
    assert set(saved["claims"]) == {"newton_10x_vs_liblinear", "lasn_faster_than_libsvm"}
    md = (out / "report.md").read_text()
    for heading in ("Table 3 analogue", "Table 4 analogue", "Sensitivity", "What structure is worth",
                    "claims, checked", "machine:"):
        assert heading in md
    for t in saved["table3"]:
        assert all(s["rel_gap_max"] <= REACH_RTOL for s in t["summary"].values() if s["reached_all"])


@pytest.mark.data
def test_mushrooms_pipeline_splits_the_single_file(tmp_path):
    if not (DATA_DIR / "mushrooms.all.xz").exists():
        pytest.skip(f"benchmark data {DATA_DIR / 'mushrooms.all.xz'} not found")
    spec = load_pipeline(REPO / "pipelines" / "mushrooms.yaml", [f"output={tmp_path / 'm'}", f"data_dir={DATA_DIR}"])
    spec["experiments"] = {}
    report = run_pipeline(spec)
    assert report["data"]["n_train"] == 6499 and report["evaluation"]["n_test"] == 1625
    assert report["evaluation"]["accuracy"] > 0.99
    assert Path(tmp_path / "m" / "report.md").exists()
