"""Checkpoints of a running fit: resume after a crash, Ctrl-C or a pre-empted job.

With ``NystroemSVC(checkpoint="fit.ckpt.npz")`` (CLI ``--checkpoint``) the
state of the fit is written after every Newton iteration: the estimator's
parameters, a fingerprint of the data, the Nyström map (landmarks and M), the
results of the binary problems already solved and the full semismooth Newton
state of the current one (x, gradient, the accumulated Gram matrix, the
counters of the update rule).  Fitting again with the same checkpoint path
skips the landmark stage and continues with the next iteration, so the
resumed model equals the uninterrupted one.  The file is removed when the fit
completes — or, inside :func:`kept_until_saved`, left for the caller to
remove (:func:`remove_checkpoint`) once the model is safely written: a
completed checkpoint resumes to the finished model without refitting.

The path is checked before any work (:func:`check_checkpoint_path`).  A
checkpoint of other data or other parameters is refused
(:class:`CheckpointMismatchError`).  Files are ``.npz`` + JSON like model
files (:mod:`dsvm.io._archive`): written through :mod:`dsvm.io._replace` (only
a checkpoint file is ever replaced), read with bounds on every member.

The data fingerprint is chunking-independent: per-column sums, sums of
squares and sums weighted by a hash of the row index, plus label and
sample-weight statistics, computed in one pass and compared to a relative
tolerance of 1e-9.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..approx import FeatureMap, KernelSpec
from ..blocks import row_index_blocks
from ..exceptions import CheckpointMismatchError, ModelFileError
from ..io import MemberRules, meta_array, npz_problem, read_npz, write_npz
from ..solvers import REGISTRY
from ._block_tasks import fingerprint_block

logger = logging.getLogger(__name__)

__all__ = ["FORMAT", "CheckpointMismatchError", "Checkpoint", "open_checkpoint", "check_checkpoint_path",
           "remove_checkpoint", "kept_until_saved", "data_fingerprint", "restore_feature_map", "restore_solver_state",
           "restore_done"]

FORMAT = "dsvm-checkpoint"
FINGERPRINT_RTOL = 1e-9
_KEEP_COMPLETED = contextvars.ContextVar("dsvm_keep_completed_checkpoint", default=False)


@contextlib.contextmanager
def kept_until_saved() -> Iterator[None]:
    """Fits completed inside this block keep their checkpoint; remove it with :func:`remove_checkpoint`.

    For a caller that saves the model after the fit: if saving fails (a full
    disk, a bad path), the finished fit is still in the checkpoint.
    """
    token = _KEEP_COMPLETED.set(True)
    try:
        yield
    finally:
        _KEEP_COMPLETED.reset(token)


def check_checkpoint_path(path: str | os.PathLike) -> Path:
    """Fail before any work if ``path`` cannot hold a checkpoint.

    It must be absent or a dsvm checkpoint (to resume from), in an existing
    writable folder.
    """
    path = Path(path)
    folder = path.absolute().parent
    if path.exists() or path.is_symlink():
        reason = npz_problem(path, FORMAT)
        if reason is not None:
            raise CheckpointMismatchError(f"checkpoint {path} exists and is not a dsvm checkpoint ({reason}); "
                                          "move it away or choose another path")
    elif not folder.is_dir():
        raise CheckpointMismatchError(f"checkpoint {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CheckpointMismatchError(f"checkpoint {path}: folder {folder} is not writable")
    return path


def remove_checkpoint(path: str | os.PathLike) -> None:
    """Remove a checkpoint file (only a dsvm checkpoint; anything else is left alone)."""
    path = Path(path)
    if (path.exists() or path.is_symlink()) and npz_problem(path, FORMAT) is None:
        path.unlink()
        logger.info("checkpoint %s removed (fit complete)", path)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _checkpoint_rules(path: Path, meta: dict) -> MemberRules:
    """The metadata fields a resume uses, type-checked; the arrays and their shapes."""
    params, done, solver = meta.get("params"), meta.get("done"), meta.get("solver")
    k_max = params.get("n_components") if isinstance(params, dict) else None
    problem = meta.get("problem")
    if not (isinstance(k_max, int) and not isinstance(k_max, bool) and k_max >= 1
            and isinstance(done, list) and all(isinstance(d, dict) for d in done)
            and isinstance(problem, int) and not isinstance(problem, bool) and 0 <= problem <= len(done) + 1
            and (solver is None or isinstance(solver, dict)) and isinstance(meta.get("kernel"), dict)
            and meta.get("dtype") in ("float32", "float64") and _finite(meta.get("gamma")) and meta["gamma"] > 0):
        raise ModelFileError(f"{path}: checkpoint metadata is incomplete or invalid")
    shapes: dict[str, tuple | None] = {"fingerprint": ("f",), "components": ("k", "p"), "normalization": ("r", "k"),
                                       "eigenvalues": ("r",), "component_indices": ("k",)}
    shapes.update({f"done_{j}_x": ("d",) for j in range(len(done))})
    shapes.update({"solver_x": ("d",), "solver_g": ("d",), "solver_H_loss": None})
    kinds = {name: "f" for name in shapes}
    kinds["component_indices"] = "iu"
    return MemberRules(shapes=shapes, at_most={"k": k_max, "r": k_max, "d": k_max + 1}, kinds=kinds)


def data_fingerprint(X_rb, y_rb, sw_rb=None) -> np.ndarray:
    """A vector summarising X, y and the sample weights (see the module docstring); one pass."""
    return np.asarray(X_rb.map_reduce(fingerprint_block, aligned=(y_rb, row_index_blocks(X_rb), sw_rb)),
                      dtype=np.float64)


def _same_fingerprint(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    scale = np.maximum(np.abs(a), np.abs(b))
    return bool(np.all(np.abs(a - b) <= FINGERPRINT_RTOL * scale + 1e-12))


def _json_params(params: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(params, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


class Checkpoint:
    """One checkpoint file for one fit.

    Parameters
    ----------
    path : path-like
        The ``.npz`` file.
    params : dict
        The estimator parameters that determine the model (compared on load).
    fingerprint : ndarray
        :func:`data_fingerprint` of the training data.
    """

    def __init__(self, path: str | os.PathLike, params: dict[str, Any], fingerprint: np.ndarray):
        self.path = Path(path)
        self.params = _json_params(params)
        self.fingerprint = np.asarray(fingerprint, dtype=np.float64)

    def load(self) -> dict[str, Any] | None:
        """The saved state, ``None`` if there is no file; refuses a foreign checkpoint."""
        if not (self.path.exists() or self.path.is_symlink()):
            return None
        try:
            meta, arrays = read_npz(self.path, FORMAT, _checkpoint_rules)
        except ModelFileError as exc:
            raise CheckpointMismatchError(f"{exc}; delete it to start afresh") from None
        if meta.get("params") != self.params:
            diff = sorted(k for k in set(self.params) | set(meta.get("params", {}))
                          if self.params.get(k) != meta.get("params", {}).get(k))
            raise CheckpointMismatchError(
                f"checkpoint {self.path} was written with other parameters ({', '.join(diff)}); "
                "use the same parameters or delete it to start afresh"
            )
        if not _same_fingerprint(arrays.get("fingerprint", np.zeros(0)), self.fingerprint):
            raise CheckpointMismatchError(
                f"checkpoint {self.path} was written for other data; use the same data or delete it to start afresh"
            )
        state = {"meta": meta, "arrays": arrays}
        logger.info("checkpoint %s: resuming (problem %d, iteration %d)", self.path,
                    meta["problem"], meta["solver"].get("it", 0) if meta.get("solver") else 0)
        return state

    def save(self, fmap, lm_indices, gamma: float, done: list[dict], problem: int, solver_state: dict | None) -> None:
        """Write the state atomically (see the module docstring)."""
        arrays = {
            "fingerprint": self.fingerprint,
            "components": fmap.components,
            "normalization": fmap.normalization,
            "eigenvalues": fmap.eigenvalues,
        }
        if lm_indices is not None:
            arrays["component_indices"] = np.asarray(lm_indices)
        for j, d in enumerate(done):
            arrays[f"done_{j}_x"] = d["x"]
        solver_meta = None
        if solver_state is not None:
            solver_meta = {k: v for k, v in solver_state.items() if k not in ("x", "g", "H_loss")}
            for k in ("x", "g", "H_loss"):
                arrays[f"solver_{k}"] = np.asarray(solver_state[k])
        meta = {
            "format": FORMAT,
            "format_version": 1,
            "params": self.params,
            "gamma": float(gamma),
            "dtype": np.dtype(fmap.dtype).name,
            "kernel": fmap.spec.to_dict(),
            "done": [{k: v for k, v in d.items() if k != "x"} for d in done],
            "problem": int(problem),
            "solver": solver_meta,
        }
        arrays["__meta__"] = meta_array(meta)
        write_npz(self.path, arrays, overwrite=True, what="checkpoint", expected_format=FORMAT)

    def complete(self) -> None:
        """The fit is done: remove the file, unless inside :func:`kept_until_saved`."""
        if _KEEP_COMPLETED.get():
            logger.info("checkpoint %s kept until the model is saved", self.path)
        else:
            remove_checkpoint(self.path)


def restore_feature_map(state: dict):
    """The :class:`~dsvm.approx.FeatureMap` and landmark indices saved in a checkpoint."""
    meta, a = state["meta"], state["arrays"]
    fmap = FeatureMap(
        spec=KernelSpec.from_dict(meta["kernel"]),
        components=a["components"],
        normalization=a["normalization"],
        eigenvalues=a["eigenvalues"],
        dtype=np.dtype(meta["dtype"]),
    )
    return fmap, a.get("component_indices"), float(meta["gamma"])


def restore_solver_state(state: dict) -> dict | None:
    """The Newton state saved in a checkpoint (to resume the current problem), or None."""
    meta, a = state["meta"], state["arrays"]
    if meta.get("solver") is None:
        return None
    out = dict(meta["solver"])
    for k in ("x", "g", "H_loss"):
        out[k] = a[f"solver_{k}"]
    return out


def restore_done(state: dict) -> list[dict]:
    """The results of the problems solved before the checkpoint was written."""
    meta, a = state["meta"], state["arrays"]
    return [dict(d, x=a[f"done_{j}_x"]) for j, d in enumerate(meta["done"])]


def open_checkpoint(est, X, y, sample_weight) -> tuple[Checkpoint | None, dict | None]:
    """``(Checkpoint, saved state or None)`` of an estimator's fit, or ``(None, None)`` without ``checkpoint``.

    Refuses a solver that cannot resume and a seed that would draw other
    landmarks on a resume; the path is checked before any work.
    """
    path = getattr(est, "checkpoint", None)
    if path is None:
        return None, None
    if not REGISTRY[est.solver].resumable:
        raise ValueError(f"checkpoint needs solver='newton', got solver={est.solver!r}")
    check_checkpoint_path(path)
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "checkpoint"}
    if not isinstance(params.get("random_state"), (int, np.integer, type(None))):
        raise ValueError("checkpoint needs random_state to be an int (or None): a resumed fit must draw the same landmarks")
    ckpt = Checkpoint(path, params, data_fingerprint(X, y, sample_weight))
    return ckpt, ckpt.load()
