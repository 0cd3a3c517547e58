"""The paper's experiments (dsvm.experiments) and the ``kind: paper`` / ``data: split:`` pipelines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import DATA_DIR, REPO, make_circles_problem
from dsvm import experiments as ex
from dsvm.pipeline import PipelineError, load_pipeline, run_pipeline


def make_xor_problem(n: int, seed: int = 0):
    """A non-linear problem whose optimal bias is about zero (LIBLINEAR regularises the bias)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, np.where(X[:, 0] * X[:, 1] > 0, 1, -1)


@pytest.fixture(scope="module")
def tiny_split():
    X, y = make_xor_problem(500, seed=1)
    return ex.Split("xor", X[:300], y[:300], X[300:], y[300:], {"n_train": 300, "n_test": 200})


@pytest.fixture(scope="module")
def tiny_problem():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(300, 20)).astype(np.float32)
    y = np.where(F[:, :3].sum(axis=1) + 0.5 * rng.normal(size=300) > 0, 1.0, -1.0)
    return ex.LinearProblem(F, y, C=10.0)


def test_objective_is_dsvms_objective(tiny_problem):
    from dsvm.solvers import semismooth_newton

    res = semismooth_newton(tiny_problem.operator(), tiny_problem.dim, tol=1e-8, hessian="gram")
    assert tiny_problem.objective(res.x[:-1], res.x[-1]) == pytest.approx(res.objective, rel=1e-6)
    # the optimum is a minimum: any other point is worse
    assert ex.optimum(tiny_problem) <= tiny_problem.objective(res.x[:-1] * 1.01, res.x[-1]) + 1e-9


@pytest.mark.parametrize("solver", ex.SOLVERS)
def test_every_solver_reaches_the_optimum_within_1e_4(tiny_problem, solver):
    phi = ex.optimum(tiny_problem)
    ladder = ex.NEWTON_LADDER if solver == "LA-SN" else ex.TOL_LADDER
    res = ex.time_to_objective(tiny_problem, solver, phi, ladder=ladder, budget_s=30.0)
    assert res["reached"] and res["rel_gap"] <= ex.REACH_RTOL
    assert res["rel_gap"] >= -1e-6  # nobody beats the tight float64 Newton solve
    assert res["tried"][-1]["tol"] == res["tol"] and res["seconds"] > 0
    # the loosest tolerance that reaches Φ*: the one before it (if any) did not
    for run in res["tried"][:-1]:
        assert run["rel_gap"] > ex.REACH_RTOL


def test_la_sn_solves_as_the_estimator_does_in_one_block():
    """Single core means one block; at n >= 4 * 10000 rows LA-SN opens with the subsample warm start."""
    rng = np.random.default_rng(2)
    F = rng.normal(size=(40_000, 8)).astype(np.float32)
    y = np.where(F[:, :2].sum(axis=1) + 0.7 * rng.normal(size=40_000) > 0, 1.0, -1.0)
    problem = ex.LinearProblem(F, y, C=1.0)
    assert problem._blocks.chunks == (40_000,)
    sub = problem.subsample_operator()
    assert sub is not None and 8_000 < sub.features.n_rows < 12_000 and sub.features.n_blocks == 1
    assert ex.LinearProblem(F[:30_000], y[:30_000], C=1.0).subsample_operator() is None
    res = ex.run_solver(problem, "LA-SN", 1e-8)
    assert res["objective"] == pytest.approx(ex.optimum(problem), rel=1e-7)


def test_liblinear_regularises_the_bias_so_newton_is_not_worse(tiny_problem):
    newton = ex.run_solver(tiny_problem, "LA-SN", 1e-8)
    for solver in ("LA-DCD", "LA-TRON"):
        lib = ex.run_solver(tiny_problem, solver, 1e-6)
        assert newton["objective"] <= lib["objective"] * (1 + 1e-6)


def test_ladder_respects_the_budget(tiny_problem):
    res = ex.time_to_objective(tiny_problem, "LA-TRON", ex.optimum(tiny_problem) * 0.5, budget_s=0.0)
    assert not res["reached"] and len(res["tried"]) == 1


