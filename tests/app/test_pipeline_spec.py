"""Pipelines are checked before any work: misspelt keys at any level, model parameters, ``--set``,
input files and Clarabel for the paper pipeline; a failed run leaves no empty output folders."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from helpers import REPO

from dsvm.app._pipeline import DEMO_PIPELINE, run_pipeline
from dsvm.app._pipeline_spec import PipelineError, load_pipeline

PAPER = REPO / "pipelines" / "paper.yaml"


def tiny(tmp_path: Path, **changes) -> dict:
    """A small generated-data pipeline writing to ``tmp_path/out``."""
    spec = {
        "name": "tiny", "output": str(tmp_path / "out"),
        "data": {"train": {"generate": {"n_samples": 300, "n_features": 6, "random_state": 0}},
                 "test": {"generate": {"n_samples": 100, "n_features": 6, "random_state": 1}}},
        "model": {"estimator": "NystroemSVC", "params": {"C": 10, "n_components": 20, "random_state": 0}},
        "report": {"plots": False},
    }
    spec.update(changes)
    return spec


def paper_spec(tmp_path: Path, **section) -> dict:
    spec = load_pipeline(PAPER, [f"output={tmp_path / 'out'}", f"data_dir={tmp_path / 'data'}"])
    spec["experiments"]["paper"].update(section)
    return spec


# --------------------------------------------------------------------------- every file still loads
@pytest.mark.parametrize("path", sorted((REPO / "pipelines").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_pipelines_load(path):
    spec = load_pipeline(path)
    assert spec["name"] == path.stem


def test_demo_pipeline_loads_with_the_demo_commands_overrides():
    spec = load_pipeline(DEMO_PIPELINE, ["n_train=1000", "n_test=200"])
    assert spec["data"]["train"]["generate"]["n_samples"] == 1000


def test_documented_overrides_still_work(tmp_path):
    a9a = load_pipeline(REPO / "pipelines" / "a9a.yaml", ["data_dir=/data/libsvm", f"output={tmp_path}"])
    assert a9a["data"]["train"]["source"] == "/data/libsvm/a9a.train.xz" and a9a["output"] == str(tmp_path)
    paper = load_pipeline(PAPER, ["repeats=2", "quick=true", "datasets=[a9a,splice]", "parts=[table3,table4]"])
    assert paper["experiments"]["paper"]["datasets"] == ["a9a", "splice"]
    assert paper["experiments"]["paper"]["quick"] is True


# --------------------------------------------------------------------------- typos, at any depth
def _nested(spec: dict, dotted: str, value) -> dict:
    spec = copy.deepcopy(spec)
    *parents, last = dotted.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return spec


@pytest.mark.parametrize("dotted, value", [
    ("model.parms", {"C": 10}),
    ("experiments.acuracy_vs_k", [10, 20]),
    ("report.plot", True),
    ("data.train.generate.n_sample", 300),
    ("data.split.seed", 0),
    ("model.search", {"grid": {"C": [1, 10]}, "cvv": 3}),
    ("model.params.Cc", 10),
])
def test_misspelt_train_keys_are_refused(tmp_path, dotted, value):
    spec = tiny(tmp_path)
    if dotted.startswith("data.split"):
        spec["data"] = {"train": spec["data"]["train"], "split": {}}
    bad = _nested(spec, dotted, value)
    path = "model.search.cvv" if dotted == "model.search" else dotted
    with pytest.raises(PipelineError, match=rf"{path}\b.*allowed"):
        load_pipeline(bad)


def test_misspelt_ingest_option_names_the_entry(tmp_path):
    bad = tiny(tmp_path, data={"train": {"source": "a.libsvm", "fromat": "libsvm"}})
    with pytest.raises(PipelineError, match=r"data\.train\.fromat.*format"):
        load_pipeline(bad)
    with pytest.raises(PipelineError, match="exactly one of"):
        load_pipeline(tiny(tmp_path, data={"train": {"source": "a.libsvm", "zarr": "a.zarr"}}))


def test_search_grid_names_and_values_are_estimator_parameters(tmp_path):
    spec = tiny(tmp_path)
    for grid, message in (({"Cc": [1, 10]}, r"model\.search\.grid\.Cc"), ({"C": [1, -1]}, "positive"),
                          ({"landmarks": ["uniform", "random"]}, "landmarks"),
                          ({"landmarks": ["pivoted"]}, r"model\.search: landmarks='pivoted' is not supported by "
                                                      "NystroemSVCCV")):
        with pytest.raises(PipelineError, match=message):
            load_pipeline(_nested(spec, "model.search", {"grid": grid, "cv": 3}))
    with pytest.raises(PipelineError, match="scoring"):
        load_pipeline(_nested(spec, "model.search", {"grid": {"k": [10, 20]}, "scoring": "auc"}))
    assert load_pipeline(_nested(spec, "model.search", {"grid": {"k": [10, 20], "C": [1, 10]}, "cv": 3}))


@pytest.mark.parametrize("section, path", [
    ({"repeat": 3}, r"experiments\.paper\.repeat\b"),
    ({"sensitivity": {"fold": 3}}, r"experiments\.paper\.sensitivity\.fold"),
    ({"structure": {"size": [100]}}, r"experiments\.paper\.structure\.size"),
    ({"split": {"seed": 1}}, r"experiments\.paper\.split\.seed"),
    ({"dataset_options": {"w8": {"k": 100}}}, r"experiments\.paper\.dataset_options\.w8\b"),
    ({"dataset_options": {"w8a": {"table4k": 500}}}, r"experiments\.paper\.dataset_options\.w8a.*table4k"),
    ({"dataset_options": {"w8a": {"table4_landmarks": "random"}}}, r"dataset_options\.w8a\.table4_landmarks"),
    ({"structure": {"dataset": "covtype"}}, r"experiments\.paper\.structure\.dataset"),
])
def test_misspelt_paper_keys_are_refused(section, path):
    spec = load_pipeline(PAPER)
    spec["experiments"]["paper"].update(section)
    with pytest.raises(PipelineError, match=path):
        load_pipeline(spec)


def test_paper_options_per_data_set_are_accepted():
    spec = load_pipeline(PAPER)
    spec["experiments"]["paper"]["dataset_options"] = {"w8a": {"table4_k": 500, "table4_landmarks": "uniform"},
                                                       "ijcnn1": {"k": 2000, "gamma": 2, "k_grid": [100, 200]}}
    assert load_pipeline(spec)["experiments"]["paper"]["dataset_options"]["w8a"]["table4_k"] == 500
    with pytest.raises(PipelineError, match=r"experiments\.acuracy"):
        load_pipeline(_nested(spec, "experiments.acuracy", 1))
    with pytest.raises(PipelineError, match="unknown key model"):
        load_pipeline({**spec, "model": {"params": {"C": 1}}})


def test_set_of_a_key_nothing_reads_is_refused(tmp_path):
    with pytest.raises(PipelineError, match="--set data_dri"):
        load_pipeline(REPO / "pipelines" / "a9a.yaml", ["data_dri=/data"])
    with pytest.raises(PipelineError, match="--set repeat"):
        load_pipeline(PAPER, ["repeat=2"])
    # a top-level key is set directly where no ${...} parameter carries it
    spec = load_pipeline(tiny(tmp_path), [f"output={tmp_path / 'elsewhere'}"])
    assert spec["output"] == str(tmp_path / "elsewhere")


# --------------------------------------------------------------------------- model parameters, before any data work
@pytest.mark.parametrize("params, message", [({"Cc": 10}, r"model\.params\.Cc"), ({"C": -1}, "C must be positive"),
                                             ({"kernel": "rbff"}, "kernel")])
def test_bad_model_parameters_fail_before_anything_is_written(tmp_path, params, message):
    spec = tiny(tmp_path)
    spec["model"]["params"].update(params)
    with pytest.raises(PipelineError, match=message):
        load_pipeline(spec)
    # a spec changed after loading is checked again by run_pipeline
    good = load_pipeline(tiny(tmp_path))
    good["model"]["params"].update(params)
    with pytest.raises(PipelineError, match=message):
        run_pipeline(good)
    assert not (tmp_path / "out").exists()


def test_accuracy_vs_k_values_are_checked(tmp_path):
    with pytest.raises(PipelineError, match=r"experiments\.accuracy_vs_k.*n_components"):
        load_pipeline(tiny(tmp_path, experiments={"accuracy_vs_k": [10, 0]}))


# --------------------------------------------------------------------------- the paper pipeline's solver
def test_paper_pipeline_without_clarabel_fails_before_work(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "clarabel", None)  # `import clarabel` raises ImportError
    spec = paper_spec(tmp_path)
    with pytest.raises(PipelineError, match=r"structure experiment needs Clarabel: pip install '\.\[reference\]'"):
        run_pipeline(spec)
    assert not (tmp_path / "out").exists()
    # without the structure benchmark Clarabel is not needed: the next check is the data files
    with pytest.raises(FileNotFoundError, match="a9a.train.xz"):
        run_pipeline(paper_spec(tmp_path, parts=["table3"]))
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- no empty folders on failure
def test_missing_data_file_leaves_no_folder(tmp_path):
    spec = load_pipeline(REPO / "pipelines" / "splice.yaml",
                         [f"output={tmp_path / 'a' / 'out'}", f"data_dir={tmp_path / 'nodata'}"])
    with pytest.raises(FileNotFoundError, match=r"data\.train\.source.*splice\.train\.xz"):
        run_pipeline(spec)
    assert list(tmp_path.iterdir()) == []


def test_failure_during_the_run_removes_only_the_empty_folders_it_made(tmp_path, monkeypatch):
    from dsvm.app import _pipeline as pipeline

    def fail(*args, **kwargs):
        raise RuntimeError("ingest failed")

    monkeypatch.setattr(pipeline, "materialise_dataset", fail)
    spec = load_pipeline(tiny(tmp_path))
    with pytest.raises(RuntimeError, match="ingest failed"):
        run_pipeline(spec)
    assert not (tmp_path / "out").exists()
    # an output folder that existed before the run is kept, with what it held:
    # a user's folder is refused before anything is written, a dsvm output folder keeps its files
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not a dsvm pipeline output folder"):
        run_pipeline(spec)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep.txt"]
    (tmp_path / "out" / ".dsvm-output").write_text("{}")
    with pytest.raises(RuntimeError):
        run_pipeline(spec)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".dsvm-output", "keep.txt"]


def test_accuracy_vs_k_reuses_the_main_model_at_its_k(tmp_path):
    """The sweep point with the model's own k is that model (the demo fitted it twice before)."""
    data = {"train": {"generate": {"n_samples": 300, "n_features": 6, "random_state": 0}},
            "test": {"generate": {"n_samples": 100, "n_features": 6, "random_state": 1}}}
    spec = load_pipeline(tiny(tmp_path, data=data, experiments={"accuracy_vs_k": [10, 20]}))
    report = run_pipeline(spec)
    rows = {r["n_components"]: r for r in report["accuracy_vs_k"]}
    assert rows[20]["accuracy"] == report["evaluation"]["accuracy"]
    assert rows[20]["fit_seconds"] == report["timing"]["fit_seconds"]
    assert rows[10]["fit_seconds"] != report["timing"]["fit_seconds"]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| other |" in text


