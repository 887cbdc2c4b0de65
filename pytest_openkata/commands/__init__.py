"""Command-line tools around a run: scaffolding, the catalogue's effectiveness, and the drop-in
``openkata-eval`` command.

Internal: its names may change between releases; the commands themselves are the interface.
"""

__all__: list[str] = []
