"""Command-line tools around a run: scaffolding, the catalogue's effectiveness, and the drop-in
``openkata-eval`` command."""
