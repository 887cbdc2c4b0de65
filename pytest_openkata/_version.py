"""The installed distribution's version (``0.0.0`` from a source tree not installed)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pytest-openkata")
except PackageNotFoundError:
    __version__ = "0.0.0"
