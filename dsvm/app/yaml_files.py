"""Reading the YAML files users give dsvm (cluster specs, pipelines): data, never code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

__all__ = ["read_yaml_file"]


def read_yaml_file(path: str | os.PathLike, error: type[Exception], what: str) -> Any:
    """The document of a YAML file (``yaml.safe_load``: no Python objects), or ``error`` with one line
    naming the file: ``"<path>: <what> file not found"`` or ``"<path>: not valid YAML (...)"``."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: {what} file not found")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML ({exc})") from None
