"""The ``dsvm train --search`` command and a pipeline's search step: the grid from the command line, the
search, and its report (Markdown, CSV and JSON tables and a heat map)."""

from __future__ import annotations

import csv
import io
import json
import logging
from pathlib import Path

import numpy as np

from ..model_selection import NystroemSVCCV, hashable
from ..svm import NystroemSVC, param_names
from ._plot_axes import score_limits
from ._report import json_safe
from ._report_files import claim_output_folder, pyplot, save_figure, write_report_file

logger = logging.getLogger(__name__)

__all__ = ["parse_search_args", "search_and_report", "cv_table", "write_cv_report", "cv_heatmap_figure"]

# --------------------------------------------------------------------------- the grid from the command line
ALIASES = {"k": "n_components", "c": "C", "g": "gamma"}


def _parse_value(key: str, text: str):
    t = text.strip()
    low = t.lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if key == "n_components" or key in ("degree", "max_iter", "kmeans_iter", "block_rows"):
        try:
            value = float(t)
        except ValueError:
            raise ValueError(f"--search {key}: {t!r} is not an integer") from None
        if not value.is_integer():
            raise ValueError(f"--search {key}: {t!r} is not an integer")
        return int(value)
    try:
        return float(t)
    except ValueError:
        pass
    if key in ("C", "tol", "coef0"):
        raise ValueError(f"--search {key}: {t!r} is not a number")
    return t


def parse_search_args(items) -> dict[str, list]:
    """``["C=1,10,100", "gamma=0.01,0.05", "k=500,1000"]`` → a ``param_grid``.

    ``k`` is ``n_components``; values are comma-separated; ``gamma`` takes
    numbers or ``scale`` / ``auto``; ``none``, ``true``, ``false`` are parsed;
    any other NystroemSVC parameter may be named (e.g. ``class_weight=none,balanced``).
    A single string is split at whitespace.

    Raises
    ------
    ValueError
        Naming the offending item, for an unknown parameter, a malformed item
        or a value of the wrong type.
    """
    if isinstance(items, str):
        items = items.split()
    allowed = set(param_names(NystroemSVC))
    grid: dict[str, list] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--search item {item!r} is not NAME=V1,V2,... (e.g. C=1,10,100)")
        name, _, values = item.partition("=")
        name = name.strip()
        key = ALIASES.get(name, name)
        if key not in allowed:
            raise ValueError(f"--search {name!r} is not a NystroemSVC parameter; valid: k, {', '.join(sorted(allowed))}")
        parts = [v for v in values.split(",") if v.strip()]
        if not parts:
            raise ValueError(f"--search {name}: no values given")
        parsed = [_parse_value(key, v) for v in parts]
        if key == "C" and any(v is None or v <= 0 for v in parsed):
            raise ValueError(f"--search C: values must be positive, got {values!r}")
        if key == "n_components" and any(v is None or v < 1 for v in parsed):
            raise ValueError(f"--search k: values must be positive integers, got {values!r}")
        if key in grid:
            raise ValueError(f"--search names {key!r} twice")
        grid[key] = list(dict.fromkeys(parsed))
    if not grid:
        raise ValueError("--search needs at least one NAME=V1,V2,... item")
    return grid


def search_and_report(X, y=None, *, param_grid, out_dir, cv=5, scoring="accuracy", prefix="cv",
                      sample_weight=None, **params):
    """Fit a :class:`NystroemSVCCV` and write its report: ``(fitted search, {kind: path})``.

    The entry point for ``dsvm train DATA --search C=1,10 gamma=0.01,0.05 k=500,1000 --cv 5``
    and for a pipeline's search step: ``param_grid`` from :func:`parse_search_args`
    (or a dict from YAML), ``params`` the NystroemSVC parameters of the command
    line / the pipeline's ``model.params`` (those in the grid are searched);
    ``X`` may be a :class:`dsvm.io.Dataset`.  The refitted model is
    ``search.best_estimator_`` (save it with :func:`dsvm.save_model`).
    """
    params = {k: v for k, v in params.items() if k not in param_grid}
    search = NystroemSVCCV(param_grid, cv=cv, scoring=scoring, refit=True, **params)
    search.fit(X, y, sample_weight=sample_weight)
    paths = write_cv_report(search, out_dir, prefix=prefix)
    logger.info("search: best %s (%s %.5f); report in %s", search.best_params_, search.scoring_,
                search.best_score_, out_dir)
    return search, paths


def cv_table(search) -> list[dict]:
    """The rows of ``search.cv_results_`` (any scikit-learn search) as plain dicts, by rank."""
    r = search.cv_results_
    n_splits = sum(1 for key in r if key.startswith("split") and key.endswith("_test_score"))
    rows = []
    for i, params in enumerate(r["params"]):
        row = {"rank": int(r["rank_test_score"][i])}
        row.update({k: json_safe(v) for k, v in params.items()})
        row["mean_test_score"] = float(r["mean_test_score"][i])
        row["std_test_score"] = float(r["std_test_score"][i])
        for s in range(n_splits):
            row[f"split{s}_test_score"] = float(r[f"split{s}_test_score"][i])
        if "mean_train_score" in r:
            row["mean_train_score"] = float(r["mean_train_score"][i])
        row["mean_fit_time"] = float(r["mean_fit_time"][i])
        row["mean_score_time"] = float(r["mean_score_time"][i])
        rows.append(row)
    rows.sort(key=lambda row: (row["rank"], -row["mean_test_score"]))
    return rows


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v)


