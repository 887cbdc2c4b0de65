"""Plumbing shared by the core and the providers: settings, the result cache, retries, call
limits, usage accounting, secret masking and environment reads."""
