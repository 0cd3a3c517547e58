"""The package version (a module of its own: importing it loads nothing else of dsvm)."""

__version__ = "0.1.0"