def write_cv_report(search, out_dir, prefix: str = "cv") -> dict[str, Path]:
    """Write the CV table (Markdown, CSV, JSON) and a heat map; return ``{kind: path}``.

    Works for :class:`NystroemSVCCV` and for scikit-learn's ``GridSearchCV``
    over :class:`~dsvm.NystroemSVC`.  Files: ``<prefix>_results.md``,
    ``.csv``, ``.json`` and ``<prefix>_heatmap.png`` — mean test score over
    ``C`` (rows) x ``gamma`` (columns) at the best values of the other
    parameters (``n_components`` …).  Without matplotlib the plot is skipped
    with a warning.  ``out_dir`` must be new, empty or a dsvm output folder
    (:func:`dsvm.app._report_files.claim_output_folder`).
    """
    out = claim_output_folder(out_dir, "report folder")
    rows = cv_table(search)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    paths: dict[str, Path] = {}

    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=columns)
    w.writeheader()
    for row in rows:
        w.writerow({k: row.get(k, "") for k in columns})
    p = write_report_file(out / f"{prefix}_results.csv", text.getvalue())
    paths["csv"] = p

    scoring = getattr(search, "scoring", None) or "accuracy"
    best = {k: json_safe(v) for k, v in search.best_params_.items()}
    p = write_report_file(out / f"{prefix}_results.json", json.dumps({
        "scoring": scoring, "best_params": best, "best_score": float(search.best_score_),
        "n_splits": int(getattr(search, "n_splits_", 0)), "refit_time": getattr(search, "refit_time_", None),
        "search_stats": {k: v for k, v in getattr(search, "search_stats_", {}).items()},
        "results": rows,
    }, indent=2, default=json_safe))
    paths["json"] = p

    shown = [c for c in columns if not c.startswith("split") and c != "mean_score_time"]
    lines = [
        f"# Cross-validation ({scoring}, {getattr(search, 'n_splits_', '?')} folds)",
        "",
        f"Best: {', '.join(f'{k}={_fmt(v)}' for k, v in best.items())} — {scoring} {search.best_score_:.5f}",
        "",
        "| " + " | ".join(shown) + " |",
        "|" + "---|" * len(shown),
    ]
    lines += ["| " + " | ".join(_fmt(row.get(c, "")) for c in shown) + " |" for row in rows]
    p = write_report_file(out / f"{prefix}_results.md", "\n".join(lines) + "\n")
    paths["markdown"] = p

    png = _plot_heatmap(search, out / f"{prefix}_heatmap.png", scoring)
    if png is not None:
        paths["heatmap"] = png
    return paths


def cv_heatmap_figure(search, scoring: str):
    """Mean CV score over C x gamma (the other parameters at their best values), as a matplotlib figure
    (None without matplotlib).  The colour scale spans at least
    :data:`~dsvm.app._plot_axes.MIN_ACCURACY_SPAN` points, so close scores get close colours."""
    plt = pyplot("the CV heat map")
    if plt is None:
        return None
    r = search.cv_results_
    best = search.best_params_
    # Candidates that agree with the best on everything but C and gamma.
    fixed = {k: v for k, v in best.items() if k not in ("C", "gamma")}
    sel = [i for i, p in enumerate(r["params"]) if all(hashable(p.get(k)) == hashable(v) for k, v in fixed.items())]
    Cs = sorted({r["params"][i].get("C") for i in sel}, key=_sort_key)
    gammas = sorted({hashable(r["params"][i].get("gamma")) for i in sel}, key=_sort_key)
    M = np.full((len(Cs), len(gammas)), np.nan)
    for i in sel:
        p = r["params"][i]
        M[Cs.index(p.get("C")), gammas.index(hashable(p.get("gamma")))] = r["mean_test_score"][i]
    vmin, vmax = score_limits(M, percent=False)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(gammas), 1.2 + 0.8 * len(Cs)))
    im = ax.imshow(M, cmap="viridis", aspect="auto", vmin=vmin, vmax=vmax)
    ax.set_xticks(range(len(gammas)), [_fmt(g) for g in gammas])
    ax.set_yticks(range(len(Cs)), [_fmt(c) for c in Cs])
    ax.set_xlabel("gamma")
    ax.set_ylabel("C")
    title = ", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items())
    ax.set_title(f"mean CV {scoring}" + (f" ({title})" if title else ""), fontsize=9)
    mid = (vmin + vmax) / 2  # dark text on the light half of the colour scale
    for a in range(M.shape[0]):
        for b in range(M.shape[1]):
            if np.isfinite(M[a, b]):
                is_best = Cs[a] == best.get("C") and gammas[b] == hashable(best.get("gamma"))
                ax.text(b, a, f"{M[a, b]:.4f}" + ("*" if is_best else ""), ha="center", va="center", fontsize=8,
                        color="black" if M[a, b] > mid else "white", fontweight="bold" if is_best else "normal")
    fig.colorbar(im, ax=ax)
    return fig


def _plot_heatmap(search, path: Path, scoring: str) -> Path | None:
    fig = cv_heatmap_figure(search, scoring)
    if fig is None:
        return None
    save_figure(fig, path, dpi=110)
    return path


def _sort_key(v):
    return (0, float(v), "") if isinstance(v, (int, float)) and v is not None else (1, 0.0, str(v))
