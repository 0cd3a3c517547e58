"""The documentation's sources against the package: the API reference lists every public name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import dsvm

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _api_names() -> set[str]:
    """The names the API page's ``autosummary`` tables list (one indented name per line)."""
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    names = set()
    for block in re.findall(r"^\.\. autosummary::\n((?:   .*\n|\n)+)", text, flags=re.M):
        names |= {line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith(":")}
    return names


def test_the_api_reference_lists_every_public_name():
    public = set(dsvm.__all__) - {"__version__"}
    listed = _api_names()
    assert public - listed == set(), f"public names missing from docs/api.rst: {sorted(public - listed)}"
    assert listed - public == set(), f"docs/api.rst lists names dsvm does not export: {sorted(listed - public)}"


def test_every_user_guide_page_is_in_its_toctree():
    index = (DOCS / "user_guide" / "index.rst").read_text(encoding="utf-8")
    pages = {p.stem for p in (DOCS / "user_guide").glob("*.md")}
    assert pages and all(re.search(rf"^   {page}$", index, flags=re.M) for page in pages), pages


def test_every_package_file_the_pages_name_exists():
    """A ``dsvm/<path>.py`` the README or a docs page names is a file of the package (modules get renamed)."""
    repo = DOCS.parent
    pages = [repo / "README.md", *DOCS.glob("*.md"), *DOCS.glob("user_guide/*.md")]
    named = {(page.name, path) for page in pages
             for path in re.findall(r"dsvm/[\w/]+\.py", page.read_text(encoding="utf-8"))}
    assert named, "the pages name some of the package's files"
    missing = sorted(f"{page}: {path}" for page, path in named if not (repo / path).is_file())
    assert not missing, missing


def test_the_python_blocks_of_the_getting_started_and_kernels_pages_run(tmp_path):
    """The pages' self-contained Python blocks run as shown (each defines its own data)."""
    blocks = []
    for page in ("getting_started.md", "user_guide/landmarks.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        blocks += [(page, code) for code in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)]
    assert len(blocks) >= 2
    for page, code in blocks:
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (page, done.stderr[-2000:])
    assert (tmp_path / "moons.npz").is_file(), "the getting-started fit saves its model"
    assert (tmp_path / "moons.csv").read_text().count("\n") == 5000, "the command-line fit's data are written"


def test_every_dotted_dsvm_name_the_pages_give_resolves():
    """A ``dsvm.<package>.<name>`` the README or a page names is importable (names move when modules are renamed)."""
    import importlib

    repo = DOCS.parent
    pages = [repo / "README.md", *DOCS.glob("*.md"), *DOCS.glob("user_guide/*.md"), *DOCS.glob("*.rst")]
    named = {(page.name, name) for page in pages
             for name in re.findall(r"`(dsvm(?:\.\w+)+)(?=[`(\[])", page.read_text(encoding="utf-8"))}
    assert len(named) > 5, named
    missing = []
    for page, dotted in sorted(named):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(f"{page}: {dotted}")
            break
        else:
            missing.append(f"{page}: {dotted}")
    assert not missing, missing


def test_the_configuration_table_lists_every_dask_config_key():
    """Every ``dsvm.*`` key of dask.config that dsvm defines is a row of the configuration page, and every row
    is a key dsvm defines."""
    from dsvm.config import DEFAULTS

    def keys(tree, prefix="dsvm"):
        for name, value in tree.items():
            if isinstance(value, dict):
                yield from keys(value, f"{prefix}.{name}")
            else:
                yield f"{prefix}.{name}"

    text = (DOCS / "user_guide" / "configuration.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(dsvm\.[\w.-]+)` \|", text, flags=re.M))
    assert rows == set(keys(DEFAULTS)), (sorted(set(keys(DEFAULTS)) - rows), sorted(rows - set(keys(DEFAULTS))))
