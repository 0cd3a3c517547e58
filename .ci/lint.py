"""Lint step of .ci/run: ruff with the rules in pyproject.toml, then three baselines that may only shrink.

Functions over complexity 12 carry ``# noqa: C901``; functions over 80 lines, and over 60 lines (each with
a comment above it saying why), are listed by name; the step fails when a count exceeds its baseline below.
Lower a baseline when a change removes one.
A function's length is its lines without its docstring: a reader holds the code, and a numpydoc
docstring with an Examples section (which every public name has) should not count against it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["dsvm", "tests", "benchmarks", "docs"]
MAX_COMPLEX_NOQA = 2   # functions of complexity > 12 (each marked `# noqa: C901`)
MAX_OVER_80_LINES = 0  # functions longer than 80 lines (docstring excluded) in dsvm/
MAX_OVER_60_LINES = 2  # functions longer than 60 lines in dsvm/, each with a comment above it saying why


def long_functions(package: Path, limit: int) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if ast.get_docstring(node, clean=False) is not None:
                    length -= node.body[0].end_lineno - node.body[0].lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def _says_why(path: Path, name_and_line: str) -> bool:
    """Whether the line above the function (above its decorators) is a comment."""
    lineno = int(name_and_line.split(":", 2)[1].split()[0])
    source = path.read_text().splitlines()
    tree = ast.parse("\n".join(source))
    node = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.lineno == lineno)
    first = min([lineno] + [d.lineno for d in node.decorator_list])
    return first >= 2 and source[first - 2].strip().startswith("#")


def main() -> int:
    paths = [p for p in PATHS if (ROOT / p).exists()]
    rc = subprocess.run([sys.executable, "-m", "ruff", "check", *paths], cwd=ROOT).returncode
    complex_noqa = sum(p.read_text().count("noqa: C901") for d in paths for p in (ROOT / d).rglob("*.py"))
    over_80 = long_functions(ROOT / "dsvm", 80)
    over_60 = long_functions(ROOT / "dsvm", 60)
    print(f"lint: {complex_noqa} functions over complexity 12 (baseline {MAX_COMPLEX_NOQA}), "
          f"{len(over_80)} over 80 lines (baseline {MAX_OVER_80_LINES}), {len(over_60)} over 60 lines "
          f"(baseline {MAX_OVER_60_LINES})")
    if complex_noqa > MAX_COMPLEX_NOQA:
        print("lint: more `# noqa: C901` than the baseline: split the new complex function")
        rc = rc or 1
    if len(over_80) > MAX_OVER_80_LINES:
        print("lint: more functions over 80 lines than the baseline:\n  " + "\n  ".join(over_80))
        rc = rc or 1
    silent = [f for f in over_60 if not _says_why(ROOT / f.split(":", 1)[0], f)]
    if silent:
        print("lint: functions over 60 lines without a comment above them saying why:\n  " + "\n  ".join(silent))
        rc = rc or 1
    if len(over_60) > MAX_OVER_60_LINES:
        print("lint: more functions over 60 lines than the baseline (split one, or say why above it):\n  "
              + "\n  ".join(over_60))
        rc = rc or 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
