"""The YAML users give dsvm (pipelines, cluster specs, --set values) is data: every problem is one line
naming the file, nothing in it expands without bound, and a FIFO or a device is refused before any read."""

from __future__ import annotations

import os
import re

import pytest
import yaml
from helpers import call_near_fifos, run_dsvm

from dsvm.app._pipeline_spec import load_pipeline
from dsvm.app._yaml_files import MAX_DEPTH, MAX_YAML_BYTES, parse_yaml, read_yaml_file
from dsvm.app.cli import main
from dsvm.app.cluster import load_cluster_spec
from dsvm.exceptions import ClusterSpecError, PipelineError

# "billion laughs": nine levels of ten aliases, 10**9 strings once expanded, in about 1.5 KB
LAUGHS = "\n".join(
    ['name: laughs', 'description:', '  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
) + "\n"


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


def test_an_alias_is_refused_naming_the_file_and_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(PipelineError, match=r"p\.yaml: line 2, column 4: an alias \(\*x\)") as info:
        read_yaml_file(path, PipelineError, "pipeline")
    _one_line(info.value)


def test_a_billion_laughs_pipeline_is_one_line_at_once(tmp_path):
    """It made ``dsvm run`` walk the expanded tree for ever."""
    assert len(LAUGHS) < 2000
    (tmp_path / "laughs.yaml").write_text(LAUGHS)
    proc = run_dsvm("run", "laughs.yaml", cwd=tmp_path, timeout=90)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsvm run: error: laughs.yaml: line 4"), proc.stderr
    assert "alias" in lines[0]


@pytest.mark.parametrize("value, needle", [
    ("[unclosed", "not valid YAML (line 1, column 10: expected ',' or ']'"),
    ("!!python/object/apply:os.system [touch HACKED]", "could not determine a constructor for the tag"),
    ("!custom 1", "could not determine a constructor for the tag '!custom'"),
    ("2020-13-45", "a value YAML cannot hold (month must be in 1..12)"),
    ("{a: &x 1, b: *x}", "an alias (*x)"),
])
def test_a_bad_set_value_is_one_line_naming_the_item(tmp_path, value, needle):
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\noutput: {tmp_path / 'out'}\nparams: {{n: 1}}\n")
    with pytest.raises(PipelineError) as info:
        load_pipeline(path, [f"n={value}"])
    assert _one_line(info.value).startswith(f"--set n={value}: ") and needle in str(info.value)
    assert not (tmp_path / "HACKED").exists()


@pytest.mark.parametrize("value", ["[unclosed", "!!python/name:os.system"])
def test_cli_set_errors_are_one_line(tmp_path, capsys, value):
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\noutput: {tmp_path / 'out'}\nparams: {{n: 1}}\n")
    assert main(["-q", "run", str(path), "--set", f"n={value}"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"dsvm run: error: --set n={value}: "), err


def test_nesting_is_bounded(tmp_path):
    """The composer recurses per level: 5000 levels were a RecursionError traceback."""
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ClusterSpecError, match=rf"deep\.yaml: line 1, column \d+: nested more than {MAX_DEPTH}"):
        load_cluster_spec(path)
    assert parse_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, ValueError, "x") is not None


def test_values_a_constructor_refuses_name_the_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\ndescription: " + "1" * 5000 + "\n")
    with pytest.raises(PipelineError, match=r"p\.yaml: a value YAML cannot hold \(Exceeds the limit"):
        load_pipeline(path)


def test_a_file_that_is_not_text_is_one_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_bytes(b"name: \xff\xfe\x00x\n")
    with pytest.raises(PipelineError, match=r"p\.yaml: not valid YAML \(.*invalid start byte.*position 6\)") as info:
        load_pipeline(path)
    _one_line(info.value)


def test_the_size_is_bounded(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("description: '" + "x" * MAX_YAML_BYTES + "'\n")
    with pytest.raises(PipelineError, match=r"big\.yaml: larger than 1 MiB; a pipeline file is a small text file"):
        load_pipeline(path)


@pytest.mark.parametrize("loader, error, what", [
    (load_pipeline, PipelineError, "a pipeline file"), (load_cluster_spec, ClusterSpecError, "a cluster spec file")])
def test_a_fifo_is_refused_at_once(tmp_path, loader, error, what):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    exc = call_near_fifos(lambda: loader(fifo), fifo)
    assert isinstance(exc, error), exc
    assert str(exc) == f"{fifo}: it is a FIFO (named pipe), not a regular file; {what} must be a regular file"


def test_a_device_and_a_folder_are_refused(tmp_path):
    with pytest.raises(PipelineError, match="/dev/zero: it is a device, not a regular file"):
        load_pipeline("/dev/zero")
    with pytest.raises(ClusterSpecError, match="it is a folder, not a regular file"):
        load_cluster_spec(tmp_path)


@pytest.mark.parametrize("text, key, line, first", [
    ("name: p\nmodel:\n  params: {C: 1.0, n_components: 50, random_state: 0, C: 1000000}\n", "C", 3, 3),
    ("name: p\ndescription: x\nname: q\n", "name", 3, 1),
])
def test_a_duplicate_key_is_one_line_naming_the_file_line_and_key(tmp_path, text, key, line, first):
    """The last of two equal keys won, silently: a pipeline trained with C=1e6 where it read C: 1.0 first."""
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert re.fullmatch(rf"{re.escape(str(path))}: line {line}, column \d+: duplicate key '{key}' \(first given at "
                        rf"line {first}\)", _one_line(info.value)), str(info.value)


def test_equal_keys_in_different_mappings_are_not_duplicates():
    assert parse_yaml("a: {x: 1}\nb: {x: 2}\n", ValueError, "x") == {"a": {"x": 1}, "b": {"x": 2}}


@pytest.mark.parametrize("text, value", [("1e300", 1e300), ("1e10", 1e10), ("1E-3", 1e-3), (".5e3", 500.0),
                                         ("-2e2", -200.0), ("+1.5E+2", 150.0), ("3.0e5", 3e5), ("1e999", float("inf"))])
def test_yaml_1_2_floats_are_numbers(text, value):
    """YAML 1.1 reads `1e300` (no dot, or an exponent without a sign) as a string: `C: 1e300` was refused as
    "C must be a finite number, got '1e300'"."""
    assert parse_yaml(f"C: {text}", ValueError, "x") == {"C": value}


@pytest.mark.parametrize("text", ["1e", "e5", "1e5x", "'1e5'", "1_0e3", "0x1e3", "1.2.3e4"])
def test_what_is_not_a_yaml_1_2_float_stays_as_it_was(text):
    assert parse_yaml(f"v: {text}", ValueError, "x") == yaml.safe_load(f"v: {text}")


def test_the_float_rule_is_dsvms_own_not_pyyaml_s(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nmodel:\n  params: {C: 1e3, gamma: 5E-2}\n")
    assert read_yaml_file(path, PipelineError, "pipeline")["model"]["params"] == {"C": 1000.0, "gamma": 0.05}
    assert yaml.safe_load("C: 1e300") == {"C": "1e300"}  # PyYAML's own loaders are left as they are
