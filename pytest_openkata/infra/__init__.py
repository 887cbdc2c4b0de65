"""Plumbing shared by the core and the providers: settings, the result cache, retries, call
limits, usage accounting, secret masking and environment reads.

Internal: its names may change between releases; the public API is :mod:`pytest_openkata`.
"""

__all__: list[str] = []
