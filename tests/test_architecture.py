"""The package's import structure: layers, no cycles, no private names across modules, Dask in its place.

Parses every module of dsvm/ with ast (nothing is imported), resolves relative
imports, and checks the rules of ARCHITECTURE.md.  Function-level imports count
as edges like top-level ones: a cycle hidden inside a function is still a cycle.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dsvm"

# unit -> units it may import (besides itself).  A unit is a sub-package or a root module.
LEAF = {"dsvm.version", "dsvm.options", "dsvm.exceptions", "dsvm.config", "dsvm.blas", "dsvm.checks",
        "dsvm.signals", "dsvm.lazy", "dsvm.user_files", "dsvm.progress"}
ALLOWED = {
    "dsvm.version": set(), "dsvm.options": set(), "dsvm.exceptions": set(),
    "dsvm.config": set(), "dsvm.blas": set(), "dsvm.checks": set(), "dsvm.signals": set(), "dsvm.lazy": set(),
    "dsvm.user_files": set(), "dsvm.progress": set(),
    "dsvm.blocks": LEAF,
    "dsvm.io": LEAF | {"dsvm.blocks"},
    "dsvm.approx": LEAF | {"dsvm.blocks"},
    "dsvm.problems": LEAF | {"dsvm.blocks", "dsvm.approx"},
    "dsvm.solvers": {"dsvm.blas", "dsvm.options", "dsvm.checks", "dsvm.exceptions"},
    "dsvm.reference": LEAF | {"dsvm.approx"},
    "dsvm.svm": LEAF | {"dsvm.blocks", "dsvm.io", "dsvm.approx", "dsvm.problems", "dsvm.solvers"},
    "dsvm.model_selection": LEAF | {"dsvm.blocks", "dsvm.approx", "dsvm.problems", "dsvm.solvers", "dsvm.svm"},
    "dsvm.experiments": LEAF | {"dsvm.blocks", "dsvm.io", "dsvm.approx", "dsvm.problems", "dsvm.solvers",
                                "dsvm.svm", "dsvm.model_selection", "dsvm.reference"},
    "dsvm.app": None,  # anything
    "dsvm": None,      # the package's lazy re-export table
    "dsvm.__main__": {"dsvm.app"},  # python -m dsvm
}
DASK = ("dask", "distributed", "dask_ml", "dask_jobqueue", "dask_kubernetes", "dask_gateway", "zarr")
DASK_UNITS = {"dsvm.blocks", "dsvm.io", "dsvm.app"}          # may import Dask
DASK_CONFIG_ONLY = {"dsvm.config"}                           # may import dask.config, nothing else of Dask
OPTIONAL = ("matplotlib", "clarabel", "dask_jobqueue", "dask_kubernetes", "dask_gateway", "sklearnex", "pyarrow", "pandas",
            "skl2onnx", "onnx", "onnxruntime", "dask_ml")
# all app/cli.py may import at top level
LIGHT_CLI = {"dsvm.version", "dsvm.options", "dsvm.exceptions", "dsvm.signals", "dsvm.progress", "dsvm.lazy"}
ROWBLOCK_ATTRIBUTES = {"blocks", "array", "delayed_blocks", "block_futures", "split_blocks", "spill_to_zarr"}
ROWBLOCK_CLASSES = {"InMemoryBlocks", "DaskBlocks"}
LIBRARY_NAMES = {"dask", "da", "np", "numpy", "zarr"}  # dask.array, np.array: not RowBlocks attributes
MAX_LINES = 600
EARNED = {}  # "dsvm/x.py": "why"


@dataclass(frozen=True)
class Import:
    module: str      # importing module
    path: str        # file:line
    target: str      # imported dsvm module (resolved) or external top-level name
    names: tuple     # names taken with `from ... import`
    deferred: bool   # inside a function


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def unit_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "dsvm"
    sub = ".".join(parts[:2])
    return sub


def _imports(module: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    out = []

    def visit(node, deferred):
        for child in ast.iter_child_nodes(node):
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(child, 'lineno', 0)}"
            if isinstance(child, ast.Import):
                for a in child.names:
                    out.append(Import(module, where, a.name, (), deferred))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module
                for a in child.names:  # `from pkg import submodule` is an edge to the submodule
                    full = f"{target}.{a.name}"
                    out.append(Import(module, where, full if full in MODULES else target, (a.name,), deferred))
            visit(child, inner)

    visit(tree, False)
    return out


IMPORTS = [imp for m, p in MODULES.items() for imp in _imports(m, p)]
INTERNAL = [i for i in IMPORTS if i.target.split(".")[0] == "dsvm"]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10_000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                found.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            strong(v)
    return found


def test_no_import_cycle_between_modules():
    edges = {m: set() for m in MODULES}
    for i in INTERNAL:
        if i.target in MODULES and i.target != i.module:
            edges[i.module].add(i.target)
    assert _cycles(edges) == []


def test_no_import_cycle_between_layers():
    edges: dict[str, set[str]] = {}
    for i in INTERNAL:
        a, b = unit_of(i.module), unit_of(i.target)
        if a != b and a not in ("dsvm",) and b != "dsvm":
            edges.setdefault(a, set()).add(b)
    assert _cycles(edges) == []


def test_no_module_imports_the_package_root():
    """``from . import __version__`` from inside the package runs dsvm/__init__: a cycle in waiting."""
    bad = [f"{i.path}: {i.module} imports dsvm" for i in INTERNAL if i.target == "dsvm" and i.module != "dsvm"]
    assert bad == []


def test_layers_import_only_the_layers_below():
    bad = []
    for i in INTERNAL:
        a, b = unit_of(i.module), unit_of(i.target)
        allowed = ALLOWED.get(a, set())
        if a != b and allowed is not None and b not in allowed:
            bad.append(f"{i.path}: {a} may not import {i.target}")
    assert bad == []


def test_other_layers_are_reached_through_their_package():
    """Across layers import ``from ..svm import x``, never from a layer's modules (its public surface
    is its __init__); inside a layer import sibling modules, never the layer's own __init__."""
    bad = []
    for i in INTERNAL:
        a, b = unit_of(i.module), unit_of(i.target)
        if a in ("dsvm", "dsvm.__main__") or b == "dsvm" or b in LEAF:
            continue
        if a != b and i.target != b:
            bad.append(f"{i.path}: {i.module} imports {i.target}; import from {b}")
        if a == b and i.target == b and i.module != b and MODULES[i.module].name != "__init__.py":
            bad.append(f"{i.path}: {i.module} imports its own package {b}; import the sibling module")
    assert bad == []


