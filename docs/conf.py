"""Sphinx configuration of dsvm's documentation (``sphinx-build -W docs docs/_build/html``)."""

import importlib
import os
import re

from docutils import nodes

os.environ.setdefault("MPLBACKEND", "Agg")

import dsvm

project = "dsvm"
author = "dsvm developers"
copyright = "2026, dsvm developers"
release = dsvm.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# blocks without a language (formulas, folder layouts, output) are shown as they are
highlight_language = "none"
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "**.zip", "examples/README.txt"]

# MyST: the user guide is Markdown moved from the README; headings get anchors for links
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# API reference: one page per public name; a class's page documents its own members and those of
# dsvm's base classes (the template in _templates/autosummary/class.rst), not scikit-learn's mixins
autosummary_generate = True
autodoc_typehints = "none"
autodoc_member_order = "groupwise"
toc_object_entries_show_parents = "hide"  # the page's table of contents: "fit()", not "NystroemSVC.fit()"
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",  # plot_1_..., plot_2_...: a first fit first
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "abort_on_example_error": True,
    "doc_module": ("dsvm",),
    "backreferences_dir": "generated/backreferences",
    "inspect_global_variables": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"dsvm {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_show_sourcelink = False
html_static_path = ["_static"]
html_css_files = ["dsvm.css"]
# pages without sub-pages have no section navigation: no left sidebar there
html_sidebars = {page: [] for page in ("index", "getting_started", "performance", "paper", "architecture")}


# cluster/README.md is included in user_guide/clusters.md: its links to the spec files beside it
# (`local.yaml`, `slurm-batch.sh`, ...) are rewritten to be relative to the page that includes it,
# where MyST makes them downloads of those files.
_CLUSTER_FILE_LINK = re.compile(r"\]\((?P<name>[\w.-]+\.(?:yaml|sh|py))\)")


def _cluster_links(app, relative_path, parent_docname, content):
    if relative_path.as_posix().endswith("cluster/README.md"):
        content[0] = _CLUSTER_FILE_LINK.sub(r"](../../cluster/\g<name>)", content[0])


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods: documented by scikit-learn, not here."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def _import(dotted):
    """The object a dotted name names, or None."""
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
            return None
        return obj
    return None


def _resolve_reference(app, env, node, contnode):
    """Cross-references Sphinx leaves unresolved (shown bold and unlinked):

    * ``dsvm.<package>.<Name>`` of a name the package root exports (docstrings name ``dsvm.io.Dataset``,
      the reference documents it as ``dsvm.Dataset``) links to the root name's page;
    * a scikit-learn class or function (``sklearn.svm.SVC``) links to scikit-learn's page for it
      (the build runs offline: no intersphinx inventory).
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if target.startswith("dsvm.") and target.count(".") >= 2:
        name = target.rsplit(".", 1)[1]
        if name in dsvm.__all__ and _import(target) is getattr(dsvm, name):
            py = env.get_domain("py")
            return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], f"dsvm.{name}", node,
                                   contnode)
    if target.startswith("sklearn.") and node["reftype"] in ("class", "func", "obj") and _import(target):
        uri = f"https://scikit-learn.org/stable/modules/generated/{target}.html"
        reference = nodes.reference("", "", internal=False, refuri=uri, reftitle=f"(in scikit-learn) {target}")
        reference += contnode
        return reference
    return None


def _mark_long_literals(app, doctree):
    """Inline code holding a word too long for a narrow column (a test id, a path) may break inside it
    (``code.dsvm-long`` in _static/dsvm.css); shorter code stays whole on its line."""
    for literal in doctree.findall(nodes.literal):
        if any(len(word) > 32 for word in literal.astext().split()):
            literal["classes"].append("dsvm-long")


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
    app.connect("include-read", _cluster_links)
    app.connect("missing-reference", _resolve_reference)
    app.connect("doctree-read", _mark_long_literals)
