"""Model selection: :class:`NystroemSVCCV`, a cross-validated search over ``C``, ``gamma`` and
``n_components`` that shares landmarks, kernel columns and features between grid points and folds and
warm-starts the ``C`` path (see :mod:`dsvm.model_selection._search`).

The names are loaded on first use (PEP 562), so that a Dask worker that unpickles a block function of
:mod:`dsvm.model_selection._folds` does not import scikit-learn with the search.
"""

from ..lazy import lazy_names

# module (relative to this package) -> the public names it defines
_MODULES = {
    "._results": ("hashable",),
    "._search": ("DEFAULT_GRID", "NystroemSVCCV", "check_auto_k", "check_search_landmarks", "check_search_params"),
}

__all__ = [name for names in _MODULES.values() for name in names]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
