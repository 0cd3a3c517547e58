"""The block functions Dask workers run for the estimators: label codes and counts, weight checks, Platt
probabilities, folds, data fingerprints and scores of one block.

They need numpy (and the light layers below) only, and live apart from the estimators so that a worker
that unpickles one does not import scikit-learn, whose import (with the pandas it loads) adds over
100 MiB to every worker's memory.
"""

from __future__ import annotations

import zlib

import numpy as np
import scipy.sparse as sp

from ..blocks import row_hash, row_uniform
from ..problems import decisions, labels_from_decision, predicted_codes


def unique_block(y_block):
    return np.unique(np.asarray(y_block))


def unique_combine(parts):
    return np.unique(np.concatenate([np.asarray(p) for p in parts]))


def encode_codes(y_block, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of labels against the sorted ``classes``, and which labels are not among them."""
    y_block = np.asarray(y_block)
    codes = np.searchsorted(classes, y_block)
    codes = np.clip(codes, 0, len(classes) - 1)
    return codes, classes[codes] != y_block


def encode_block(y_block, classes):
    codes, bad = encode_codes(y_block, classes)
    if bad.any():
        labels = np.unique(np.asarray(y_block)[bad])[:5].tolist()
        raise ValueError(f"y holds labels {labels} that are not among the classes {classes.tolist()}")
    return codes.astype(np.int32)


def weight_stats_block(sw_block, codes_block, rows_block, n_groups):
    """Per-group weight sums of one block, plus the first non-finite and the first negative row."""
    w = np.asarray(sw_block, dtype=np.float64)
    rows = np.asarray(rows_block)
    nonfinite, negative = ~np.isfinite(w), w < 0
    first = [float(rows[m][0]) if m.any() else np.inf for m in (nonfinite, negative)]
    clean = np.where(nonfinite | negative, 0.0, w)
    if codes_block is None:
        mass = np.array([clean.sum()])
    else:
        mass = np.bincount(np.asarray(codes_block), weights=clean, minlength=n_groups)
    return mass, np.array(first)


def weight_stats_combine(parts):
    parts = list(parts)
    return sum(p[0] for p in parts), np.min([p[1] for p in parts], axis=0)


def class_counts_block(codes_block, n_classes):
    return np.bincount(codes_block, minlength=n_classes).astype(np.float64)


def platt_log_proba(dec: np.ndarray, probA: np.ndarray, probB: np.ndarray) -> np.ndarray:
    """Log-probabilities of every class from decision values, shape (n, n_classes).

    ``dec`` has one column per binary problem.  One problem (two classes):
    ``[log(1 − p), log p]`` with ``p = 1/(1+exp(A f + B))``; several (one-vs-rest):
    ``log p_j − log Σ_l p_l``.  Computed in the log domain (``logaddexp``), so
    no probability underflows to ``log 0``.
    """
    dec = np.asarray(dec, dtype=np.float64)
    if dec.ndim == 1:
        dec = dec[:, None]
    z = dec * probA[None, :] + probB[None, :]
    if dec.shape[1] == 1:
        z = z[:, 0]
        return np.column_stack([-np.logaddexp(0.0, -z), -np.logaddexp(0.0, z)])
    logp = -np.logaddexp(0.0, z)
    top = logp.max(axis=1, keepdims=True)
    return logp - (top + np.log(np.exp(logp - top).sum(axis=1, keepdims=True)))


def proba_block(dec_block, probA, probB, log=False):
    """Block function: (log-)probabilities of a block of decision values."""
    lp = platt_log_proba(dec_block, probA, probB)
    return lp if log else np.exp(lp)


def fold_block(v_block, n_folds, seed, sample_rate, offset=0):
    """Fold of every row (0 .. n_folds-1), or -1 - fold for rows outside the Platt subsample."""
    h = row_hash(v_block.shape[0], seed, offset)
    fold = (h % np.uint64(n_folds)).astype(np.int16)
    if sample_rate < 1.0:
        u = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53
        fold = np.where(u < sample_rate, fold, -1 - fold).astype(np.int16)
    return fold


def fold_weight_block(fold, sample_weight, f):
    real = np.where(fold < 0, -1 - fold, fold)
    w = (real != f).astype(np.float64)
    return w if sample_weight is None else w * sample_weight


def heldout_pairs_block(F, codes, fold, sample_weight, W, positive):
    """``(decision value, is positive)`` of every sampled row with its fold's model."""
    keep = fold >= 0
    if sample_weight is not None:
        keep &= np.asarray(sample_weight) > 0
    if not keep.any():
        return np.zeros(0), np.zeros(0, dtype=bool)
    Fk = F[keep]
    dec = decisions(Fk, W[:, :-1], W[:, -1])[np.arange(Fk.shape[0]), fold[keep]]
    return dec, np.asarray(codes)[keep] == positive


def concat_pairs(parts):
    parts = list(parts)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def correct_from_decision(dec, y_block, classes):
    pred = labels_from_decision(dec, classes)
    return np.array([float(np.sum(pred == np.asarray(y_block))), float(len(pred))])


def confusion_from_decision(dec, y_block, classes):
    m = len(classes)
    pred = predicted_codes(dec)
    true, unknown = encode_codes(y_block, classes)
    if unknown.any():
        bad = np.unique(np.asarray(y_block)[unknown])[:5]
        raise ValueError(f"y holds labels {bad.tolist()} that the model was not trained on (classes: {classes.tolist()})")
    return np.bincount(true * m + pred, minlength=m * m).reshape(m, m)


def regression_sums(dec, y_block) -> np.ndarray:
    """Block function: ``[Σ r², Σ |r|, Σ y, Σ y², n]`` of the residuals ``r = y − prediction`` of a block
    of one-column decision values (a regression model's predictions)."""
    y = np.asarray(y_block, dtype=np.float64)
    r = y - dec[:, 0]
    return np.array([float(r @ r), float(np.abs(r).sum()), float(y.sum()), float(y @ y), float(y.size)])


def finite_targets_block(y_block):
    return np.array([float(np.sum(~np.isfinite(np.asarray(y_block, dtype=np.float64))))])


def as_float_block(y_block):
    return np.asarray(y_block, dtype=np.float64)


def fingerprint_block(X_block, y_block, rows_block, sw_block):
    """Sums over the rows of one block; additive, so blocks may be cut anywhere."""
    offset = int(rows_block[0]) if len(rows_block) else 0
    w = row_uniform(np.arange(offset, offset + X_block.shape[0], dtype=np.int64))
    # no sample weights and weights of one are the same problem
    sw = np.ones(X_block.shape[0]) if sw_block is None else np.asarray(sw_block, dtype=np.float64)
    y = np.asarray(y_block)
    # string labels by a checksum of their text: Python's str hash differs between processes
    y_num = (y.astype(np.float64) if y.dtype.kind in "biuf"
             else np.array([zlib.crc32(str(v).encode("utf-8")) % 1000 for v in y], dtype=np.float64))
    if sp.issparse(X_block):
        Xs = X_block.tocsr().astype(np.float64)
        col = np.asarray(Xs.sum(axis=0)).ravel()
        colsq = np.asarray(Xs.multiply(Xs).sum(axis=0)).ravel()
        colw = np.asarray(Xs.T @ w).ravel()
    else:
        Xd = np.asarray(X_block, dtype=np.float64)
        col, colsq, colw = Xd.sum(axis=0), (Xd * Xd).sum(axis=0), Xd.T @ w
    return np.concatenate([col, colsq, colw, [y_num.sum(), (y_num * y_num).sum(), y_num @ w, float(len(y)),
                                              sw.sum(), sw @ sw, sw @ w, (sw * y_num) @ w]])
