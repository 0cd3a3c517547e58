"""The paper experiments' settings: defaults, overrides, per-data-set options (dsvm.experiments._settings)."""

from __future__ import annotations

import pytest

from dsvm import experiments as ex


def test_paper_config_defaults_and_errors():
    cfg = ex.paper_config({"experiments": {"paper": {"repeats": 3, "sensitivity": {"folds": 5}}}})
    assert cfg["repeats"] == 3 and cfg["sensitivity"]["folds"] == 5 and cfg["sensitivity"]["C"] == [0.1, 1.0, 10.0, 100.0]
    assert cfg["datasets"] == ["a9a", "w8a", "ijcnn1", "mushrooms", "splice"]
    assert ex.paper_config({"experiments": {"paper": {"datasets": "a9a, splice"}}})["datasets"] == ["a9a", "splice"]
    with pytest.raises(ValueError, match="unknown key"):
        ex.paper_config({"experiments": {"paper": {"repeat": 3}}})
    with pytest.raises(ValueError, match="unknown"):
        ex.paper_config({"experiments": {"paper": {"datasets": ["covtype"]}}})
    with pytest.raises(ValueError, match="parts"):
        ex.paper_config({"experiments": {"paper": {"parts": ["table5"]}}})
    ds = ex.dataset_settings({**cfg, "dataset_options": {"splice": {"gamma": 0.02, "k": 50}}}, "splice")
    assert (ds.gamma, ds.k) == (0.02, 50)


def test_table4_settings_are_checked():
    cfg = ex.paper_config({"experiments": {"paper": {"dataset_options": {"w8a": {"table4_k": 2000,
                                                                                 "table4_landmarks": "active"}}}}})
    ds = ex.dataset_settings(cfg, "w8a")
    assert ds.k == ex.PAPER_DATASETS["w8a"].k and ds.table4_settings == (2000, "active")
    assert ex.dataset_settings(cfg, "a9a").table4_settings == (ex.PAPER_DATASETS["a9a"].k, "uniform")
    bad = ex.paper_config({"experiments": {"paper": {"dataset_options": {"w8a": {"table4_landmarks": "random"}}}}})
    with pytest.raises(ValueError, match="table4_landmarks"):
        ex.dataset_settings(bad, "w8a")
    with pytest.raises(ValueError, match="allowed"):
        ex.dataset_settings(ex.paper_config({"experiments": {"paper": {"dataset_options": {"w8a": {"kk": 1}}}}}),
                             "w8a")
