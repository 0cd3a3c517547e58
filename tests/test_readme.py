"""README.md and the documentation's sources against the repository.

Every test they name exists, the commands and options they show are the CLI's,
the README's first two commands are true, its Python quickstart runs, and its
links lead to files that exist.

The pages name tests as ``tests/<path>.py::<function>``; in a table cell (or
a line of prose) a bare ``::<function>`` after such a name refers to the same
file.  Each named file must exist and define that test function at module
level (read with :mod:`ast`, nothing imported).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dsvm.app.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
# what the documentation build writes: not sources
_BUILT = ("_build", "auto_examples", "generated")

# a test file with an optional function, or a bare ``::function`` continuing the last file named
_REFERENCE = re.compile(r"(?P<file>tests/[\w/]+\.py)(?:::(?P<name>\w+))?|(?<![\w:])::(?P<more>\w+)")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _cells(text: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of every table cell and every other line of ``text``."""
    cells = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("|"):
            cells.extend((number, cell) for cell in _CELL_SPLIT.split(line))
        else:
            cells.append((number, line))
    return cells


def named_tests(text: str) -> list[tuple[int, str, str | None]]:
    """Every ``(line, file, function or None)`` a page names, continuations resolved."""
    refs: list[tuple[int, str, str | None]] = []
    for number, cell in _cells(text):
        current = None
        for m in _REFERENCE.finditer(cell):
            if m.group("file"):
                current = m.group("file")
                refs.append((number, current, m.group("name")))
            elif current is None:
                raise AssertionError(f"line {number}: '::{m.group('more')}' follows no test file in its cell")
            else:
                refs.append((number, current, m.group("more")))
    return refs


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}


def _commands() -> dict[str, set[str]]:
    """The options of every ``dsvm`` subcommand, from the CLI's own parser."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {verb: {s for a in p._actions for s in a.option_strings} for verb, p in sub.choices.items()}


def _first_code_block(text: str) -> list[str]:
    m = re.search(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    assert m, "README.md has no code block"
    return [line for line in m.group(1).splitlines() if line.strip()]


def doc_sources() -> list[Path]:
    """The documentation's Markdown and reST sources (not what the build writes)."""
    return sorted(path for path in [*DOCS.rglob("*.md"), *DOCS.rglob("*.rst")]
                  if not set(path.relative_to(DOCS).parts) & set(_BUILT))


def test_every_test_the_readme_and_the_docs_name_exists():
    refs, missing = 0, []
    for page in [README, *doc_sources()]:
        for number, file, name in named_tests(page.read_text(encoding="utf-8")):
            refs += 1
            path = REPO / file
            where = f"{page.relative_to(REPO)}:{number}"
            if not path.is_file():
                missing.append(f"{where}: {file} does not exist")
            elif name is not None and name not in _test_functions(path):
                missing.append(f"{where}: {file} defines no test {name}")
    assert not missing, "\n".join(missing)
    reliability = named_tests((DOCS / "user_guide" / "reliability.md").read_text(encoding="utf-8"))
    assert len(reliability) > 50, "the reliability page's table names its tests"
    assert refs >= len(reliability)


def test_a_wrong_node_id_is_caught():
    text = ("| a | b | `tests/test_readme.py::test_every_test_the_readme_names_exists`, `::test_no_such_test` |\n"
            "see `tests/test_readme.py::test_a_wrong_node_id_is_caught`\n")
    refs = named_tests(text)
    assert refs == [(1, "tests/test_readme.py", "test_every_test_the_readme_names_exists"),
                    (1, "tests/test_readme.py", "test_no_such_test"),
                    (2, "tests/test_readme.py", "test_a_wrong_node_id_is_caught")]
    assert "test_no_such_test" not in _test_functions(REPO / "tests/test_readme.py")
    with pytest.raises(AssertionError, match="follows no test file"):
        named_tests("| `::test_orphan` | x |")


def test_the_first_code_block_installs_runs_the_demo_and_runs_the_tests():
    lines = _first_code_block(README.read_text(encoding="utf-8"))
    assert len(lines) == 2, lines
    demo, tests = lines
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    m = re.fullmatch(r'python3 -m venv \.venv && \.venv/bin/pip install "\.\[([\w,-]+)\]" && \.venv/bin/dsvm demo',
                     demo)
    assert m, demo
    assert set(m.group(1).split(",")) <= set(extras), m.group(1)
    assert project["scripts"].get("dsvm") == "dsvm.app.cli:main"
    assert "demo" in _commands()

    m = re.fullmatch(r'python3 -m venv \.venv && \.venv/bin/pip install -e "\.\[([\w,-]+)\]" && '
                     r"\.venv/bin/python -m pytest", tests)
    assert m, tests
    assert m.group(1) == "test" and "test" in extras
    # CI runs the same test command
    assert re.search(r"^python -m pytest\b", (REPO / ".ci/run").read_text(encoding="utf-8"), flags=re.M)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _check_commands(text: str, where: str) -> set[str]:
    """Every ``dsvm VERB`` line and every ``--option`` of ``text`` is in the CLI's parser; the options."""
    commands = _commands()
    verbs = set(re.findall(r"^dsvm (\w+)", text, flags=re.M))
    assert verbs and verbs <= set(commands), (where, verbs - set(commands))
    known = set().union(*commands.values())
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
    assert options <= known, (where, sorted(options - known))
    return options


def test_the_commands_and_options_the_readme_and_the_docs_show_exist():
    """The README's command section, the CLI page and the getting-started page use only the CLI's verbs and options."""
    _check_commands(_section(README.read_text(encoding="utf-8"), "## The `dsvm` command"), "README.md")
    cli_options = _check_commands((DOCS / "user_guide" / "cli.md").read_text(encoding="utf-8"), "cli.md")
    assert len(cli_options) > 30, "the CLI page describes the options"
    _check_commands((DOCS / "getting_started.md").read_text(encoding="utf-8"), "getting_started.md")


def test_a_wrong_option_is_caught():
    with pytest.raises(AssertionError, match="--no-such-option"):
        _check_commands("dsvm train d.zarr --no-such-option 3\n", "x")
    with pytest.raises(AssertionError, match="fly"):
        _check_commands("dsvm fly d.zarr\n", "x")


def test_the_readme_quickstart_runs(tmp_path):
    """The README's first Python block defines its data, fits, prints a test accuracy well above chance and saves."""
    m = re.search(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    assert m, "README.md has no Python quickstart"
    code = m.group(1)
    assert len(code.strip().splitlines()) <= 12, "the quickstart is about ten lines"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    accuracy = re.search(r"test accuracy (\d\.\d+)", done.stdout)
    assert accuracy, done.stdout
    assert float(accuracy.group(1)) > 0.9, done.stdout
    saved = list(tmp_path.glob("*.npz"))
    assert saved, "the quickstart saves its model"


def test_the_readmes_links_lead_to_files_that_exist():
    text = README.read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and not t.startswith("#")]
    assert len(links) > 10
    missing = [t for t in links if not (REPO / t.split("#")[0]).exists()]
    assert not missing, missing
