"""Axis rules of the report plots (dsvm.app._plot_axes), checked on the matplotlib objects; the figures of
the train report (convergence, accuracy vs k), the CV heat map and the paper's sensitivity maps use them."""

import numpy as np
import pytest

import dsvm
from dsvm.app._paper_report import sensitivity_figure
from dsvm.app._plot_axes import MIN_ACCURACY_SPAN, score_limits
from dsvm.app._report import accuracy_vs_k_figure, convergence_figure
from dsvm.app._search_report import cv_heatmap_figure

plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _drawn_tick_labels(axis, which="major"):
    """The tick labels matplotlib draws (the figure is drawn first, so formatters have run)."""
    axis.figure.canvas.draw()
    ticks = axis.get_major_ticks() if which == "major" else axis.get_minor_ticks()
    return [t.label1.get_text() for t in ticks if t.label1.get_visible() and t.label1.get_text()]


@pytest.mark.parametrize("spread", [(85.0, 85.15), (99.95, 100.0), (0.0, 0.1), (40.0, 90.0)])
def test_score_limits_span_at_least_the_minimum_and_stay_in_range(spread):
    lo, hi = score_limits(list(spread))
    assert hi - lo >= MIN_ACCURACY_SPAN - 1e-12 and 0.0 <= lo <= spread[0] and spread[1] <= hi <= 100.0
    if spread[1] - spread[0] > MIN_ACCURACY_SPAN:  # a wide spread keeps its own range plus a margin
        assert hi - lo == pytest.approx(1.2 * (spread[1] - spread[0]))
    flo, fhi = score_limits(np.array(spread) / 100, percent=False)
    assert (flo, fhi) == pytest.approx((lo / 100, hi / 100))
    assert score_limits([np.nan]) == (0.0, 100.0)


def test_newton_iteration_axes_have_integer_ticks_only(circles):
    """Three iterations got ticks at 1.5 and 2.5."""
    short = {"problems": [{"class": 1, "history": [{"iter": i, "objective": 10.0 / i, "grad_norm": 10.0 ** -i}
                                                    for i in (1, 2, 3)]}]}
    X, y = circles
    fitted = dsvm.NystroemSVC(n_components=30, random_state=0).fit(X, y).solver_stats_
    for stats in (short, fitted):
        fig = convergence_figure(stats)
        for ax in fig.axes:
            ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks), ticks


A9A_LIKE = [{"n_components": k, "accuracy": a, "fit_seconds": s}
            for k, a, s in [(100, 0.8488, 0.8), (200, 0.8497, 1.1), (500, 0.8503, 1.9), (1000, 0.8500, 3.5)]]


def test_accuracy_vs_k_ticks_at_the_k_tried_and_does_not_blow_up_a_small_spread():
    fig = accuracy_vs_k_figure(A9A_LIKE)
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [100, 200, 500, 1000]
    assert _drawn_tick_labels(ax.xaxis) == ["100", "200", "500", "1000"]
    assert _drawn_tick_labels(ax.xaxis, "minor") == []  # no 2×10², 3×10² ... between them
    lo, hi = ax.get_ylim()
    acc = [100 * r["accuracy"] for r in A9A_LIKE]
    # a 0.15-point spread takes under a tenth of the height
    assert hi - lo >= MIN_ACCURACY_SPAN and lo < min(acc) and max(acc) < hi
    assert (max(acc) - min(acc)) / (hi - lo) < 0.1
    assert fig.axes[1].get_ylim()[0] == 0.0  # fit seconds from 0


def test_cv_heat_map_colours_do_not_stretch_a_small_spread(circles):
    X, y = circles
    search = dsvm.NystroemSVCCV({"C": [1.0, 10.0], "gamma": [0.1, 0.3]}, cv=3, n_components=20, random_state=0,
                                refit=False).fit(X, y)
    fig = cv_heatmap_figure(search, "accuracy")
    vmin, vmax = fig.axes[0].images[0].get_clim()
    scores = search.cv_results_["mean_test_score"]
    assert vmax - vmin >= MIN_ACCURACY_SPAN / 100 - 1e-12 and vmin <= scores.min() and scores.max() <= vmax


def test_sensitivity_maps_do_not_stretch_a_small_spread():
    grid = {"dataset": "a9a", "C": [1, 10], "k": [100, 500],
            "cv_accuracy": [[0.8490, 0.8495], [0.8500, 0.8505]], "test_accuracy": [[0.80, 0.85], [0.90, 0.95]]}
    fig = sensitivity_figure(plt, [grid])
    small, wide = (ax.images[0].get_clim() for ax in fig.axes if ax.images)
    assert small[1] - small[0] == pytest.approx(MIN_ACCURACY_SPAN)
    assert small[0] < 84.90 and small[1] > 85.05
    assert wide[0] < 80.0 and wide[1] > 95.0 and wide[1] - wide[0] == pytest.approx(1.2 * 15.0)
