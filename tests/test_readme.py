"""README.md against the repository: every test it names exists, and its first two commands are true.

The README names tests as ``tests/<path>.py::<function>``; in a table cell (or
a line of prose) a bare ``::<function>`` after such a name refers to the same
file.  Each named file must exist and define that test function at module
level (read with :mod:`ast`, nothing imported).
"""

from __future__ import annotations

import argparse
import ast
import re
import tomllib
from pathlib import Path

import pytest

from dsvm.app.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

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
    """Every ``(line, file, function or None)`` the README names, continuations resolved."""
    refs: list[tuple[int, str, str | None]] = []
    for number, cell in _cells(text):
        current = None
        for m in _REFERENCE.finditer(cell):
            if m.group("file"):
                current = m.group("file")
                refs.append((number, current, m.group("name")))
            elif current is None:
                raise AssertionError(f"README.md:{number}: '::{m.group('more')}' follows no test file in its cell")
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


def test_every_test_the_readme_names_exists():
    refs = named_tests(README.read_text(encoding="utf-8"))
    assert len(refs) > 50, "the README's reliability table names its tests"
    missing = []
    for number, file, name in refs:
        path = REPO / file
        if not path.is_file():
            missing.append(f"README.md:{number}: {file} does not exist")
        elif name is not None and name not in _test_functions(path):
            missing.append(f"README.md:{number}: {file} defines no test {name}")
    assert not missing, "\n".join(missing)


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


def test_the_commands_and_options_the_readme_shows_exist():
    """Every ``dsvm VERB`` and every ``--option`` of the README's command section is in the CLI's parser."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The `dsvm` command"):text.index("\n## ", text.index("## The `dsvm` command") + 1)]
    commands = _commands()
    verbs = set(re.findall(r"^dsvm (\w+)", section, flags=re.M))
    assert verbs and verbs <= set(commands), verbs - set(commands)
    known = set().union(*commands.values())
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", section))
    assert len(options) > 30
    assert options <= known, sorted(options - known)
