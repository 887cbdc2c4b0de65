"""The pytest adapter: options, collection, items, fixtures, scheduling glue, the xdist
transport and the hooks that hand skill summaries to the reporters.

The ``pytest11`` entry point is :mod:`pytest_openkata.plugin.hooks`.

Internal: its names may change between releases; the public API is :mod:`pytest_openkata`.
"""

__all__: list[str] = []
