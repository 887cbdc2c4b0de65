"""The built-in local model and its sandbox: tooling around a run, not part of it.

``python -m pytest_openkata.localmodel`` (:mod:`pytest_openkata.local.model`) builds, serves
and uses SmolLM2-135M through llama-server; :mod:`pytest_openkata.local.sandbox` gives it a
Docker engine holding an image with Codex; :mod:`pytest_openkata.local.steps` holds what both
share: their long steps, the locks other runs hold, the cache folder and the logged commands.
The imports run one way, model → sandbox → steps, and the plugin imports none of them.

Internal: its names may change between releases; the command is the interface.
"""

__all__: list[str] = []
