"""What reports say: the machine they ran on, JSON-safe values, and the train pipeline's report
(Markdown, convergence and accuracy-vs-k plots)."""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import scipy
import sklearn

from ..version import __version__
from ._plot_axes import integer_ticks, set_accuracy_limits, ticks_at_values
from ._report_files import pyplot, save_figure

__all__ = ["machine_info", "machine_line", "json_safe", "convergence_figure", "plot_convergence",
           "accuracy_vs_k_figure", "plot_accuracy_vs_k", "train_report_markdown"]


def machine_info() -> dict:
    """Where the report was produced: CPU model, cores, memory, library versions, load."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = f"{psutil.virtual_memory().total / 2**30:.0f} GiB"
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "dsvm": __version__,
            "load_average_start": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None}


def machine_line() -> str:
    """The machine in one line (processor, cores, Python), as the train report shows it."""
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def json_safe(obj):
    """A value for a report's JSON (``json.dumps`` fallback) or table: numpy scalars and arrays as Python
    values, plain values as they are, anything else as text."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def nan_as_null(values):
    """A number or list of numbers (an ndarray's) for JSON output, None where one is nan or infinite."""
    values = values.tolist() if hasattr(values, "tolist") else values
    if isinstance(values, list):
        return [nan_as_null(v) for v in values]
    return float(values) if math.isfinite(values) else None


def convergence_figure(stats: dict):
    """The objective gap and gradient norm of every Newton iteration (a matplotlib figure; None without
    matplotlib).  Iterations are counted on integer ticks."""
    plt = pyplot("the convergence plot")
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for prob in stats["problems"]:
        hist = prob["history"]
        if not hist:
            continue
        it = [h["iter"] for h in hist]
        obj = np.array([h["objective"] for h in hist])
        # gap of each iterate to the last one (the last is 0 by definition: not drawn)
        gap = np.maximum((obj - obj[-1]) / max(abs(obj[-1]), 1e-300), 1e-16)
        axes[0].semilogy(it[:-1], gap[:-1], marker="o", label=str(prob["class"]))
        axes[1].semilogy(it, [h["grad_norm"] for h in hist], marker="o", label=str(prob["class"]))
    axes[0].set(xlabel="Newton iteration", ylabel="(Φ − Φ_final) / Φ_final", title="objective")
    axes[1].set(xlabel="Newton iteration", ylabel="‖∇Φ‖", title="gradient norm")
    for ax in axes:
        integer_ticks(ax.xaxis)
    if len(stats["problems"]) > 1:
        axes[1].legend(title="class")
    return fig


def plot_convergence(stats: dict, path: Path) -> bool:
    """:func:`convergence_figure` as a PNG; False without matplotlib."""
    fig = convergence_figure(stats)
    if fig is None:
        return False
    save_figure(fig, path, dpi=110)
    return True


def accuracy_vs_k_figure(rows: list[dict]):
    """Test accuracy and fit time over the landmarks ``k`` (a matplotlib figure; None without matplotlib).

    ``k`` is ticked at the values tried; the accuracy axis spans at least
    :data:`~dsvm.app._plot_axes.MIN_ACCURACY_SPAN` points, and the time axis starts at 0.
    """
    plt = pyplot("the accuracy-vs-k plot")
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ks = [r["n_components"] for r in rows]
    accuracy = [100 * r["accuracy"] for r in rows]
    ax.plot(ks, accuracy, marker="o")
    ax.set(xscale="log", xlabel="landmarks k", ylabel="test accuracy (%)", title="accuracy vs k")
    ticks_at_values(ax.xaxis, ks)
    set_accuracy_limits(ax, accuracy)
    ax2 = ax.twinx()
    ax2.plot(ks, [r["fit_seconds"] for r in rows], marker="s", color="tab:orange")
    ax2.set_ylabel("fit seconds", color="tab:orange")
    ax2.set_ylim(bottom=0)
    return fig


def plot_accuracy_vs_k(rows: list[dict], path: Path) -> bool:
    """:func:`accuracy_vs_k_figure` as a PNG; False without matplotlib."""
    fig = accuracy_vs_k_figure(rows)
    if fig is None:
        return False
    save_figure(fig, path, dpi=110)
    return True


