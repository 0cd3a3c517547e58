"""Prediction through the landmarks (``K(X, L) α + b``) against the feature path it replaced.

Fits ``NystroemSVC`` on ijcnn1 (γ = 2, C = 10, uniform landmarks, seed 0,
``--k`` landmarks) and times ``predict`` on the 91,701 test rows two ways in the
same run, alternated so that both see the same machine load:

* **features** (the path of dsvm before prediction folded the map): per row
  block the ``n x r`` features ``F = fmap.transform_block(X_b)``, then the linear
  decision ``F coefᵀ + b`` (:func:`dsvm.problems.decisions`), block-wise as
  ``predict`` ran it — written out here;
* **landmarks**: ``model.predict``, which folds ``α = M coefᵀ`` once and
  computes ``K(X_b, L) α + b`` per block.

Each path is run once untimed, then ``--repeats`` times; the table gives the
medians and their ratio.  The predictions must be the same: a label may differ
only on a row whose decision value lies closer to 0 than the two paths'
largest difference (a tie to float32 rounding); the script fails otherwise.

Usage::

    python benchmarks/bench_predict.py [--data-dir ../shared/data] [--k 2000] [--repeats 3]

Prints a Markdown table; writes JSON to benchmarks/results/predict.json.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

import numpy as np
from common import DEFAULT_DATA_DIR, REPO, load_libsvm, machine, save_json, table

from dsvm import NystroemSVC
from dsvm.approx import check_features
from dsvm.blocks import lazy_result
from dsvm.checks import check_finite_block
from dsvm.problems import decisions, labels_from_decision
from dsvm.svm._base import prediction_input


def _feature_block(X_block, fmap, coef, intercept, check_finite, offset=0):
    """The decision block of the feature path: the block's features, checked, times the coefficients."""
    if check_finite:
        check_finite_block(X_block, offset)
    with np.errstate(over="ignore", invalid="ignore"):
        F = fmap.transform_block(X_block)
        check_features(F, X_block, fmap, offset)
        return decisions(F, coef, intercept)


def predict_through_features(model, X) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, decision values)`` of ``model`` on ``X`` by the feature path, on the row blocks ``predict`` uses."""
    X_rb, checked = prediction_input(model, X)
    dec = X_rb.map_blocks(_feature_block, model.coef_.shape[0], np.float64, with_offset=True,
                          shared=(model.feature_map_, model.coef_, model.intercept_, not checked))
    dec = np.asarray(lazy_result(dec))
    return labels_from_decision(dec, model.classes_), dec


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def _near_tie(dec: np.ndarray, gap: float) -> np.ndarray:
    """Rows whose label a change of ``gap`` in the decision values may flip: a value within ``gap`` of 0 (one
    problem), the two largest within ``2 gap`` (several)."""
    if dec.shape[1] == 1:
        return np.abs(dec[:, 0]) <= gap
    top2 = np.sort(dec, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0] <= 2 * gap


def compare(model, X, repeats: int) -> tuple[dict, np.ndarray]:
    """Both paths on ``X``, alternated: their times and whether their predictions are the same; and the labels."""
    paths = {"features": lambda: predict_through_features(model, X)[0], "landmarks": lambda: model.predict(X)}
    labels = {name: fn() for name, fn in paths.items()}  # untimed: the map's cast copies, α
    times = {name: [] for name in paths}
    for _ in range(repeats):
        for name, fn in paths.items():
            seconds, labels[name] = _timed(fn)
            times[name].append(seconds)
    old_dec = predict_through_features(model, X)[1]
    new_dec = np.asarray(model.decision_function(X)).reshape(old_dec.shape)
    gap = float(np.max(np.abs(new_dec - old_dec)))
    differ = labels["features"] != labels["landmarks"]
    old, new = statistics.median(times["features"]), statistics.median(times["landmarks"])
    return {"features (s)": old, "landmarks (s)": new, "features / landmarks": old / new,
            "labels differing": int(differ.sum()),
            "labels differing away from a tie": int((differ & ~_near_tie(old_dec, gap)).sum()),
            "max abs decision change": gap, "max abs decision": float(np.max(np.abs(old_dec))),
            "times": times}, labels["landmarks"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--k", type=int, default=2000, help="landmarks (n_components)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    X, y = load_libsvm(args.data_dir, "ijcnn1", "train")
    X_test, y_test = load_libsvm(args.data_dir, "ijcnn1", "test")
    fit_s, model = _timed(lambda: NystroemSVC(gamma=2.0, C=10.0, n_components=args.k, landmarks="uniform",
                                              random_state=0).fit(X, y))
    figures, labels = compare(model, X_test, args.repeats)
    row = {"data": "ijcnn1", "n test": int(X_test.shape[0]), "k": args.k, "r": int(model.coef_.shape[1]),
           "fit (s)": fit_s, **figures, "accuracy": float(np.mean(labels == y_test))}
    print(f"machine: {machine()}; medians of {args.repeats} alternated predicts\n")
    print(table([row], ["data", "n test", "k", "r", "features (s)", "landmarks (s)", "features / landmarks",
                        "labels differing", "max abs decision change", "max abs decision", "accuracy"]))
    save_json({"machine": machine(), "repeats": args.repeats, "rows": [row]},
              REPO / "benchmarks" / "results" / "predict.json")
    if row["labels differing away from a tie"]:
        raise SystemExit(f"{row['labels differing away from a tie']} labels differ away from a tie")


if __name__ == "__main__":
    main()
