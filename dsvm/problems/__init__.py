"""The problems the solvers solve: per-block loss pieces, the loss operators over feature blocks, the
feature store of a fit, and decision values."""

from ..exceptions import NonFiniteError
from .decision import decision_block, decision_blocks, decisions, labels_from_decision, predicted_codes
from .features import FEATURE_STORES, STORE_DTYPES, FeatureStore, plan_feature_store, plan_store_dtype
from .losses import GramDelta, labels_pm1, row_costs
from .margin_cache import IN_PROCESS, MarginCache
from .operators import (
    LossOperator,
    PassResult,
    SquaredEpsilonOperator,
    SquaredHingeOperator,
    active_row_sample,
    opening_evaluations,
    opening_results,
)

__all__ = [
    "PassResult", "LossOperator", "SquaredHingeOperator", "SquaredEpsilonOperator", "active_row_sample",
    "opening_evaluations", "opening_results",
    "FEATURE_STORES", "STORE_DTYPES", "plan_feature_store", "plan_store_dtype", "FeatureStore",
    "decisions", "decision_block", "decision_blocks", "predicted_codes", "labels_from_decision",
    "MarginCache", "IN_PROCESS", "GramDelta", "labels_pm1", "row_costs", "NonFiniteError",
]