def test_tables_3_and_4(tiny_split):
    fits = ex.lasn_fits(tiny_split, gamma=0.2, k=40, repeats=2)
    assert [row["seed"] for _, row in fits] == [0, 1]
    t3 = ex.table3(tiny_split, fits, budget_s=20.0)
    assert t3["repeats"] == 2 and len(t3["runs"]) == 2 and t3["k"] == 40
    assert set(t3["summary"]) == set(ex.SOLVERS)
    assert t3["summary"]["LA-SN"]["ratio_to_sn"] == pytest.approx(1.0)
    for solver, s in t3["summary"].items():
        assert s["reached_all"], solver
        assert s["rel_gap_max"] <= ex.REACH_RTOL
        assert 0.5 < s["accuracy"]["mean"] <= 1.0
        assert set(s["seconds"]) == {"mean", "std", "median", "min", "max"}
    for run in t3["runs"]:
        assert run["phi_star"] <= min(e["objective"] for e in run["solvers"].values()) + 1e-9
    lib = ex.libsvm_fit(tiny_split, gamma=0.2)
    t4 = ex.table4("xor", fits, lib, accuracy_tolerance=0.01)
    assert t4["speedup"] == pytest.approx(lib["fit_seconds"] / t4["lasn_fit_seconds"]["mean"])
    assert t4["accuracy_difference"] == pytest.approx(t4["lasn_accuracy"]["mean"] - lib["accuracy"])
    assert t4["faster"] == (t4["speedup"] > 1)
    report = {"table3": [t3], "table4": [t4]}
    c = ex.claims(report)
    ratios = c["newton_10x_vs_liblinear"]["per_dataset"][0]
    assert ratios["LA-DCD"]["ratio"] == pytest.approx(t3["summary"]["LA-DCD"]["ratio_to_sn"])
    assert c["newton_10x_vs_liblinear"]["holds_on_all"] == ratios["holds"]
    assert c["lasn_faster_than_libsvm"]["per_dataset"][0]["speedup"] == t4["speedup"]


def test_sensitivity_grid(tiny_split):
    s = ex.sensitivity(tiny_split.X_train, tiny_split.y_train, gamma=0.2, ks=[10, 40], Cs=[1.0, 10.0], folds=2,
                       name="xor")
    assert np.shape(s["cv_accuracy"]) == (2, 2) and np.shape(s["test_accuracy"]) == (2, 2)
    assert s["n_80"] == 240 and s["n_20"] == 60
    assert np.all((np.asarray(s["cv_accuracy"]) > 0.4) & (np.asarray(s["cv_accuracy"]) <= 1))
    best = s["best_by_cv"]
    assert s["cv_accuracy"][s["k"].index(best["k"])][s["C"].index(best["C"])] == pytest.approx(best["cv_accuracy"])


def test_structure_benchmark(tiny_split):
    X, y = make_xor_problem(400, seed=2)
    st = ex.structure_benchmark(tiny_split.X_train, tiny_split.y_train, X, y, gamma=0.2, sizes=[30, 60, 90], k=50,
                                slsqp_cap_s=30.0)
    assert [r["N"] for r in st["rows"]] == [30, 60, 90]
    for r in st["rows"]:
        assert abs(r["slsqp_rel_gap"]) < 1e-4  # SLSQP converges on these sizes
        assert abs(r["libsvm_rel_gap"]) < 1e-3  # LIBSVM stops at tol=1e-3 on its KKT gap
        assert r["generic_over_libsvm"] == pytest.approx(r["slsqp_seconds"] / r["libsvm_seconds"])
        assert r["libsvm_over_dsvm"] == pytest.approx(r["libsvm_seconds"] / r["dsvm_seconds"])
        assert r["dsvm_k"] <= min(50, r["N"]) and 0.5 < r["dsvm_accuracy"] <= 1


def test_slsqp_cap_is_reported():
    X, y = make_circles_problem(n=60, p=3, seed=3)
    from dsvm.kernels import kernel_matrix, make_kernel_spec

    K = kernel_matrix(X, X, make_kernel_spec("rbf", 0.5))
    res = ex.slsqp_dual(K, y.astype(float), 10.0, cap_s=0.0)
    assert res["capped"] and not res["success"]


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
    ds = ex._dataset_settings({**cfg, "dataset_options": {"splice": {"gamma": 0.02, "k": 50}}}, "splice")
    assert (ds.gamma, ds.k) == (0.02, 50)


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


# ----------------------------------------------------------------------------- on the real data sets
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
        assert all(s["rel_gap_max"] <= ex.REACH_RTOL for s in t["summary"].values() if s["reached_all"])


def test_table4_settings_are_checked():
    cfg = ex.paper_config({"experiments": {"paper": {"dataset_options": {"w8a": {"table4_k": 2000,
                                                                                 "table4_landmarks": "active"}}}}})
    ds = ex._dataset_settings(cfg, "w8a")
    assert ds.k == ex.PAPER_DATASETS["w8a"].k and ds.table4_settings == (2000, "active")
    assert ex._dataset_settings(cfg, "a9a").table4_settings == (ex.PAPER_DATASETS["a9a"].k, "uniform")
    bad = ex.paper_config({"experiments": {"paper": {"dataset_options": {"w8a": {"table4_landmarks": "random"}}}}})
    with pytest.raises(ValueError, match="table4_landmarks"):
        ex._dataset_settings(bad, "w8a")
    with pytest.raises(ValueError, match="allowed"):
        ex._dataset_settings(ex.paper_config({"experiments": {"paper": {"dataset_options": {"w8a": {"kk": 1}}}}}),
                             "w8a")


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
