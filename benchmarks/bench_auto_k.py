"""``n_components="auto"`` against a grid over k on the LIBSVM benchmark sets (issue 28's table).

For each data set (C = 10, γ as in ``bench_speed.py``) and one landmark method:
fits at every k of the grid (at most the training rows), each with its fit
time and test accuracy, then one ``n_components="auto"`` fit.  Printed per
set: the grid's best test accuracy, the auto fit's chosen k, its accuracy,
the points it gives up against the best, and its time against the grid's fit
at the k it chose (the issue asks within 0.2 points, in at most 2x).

Usage::

    python benchmarks/bench_auto_k.py [--data-dir DIR] [--sets a9a,w8a,ijcnn1,mushrooms,splice]
                                      [--landmarks uniform] [--grid 250,500,1000,2000,4000]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from bench_speed import DATASETS, C, load
from common import DEFAULT_DATA_DIR, REPO, machine, save_json, table


def fit_and_score(Xtr, ytr, Xte, yte, **params) -> tuple[float, float, object]:
    """(fit seconds, test accuracy, model) of one NystroemSVC fit."""
    from dsvm import NystroemSVC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = NystroemSVC(C=C, random_state=0, **params).fit(Xtr, ytr)
        seconds = time.perf_counter() - t0
    return seconds, float(model.score(Xte, yte)), model


def one_set(data_dir: Path, name: str, landmarks: str, grid: list[int]) -> dict:
    gamma = DATASETS[name][0]
    Xtr, ytr, Xte, yte = load(data_dir, name)
    fits = {}
    for k in [k for k in grid if k <= Xtr.shape[0]]:
        seconds, acc, _ = fit_and_score(Xtr, ytr, Xte, yte, gamma=gamma, n_components=k, landmarks=landmarks)
        fits[k] = {"seconds": seconds, "accuracy": acc}
        print(f"{name} k={k}: {seconds:.2f}s {100 * acc:.2f}%", flush=True)
    seconds, acc, model = fit_and_score(Xtr, ytr, Xte, yte, gamma=gamma, n_components="auto", landmarks=landmarks)
    chosen = model.n_components_
    best_k = max(fits, key=lambda k: fits[k]["accuracy"])
    at_chosen = fits.get(chosen, {}).get("seconds")
    print(f"{name} auto: k={chosen} {seconds:.2f}s {100 * acc:.2f}%; path {model.k_path_}", flush=True)
    return {"set": name, "n_train": Xtr.shape[0], "best_k": best_k, "best_acc": 100 * fits[best_k]["accuracy"],
            "auto_k": chosen, "auto_acc": 100 * acc, "points_behind": 100 * (fits[best_k]["accuracy"] - acc),
            "auto_s": seconds, "grid_s_at_k": at_chosen,
            "time_ratio": None if at_chosen is None else seconds / at_chosen,
            "grid": fits, "path": model.k_path_}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--sets", default="a9a,w8a,ijcnn1,mushrooms,splice")
    ap.add_argument("--landmarks", default="uniform")
    ap.add_argument("--grid", default="250,500,1000,2000,4000")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "auto_k.json")
    args = ap.parse_args()
    grid = [int(v) for v in args.grid.split(",")]
    rows = [one_set(args.data_dir, name, args.landmarks, grid) for name in args.sets.split(",")]
    print(f"\n## n_components='auto' against k in {grid}, landmarks={args.landmarks}, C = {C}\n")
    print(f"machine: {machine()}\n")
    print(table(rows, ["set", "n_train", "best_k", "best_acc", "auto_k", "auto_acc", "points_behind", "auto_s",
                       "grid_s_at_k", "time_ratio"]))
    save_json({"machine": machine(), "landmarks": args.landmarks, "grid": grid, "sets": rows}, args.out)


if __name__ == "__main__":
    main()
