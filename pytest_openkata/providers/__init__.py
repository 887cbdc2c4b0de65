"""Talking to the outside world behind small protocols: model backends, agent CLIs, sandbox
providers, graders and reporters, one module per provider and one registry per kind
(:mod:`pytest_openkata.infra.registry`).

The built-in providers. Their modules are internal (a provider is used through its registered
name); each kind's package hands on the names of its contract for providers written against
this package.
"""

__all__: list[str] = []
