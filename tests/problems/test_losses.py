"""The per-block loss pieces on points so far out that their sums overflow: no numpy RuntimeWarning (it leaked
from the worker processes in Python's two-line form, past ``-q``), and the overflow stays in the result, where
the solvers' non-finite checks name it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dsvm.problems import _losses as losses

F = np.ones((10, 3), dtype=np.float32)
CODES = np.array([0, 1] * 5)
COST = np.array([1e30, 1e30])
FAR = np.array([1e10, 1e10, 1e10, 0.0])  # margins 3e10: c * slope ~ 6e40 overflows float32
ZERO = np.zeros(4)
HUGE = np.array([1e300, 1e300, 1e300, 0.0])  # beyond float32: the GEMV of a float32 block overflows

CASES = {
    "sqhinge_pass": lambda: losses.sqhinge_pass(F, CODES, None, dict(x0=ZERO, x1=FAR, positive=1, class_cost=COST,
                                                                    t_grid=[0.5, 1.0], hessian="full")),
    "sqhinge_pass delta": lambda: losses.sqhinge_pass(F, CODES, None, dict(x0=ZERO, x1=FAR, positive=1,
                                                                          class_cost=COST, hessian="delta")),
    "sqhinge_hvp": lambda: losses.sqhinge_hvp(F, CODES, None, dict(x=FAR, positive=1, class_cost=COST,
                                                                  V=np.full(4, 1e30))),
    "sqhinge_active": lambda: losses.sqhinge_active(F, CODES, None, dict(x=HUGE, positive=1,
                                                                        class_cost=COST)),
    "hinge_loss_block": lambda: losses.hinge_loss_block(F, CODES, None, dict(x=HUGE, positive=1,
                                                                            class_cost=COST)),
    "sqeps_pass": lambda: losses.sqeps_pass(F, CODES.astype(float), None, dict(x0=ZERO, x1=FAR, C=1e30, epsilon=0.0,
                                                                               t_grid=[0.5], hessian="delta")),
    "sqeps_hvp": lambda: losses.sqeps_hvp(F, CODES.astype(float), None, dict(x=FAR, C=1e30, epsilon=0.0,
                                                                             V=np.full(4, 1e30))),
    "sqeps_active": lambda: losses.sqeps_active(F, CODES.astype(float), None, dict(x=HUGE, C=1e30,
                                                                                   epsilon=0.0)),
}


def _finite(result) -> bool:
    if isinstance(result, dict):
        return all(_finite(v) for k, v in result.items() if k in ("loss", "grad", "loss_grid"))
    return bool(np.all(np.isfinite(np.asarray(result, dtype=np.float64))))


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_overflowing_block_warns_nothing(name):
    """``train -C 1e30`` printed ``losses.py:395: RuntimeWarning: overflow encountered in cast`` and its source
    line from a worker process."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = CASES[name]()
    if name not in ("sqhinge_active", "sqeps_active"):  # masks: nothing to carry the overflow
        assert not _finite(result), "the overflow must reach the solver's non-finite check"