def test_params_that_refer_to_each_other_in_a_cycle_are_an_error(tmp_path):
    """`params: {a: "${b}", b: "${a}"}` created a folder named `${b}`."""
    spec = tiny(tmp_path, params={"a": "${b}", "b": "${a}"}, output=str(tmp_path / "${a}"))
    with pytest.raises(PipelineError, match=r"params refer to each other in a cycle \(\$\{a\} -> \$\{b\} -> \$\{a\}\)"):
        load_pipeline(spec)
    assert sorted(tmp_path.iterdir()) == []


def test_params_may_use_other_params(tmp_path):
    spec = load_pipeline(tiny(tmp_path, params={"root": str(tmp_path), "out": "${root}/reports"},
                              output="${out}/tiny"))
    assert spec["output"] == f"{tmp_path}/reports/tiny" and spec["params"]["out"] == f"{tmp_path}/reports"


# --------------------------------------------------------------------------- the type of every field, at load
@pytest.mark.parametrize("changes, message", [
    ({"output": None}, r"output must be a path \(a non-empty text\), got None"),
    ({"output": 5}, r"output must be a path \(a non-empty text\), got 5"),
    ({"output": ["a"]}, r"output must be a path \(a non-empty text\), got \['a'\]"),
    ({"output": {"a": 1}}, r"output must be a path \(a non-empty text\), got \{'a': 1\}"),
    ({"output": ""}, r"output must be a path \(a non-empty text\), got ''"),
    ({"name": 5}, r"name must be a text, got 5"),
    ({"description": ["x"]}, r"description must be a text, got \['x'\]"),
    ({"name": "caf\ud800"}, r"name holds '\\ud800', which is not a character \(a lone surrogate\)"),
    ({"description": "x\udfff"}, r"description holds '\\udfff', which is not a character"),
    ({"report": {"plots": "yes"}}, r"report\.plots must be true or false, got 'yes'"),
    ({"data": {"train": {"zarr": 5}}}, r"data\.train\.zarr must be a path \(a non-empty text\), got 5"),
    ({"data": {"train": {"source": 5}}}, r"data\.train\.source must be a path"),
    ({"data": {"train": {"source": "a.libsvm", "n_features": "abc"}}},
     r"data\.train\.n_features must be an integer from 1 to 2147483647, got 'abc'"),
    ({"data": {"train": {"source": "a.libsvm", "n_features": 2**31}}},
     r"data\.train\.n_features must be an integer from 1 to 2147483647, got 2147483648"),
    ({"data": {"train": {"source": "a.libsvm", "dense": "yes"}}}, r"data\.train\.dense must be true, false or null"),
    ({"data": {"train": {"source": "a.libsvm", "zero_based": 1}}}, r"data\.train\.zero_based must be 'auto', true or "
                                                                   r"false, got 1"),
    ({"data": {"train": {"generate": {"n_samples": 300, "n_features": "abc"}}}},
     r"data\.train\.generate: n_features must be a positive integer, got 'abc'"),
    ({"data": {"train": {"generate": {"n_samples": 300, "n_features": 4, "n_informative": 5}}}},
     r"data\.train\.generate: n_informative must be between 1 and n_features=4, got 5"),
    ({"data": {"train": {"generate": {"n_samples": 300, "n_features": 6}}, "split": {"random_state": "x"}}},
     r"data\.split\.random_state must be an integer, got 'x'"),
])
def test_every_field_has_its_type_checked_when_the_pipeline_is_loaded(tmp_path, changes, message):
    """These failed after the folder was made and the data ingested (`n_features: abc` with a raw "invalid literal
    for int()"), or with a TypeError traceback (`output:` empty, `zarr: 5`)."""
    with pytest.raises(PipelineError, match=message):
        load_pipeline(tiny(tmp_path, **changes))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("params, message", [({"class_weight": [1]}, r"model\.params: class_weight must be None"),
                                             ({"random_state": "x"}, r"model\.params: random_state must be None")])
