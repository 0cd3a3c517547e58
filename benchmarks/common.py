"""Shared helpers of the benchmark scripts (data loading, timing, tables)."""

from __future__ import annotations

import json
import lzma
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = Path(os.environ.get("DSVM_DATA_DIR", REPO.parent / "shared" / "data"))

N_FEATURES = {"a9a": 123, "w8a": 300, "ijcnn1": 22, "mushrooms": 112, "splice": 60}


def load_libsvm(data_dir: Path, name: str, part: str):
    """(X, y) of ``<name>.<part>.xz`` read with scikit-learn's parser (CSR, float64)."""
    from sklearn.datasets import load_svmlight_file

    path = Path(data_dir) / f"{name}.{part}.xz"
    if not path.exists():
        raise SystemExit(f"benchmark data {path} not found; pass --data-dir")
    with lzma.open(path) as f:
        X, y = load_svmlight_file(f, n_features=N_FEATURES[name])
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X, y


def timed(fn, repeats: int = 1):
    """Run ``fn`` ``repeats`` times; return (median seconds, all seconds, last result)."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def table(rows: list[dict], columns: list[str]) -> str:
    """A Markdown table of ``rows`` restricted to ``columns``."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.6g}"
        return str(v)

    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(out)


def gemm_gflops(n: int = 3000, dtype=np.float32, repeats: int = 3) -> float:
    """This machine's GEMM rate (GFLOP/s), measured now."""
    a = np.random.default_rng(0).random((n, n), dtype=np.float64).astype(dtype)
    a @ a
    best = min(timed(lambda: a @ a, 1)[0] for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def save_json(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
