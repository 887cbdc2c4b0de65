"""Talking to the outside world behind small protocols: model backends, agent CLIs, sandbox
providers, graders and reporters, one module per provider and one registry per kind
(:mod:`pytest_openkata.infra.registry`)."""
