"""The CV report of `dsvm train --search` and a pipeline's search step (dsvm.app._search_report)."""

import json

import pytest
from sklearn.model_selection import GridSearchCV

from dsvm import NystroemSVC, NystroemSVCCV
from dsvm.app._search_report import parse_search_args, search_and_report, write_cv_report


def test_parse_search_args():
    assert parse_search_args(["C=1,10,100", "gamma=0.01,0.05", "k=500,1000"]) == {
        "C": [1.0, 10.0, 100.0], "gamma": [0.01, 0.05], "n_components": [500, 1000]}
    assert parse_search_args("C=1 gamma=scale,0.1 class_weight=none,balanced") == {
        "C": [1.0], "gamma": ["scale", 0.1], "class_weight": [None, "balanced"]}
    for bad, match in [(["C"], "NAME="), (["k=1.5"], "integer"), (["C=-1"], "positive"), (["foo=1"], "not a NystroemSVC"),
                       (["C=a"], "number"), (["C=1", "C=2"], "twice"), ([], "at least one")]:
        with pytest.raises(ValueError, match=match):
            parse_search_args(bad)


def test_write_cv_report(tmp_path, circles):
    X, y = circles
    grid = {"C": [1.0, 10.0, 100.0], "gamma": [0.1, 0.3], "n_components": [20, 40]}
    search = NystroemSVCCV(grid, cv=3, random_state=0, refit=False).fit(X, y)
    paths = write_cv_report(search, tmp_path / "report")
    assert set(paths) == {"csv", "json", "markdown", "heatmap"}
    assert all(p.exists() and p.stat().st_size > 0 for p in paths.values())
    lines = paths["csv"].read_text().splitlines()
    assert len(lines) == 1 + 12 and lines[0].startswith("rank,C,gamma,n_components,mean_test_score")
    doc = json.loads(paths["json"].read_text())
    assert doc["best_params"] == search.best_params_ and len(doc["results"]) == 12
    assert "| rank |" in paths["markdown"].read_text()
    assert paths["heatmap"].read_bytes()[:4] == b"\x89PNG"
    # also for scikit-learn's GridSearchCV over NystroemSVC
    gs = GridSearchCV(NystroemSVC(n_components=20, random_state=0), {"C": [1.0, 10.0], "gamma": [0.1, 0.3]}, cv=3)
    assert "heatmap" in write_cv_report(gs.fit(X, y), tmp_path / "gs", prefix="gs")


def test_write_cv_report_without_matplotlib(tmp_path, circles, monkeypatch):
    import builtins

    X, y = circles
    search = NystroemSVCCV({"C": [1.0, 10.0]}, cv=3, n_components=20, random_state=0, refit=False).fit(X, y)
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.warns(UserWarning, match="matplotlib"):
        paths = write_cv_report(search, tmp_path)
    assert "heatmap" not in paths and paths["csv"].exists()


def test_search_and_report_for_the_cli_and_pipelines(tmp_path, circles):
    X, y = circles
    grid = parse_search_args(["C=1,10", "gamma=0.1,0.3", "k=20,40"])
    search, paths = search_and_report(X, y, param_grid=grid, out_dir=tmp_path, cv=3, C=5.0, n_components=30,
                                      random_state=0)
    assert set(search.best_params_) == {"C", "gamma", "n_components"}
    assert search.best_estimator_.n_components == search.best_params_["n_components"]
    assert paths["heatmap"].exists() and paths["csv"].exists()
