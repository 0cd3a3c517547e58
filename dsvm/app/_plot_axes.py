"""Axis rules shared by the report plots, so that a figure does not suggest what the numbers do not say.

* counts (Newton iterations) get integer ticks only;
* a parameter tried at a few values (the landmarks ``k``) gets its ticks at
  exactly those values, labelled plainly, with no minor log-scale labels
  between them;
* an accuracy (or any score in ``[0, 1]`` or ``[0, 100]``) gets limits that
  span at least :data:`MIN_ACCURACY_SPAN` points around the data, so a
  0.15-point spread is drawn as the small spread it is, not over the full
  height; the same span bounds a heat map's colour scale.

The functions take matplotlib objects; matplotlib is imported only by whoever
draws (it is optional).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MIN_ACCURACY_SPAN", "integer_ticks", "ticks_at_values", "score_limits", "set_accuracy_limits"]

MIN_ACCURACY_SPAN = 2.0  # accuracy points (percent); 0.02 on a 0–1 scale
MARGIN = 0.1  # share of the data's own spread added above and below it


def integer_ticks(axis) -> None:
    """Ticks of a count axis (an ``ax.xaxis`` / ``ax.yaxis``) at integers only."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def ticks_at_values(axis, values: Sequence[float]) -> None:
    """Major ticks of ``axis`` at ``values`` (labelled ``500``, ``1000``, not ``10^3``), no minor labels.

    Works on linear and log scales; on a log scale the minor ticks keep their
    marks but lose their labels, which otherwise overlap the chosen ones.
    """
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    ticks = sorted({float(v) for v in values})
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FixedFormatter([f"{v:g}" for v in ticks]))
    axis.set_minor_formatter(NullFormatter())


def score_limits(values, *, percent: bool = True, min_span: float | None = None) -> tuple[float, float]:
    """Axis limits for scores ``values``: their range plus a margin, widened to at least ``min_span``
    (default :data:`MIN_ACCURACY_SPAN` points) around its middle, kept within ``[0, 100]`` (``[0, 1]``
    with ``percent=False``).  ``NaN`` values are ignored; none left gives the full range."""
    top = 100.0 if percent else 1.0
    span = (MIN_ACCURACY_SPAN if percent else MIN_ACCURACY_SPAN / 100) if min_span is None else float(min_span)
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return 0.0, top
    lo, hi = float(v.min()), float(v.max())
    pad = MARGIN * (hi - lo)
    lo, hi = lo - pad, hi + pad
    if hi - lo < span:
        middle = (lo + hi) / 2
        lo, hi = middle - span / 2, middle + span / 2
    if lo < 0.0:  # shift rather than cut, so the span stays
        lo, hi = 0.0, min(top, hi - lo)
    if hi > top:
        lo, hi = max(0.0, lo - (hi - top)), top
    return lo, hi


def set_accuracy_limits(ax, values, *, percent: bool = True) -> tuple[float, float]:
    """Set the y limits of an accuracy axis with :func:`score_limits`; returns them."""
    lo, hi = score_limits(values, percent=percent)
    ax.set_ylim(lo, hi)
    return lo, hi
