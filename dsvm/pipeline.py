"""YAML pipelines: ingest → train → evaluate → report (Markdown, JSON, PNG plots).

A pipeline file (see ``pipelines/``)::

    name: a9a
    params:                        # defaults for ${...}; override with --set key=value
      data_dir: ../shared/data
    output: reports/a9a            # report folder; ingested stores go to <output>/data
    data:
      train: {source: "${data_dir}/a9a.train.xz", format: libsvm, n_features: 123}
      test:  {source: "${data_dir}/a9a.test.xz", format: libsvm, n_features: 123}
      # or generated:  train: {generate: {n_samples: 100000, n_features: 20, random_state: 0}}
    model:
      estimator: NystroemSVC
      params: {C: 10, gamma: 0.05, n_components: 500, random_state: 0}
      # search: {grid: {C: [1, 10, 100], gamma: [0.01, 0.05]}, cv: 5}   # optional CV step
    experiments:
      accuracy_vs_k: [100, 200, 500, 1000]   # optional extra fits, one plot
    report: {plots: true}

Relative paths are taken from the current directory.  The model is saved
as ``<output>/model.npz``.

A data set without a test file can be split after ingesting (it is loaded
into memory for that, so only for small data; stratified and seeded)::

    data:
      train: {source: "${data_dir}/mushrooms.all.xz", format: libsvm, n_features: 112}
      split: {test_fraction: 0.2, random_state: 0}

``kind: paper`` runs the LA-SN paper's experiments instead of one fit (see
:mod:`dsvm.experiments` and ``pipelines/paper.yaml``); its settings go under
``experiments: paper:`` and it needs no ``data`` or ``model`` section.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

logger = logging.getLogger(__name__)

PIPELINE_KEYS = {"name", "description", "kind", "params", "output", "data", "model", "experiments", "report"}
KINDS = ("train", "paper")
ESTIMATORS = ("NystroemSVC",)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PipelineError(ValueError):
    """A pipeline file is malformed."""


def _substitute(value: Any, params: dict[str, Any], where: str) -> Any:
    if isinstance(value, str):
        def repl(m):
            key = m.group(1)
            if key not in params:
                raise PipelineError(f"{where}: ${{{key}}} is not defined under 'params' (or --set {key}=...)")
            return str(params[key])

        full = _VAR.fullmatch(value)
        if full and full.group(1) in params and not isinstance(params[full.group(1)], str):
            return params[full.group(1)]
        return _VAR.sub(repl, value)
    if isinstance(value, dict):
        return {k: _substitute(v, params, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, params, where) for v in value]
    return value


def _parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise PipelineError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    return key.strip(), yaml.safe_load(raw)


def load_pipeline(path: str | Path | dict, overrides: list[str] | None = None) -> dict[str, Any]:
    """Read a pipeline (file or dict), apply ``key=value`` overrides, substitute ``${...}``."""
    where = str(path) if not isinstance(path, dict) else "pipeline"
    if isinstance(path, dict):
        spec = copy.deepcopy(path)
    else:
        p = Path(path)
        if not p.exists():
            raise PipelineError(f"{p}: pipeline file not found")
        try:
            spec = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise PipelineError(f"{p}: not valid YAML ({exc})") from None
    if not isinstance(spec, dict):
        raise PipelineError(f"{where}: expected a mapping at the top level")
    unknown = set(spec) - PIPELINE_KEYS
    if unknown:
        raise PipelineError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(PIPELINE_KEYS)}")
    params = dict(spec.get("params") or {})
    for text in overrides or []:
        key, value = _parse_override(text)
        params[key] = value
    spec["params"] = params
    resolved = _substitute({k: v for k, v in spec.items() if k != "params"}, params, where)
    resolved["params"] = params
    kind = resolved.setdefault("kind", "train")
    if kind not in KINDS:
        raise PipelineError(f"{where}: kind {kind!r} unknown; choose one of {KINDS}")
    if kind == "paper":
        resolved.setdefault("name", Path(where).stem)
        resolved.setdefault("output", f"reports/{resolved['name']}")
        return resolved
    if "data" not in resolved or "train" not in (resolved["data"] or {}):
        raise PipelineError(f"{where}: 'data: train:' is required")
    model = resolved.setdefault("model", {})
    if model.get("estimator", "NystroemSVC") not in ESTIMATORS:
        raise PipelineError(f"{where}: model estimator {model.get('estimator')!r} unknown; choose one of {ESTIMATORS}")
    resolved.setdefault("name", Path(where).stem)
    resolved.setdefault("output", f"reports/{resolved['name']}")
    return resolved


def _materialise(entry: dict[str, Any], target: Path, where: str):
    """Open, ingest or generate one dataset entry of the pipeline."""
    from . import io

    if not isinstance(entry, dict):
        raise PipelineError(f"{where}: expected a mapping with 'source', 'zarr' or 'generate'")
    if "zarr" in entry:
        return io.open_dataset(entry["zarr"])
    if "generate" in entry:
        opts = dict(entry["generate"])
        return io.make_classification_zarr(target, overwrite=True, **opts)
    if "source" in entry:
        opts = {k: v for k, v in entry.items() if k != "source"}
        return io.ingest(entry["source"], target, overwrite=True, **opts)
    raise PipelineError(f"{where}: give 'source' (a file to ingest), 'zarr' (a dataset) or 'generate'")


def _split_dataset(ds, data_dir: Path, opts: Any):
    """``data: split:`` — a stratified, seeded train/test split of a small dataset (loaded into memory)."""
    from sklearn.model_selection import train_test_split

    from . import io

    if not isinstance(opts, dict) or set(opts) - {"test_fraction", "random_state"}:
        raise PipelineError(f"data.split: expected {{test_fraction: 0.2, random_state: 0}}, got {opts!r}")
    fraction = float(opts.get("test_fraction", 0.2))
    if not 0.0 < fraction < 1.0:
        raise PipelineError(f"data.split.test_fraction must be between 0 and 1, got {fraction}")
    X, y = ds.load()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=fraction, random_state=int(opts.get("random_state", 0)),
                                          stratify=y)
    dtype = str(ds.dtype)
    return (io.ingest((Xtr, ytr), data_dir / "train_split.zarr", overwrite=True, dtype=dtype),
            io.ingest((Xte, yte), data_dir / "test_split.zarr", overwrite=True, dtype=dtype))


def _plot_convergence(stats: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed; skipping %s (pip install 'dsvm[plots]')", path.name)
        return False
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
    if len(stats["problems"]) > 1:
        axes[1].legend(title="class")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_accuracy_vs_k(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ks = [r["n_components"] for r in rows]
    ax.plot(ks, [100 * r["accuracy"] for r in rows], marker="o")
    ax.set(xscale="log", xlabel="landmarks k", ylabel="test accuracy (%)", title="accuracy vs k")
    ax2 = ax.twinx()
    ax2.plot(ks, [r["fit_seconds"] for r in rows], marker="s", color="tab:orange")
    ax2.set_ylabel("fit seconds", color="tab:orange")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _markdown(report: dict[str, Any]) -> str:
    m, ev = report["model"], report.get("evaluation")
    lines = [f"# dsvm report: {report['name']}", ""]
    lines += [f"- train: {report['data']['train']}", f"- test: {report['data'].get('test', '—')}"]
    lines += [f"- model: NystroemSVC({', '.join(f'{k}={v!r}' for k, v in m['params'].items())})"]
    lines += [f"- machine: {report['machine']}", ""]
    t = report["timing"]
    lines += ["| stage | seconds | share of fit |", "|---|---:|---:|"]
    for key in ("landmark_seconds", "feature_seconds", "solve_seconds"):
        lines.append(f"| {key.replace('_seconds', '')} | {t[key]:.3f} | {100 * t[key] / t['fit_seconds']:.0f} % |")
    lines.append(f"| **fit** | **{t['fit_seconds']:.3f}** | |")
    lines.append("")
    if ev:
        lines += [f"**Test accuracy: {100 * ev['accuracy']:.2f} %** on {ev['n_test']} rows "
                  f"(balanced accuracy {100 * ev['balanced_accuracy']:.2f} %, predict {ev['predict_seconds']:.3f} s)", ""]
        lines += ["| class | precision | recall | F1 | support |", "|---|---:|---:|---:|---:|"]
        for c in ev["per_class"]:
            lines.append(f"| {c['label']} | {c['precision']:.4f} | {c['recall']:.4f} | {c['f1']:.4f} | {c['support']} |")
        lines.append("")
    lines += ["## Newton iterations", "", "| class | iterations | passes | seconds | stop |", "|---|---:|---:|---:|---|"]
    for p in report["solver"]["problems"]:
        lines.append(f"| {p['class']} | {p['n_iter']} | {p['n_passes']} | {p['seconds']:.3f} | {p['stop_reason']} |")
    lines.append("")
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


def _machine() -> str:
    import os
    import platform

    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def run_pipeline(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a loaded pipeline with the current Dask scheduler; returns the report dict."""
    if spec.get("kind") == "paper":
        from .experiments import run_paper

        return run_paper(spec)
    from . import io
    from .estimator import NystroemSVC
    from .metrics import evaluate
    from .model_io import save_model

    out = Path(spec["output"])
    out.mkdir(parents=True, exist_ok=True)
    data_dir = out / "data"
    data_dir.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    train = _materialise(spec["data"]["train"], data_dir / "train.zarr", "data.train")
    test_entry = spec["data"].get("test")
    split = spec["data"].get("split")
    if split is not None and test_entry:
        raise PipelineError("data: give either 'test' or 'split', not both")
    test = _materialise(test_entry, data_dir / "test.zarr", "data.test") if test_entry else None
    if split is not None:
        train, test = _split_dataset(train, data_dir, split)
    ingest_seconds = time.perf_counter() - t0
    logger.info("pipeline %s: data ready in %.2fs (train %d rows)", spec["name"], ingest_seconds, train.n_samples)

    params = dict(spec["model"].get("params") or {})
    search_spec = spec["model"].get("search")
    cv_rows, cv_plots = None, []
    if search_spec:
        from .search import cv_table, parse_search_args, search_and_report

        grid = search_spec.get("grid")
        if not isinstance(grid, dict) or not grid:
            raise PipelineError("model.search.grid must be a mapping such as {C: [1, 10], gamma: [0.01, 0.05]}")
        grid = parse_search_args([f"{k}={','.join(str(v) for v in (vs if isinstance(vs, list) else [vs]))}"
                                  for k, vs in grid.items()])
        search, paths = search_and_report(train, param_grid=grid, out_dir=out, cv=int(search_spec.get("cv", 5)),
                                          scoring=search_spec.get("scoring", "accuracy"), prefix="cv", **params)
        model = search.best_estimator_
        params = {**params, **search.best_params_}
        cv_rows = cv_table(search)
        cv_plots = [Path(p).name for kind, p in paths.items() if kind == "heatmap"]
        logger.info("pipeline %s: best %s (CV %.4f)", spec["name"], search.best_params_, search.best_score_)
    else:
        model = NystroemSVC(**params).fit(train)
    save_model(model, out / "model.npz")
    evaluation = evaluate(model, test) if test is not None else None
    stats = model.solver_stats_
    report: dict[str, Any] = {
        "name": spec["name"],
        "machine": _machine(),
        "data": {"train": str(train.path), "test": str(test.path) if test is not None else None,
                 "n_train": train.n_samples, "n_features": train.n_features, "split": split},
        "model": {"estimator": "NystroemSVC", "params": params, "gamma": model.gamma_,
                  "n_components": int(model.components_.shape[0]), "n_features_out": int(model.coef_.shape[1])},
        "timing": {"ingest_seconds": ingest_seconds, **{k: v for k, v in stats.items() if k.endswith("_seconds")}},
        "solver": {"hessian": stats["hessian"], "problems": stats["problems"]},
        "evaluation": evaluation,
        "plots": list(cv_plots),
    }
    if cv_rows is not None:
        report["cv_results"] = cv_rows
    ks = (spec.get("experiments") or {}).get("accuracy_vs_k")
    if ks and test is not None:
        rows = []
        for k in ks:
            m = NystroemSVC(**{**params, "n_components": int(k)}).fit(train)
            rows.append({"n_components": int(k), "accuracy": evaluate(m, test)["accuracy"],
                         "fit_seconds": m.solver_stats_["fit_seconds"]})
            logger.info("accuracy vs k: k=%d accuracy=%.4f", k, rows[-1]["accuracy"])
        report["accuracy_vs_k"] = rows
    if (spec.get("report") or {}).get("plots", True):
        if _plot_convergence(stats, out / "convergence.png"):
            report["plots"].append("convergence.png")
        if report.get("accuracy_vs_k") and _plot_accuracy_vs_k(report["accuracy_vs_k"], out / "accuracy_vs_k.png"):
            report["plots"].append("accuracy_vs_k.png")
    from .experiments import json_safe

    (out / "report.json").write_text(json.dumps(report, indent=2, default=json_safe))
    (out / "report.md").write_text(_markdown(report))
    logger.info("pipeline %s: report written to %s", spec["name"], out)
    del io
    return report


DEMO_PIPELINE: dict[str, Any] = {
    "name": "demo",
    "description": "Generated non-linear problem (a noisy sphere in 20 dims) on the default local cluster",
    "params": {"n_train": 200_000, "n_test": 50_000, "n_features": 20},
    "output": "reports/demo",
    "data": {
        "train": {"generate": {"n_samples": "${n_train}", "n_features": "${n_features}", "random_state": 0}},
        "test": {"generate": {"n_samples": "${n_test}", "n_features": "${n_features}", "random_state": 1}},
    },
    "model": {"estimator": "NystroemSVC", "params": {"C": 10.0, "n_components": 500, "random_state": 0}},
    "experiments": {"accuracy_vs_k": [50, 100, 200, 500]},
    "report": {"plots": True},
}
