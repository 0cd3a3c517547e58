"""Writing predictions block by block (never all of them in memory at once)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from .operator import decision_blocks

OUTPUT_SUFFIXES = (".zarr", ".npy", ".csv")


def write_predictions(model, X, out: str | os.PathLike, *, decision: bool = False, overwrite: bool = False) -> int:
    """Predict ``X`` (array, dask array or Dataset) block-wise and write to ``out``.

    The format follows the suffix: ``.zarr`` (a 1-d array, or 2-d decision
    values for multiclass), ``.npy`` or ``.csv`` (one row per input row).  The
    output is written under a temporary name and renamed when complete.

    Returns
    -------
    Number of rows written.
    """
    import zarr

    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise ValueError(f"--out {out}: unknown output type; use one of {', '.join(OUTPUT_SUFFIXES)}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass --overwrite to replace it")
    X_rb, checked = model._validate_predict_input(X)
    dec = decision_blocks(X_rb, model.feature_map_, model.coef_, model.intercept_, not checked)
    classes = getattr(model, "classes_", None)  # None for a regression model: the prediction is the value
    if classes is not None and classes.dtype.kind == "O":
        # one fixed width for every block: the first block's labels may all be short ones
        classes = classes.astype(str)
    binary = model.coef_.shape[0] == 1

    def convert(d: np.ndarray) -> np.ndarray:
        if decision or classes is None:
            return d[:, 0] if binary else d
        return classes[(d[:, 0] > 0).astype(int)] if binary else classes[np.argmax(d, axis=1)]

    n = X_rb.n_rows
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        if suffix == ".zarr":
            arr = None
            start = 0
            for block in dec.iter_blocks():
                values = convert(block)
                if arr is None:
                    shape = (n,) + values.shape[1:]
                    arr = zarr.create_array(str(tmp), shape=shape, dtype=values.dtype,
                                            chunks=(max(1, len(values)),) + values.shape[1:])
                    kind = "decision" if decision else ("labels" if classes is not None else "values")
                    arr.attrs.update({"kind": kind, "n_rows": n})
                arr[start : start + len(values)] = values
                start += len(values)
        elif suffix == ".npy":
            mm = None
            start = 0
            for block in dec.iter_blocks():
                values = convert(block)
                if mm is None:
                    mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=values.dtype, shape=(n,) + values.shape[1:])
                mm[start : start + len(values)] = values
                start += len(values)
            if mm is not None:
                mm.flush()
                del mm
        else:
            with open(tmp, "w") as f:
                header = ["decision"] if decision and binary else (
                    [f"decision_{c}" for c in classes] if decision else ["prediction"])
                f.write(",".join(header) + "\n")
                for block in dec.iter_blocks():
                    values = convert(block)
                    values = values[:, None] if values.ndim == 1 else values
                    np.savetxt(f, values, delimiter=",", fmt="%s" if values.dtype.kind in "UO" else "%.10g")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    return n
