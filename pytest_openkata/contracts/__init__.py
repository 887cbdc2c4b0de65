"""The contracts kernel: what every layer above agrees on, importing nothing above it.

Its modules import only the standard library and each other. Today it holds the exception
tree (:mod:`pytest_openkata.contracts.errors`); ``tests/architecture`` keeps it free of
imports from the rest of the package.
"""
