"""Running a ``kind: train`` pipeline: the ``data: split`` step."""

from __future__ import annotations

import numpy as np
import pytest

from dsvm.app.pipeline import run_pipeline
from dsvm.app.pipeline_spec import load_pipeline
from dsvm.exceptions import PipelineError
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
