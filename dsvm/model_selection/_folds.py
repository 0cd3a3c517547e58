"""The folds of a CV search: who trains and who is held out, and the training rows of each fold.

Per row and split a two-bit role (0 unused, 1 train, 2 test) is packed into
``uint64`` words, 32 splits a word (:func:`pack_roles`); in-memory data split
into a partition is reordered into blocks that never straddle two folds
(:class:`SearchContext`).
"""

from __future__ import annotations

import os

import numpy as np

from ..blocks import RowBlocks, aligned_vector, from_blocks
from ..problems import decisions, predicted_codes

__all__ = ["MAX_SPLITS_PER_WORD", "FOLD_MIN_BLOCK_ROWS", "SearchContext", "pack_roles", "cv_confusion_block"]

MAX_SPLITS_PER_WORD = 32
FOLD_MIN_BLOCK_ROWS = 1024  # held-out views smaller than this gain nothing from a second thread


def _role_block(packed, s):
    return ((packed >> np.uint64(2 * s)) & np.uint64(3)).astype(np.int8)


def _train_weight_block(packed, sample_weight, s):
    w = (_role_block(packed, s) == 1).astype(np.float64)
    return w if sample_weight is None else w * sample_weight


def cv_confusion_block(F, codes, packed, W, splits, n_classes, train):
    """Confusion matrices ``(len(splits), n_C, 2, m, m)`` (test, train) of every fold model."""
    S, nC, nP, dim = W.shape
    m = n_classes
    out = np.zeros((S, nC, 2, m, m))
    if F.shape[0] == 0:
        return out
    dec = decisions(F, W[..., :-1].reshape(-1, dim - 1), W[..., -1].ravel()).reshape(F.shape[0], S, nC, nP)
    pred = predicted_codes(dec)
    codes = np.asarray(codes, dtype=np.int64)
    for i, s in enumerate(splits):
        role = _role_block(packed, s)
        for which, value in ((0, 2), (1, 1)) if train else ((0, 2),):
            rows = role == value
            if not rows.any():
                continue
            t = codes[rows] * m
            for c in range(nC):
                out[i, c, which] = np.bincount(t + pred[rows, i, c], minlength=m * m).reshape(m, m)
    return out


class SearchContext:
    """What every group of a search shares: rows, labels, fold roles and the training rows of each fold.

    In-memory data whose splits partition the rows (k-fold splitters) is
    reordered once, fold after fold, into blocks that never straddle two
    folds: the training rows of a fold are then the other folds' blocks —
    numpy views, no copy, no pass over held-out rows.  Otherwise (Dask
    arrays, or splits that overlap or leave rows out) a fold's training rows
    are all rows with the held-out ones weighted zero.
    """

    def __init__(self, X_rb, X_orig, checked, codes, classes, sample_weight, packed, n_splits,
                 fold_blocks=None, train_w=None):
        self.X_rb = X_rb
        self.X_orig = X_orig
        self.checked = checked
        self.codes = codes
        self.classes = classes
        self.sample_weight = sample_weight
        self.packed = packed
        self.n_splits = n_splits
        self.fold_blocks = fold_blocks
        self.train_w = train_w

    @classmethod
    def build(cls, X_rb, checked, codes, y_codes, classes, sw, splits, base):
        n, S = X_rb.n_rows, len(splits)
        tests = [np.asarray(test, dtype=np.int64) for _, test in splits]
        partition = (
            not X_rb.is_distributed
            and sum(t.size for t in tests) == n
            and all(np.asarray(train).size + t.size == n for (train, _), t in zip(splits, tests))
            and np.all(np.bincount(np.concatenate(tests), minlength=n) == 1)
        )
        if partition:
            order = np.concatenate(tests)
            X = X_rb.compute()[order]
            block_rows = max(X_rb.chunks)
            bounds, fold_blocks, start = [], [], 0
            for t in tests:
                first = len(bounds)
                for a in range(start, start + t.size, block_rows):
                    bounds.append((a, min(a + block_rows, start + t.size)))
                fold_blocks.append(set(range(first, len(bounds))))
                start += t.size
            X_fold = from_blocks([X[a:b] for a, b in bounds])
            codes_f = aligned_vector(y_codes[order].astype(np.int32), X_fold)
            sw_f = None if sw is None else aligned_vector(np.asarray(sw.compute(), dtype=np.float64)[order], X_fold)
            packed = [aligned_vector(p[order], X_fold) for p in pack_roles(splits, n)]
            return cls(X_fold, X_rb, checked, codes_f, classes, sw_f, packed, S, fold_blocks=fold_blocks)
        packed = [aligned_vector(p, X_rb).persist() for p in pack_roles(splits, n)]
        train_w = [
            packed[s // MAX_SPLITS_PER_WORD].map_blocks(
                _train_weight_block, None, np.float64, aligned=(sw,), shared=(s % MAX_SPLITS_PER_WORD,)
            ).persist()
            for s in range(S)
        ]
        return cls(X_rb, X_rb, checked, codes, classes, sw, packed, S, train_w=train_w)

    def held_out_rows(self, F: RowBlocks, s: int):
        """``(features, label codes, weights)`` of the rows fold ``s`` holds out (fold-block layout only)."""
        keep = sorted(self.fold_blocks[s])
        # A fold is often a single block: cut it into one view per thread so that the passes over
        # held-out rows (fold exchanges) use every core.  (Smaller blocks everywhere would slow
        # the training passes, whose per-block costs grow with the number of blocks.)
        parts = max(1, min((os.cpu_count() or 1) // len(keep),
                           sum(self.X_rb.chunks[i] for i in keep) // (FOLD_MIN_BLOCK_ROWS * len(keep))))

        def sub(rb):
            return None if rb is None else rb.select_blocks(keep, split=parts)

        return sub(F), sub(self.codes), sub(self.sample_weight)

    def training_rows(self, F: RowBlocks, s: int):
        """``(features, label codes, weights)`` of fold ``s``'s training problem."""
        if self.fold_blocks is None:
            return F, self.codes, self.train_w[s]
        keep = [i for i in range(F.n_blocks) if i not in self.fold_blocks[s]]

        def sub(rb):
            return None if rb is None else rb.select_blocks(keep)

        return sub(F), sub(self.codes), sub(self.sample_weight)


def pack_roles(splits, n: int) -> list[np.ndarray]:
    """Per row and split: 0 unused, 1 train, 2 test — two bits per split, 32 splits per uint64."""
    words = []
    for start in range(0, len(splits), MAX_SPLITS_PER_WORD):
        packed = np.zeros(n, dtype=np.uint64)
        for s, (train, test) in enumerate(splits[start : start + MAX_SPLITS_PER_WORD]):
            shift = np.uint64(2 * s)
            packed[np.asarray(train)] |= np.uint64(1) << shift
            packed[np.asarray(test)] |= np.uint64(2) << shift
        words.append(packed)
    return words