def _k_path_lines(path: list[dict] | None, chosen: int) -> list[str]:
    """The ``n_components="auto"`` path as a Markdown section (nothing for a fixed k)."""
    if not path:
        return []
    lines = ["## Choosing k", "", f"`n_components=\"auto\"` chose **k = {chosen}**; the path, scored on the "
             "held-out training rows:", "", "| k | held-out score | seconds |", "|---:|---:|---:|"]
    lines += [f"| {p['k']} | {p['score']:.4f} | {p['seconds']:.2f} |" for p in path]
    return lines + [""]


def train_report_markdown(report: dict[str, Any]) -> str:
    """The Markdown of a ``kind: train`` pipeline's report."""
    m, ev = report["model"], report.get("evaluation")
    lines = [f"# dsvm report: {report['name']}", ""]
    lines += [f"- train: {report['data']['train']}", f"- test: {report['data'].get('test', '—')}"]
    lines += [f"- model: NystroemSVC({', '.join(f'{k}={v!r}' for k, v in m['params'].items())})"]
    lines += [f"- machine: {report['machine']}", ""]
    t = report["timing"]
    lines += ["| stage | seconds | share of fit |", "|---|---:|---:|"]
    stages = {key.replace("_seconds", ""): t[key] for key in ("landmark_seconds", "feature_seconds", "solve_seconds")}
    if "auto_k_seconds" in t:  # n_components="auto": the path of fits that chose k, before the final solve
        stages = {"choosing k": t["auto_k_seconds"], **stages}
    # checks, gamma="scale", label encoding, the feature store's setup and the solver's bookkeeping
    stages["other"] = max(0.0, t["fit_seconds"] - sum(stages.values()))
    for name, seconds in stages.items():
        lines.append(f"| {name} | {seconds:.3f} | {100 * seconds / t['fit_seconds']:.0f} % |")
    lines.append(f"| **fit** | **{t['fit_seconds']:.3f}** | |")
    lines.append("")
    if ev:
        lines += [f"**Test accuracy: {100 * ev['accuracy']:.2f} %** on {ev['n_test']} rows "
                  f"(balanced accuracy {100 * ev['balanced_accuracy']:.2f} %, predict {ev['predict_seconds']:.3f} s)", ""]
        lines += ["| class | precision | recall | F1 | support |", "|---|---:|---:|---:|---:|"]
        for c in ev["per_class"]:
            lines.append(f"| {c['label']} | {c['precision']:.4f} | {c['recall']:.4f} | {c['f1']:.4f} | {c['support']} |")
        lines.append("")
    lines += ["## Newton iterations", "",
              "| class | iterations | passes | seconds | stop | duality gap |", "|---|---:|---:|---:|---|---:|"]
    for p in report["solver"]["problems"]:
        gap = p.get("duality_gap")
        gap_text = "—" if gap is None or gap != gap else f"{gap:.1e}"  # nan: the solver gave no certificate
        lines.append(f"| {p['class']} | {p['n_iter']} | {p['n_passes']} | {p['seconds']:.3f} | {p['stop_reason']} "
                     f"| {gap_text} |")
    lines.append("")
    lines += _k_path_lines(m.get("k_path"), m["n_components"])
    if report.get("cv_results"):
        rows = report["cv_results"]
        keys = [k for k in rows[0] if k not in ("rank", "mean_test_score", "std_test_score") and not k.startswith("split")
                and not k.startswith("mean_") and not k.startswith("std_")]
        lines += ["## Cross-validated search", "", "| rank | " + " | ".join(keys) + " | mean score | std |",
                  "|---:|" + "---|" * len(keys) + "---:|---:|"]
        for r in rows:
            lines.append(f"| {r['rank']} | " + " | ".join(str(r[k]) for k in keys)
                         + f" | {r['mean_test_score']:.4f} | {r['std_test_score']:.4f} |")
        lines.append("")
    if report.get("accuracy_vs_k"):
        lines += ["## Accuracy vs k", "", "| k | accuracy | fit seconds |", "|---:|---:|---:|"]
        for r in report["accuracy_vs_k"]:
            lines.append(f"| {r['n_components']} | {100 * r['accuracy']:.2f} % | {r['fit_seconds']:.3f} |")
        lines.append("")
    for plot in report.get("plots", []):
        lines.append(f"![{plot}]({plot})")
    return "\n".join(lines) + "\n"
