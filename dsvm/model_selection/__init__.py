"""Model selection: :class:`NystroemSVCCV`, a cross-validated search over ``C``, ``gamma`` and
``n_components`` that shares landmarks, kernel columns and features between grid points and folds and
warm-starts the ``C`` path (see :mod:`dsvm.model_selection.search`).

The names are loaded on first use (PEP 562), so that a Dask worker that unpickles a block function of
:mod:`dsvm.model_selection.folds` does not import scikit-learn with the search.
"""

from ..lazy import lazy_names

# module (relative to this package) -> the public names it defines
_MODULES = {
    "..svm": ("SCORINGS", "score_from_confusion"),
    ".cpath": ("CachedOperator", "cv_pair", "landmark_coefs", "map_to_larger_k", "refit_start",
               "weights_from_landmark_coefs"),
    ".folds": ("SearchContext", "pack_roles"),
    ".results": ("format_results", "hashable"),
    ".search": ("CHEAP_AXES", "DEFAULT_GRID", "SEARCH_LANDMARKS", "NystroemSVCCV", "check_search_landmarks",
                "check_search_params"),
}

__all__ = [
    "NystroemSVCCV", "check_search_params", "check_search_landmarks", "SEARCH_LANDMARKS", "CHEAP_AXES",
    "DEFAULT_GRID", "SCORINGS", "score_from_confusion",
    "CachedOperator", "cv_pair", "map_to_larger_k", "landmark_coefs", "weights_from_landmark_coefs", "refit_start",
    "SearchContext", "pack_roles", "format_results", "hashable",
]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
