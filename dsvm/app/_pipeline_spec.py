"""Pipeline files: read the YAML, apply ``--set`` overrides, substitute ``${...}`` and check it all.

Every key, at every level, is checked when a pipeline is loaded (a typo such
as ``model: parms:`` is an error naming ``model.parms``), and so are the model
parameters, the search grid and the paper experiments' settings; the inputs
(and Clarabel, for the paper's structure benchmark) are checked before a run
writes anything.  Nothing here reads data or talks to Dask: :mod:`dsvm.app._pipeline`
runs what this module has checked.
"""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any

from sklearn.model_selection import ParameterGrid

from ..exceptions import PipelineError
from ..experiments import DEFAULTS, PAPER_DATASETS, dataset_settings, paper_config
from ..io import MAX_N_FEATURES, check_synthetic_options, ingest, make_classification_zarr
from ..model_selection import check_auto_k, check_search_landmarks, check_search_params
from ..options import DTYPES
from ..reference import require_clarabel
from ..svm import NystroemSVC, check_params, param_names
from ._search_report import ALIASES, parse_search_args
from ._yaml_files import parse_yaml, read_yaml_file

PIPELINE_KEYS = {"name", "description", "kind", "params", "output", "data", "preprocess", "model", "experiments",
                 "report"}
KINDS = ("train", "paper")
PIPELINE_ESTIMATORS = ("NystroemSVC",)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# the keys each section may hold: exactly what run_pipeline (or dsvm.experiments) reads
PAPER_TOP_KEYS = PIPELINE_KEYS - {"data", "preprocess", "model"}
PREPROCESS_KEYS = {"scale"}
DATA_KEYS = {"train", "test", "split"}
SPLIT_KEYS = {"test_fraction", "random_state"}
MODEL_KEYS = {"estimator", "params", "search"}
SEARCH_SECTION_KEYS = {"grid", "cv", "scoring"}
TRAIN_EXPERIMENT_KEYS = {"accuracy_vs_k"}
PAPER_EXPERIMENT_KEYS = {"paper"}
REPORT_KEYS = {"plots"}
DATA_SOURCES = ("source", "zarr", "generate")
# set by the pipeline itself when it ingests or generates, so not an option of a data entry
_FIXED_IO_ARGS = {"source", "target", "path", "overwrite", "like"}


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _path_text(value) -> bool:
    return isinstance(value, str) and value != ""


# the type of each ingest option a pipeline may give (ingest checks the values it can only judge with the data)
INGEST_OPTION_TYPES: dict[str, tuple[str, Any]] = {
    "format": ("one of libsvm, csv, npy, parquet", lambda v: v is None or isinstance(v, str)),
    "y": ("a path (a non-empty text)", lambda v: v is None or _path_text(v)),
    "n_features": (f"an integer from 1 to {MAX_N_FEATURES}", lambda v: v is None or (_whole(v) and
                                                                               1 <= v <= MAX_N_FEATURES)),
    "zero_based": ("'auto', true or false", lambda v: v == "auto" or isinstance(v, bool)),
    "dense": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
    "chunk_rows": ("a positive integer", lambda v: v is None or (_whole(v) and v >= 1)),
    "chunk_bytes": ("a positive integer", lambda v: v is None or (_whole(v) and v >= 1)),
    "block_bytes": ("a positive integer", lambda v: v is None or (_whole(v) and v >= 1)),
    "dtype": ("float32 or float64", lambda v: v in DTYPES),
    "label_column": ("a column number or name, false or null",
                     lambda v: v is None or v is False or _whole(v) or isinstance(v, str)),
    "header": ("'auto', true or false", lambda v: v == "auto" or isinstance(v, bool)),
    "delimiter": ("one character", lambda v: v is None or isinstance(v, str)),
    "progress": ("true or false", lambda v: isinstance(v, bool)),
}

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


