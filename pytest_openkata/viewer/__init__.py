"""The run viewer: ``python -m pytest_openkata view [FOLDER]``, a local web app over the run
logs under a folder (runs, a run, a trial, two runs compared, human verdicts of the judge's).

It sits beside the reporters: it reads runs through the core and shows them with the HTML
report's templates and escaping; nothing of a run imports it, and its web framework is
imported only when the command runs.
"""

__all__: list[str] = []
