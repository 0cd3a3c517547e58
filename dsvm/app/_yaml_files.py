"""Reading the YAML users give dsvm (cluster specs, pipelines, ``--set`` values): data, never code.

One loader reads all of it, and every problem is one line naming the file (or
the ``--set`` item) and, where the parser knows it, the line and column:

* the file must be a regular file of at most :data:`MAX_YAML_BYTES`
  (:mod:`dsvm.user_files`: a FIFO or a device is refused before any read);
* ``yaml.SafeLoader``'s types only: a tag such as ``!!python/object`` is an error;
* no aliases (``*name``): an alias makes the document a graph, which a
  2 KB file can blow up to billions of nodes ("billion laughs") and which
  every walk over the document (``${...}`` substitution, the key checks)
  would expand; write the value out instead;
* at most :data:`MAX_DEPTH` levels of nesting (the composer recurses per level);
* no key twice in one mapping (YAML forbids it; PyYAML keeps the last one silently, so
  ``{C: 1.0, ..., C: 1000000}`` would train with the second C): the error names the key and both lines;
* numbers written as YAML 1.2 writes them: ``1e10``, ``1E-3`` or ``.5e3`` are floats (YAML 1.1, which
  PyYAML follows, needs a dot and a signed exponent, and reads them as strings); only this loader
  reads them so, PyYAML's own loaders are left as they are;
* the values a constructor refuses (a date such as ``2020-13-45``, an integer
  of thousands of digits) are errors too, never a traceback.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from ..user_files import read_user_file

__all__ = ["read_yaml_file", "parse_yaml", "MAX_YAML_BYTES", "MAX_DEPTH"]

MAX_YAML_BYTES = 2**20  # a pipeline or a cluster spec is a few KiB
MAX_DEPTH = 50


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that dsvm does not accept (an alias, too deep a nesting)."""


# YAML 1.2's core schema floats with an exponent, which YAML 1.1's pattern leaves to strings (the ones
# without an exponent, and `1.5e+3`, it reads already)
_FLOAT_1_2 = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


class _UserLoader(yaml.SafeLoader):
    """``SafeLoader`` without aliases or duplicate keys, with bounded nesting and YAML 1.2's floats."""

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(problem=f"an alias (*{event.anchor}): dsvm's YAML files do not accept aliases (a graph "
                           "of aliases can expand without bound); write the value out", problem_mark=event.start_mark)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _Refused(problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        """The mapping, refused if a key occurs twice in it (merge keys ``<<`` aside, which YAML lets a
        mapping override)."""
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in first:
                    raise _Refused(problem=f"duplicate key {key!r} (first given at line {first[key].line + 1})",
                                   problem_mark=key_node.start_mark)
                first[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


_UserLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, list("-+0123456789."))


def _describe(exc: BaseException) -> str:
    """What went wrong, in one line: ``line L, column C: problem (context)`` where the parser knows the place."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        text = exc.problem or exc.context or type(exc).__name__
        if exc.problem and exc.context:
            text = f"{exc.problem} ({exc.context})"
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return " ".join(f"{where}{text}".split())
    if isinstance(exc, RecursionError):
        return f"nested more than {MAX_DEPTH} levels deep"
    return " ".join(str(exc).split()) or type(exc).__name__


def _load(data: bytes | str) -> Any:
    loader = _UserLoader(data)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _problem(data: bytes | str) -> tuple[Any, str | None]:
    """``(document, None)``, or ``(None, why not)``: a YAML error, a refusal, or a value a constructor refused."""
    try:
        return _load(data), None
    except _Refused as exc:
        return None, _describe(exc)
    except yaml.YAMLError as exc:
        return None, f"not valid YAML ({_describe(exc)})"
    except (ValueError, OverflowError, TypeError, RecursionError) as exc:  # a constructor's refusal
        return None, f"a value YAML cannot hold ({_describe(exc)})"


def parse_yaml(text: str | bytes, error: type[Exception], where: str) -> Any:
    """The value of a YAML text (a ``--set`` value), or ``error``: ``"<where>: <why>"`` in one line."""
    value, problem = _problem(text)
    if problem is not None:
        raise error(f"{where}: {problem}")
    return value


def read_yaml_file(path: str | os.PathLike, error: type[Exception], what: str) -> Any:
    """The document of a YAML file (see the module docstring), or ``error`` with one line naming the file:
    ``"<path>: <what> file not found"``, ``"<path>: not valid YAML (line L, column C: ...)"``, ..."""
    path = Path(path)
    try:
        data = read_user_file(path, f"{what} file", error, MAX_YAML_BYTES)
    except FileNotFoundError:
        raise error(f"{path}: {what} file not found") from None
    except OSError as exc:
        raise error(f"{path}: the {what} file cannot be read ({exc.strerror or exc})") from None
    return parse_yaml(data, error, str(path))