def _resolve_params(params: dict[str, Any], where: str) -> dict[str, Any]:
    """Parameters that use other parameters (``out: "${root}/x"``) resolved; a cycle is an error."""
    resolved: dict[str, Any] = {}

    def resolve(key: str, chain: tuple[str, ...]) -> Any:
        if key in resolved:
            return resolved[key]
        if key in chain:
            cycle = " -> ".join(f"${{{k}}}" for k in (*chain[chain.index(key):], key))
            raise PipelineError(f"{where}: params refer to each other in a cycle ({cycle})")
        refs = {ref: resolve(ref, (*chain, key)) for ref in _referenced(params[key]) if ref in params}
        resolved[key] = _substitute(params[key], refs, f"{where}: params.{key}")
        return resolved[key]

    for key in params:
        resolve(key, ())
    return resolved


def _parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise PipelineError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    return key.strip(), parse_yaml(raw, PipelineError, f"--set {text}")


def _referenced(value: Any) -> set[str]:
    """Names used as ``${NAME}`` anywhere in ``value``."""
    if isinstance(value, str):
        return set(_VAR.findall(value))
    if isinstance(value, dict):
        return set().union(*(_referenced(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_referenced(v) for v in value))
    return set()


def _apply_overrides(spec: dict[str, Any], params: dict[str, Any], overrides: list[str], where: str) -> None:
    """``--set KEY=VALUE``: a parameter (used as ``${KEY}`` or under ``params``), else a top-level key.

    A key that nothing reads is refused: a typo such as ``data_dri`` would otherwise be ignored.
    """
    used = _referenced({k: v for k, v in spec.items() if k != "params"})
    for text in overrides:
        key, value = _parse_override(text)
        if key in used or key in params:
            params[key] = value
        elif key in PIPELINE_KEYS - {"params"}:
            spec[key] = value
        else:
            raise PipelineError(
                f"{where}: --set {key}=...: {key!r} is neither a parameter of this pipeline "
                f"({', '.join(sorted(used | set(params))) or 'none'}) nor a top-level key "
                f"({', '.join(sorted(PIPELINE_KEYS - {'params'}))})")


def _read_spec(path: str | Path | dict) -> tuple[str, dict[str, Any]]:
    """``(where, spec)``: a copy of a dict, or a YAML file parsed."""
    if isinstance(path, dict):
        return "pipeline", copy.deepcopy(path)
    p = Path(path)
    spec = read_yaml_file(p, PipelineError, "pipeline")
    if not isinstance(spec, dict):
        raise PipelineError(f"{p}: expected a mapping at the top level")
    return str(p), spec


def load_pipeline(path: str | Path | dict, overrides: list[str] | None = None) -> dict[str, Any]:
    """Read a pipeline, apply ``--set`` overrides, substitute ``${...}`` and check it.

    Parameters
    ----------
    path : str, pathlib.Path or dict
        A YAML pipeline file, or the pipeline as a dict (copied, not changed).
    overrides : list of str, optional
        ``KEY=VALUE`` items (values parsed as YAML): a parameter used as
        ``${KEY}`` or declared under ``params``, else a top-level key.

    Returns
    -------
    dict
        The resolved pipeline, with ``kind``, ``name`` and ``output`` filled in.

    Raises
    ------
    PipelineError
        For malformed YAML, an unknown key at any level (naming its path, e.g.
        ``model.parms``), an override that nothing reads, an undefined
        ``${...}``, or model parameters the estimator refuses.  Nothing is
        read or written besides the pipeline file.
    """
    where, spec = _read_spec(path)
    _check_keys(spec, PIPELINE_KEYS, "", where)
    params = _check_keys(spec.get("params"), None, "params", where)
    params = dict(params)
    _apply_overrides(spec, params, overrides or [], where)
    params = _resolve_params(params, where)
    resolved = _substitute({k: v for k, v in spec.items() if k != "params"}, params, where)
    resolved["params"] = params
    resolved.setdefault("kind", "train")
    resolved.setdefault("name", Path(where).stem)
    resolved.setdefault("output", f"reports/{resolved['name']}")
    if resolved["kind"] == "train":
        resolved.setdefault("model", {})
    check_pipeline(resolved, where)
    return resolved


# --------------------------------------------------------------------------- checks (no data read)
def _check_keys(value: Any, allowed: set[str] | None, path: str, where: str) -> dict[str, Any]:
    """``value`` as a mapping (``None``: empty) whose keys are all in ``allowed`` (``None``: any)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PipelineError(f"{where}: {path or 'the top level'} must be a mapping, got {value!r}")
    unknown = sorted(str(k) for k in value if allowed is not None and k not in allowed)
    if unknown:
        named = ", ".join(f"{path}.{k}" if path else k for k in unknown)
        place = f"under {path}" if path else "at the top level"
        raise PipelineError(f"{where}: unknown key {named}; allowed {place}: {', '.join(sorted(allowed))}")
    return value


def _kwarg_names(func) -> tuple[set[str], set[str]]:
    """``(all, required)`` keyword names of ``func``, less the ones the pipeline sets itself."""
    sig = inspect.signature(func).parameters.values()
    named = [p for p in sig if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in _FIXED_IO_ARGS]
    return {p.name for p in named}, {p.name for p in named if p.default is p.empty}


def _check_data_entry(entry: Any, path: str, where: str) -> None:
    """One of ``{source: FILE, <ingest options>}``, ``{zarr: DIR}`` or ``{generate: {...}}``."""
    if not isinstance(entry, dict):
        raise PipelineError(f"{where}: {path} must be a mapping with 'source', 'zarr' or 'generate', got {entry!r}")
    given = [k for k in DATA_SOURCES if k in entry]
    if len(given) != 1:
        raise PipelineError(f"{where}: {path}: give exactly one of 'source' (a file to ingest), 'zarr' (a dataset) "
                            f"or 'generate' (synthetic data), got {sorted(map(str, entry))}")
    if given[0] == "source":
        _check_keys(entry, {"source"} | _kwarg_names(ingest)[0], path, where)
        _check_source(entry, path, where)
    elif given[0] == "zarr":
        _check_keys(entry, {"zarr"}, path, where)
        if not _path_text(entry["zarr"]):
            raise PipelineError(f"{where}: {path}.zarr must be a path (a non-empty text), got {entry['zarr']!r}")
    else:
        _check_keys(entry, {"generate"}, path, where)
        allowed, required = _kwarg_names(make_classification_zarr)
        opts = _check_keys(entry["generate"], allowed, f"{path}.generate", where)
        missing = sorted(required - set(opts))
        if missing:
            raise PipelineError(f"{where}: {path}.generate needs {', '.join(missing)}")
        try:
            check_synthetic_options(**opts)
        except ValueError as exc:
            raise PipelineError(f"{where}: {path}.generate: {exc}") from None


def _check_source(entry: dict[str, Any], path: str, where: str) -> None:
    """``source:`` a path (or a list of paths) and each ingest option of the type ingest takes."""
    source = entry["source"]
    if not (_path_text(source) or (isinstance(source, list) and source and all(map(_path_text, source)))):
        raise PipelineError(f"{where}: {path}.source must be a path (a non-empty text) or a list of paths, "
                            f"got {source!r}")
    for key, value in entry.items():
        what, ok = INGEST_OPTION_TYPES.get(key, ("", lambda v: True))
        if not ok(value):
            raise PipelineError(f"{where}: {path}.{key} must be {what}, got {value!r}")


def _check_data(data: Any, where: str) -> None:
    data = _check_keys(data, DATA_KEYS, "data", where)
    if "train" not in data:
        raise PipelineError(f"{where}: 'data: train:' is required")
    _check_data_entry(data["train"], "data.train", where)
    if data.get("test") is not None:
        _check_data_entry(data["test"], "data.test", where)
    split = data.get("split")
    if split is None:
        return
    if data.get("test"):
        raise PipelineError(f"{where}: data: give either 'test' or 'split', not both")
    split = _check_keys(split, SPLIT_KEYS, "data.split", where)
    if not _whole(split.get("random_state", 0)):
        raise PipelineError(f"{where}: data.split.random_state must be an integer, got {split['random_state']!r}")
    try:
        fraction = float(split.get("test_fraction", 0.2))
    except (TypeError, ValueError):
        fraction = float("nan")
    if not 0.0 < fraction < 1.0:
        raise PipelineError(f"{where}: data.split.test_fraction must be between 0 and 1, got "
                            f"{split.get('test_fraction')!r}")


def _lone_surrogate(value: Any, path: str) -> tuple[str, str] | None:
    """``(key path, character)`` of the first lone surrogate in a string of ``value`` (keys included), if any:
    text that cannot be written as UTF-8 (a report's Markdown) or as a file name."""
    if isinstance(value, str):
        bad = next((ch for ch in value if "\ud800" <= ch <= "\udfff"), None)
        return None if bad is None else (path, bad)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        inner = f"{path}.{key}" if path and isinstance(value, dict) else f"{path}[{key}]" if path else str(key)
        found = _lone_surrogate(key, inner) or _lone_surrogate(item, inner)
        if found:
            return found
    return None


def _check_text_fields(spec: dict[str, Any], where: str) -> None:
    """``name`` and ``description`` are texts, ``output`` a path, and no text anywhere holds a lone surrogate
    (a ``\\ud800`` escape in YAML): found here, not when the report is written after the fit."""
    for key in ("name", "description"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            raise PipelineError(f"{where}: {key} must be a text, got {spec[key]!r}")
    if not _path_text(spec.get("output")):
        raise PipelineError(f"{where}: output must be a path (a non-empty text), got {spec.get('output')!r}")
    found = _lone_surrogate(spec, "")
    if found:
        raise PipelineError(f"{where}: {found[0]} holds {found[1]!r}, which is not a character (a lone surrogate); "
                            "write the text itself, in UTF-8")


def _estimator(params: dict[str, Any], path: str, where: str):
    """The pipeline's NystroemSVC with ``params``, its parameters checked as ``fit`` checks them."""
    allowed = set(param_names(NystroemSVC))
    _check_keys(params, allowed, path, where)
    try:
        est = NystroemSVC(**params)
        check_params(est)
    except (TypeError, ValueError) as exc:
        raise PipelineError(f"{where}: {path}: {exc}") from None
    return est


def search_grid(search: dict[str, Any], where: str) -> dict[str, list]:
    """``model.search.grid`` parsed as ``dsvm train --search`` parses its items (``k`` is ``n_components``)."""
    grid = search.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise PipelineError(f"{where}: model.search.grid must be a mapping such as "
                            "{C: [1, 10], gamma: [0.01, 0.05]}")
    _check_keys(grid, set(param_names(NystroemSVC)) | set(ALIASES), "model.search.grid", where)
    try:
        return parse_search_args([f"{k}={','.join(str(v) for v in (vs if isinstance(vs, list) else [vs]))}"
                                  for k, vs in grid.items()])
    except ValueError as exc:
        raise PipelineError(f"{where}: model.search.grid: {exc}") from None


def _check_search(search: Any, params: dict[str, Any], where: str) -> None:
    """Grid names and values, ``cv`` and ``scoring`` as NystroemSVCCV will take them."""
    search = _check_keys(search, SEARCH_SECTION_KEYS, "model.search", where)
    grid = search_grid(search, where)
    cv = search.get("cv", 5)
    if isinstance(cv, bool) or not isinstance(cv, int) or cv < 2:
        raise PipelineError(f"{where}: model.search.cv must be an integer of at least 2, got {cv!r}")
    try:
        check_search_params(search.get("scoring", "accuracy"), None)
    except ValueError as exc:
        raise PipelineError(f"{where}: model.search.scoring: {exc}") from None
    points = list(ParameterGrid(grid))
    try:
        check_auto_k([{**params, **point}.get("n_components", NystroemSVC().n_components) for point in points])
    except ValueError as exc:
        raise PipelineError(f"{where}: model.search: {exc}") from None
    for point in points:
        _estimator({**params, **point}, "model.search.grid", where)
        try:
            check_search_landmarks([{**params, **point}.get("landmarks", "uniform")])
        except ValueError as exc:
            raise PipelineError(f"{where}: model.search: {exc}") from None


def model_params(spec: dict[str, Any], where: str = "pipeline") -> dict[str, Any]:
    """The estimator's parameters: ``model.params`` with the ``preprocess:`` step (``scale``) folded in.

    ``preprocess: {scale: standard}`` is the model's ``scale`` parameter: the
    statistics are fitted with the model and kept in its file, so every
    prediction scales the same way.  Giving ``scale`` in both places with
    different values is an error.
    """
    model = _check_keys(spec.get("model"), MODEL_KEYS, "model", where)
    params = dict(_check_keys(model.get("params"), None, "model.params", where))
    pre = _check_keys(spec.get("preprocess"), PREPROCESS_KEYS, "preprocess", where)
    if "scale" in pre:
        if "scale" in params and params["scale"] != pre["scale"]:
            raise PipelineError(f"{where}: preprocess.scale is {pre['scale']!r} but model.params.scale is "
                                f"{params['scale']!r}; give it once")
        params["scale"] = pre["scale"]
    return params


def _check_model(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """``model:`` keys, the estimator, its parameters (with ``preprocess:``) and the search step; returns the
    parameters."""
    model = _check_keys(spec.get("model"), MODEL_KEYS, "model", where)
    if model.get("estimator", "NystroemSVC") not in PIPELINE_ESTIMATORS:
        raise PipelineError(f"{where}: model estimator {model.get('estimator')!r} unknown; "
                            f"choose one of {PIPELINE_ESTIMATORS}")
    params = model_params(spec, where)
    _estimator(params, "model.params", where)
    if model.get("search") is not None:
        _check_search(model["search"], params, where)
    return params


def _check_train_experiments(experiments: Any, params: dict[str, Any], where: str) -> None:
    experiments = _check_keys(experiments, TRAIN_EXPERIMENT_KEYS, "experiments", where)
    ks = experiments.get("accuracy_vs_k")
    if ks is None:
        return
    if not isinstance(ks, list):
        raise PipelineError(f"{where}: experiments.accuracy_vs_k must be a list of k, got {ks!r}")
    for k in ks:
        _estimator({**params, "n_components": k}, "experiments.accuracy_vs_k", where)


def _check_paper(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """Every key of ``experiments: paper:`` against :data:`dsvm.experiments.DEFAULTS`; returns its config."""
    _check_keys(spec, PAPER_TOP_KEYS, "", where)
    experiments = _check_keys(spec.get("experiments"), PAPER_EXPERIMENT_KEYS, "experiments", where)
    section = _check_keys(experiments.get("paper"), set(DEFAULTS), "experiments.paper", where)
    # paper_config merges these sections key by key over the defaults: a misspelt key would be kept, unread
    for key, default in DEFAULTS.items():
        if isinstance(default, dict) and key != "dataset_options":
            _check_keys(section.get(key), set(default), f"experiments.paper.{key}", where)
    options = _check_keys(section.get("dataset_options"), set(PAPER_DATASETS),
                          "experiments.paper.dataset_options", where)
    try:
        cfg = paper_config(spec)
        for name, opts in options.items():
            _check_keys(opts, None, f"experiments.paper.dataset_options.{name}", where)
            dataset_settings(cfg, name)  # the per-data-set keys (gamma, k, k_grid, table4_k, table4_landmarks)
    except (TypeError, ValueError) as exc:
        raise PipelineError(f"{where}: {exc}") from None
    if cfg["structure"]["dataset"] not in PAPER_DATASETS:  # else a KeyError after all other experiments
        raise PipelineError(f"{where}: experiments.paper.structure.dataset {cfg['structure']['dataset']!r} unknown; "
                            f"choose one of {', '.join(PAPER_DATASETS)}")
    return cfg


def check_pipeline(spec: dict[str, Any], where: str = "pipeline") -> None:
    """Check a resolved pipeline without reading data or writing anything.

    Parameters
    ----------
    spec : dict
        A pipeline as :func:`load_pipeline` returns it.
    where : str, default="pipeline"
        Prefix of the error messages (the pipeline file).

    Raises
    ------
    PipelineError
        An unknown key anywhere (the message names its path and the allowed
        keys), a malformed section, or model parameters (also those of the
        search grid and of ``accuracy_vs_k``) that the estimator refuses.
    """
    kind = spec.get("kind", "train")
    if kind not in KINDS:
        raise PipelineError(f"{where}: kind {kind!r} unknown; choose one of {KINDS}")
    _check_keys(spec, PIPELINE_KEYS, "", where)
    _check_text_fields(spec, where)
    report = _check_keys(spec.get("report"), REPORT_KEYS, "report", where)
    if not isinstance(report.get("plots", True), bool):
        raise PipelineError(f"{where}: report.plots must be true or false, got {report['plots']!r}")
    if kind == "paper":
        _check_paper(spec, where)
        return
    _check_data(spec.get("data"), where)
    params = _check_model(spec, where)
    _check_train_experiments(spec.get("experiments"), params, where)



# --------------------------------------------------------------------------- inputs, before any work
def _local_path(value: Any) -> Path | None:
    """A local file named in the pipeline (``None`` for URLs and in-memory sources)."""
    if isinstance(value, (str, Path)) and "://" not in str(value):
        return Path(value)
    return None


def _train_inputs(spec: dict[str, Any]) -> list[tuple[str, Path]]:
    """``(key path, file)`` of every local file or dataset a ``kind: train`` pipeline reads."""
    found = []
    for role in ("train", "test"):
        entry = spec["data"].get(role) or {}
        names: list[tuple[str, Any]] = [("zarr", entry["zarr"])] if "zarr" in entry else []
        if "source" in entry:
            src = entry["source"]
            names += [("source", s) for s in (src if isinstance(src, (list, tuple)) else [src])]
            names += [("y", entry["y"])] if entry.get("y") is not None else []
        found += [(f"data.{role}.{key}", p) for key, v in names if (p := _local_path(v)) is not None]
    return found


def _paper_inputs(cfg: dict[str, Any]) -> list[tuple[str, Path]]:
    """The LIBSVM files :func:`dsvm.app._paper.run_paper` will ingest, as it picks them."""
    names = list(cfg["datasets"])
    if "structure" in cfg["parts"]:
        st = cfg["structure"]["dataset"]
        # run_paper's choice: a quick run keeps the structure benchmark on one of its data sets
        names.append(st if (st in names or not cfg["quick"] or not names) else names[0])
    found = []
    for name in dict.fromkeys(names):
        ds = PAPER_DATASETS[name]
        found += [(f"experiments.paper data set {name}", Path(cfg["data_dir"]) / f) for f in (ds.train, ds.test) if f]
    return found


def _require_inputs(inputs: list[tuple[str, Path]], where: str) -> None:
    missing = [f"{key}: {path}" for key, path in inputs if not path.exists()]
    if missing:
        raise FileNotFoundError(f"{where}: input not found ({'; '.join(missing)}); nothing was written "
                                "(set data_dir, e.g. --set data_dir=/path/to/data)")


def _require_clarabel(cfg: dict[str, Any]) -> None:
    """The structure benchmark's exact optimum comes from dsvm.reference, whose QPs need Clarabel."""
    if "structure" not in cfg["parts"]:
        return
    try:
        require_clarabel()
    except ImportError:
        raise PipelineError("the paper pipeline's structure experiment needs Clarabel: pip install '.[reference]' "
                            "(or leave 'structure' out of experiments.paper.parts)") from None



def check_inputs(spec: dict[str, Any], where: str) -> None:
    """Input files (and, for the paper's structure benchmark, Clarabel) exist; run before any output.

    Raises
    ------
    PipelineError
        The paper pipeline's structure benchmark without Clarabel.
    FileNotFoundError
        An input file or dataset that does not exist.
    """
    if spec.get("kind") == "paper":
        cfg = paper_config(spec)
        _require_clarabel(cfg)
        _require_inputs(_paper_inputs(cfg), where)
    else:
        _require_inputs(_train_inputs(spec), where)
