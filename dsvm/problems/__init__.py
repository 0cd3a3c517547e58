"""The problems the solvers solve: per-block loss pieces, the loss operators over feature blocks, the
feature store of a fit, and decision values."""

from ._decision import decision_blocks, decisions, labels_from_decision, predicted_codes
from ._features import FeatureStore, plan_feature_store
from ._operators import (
    PassResult,
    SquaredEpsilonOperator,
    SquaredHingeOperator,
    active_row_sample,
    opening_evaluations,
    opening_results,
)

__all__ = [
    "FeatureStore", "PassResult", "SquaredEpsilonOperator", "SquaredHingeOperator", "active_row_sample",
    "decision_blocks", "decisions", "labels_from_decision", "opening_evaluations", "opening_results",
    "plan_feature_store", "predicted_codes",
]
