"""The evaluation itself, without pytest: load a scenario, build its prompt, run the agent,
grade, score, combine trials, summarise skills and write their reports.

Nothing here imports pytest or xdist (a test imports every module with pytest made
unimportable); the pytest adapter lives in :mod:`pytest_openkata.plugin`.

Internal: the package's own modules, whose names may change between releases; the public API is
:mod:`pytest_openkata`.
"""

__all__: list[str] = []
