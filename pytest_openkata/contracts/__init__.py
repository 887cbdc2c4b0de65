"""The contracts kernel: what every layer agrees on, importing nothing above it.

Its modules import only the standard library, each other and, for the settings model,
pydantic: the exception tree (:mod:`~pytest_openkata.contracts.errors`), the contracts of
model backends, agent CLIs and sandbox providers (:mod:`~pytest_openkata.contracts.backends`,
:mod:`~pytest_openkata.contracts.agents`, :mod:`~pytest_openkata.contracts.sandboxes`), the
run's settings model (:mod:`~pytest_openkata.contracts.config`) and the settings a provider
declares of its own (:mod:`~pytest_openkata.contracts.settings`), the keys by which the JUnit
file names a scenario (:mod:`~pytest_openkata.contracts.junit`), the one result model
(:mod:`~pytest_openkata.contracts.results`) and the reference's way of decoding invalid UTF-8
(:mod:`~pytest_openkata.contracts.text`). ``tests/architecture`` keeps it free of imports
from the rest of the package.

Public for provider authors: each module's ``__all__`` is its part of the contract; the package
itself adds no names.
"""

__all__: list[str] = []
