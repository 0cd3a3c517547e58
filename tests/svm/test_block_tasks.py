"""What a Dask worker imports to run a fit: the block functions it unpickles must not pull in
scikit-learn (and the pandas and pyarrow it loads), which would add over 100 MiB to every worker's
memory and leave less for the blocks (issue 18: an idle worker already held 300 MiB)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

HEAVY = ("sklearn", "pandas", "pyarrow")


def _heavy_modules_loaded():
    return sorted(name for name in HEAVY if name in sys.modules)


def test_a_worker_that_fits_predicts_and_evaluates_never_imports_scikit_learn(tmp_path):
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    from dsvm import NystroemSVC, NystroemSVR, evaluate, open_dataset, write_dataset
    from dsvm.io._split import split_dataset
    from dsvm.model_selection import NystroemSVCCV

    X = da.random.default_rng(0).standard_normal((8000, 6), chunks=(2000, 6))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(np.int64)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as cluster, distributed.Client(cluster) as client:
        assert list(client.run(_heavy_modules_loaded).values()) == [[]], "a fresh worker already has them"
        ds = write_dataset(tmp_path / "d.zarr", X, y, chunk_rows=2000)
        model = NystroemSVC(n_components=40, probability=True, class_weight="balanced", scale="standard",
                            checkpoint=str(tmp_path / "ck.npz")).fit(open_dataset(ds.path))
        model.predict_proba(X).compute()
        assert evaluate(model, open_dataset(ds.path))["accuracy"] > 0.9
        NystroemSVC(n_components=20, solver="pegasos").fit(X, y, sample_weight=da.ones(8000, chunks=2000))
        NystroemSVR(n_components=20).fit(X, X[:, 1]).predict(X).compute()
        NystroemSVCCV(param_grid={"C": [1.0, 10.0]}, n_components=20, cv=2).fit(X, y)
        split_dataset(open_dataset(ds.path), tmp_path / "tr.zarr", tmp_path / "te.zarr")
        loaded = client.run(_heavy_modules_loaded)
        dsvm_on_worker = client.run(lambda: sorted(m for m in sys.modules if m.startswith("dsvm.svm.")))
    assert list(loaded.values()) == [[]], f"the worker imported {loaded}"
    # the fit did run its block functions there
    assert any("dsvm.svm._block_tasks" in mods for mods in dsvm_on_worker.values())
