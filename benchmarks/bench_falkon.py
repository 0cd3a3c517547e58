"""dsvm against FALKON on CPU, same data, same landmark counts, same run.

For each data set (γ as in ``bench_speed.py``, C = 10) and each k, fits
``NystroemSVC(n_components=k, landmarks="uniform")`` with each feature store
asked (``--stores``, default ``memory,implicit``) and, when the ``falkon``
package is installed, ``falkon.Falkon`` with ``M = k`` uniform centres, the
Gaussian kernel of the same γ (σ = 1/√(2γ)) and the penalty ``λ = 1/(2 C n)``
(the SVM's ``½‖w‖² + C Σ loss`` divided by ``C n``), on the same threads.
FALKON fits the squared loss to the ±1 labels and predicts their sign.
Prints fit seconds and test accuracy per k, dsvm's time against FALKON's at
each k, and how each one's time grows from the smallest k to the largest.

FALKON is not a dependency of dsvm, and it is not on PyPI: to get its columns,
install PyTorch and build FALKON from its source for CPU, in an environment of
its own (PyTorch from PyPI brings several GB of CUDA libraries)::

    pip install torch ninja wheel setuptools
    FORCE_ONLY_CPU=1 pip install --no-build-isolation git+https://github.com/FalkonML/falkon.git
    pip install -e /path/to/dsvm

Usage::

    python benchmarks/bench_falkon.py [--datasets ijcnn1,a9a,w8a] [--ks 1000,2000,4000]
                                      [--stores memory,implicit] [--repeats 1] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from bench_speed import DATASETS, load
from common import DEFAULT_DATA_DIR, REPO, machine, save_json, table

logger = logging.getLogger("bench_falkon")

C = 10.0


def fit_dsvm(Xtr, ytr, Xte, yte, gamma: float, k: int, store: str, repeats: int) -> dict:
    from dsvm import NystroemSVC

    times, model = [], None
    for _ in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            model = NystroemSVC(C=C, gamma=gamma, n_components=k, landmarks="uniform", random_state=0,
                                feature_store=store).fit(Xtr, ytr)
            times.append(time.perf_counter() - t0)
    s = model.solver_stats_
    return {"fit_s": statistics.median(times), "runs": [round(t, 2) for t in times],
            "accuracy": float(model.score(Xte, yte)), "feature_s": s["feature_seconds"],
            "solve_s": s["solve_seconds"], "landmark_s": s["landmark_seconds"], "newton_iter": int(model.n_iter_)}


def falkon_available() -> bool:
    try:
        import falkon  # noqa: F401
    except ImportError:
        return False
    return True


def fit_falkon(Xtr, ytr, Xte, yte, gamma: float, k: int, repeats: int) -> dict:
    import falkon
    import torch

    dense = [torch.from_numpy(np.asarray(X.todense() if hasattr(X, "todense") else X, dtype=np.float32))
             for X in (Xtr, Xte)]
    labels = torch.from_numpy(np.where(ytr > 0, 1.0, -1.0).astype(np.float32)).reshape(-1, 1)
    kernel = falkon.kernels.GaussianKernel(sigma=1.0 / np.sqrt(2.0 * gamma))
    options = falkon.FalkonOptions(use_cpu=True, keops_active="no")
    times, model = [], None
    for _ in range(repeats):
        model = falkon.Falkon(kernel=kernel, penalty=1.0 / (2.0 * C * Xtr.shape[0]), M=k, seed=0, options=options)
        t0 = time.perf_counter()
        model.fit(dense[0], labels)
        times.append(time.perf_counter() - t0)
    predicted = np.where(model.predict(dense[1]).numpy().ravel() > 0, 1.0, -1.0)
    return {"fit_s": statistics.median(times), "runs": [round(t, 2) for t in times],
            "accuracy": float(np.mean(predicted == np.where(yte > 0, 1.0, -1.0)))}


def growth(rows: list[dict], key: str) -> float:
    """Time at the largest k over time at the smallest."""
    return rows[-1][key] / rows[0][key]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="ijcnn1,a9a,w8a")
    ap.add_argument("--ks", default="1000,2000,4000")
    ap.add_argument("--stores", default="memory,implicit", help="dsvm's feature_store values to fit with")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "falkon.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ks = [int(k) for k in args.ks.split(",")]
    stores = args.stores.split(",")
    with_falkon = falkon_available()
    if not with_falkon:
        print("falkon is not installed: dsvm's columns only")
    results = {"machine": machine(), "C": C, "ks": ks, "stores": stores, "falkon": with_falkon, "datasets": {}}
    for name in args.datasets.split(","):
        gamma = DATASETS[name][0]
        Xtr, ytr, Xte, yte = load(args.data_dir, name)
        rows = []
        for k in ks:
            row: dict = {"k": k}
            for store in stores:
                res = fit_dsvm(Xtr, ytr, Xte, yte, gamma, k, store, args.repeats)
                row.update({f"dsvm_{store}_s": res["fit_s"], f"dsvm_{store}_acc": res["accuracy"],
                            f"dsvm_{store}": res})
            if with_falkon:
                res = fit_falkon(Xtr, ytr, Xte, yte, gamma, k, args.repeats)
                row.update({"falkon_s": res["fit_s"], "falkon_acc": res["accuracy"]})
                for store in stores:
                    row[f"{store}/falkon"] = row[f"dsvm_{store}_s"] / res["fit_s"]
            rows.append(row)
            print({key: (round(v, 4) if isinstance(v, float) else v) for key, v in row.items()
                   if not isinstance(v, dict)}, flush=True)
        columns = ["k"] + [f"dsvm_{s}_{x}" for s in stores for x in ("s", "acc")]
        if with_falkon:
            columns += ["falkon_s", "falkon_acc"] + [f"{s}/falkon" for s in stores]
        print(f"\n## {name} (γ={gamma}, C={C}, n={Xtr.shape[0]}, test {Xte.shape[0]})\n")
        print(table(rows, columns))
        grown = {store: growth(rows, f"dsvm_{store}_s") for store in stores}
        if with_falkon:
            grown["falkon"] = growth(rows, "falkon_s")
        print(f"time at k={ks[-1]} / time at k={ks[0]}: " + ", ".join(f"{key} {v:.2f}" for key, v in grown.items()))
        results["datasets"][name] = {"gamma": gamma, "rows": rows, "growth": grown}
    save_json(results, args.out)


if __name__ == "__main__":
    main()
