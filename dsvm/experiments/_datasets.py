"""The data sets of the paper's experiments, their settings, and loading them into memory."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

from ..io import ingest

__all__ = ["C_PAPER", "PaperDataset", "PAPER_DATASETS", "Split", "load_split", "subsample", "signed_labels"]

C_PAPER = 10.0


@dataclass(frozen=True)
class PaperDataset:
    """One data set of the paper's experiments and the settings used for it."""

    name: str
    train: str
    test: str | None
    n_features: int
    gamma: float
    k: int
    k_grid: tuple[int, ...]
    gamma_note: str
    # Table 4's own landmarks where accuracy needs more, better placed ones than Table 3's k
    table4_k: int | None = None
    table4_landmarks: str = "uniform"

    @property
    def table4_settings(self) -> tuple[int, str]:
        """``(k, landmarks)`` of Table 4's LA-SN fits."""
        return (self.k if self.table4_k is None else self.table4_k), self.table4_landmarks


PAPER_DATASETS: dict[str, PaperDataset] = {
    "a9a": PaperDataset("a9a", "a9a.train.xz", "a9a.test.xz", 123, 0.05, 500, (100, 200, 500, 1000),
                        "the paper's value"),
    # w8a: uniform landmarks at k = 500 fall 0.8 pp short of LIBSVM; Table 4 uses 2500 "active" landmarks
    # (drawn among the rows a k = 500 model leaves active), which reach it
    "w8a": PaperDataset("w8a", "w8a.train.xz", "w8a.test.xz", 300, 0.05, 500, (100, 200, 500, 1000),
                        "the paper's value", table4_k=2500, table4_landmarks="active"),
    "ijcnn1": PaperDataset("ijcnn1", "ijcnn1.train.xz", "ijcnn1.test.xz", 22, 2.0, 1000, (100, 200, 500, 1000, 2000),
                           "the paper's value"),
    # mushrooms: Table 4 uses 400 uniform landmarks, which reach LIBSVM's 100 % (k = 100 does not)
    "mushrooms": PaperDataset("mushrooms", "mushrooms.all.xz", None, 112, 0.1, 100, (25, 50, 100, 200),
                              "3-fold CV of LIBSVM (C=10) on the 80 % train part: 100 % for γ in 0.03–0.3",
                              table4_k=400),
    "splice": PaperDataset("splice", "splice.train.xz", "splice.test.xz", 60, 0.01, 500, (50, 100, 200, 500),
                           "3-fold CV of LIBSVM (C=10) on the train file over γ in {0.001,…,0.1}: best 0.01"),
}


@dataclass
class Split:
    """In-memory train / test arrays of one data set."""

    name: str
    X_train: Any
    y_train: np.ndarray
    X_test: Any
    y_test: np.ndarray
    info: dict


def subsample(X, y, n: int | None, seed: int):
    """At most ``n`` rows of ``(X, y)``: a stratified, seeded subsample (all rows when there are fewer)."""
    if n is None or X.shape[0] <= n:
        return X, y
    X, _, y, _ = train_test_split(X, y, train_size=n, random_state=seed, stratify=y)
    return X, y


def load_split(
    ds: PaperDataset,
    data_dir: str | Path,
    work_dir: str | Path,
    *,
    test_fraction: float = 0.2,
    random_state: int = 0,
    max_train: int | None = None,
    max_test: int | None = None,
) -> Split:
    """Ingest a data set's LIBSVM file(s) with :func:`dsvm.io.ingest` and load them into memory.

    A data set without a test file (mushrooms) is split into ``1 − test_fraction``
    / ``test_fraction`` (stratified, seeded).  ``max_train`` / ``max_test``
    subsample (stratified, seeded) for quick runs.
    """
    data_dir, work_dir = Path(data_dir), Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    src = data_dir / ds.train
    if not src.exists():
        raise FileNotFoundError(f"{src}: data file of {ds.name} not found; set data_dir to the folder holding {ds.train}")
    t0 = time.perf_counter()
    train = ingest(src, work_dir / f"{ds.name}.train.zarr", format="libsvm", n_features=ds.n_features,
                      dtype="float64", overwrite=True)
    Xtr, ytr = train.load()
    info = {"train_file": str(src), "zarr": str(train.path)}
    if ds.test is not None:
        test = ingest(data_dir / ds.test, work_dir / f"{ds.name}.test.zarr", format="libsvm",
                         n_features=ds.n_features, dtype="float64", overwrite=True)
        Xte, yte = test.load()
        info["test_file"] = str(data_dir / ds.test)
    else:
        Xtr, Xte, ytr, yte = train_test_split(Xtr, ytr, test_size=test_fraction, random_state=random_state,
                                              stratify=ytr)
        info["split"] = {"test_fraction": test_fraction, "random_state": random_state, "stratified": True}
    Xtr, ytr = subsample(Xtr, ytr, max_train, random_state)
    Xte, yte = subsample(Xte, yte, max_test, random_state)
    info.update(n_train=int(Xtr.shape[0]), n_test=int(Xte.shape[0]), n_features=int(Xtr.shape[1]),
                load_seconds=time.perf_counter() - t0)
    return Split(ds.name, Xtr, np.asarray(ytr), Xte, np.asarray(yte), info)


def signed_labels(y, classes) -> np.ndarray:
    """Labels as ±1: +1 for ``classes[1]`` (the positive class), −1 otherwise."""
    return np.where(np.asarray(y) == classes[1], 1.0, -1.0)
