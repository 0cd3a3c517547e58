"""Model selection: :class:`NystroemSVCCV`, a cross-validated search over ``C``, ``gamma`` and
``n_components`` that shares landmarks, kernel columns and features between grid points and folds and
warm-starts the ``C`` path (see :mod:`dsvm.model_selection.search`)."""

from ..svm import SCORINGS, score_from_confusion
from .cpath import CachedOperator, cv_pair, landmark_coefs, map_to_larger_k, refit_start, weights_from_landmark_coefs
from .folds import SearchContext, pack_roles
from .results import format_results, hashable
from .search import (
    CHEAP_AXES,
    DEFAULT_GRID,
    SEARCH_LANDMARKS,
    NystroemSVCCV,
    check_search_landmarks,
    check_search_params,
)

__all__ = [
    "NystroemSVCCV", "check_search_params", "check_search_landmarks", "SEARCH_LANDMARKS", "CHEAP_AXES",
    "DEFAULT_GRID", "SCORINGS", "score_from_confusion",
    "CachedOperator", "cv_pair", "map_to_larger_k", "landmark_coefs", "weights_from_landmark_coefs", "refit_start",
    "SearchContext", "pack_roles", "format_results", "hashable",
]
