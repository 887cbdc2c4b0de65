"""The contracts kernel: what every layer agrees on, importing nothing above it.

Its modules import only the standard library and each other: the exception tree
(:mod:`~pytest_openkata.contracts.errors`), the contracts of model backends, agent CLIs and
sandbox providers (:mod:`~pytest_openkata.contracts.backends`,
:mod:`~pytest_openkata.contracts.agents`, :mod:`~pytest_openkata.contracts.sandboxes`), the
settings a provider declares of its own (:mod:`~pytest_openkata.contracts.settings`) and
the keys by which the JUnit file names a scenario (:mod:`~pytest_openkata.contracts.junit`).
``tests/architecture`` keeps it free of imports from the rest of the package.
"""
