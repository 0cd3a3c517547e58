"""The Examples sections of the public docstrings run, and say what they print.

Every name of ``dsvm.__all__`` has an Examples section (numpydoc) with ``>>>``
lines; each runs here as a doctest on tiny data, as a reader would paste it.
"""

from __future__ import annotations

import doctest
import importlib.util

import pytest

import dsvm

PUBLIC = sorted(name for name in dsvm.__all__ if name != "__version__")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
NEEDS = {"export_onnx": ("onnxruntime", "skl2onnx")}


def _doctests(name: str) -> list[doctest.DocTest]:
    """The doctests of the object's own docstring and of its members' (those with examples)."""
    tests = doctest.DocTestFinder().find(getattr(dsvm, name), name)
    return [test for test in tests if test.examples]


def test_every_public_name_is_checked():
    assert "NystroemSVC" in PUBLIC and "show_progress" in PUBLIC and len(PUBLIC) >= 25


@pytest.mark.parametrize("name", PUBLIC)
def test_public_docstring_has_examples(name):
    doc = getattr(dsvm, name).__doc__ or ""
    assert "\n    Examples\n    --------\n" in doc, f"{name}'s docstring has no numpydoc Examples section"
    own = [test for test in _doctests(name) if test.name == name]
    assert own and any(not example.options.get(doctest.SKIP) for example in own[0].examples), (
        f"{name}'s Examples section has no example that runs"
    )


@pytest.mark.parametrize("name", PUBLIC)
def test_public_docstring_examples_pass(name, monkeypatch, tmp_path):
    missing = [module for module in NEEDS.get(name, ()) if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"{name}'s example needs {', '.join(missing)}")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # tempfile.mkdtemp() in the examples writes under tmp_path
    monkeypatch.setattr("tempfile.tempdir", None)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in _doctests(name):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples of {name} failed (output above)"