def test_no_private_name_crosses_a_module():
    bad = []
    for i in INTERNAL:
        private_module = any(part.startswith("_") and not part.startswith("__") for part in i.target.split("."))
        if private_module and unit_of(i.module) != unit_of(i.target):
            bad.append(f"{i.path}: {i.module} imports private module {i.target}")
        for name in i.names:  # inside a layer private modules and names are shared (scikit-learn's rule)
            if name.startswith("_") and not name.startswith("__") and unit_of(i.module) != unit_of(i.target):
                bad.append(f"{i.path}: {i.module} imports private name {name} from {i.target}")
    # `module._name` on an imported dsvm module, and `obj._name` on anything but self / cls (os._exit is the
    # standard library's documented exit without the interpreter's exit: dsvm.signals' deadline needs it)
    for m, p in MODULES.items():
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and not (isinstance(node.value, ast.Name) and (node.value.id, node.attr) == ("os", "_exit"))
                    and not (isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") in ("type", "super"))):
                bad.append(f"{p.relative_to(PACKAGE.parent)}:{node.lineno}: {m} reaches {node.attr}")
    assert bad == []


def test_dask_and_zarr_only_in_blocks_io_and_app():
    bad = []
    for i in IMPORTS:
        top = i.target.split(".")[0]
        if top not in DASK:
            continue
        unit = unit_of(i.module)
        if unit in DASK_UNITS or (i.module in DASK_CONFIG_ONLY and i.target == "dask.config"):
            continue
        bad.append(f"{i.path}: {i.module} imports {i.target}")
    assert bad == []


def test_optional_dependencies_are_imported_inside_functions():
    bad = [f"{i.path}: {i.target} at module level" for i in IMPORTS
           if i.target.split(".")[0] in OPTIONAL and not i.deferred]
    assert bad == []


def test_cli_module_imports_only_light_modules_at_top_level():
    """``dsvm --help`` must not pay for scikit-learn, Dask arrays or the model layers."""
    bad = [f"{i.path}: {i.target}" for i in IMPORTS
           if i.module in ("dsvm.app.cli", "dsvm", "dsvm.app", "dsvm.__main__") and not i.deferred
           and i.target.split(".")[0] == "dsvm"
           and i.target not in LIGHT_CLI | {"dsvm.config", "dsvm.app", "dsvm.app.cli"}]
    assert bad == []


def test_cli_import_loads_no_heavy_library():
    """The runtime side of the previous test: what ``dsvm --help`` pays for (no timing asserted)."""
    code = ("import sys, dsvm.app.cli; print(sorted(m for m in ('sklearn', 'scipy', 'dask.array', "
            "'distributed', 'zarr') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]"


def test_row_blocks_internals_stay_in_blocks():
    bad = []
    for m, p in MODULES.items():
        if unit_of(m) == "dsvm.blocks":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in ROWBLOCK_ATTRIBUTES
                    and not (isinstance(node.value, ast.Name) and node.value.id in LIBRARY_NAMES)):
                bad.append(f"{p.relative_to(PACKAGE.parent)}:{node.lineno}: {m} uses .{node.attr}")
            elif isinstance(node, ast.Name) and node.id in ROWBLOCK_CLASSES:
                bad.append(f"{p.relative_to(PACKAGE.parent)}:{node.lineno}: {m} uses {node.id}")
    assert bad == []


def test_modules_stay_small():
    big = {str(p.relative_to(PACKAGE.parent)): n for p in MODULES.values()
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert {k: v for k, v in big.items() if k not in EARNED} == {}


# --- a small public surface (issue 26): a package's __init__ exports what users or other layers need ----------
MAX_EXPORTS = 12
WIDE = {  # package -> why it exports more than MAX_EXPORTS names (each name is still used outside the package)
    "dsvm.blocks": "the one interface to rows and to the cluster: every training layer passes over rows, sizes "
                   "blocks and waits on workers through it (only blocks/ knows how rows are held)",
    "dsvm.io": "datasets for users, plus the one safe-replace routine and the one archive format that every "
               "writer in svm/ and app/ goes through",
    "dsvm.approx": "kernels, landmarks, the Nyström map and the scaling, each also used by svm/ and by "
                   "model_selection/, whose search rebuilds the pieces of a fit",
    "dsvm.svm": "the estimators, model files and exports for users, plus the estimator functions that "
                "model_selection/ and app/ call instead of its private methods",
    "dsvm.experiments": "one name per experiment, dataset and setting that the paper driver (app/) runs",
}
# names no other layer imports but users do (README, docs, benchmarks); dsvm/__init__'s table counts too
USER_NAMES = {
    "dsvm.io": {"write_dataset", "split_dataset", "make_classification_zarr", "Dataset"},
    "dsvm.solvers": {"semismooth_newton", "choose_hessian"},
    "dsvm.svm": {"NystroemSVC", "NystroemSVR", "PegasosSVC", "save_model", "load_model", "evaluate",
                 "export_onnx", "to_sklearn", "to_onnx"},
    "dsvm.model_selection": {"NystroemSVCCV", "DEFAULT_GRID"},
    # the references users check solvers against (the user guide's table; the benchmarks)
    "dsvm.reference": {"primal_qp", "subgradient_descent", "exact_squared_hinge", "hinge_objective", "binary_labels",
                       "PrimalQPResult", "DualQPResult", "SubgradientResult", "SquaredHingeResult"},
}
# the modules of a sub-package a user may import by name; every other module is _private.py
PUBLIC_MODULES = {
    "dsvm.app.cli": "the dsvm command (pyproject's entry point, python -m dsvm.app.cli)",
    "dsvm.app.cluster": "the cluster specs: batch scripts import WORKER_MALLOC_ENV / connect from it",
}
PACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py" and m != "dsvm")


def exports(package: str) -> list[str]:
    """A package's ``__all__``: a list literal, or the names of its lazy ``_MODULES`` table."""
    tree = ast.parse(MODULES[package].read_text())
    table, names = None, []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "_MODULES":
                table = ast.literal_eval(node.value)
            elif node.targets[0].id == "__all__":
                names = ast.literal_eval(node.value) if isinstance(node.value, ast.List) else None
    return [n for group in table.values() for n in group] if names is None else names


def _top_level_table() -> dict:
    for node in ast.parse(MODULES["dsvm"].read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_PUBLIC":
            return ast.literal_eval(node.value)
    raise AssertionError("dsvm/__init__.py has no _PUBLIC table")


def _used_by_other_layers() -> dict[str, set[str]]:
    """package -> the names other layers take from it: ``from ..pkg import x`` or ``pkg.x`` on an imported package."""
    used: dict[str, set[str]] = {}
    for i in INTERNAL:
        if unit_of(i.module) != unit_of(i.target) and i.target in PACKAGES:
            used.setdefault(i.target, set()).update(n for n in i.names if f"dsvm.{n}" != i.target)
    for m, p in MODULES.items():
        aliases = {f"dsvm.{n}": n for i in INTERNAL if i.module == m and i.target in PACKAGES
                   for n in i.names if f"dsvm.{n}" == i.target}
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                for package, alias in aliases.items():
                    if node.value.id == alias and unit_of(m) != package:
                        used.setdefault(package, set()).add(node.attr)
    return used


def test_every_package_exports_a_small_surface():
    too_many = {p: len(exports(p)) for p in PACKAGES if len(exports(p)) > MAX_EXPORTS and p not in WIDE}
    assert too_many == {}
    assert {p for p in WIDE if len(exports(p)) <= MAX_EXPORTS} == set()  # an exception no longer needed goes


def test_exported_names_are_used_by_users_or_other_layers():
    """Nothing is exported 'just in case': each name of an ``__all__`` is imported by another layer, is one
    of ``import dsvm``'s names, or is one users name (USER_NAMES); the rest stays package-private."""
    used, top = _used_by_other_layers(), _top_level_table()
    unused = {p: sorted(set(exports(p)) - used.get(p, set()) - USER_NAMES.get(p, set())
                        - {n for n, where in top.items() if where == p}) for p in PACKAGES}
    assert {p: names for p, names in unused.items() if names} == {}


def test_other_layers_use_only_exported_names():
    used = _used_by_other_layers()
    bad = {p: sorted(names - set(exports(p))) for p, names in used.items() if names - set(exports(p))}
    assert bad == {}


def test_modules_inside_packages_are_private():
    """A sub-package's modules are ``_name.py`` (usable anywhere inside the package, never from outside),
    except the few a user imports by module name."""
    public = sorted(m for m, p in MODULES.items() if m.count(".") == 2 and p.name != "__init__.py"
                    and not m.rsplit(".", 1)[1].startswith("_"))
    assert public == sorted(PUBLIC_MODULES)


def test_top_level_names_come_from_the_exports():
    """``import dsvm``'s names are promises to users: each is exported by the package it is loaded from."""
    bad = {n: where for n, where in _top_level_table().items()
           if where in PACKAGES and n not in exports(where)}
    assert bad == {}


TESTS = Path(__file__).resolve().parent
# top-level test files that check the repository, not one module
REPO_CHECKS = {"test_readme", "test_docs", "test_architecture", "test_public_api", "test_docstring_examples"}
SCENARIOS = "integration"  # tests/integration/: scenario and end-to-end tests that cross layers
MIN_MIRRORED = 66  # modules with a mirror test file when the rule came in (issue 26); may only grow


def _module_names(folder: Path) -> dict[str, str]:
    """The names a test file may mirror in ``folder`` (its modules, the leading underscore dropped) -> module."""
    prefix = module_name(folder / "__init__.py")
    return {p.stem.removeprefix("_"): f"{prefix}.{p.stem}" for p in folder.glob("*.py")
            if p.name not in ("__init__.py", "__main__.py")}


def _mirrored(stem: str, names: dict[str, str]) -> str | None:
    """The module ``test_<name>.py`` or ``test_<name>_<aspect>.py`` mirrors (the longest name that fits), or None."""
    bare = stem.removeprefix("test_")
    fits = [name for name in names if bare == name or bare.startswith(name + "_")]
    return names[max(fits, key=len)] if fits else None


def _test_homes() -> dict[Path, str | None]:
    """Every test file outside tests/integration/ -> the module (or package) it mirrors, or None."""
    homes: dict[Path, str | None] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        folder = path.parent.relative_to(TESTS)
        if folder.parts[:1] == (SCENARIOS,):
            continue
        package = PACKAGE.joinpath(*folder.parts)
        if not (package / "__init__.py").exists():
            homes[path] = None
            continue
        names = _module_names(package)
        if folder.parts:
            names[folder.parts[-1]] = module_name(package / "__init__.py")  # test_<pkg>.py: the package itself
        homes[path] = _mirrored(path.stem, names)
    return homes


def test_tests_mirror_the_modules():
    """tests/<pkg>/test_<module>[_<aspect>].py for dsvm/<pkg>/_<module>.py, tests/test_<m>.py for dsvm/<m>.py.

    What tests no single module (a command run end to end, a real cluster, a signal to a
    whole process, a scenario across layers) lives in tests/integration/; the few checks
    of the repository itself (README, docs, this file) are named in REPO_CHECKS.
    """
    homes = _test_homes()
    astray = [str(p.relative_to(TESTS)) for p, m in homes.items() if m is None and p.stem not in REPO_CHECKS]
    assert not astray, f"test files that mirror no module of dsvm/ (rename, or move to tests/{SCENARIOS}/): {astray}"
    mirrored = {m for m in homes.values() if m is not None and MODULES[m].name != "__init__.py"}
    modules = [m for m, p in MODULES.items() if p.name not in ("__init__.py", "__main__.py")]
    print(f"{len(mirrored)} of {len(modules)} modules have a mirror test file")
    assert len(mirrored) >= MIN_MIRRORED, f"only {len(mirrored)} modules have a mirror test file (was {MIN_MIRRORED})"
