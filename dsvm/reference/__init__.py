"""Reference solvers for small problems, to check the large-scale solvers against and to teach from.

* hinge loss (L1), the textbook formulations: :func:`primal_qp`, :func:`dual_qp`
  (QPs solved by Clarabel, ``pip install 'dsvm[reference]'``) and
  :func:`subgradient_descent`;
* squared hinge (dsvm's loss), the exact kernel SVM without landmarks:
  :func:`exact_squared_hinge`.
"""

from ._hinge import (
    DualQPResult,
    PrimalQPResult,
    SubgradientResult,
    binary_labels,
    dual_bias,
    dual_qp,
    hinge_objective,
    primal_qp,
    require_clarabel,
    subgradient_descent,
)
from ._squared_hinge import SquaredHingeResult, exact_squared_hinge

__all__ = [
    "PrimalQPResult",
    "DualQPResult",
    "SubgradientResult",
    "SquaredHingeResult",
    "binary_labels",
    "primal_qp",
    "dual_qp",
    "subgradient_descent",
    "exact_squared_hinge",
    "hinge_objective",
    "dual_bias",
    "require_clarabel",
]
