"""Sandboxed scenarios: an environment interface, its providers and the workspace diff."""