def test_parameters_the_fit_refuses_are_refused_at_load(tmp_path, params, message):
    spec = tiny(tmp_path)
    spec["model"]["params"].update(params)
    with pytest.raises(PipelineError, match=message):
        load_pipeline(spec)
    assert list(tmp_path.iterdir()) == []


def test_a_parameter_substituted_whole_is_checked_where_it_is_used(tmp_path):
    """`params: {n: {a: 1}}` used as `n_samples: ${n}` was a TypeError traceback from int()."""
    spec = tiny(tmp_path, params={"n": {"a": 1}})
    spec["data"]["train"]["generate"]["n_samples"] = "${n}"
    with pytest.raises(PipelineError, match=r"data\.train\.generate: n_samples must be a positive integer, "
                                            r"got \{'a': 1\}"):
        load_pipeline(spec)


def test_a_lone_surrogate_from_a_yaml_file_is_refused_at_load(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(f'name: "a\\ud800"\noutput: {tmp_path / "out"}\ndata: {{train: {{zarr: d.zarr}}}}\n')
    with pytest.raises(PipelineError, match=rf"{path}: name holds '\\ud800', which is not a character"):
        load_pipeline(path)


def test_a_spec_changed_after_loading_is_checked_again_before_the_folder_is_made(tmp_path):
    spec = load_pipeline(tiny(tmp_path))
    spec["data"]["train"]["generate"]["n_features"] = "abc"
    with pytest.raises(PipelineError, match=r"data\.train\.generate: n_features must be a positive integer"):
        run_pipeline(spec)
    assert list(tmp_path.iterdir()) == []
