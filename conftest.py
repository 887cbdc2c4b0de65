"""Project-wide pytest configuration.

``pytester`` runs the plugin the way users do, in child pytest runs, for the test suite.
The project's own skills under ``skills/`` are evaluated by the installed plugin itself
(``pytest skills/commit-message``); nothing here changes how they are collected.
"""

pytest_plugins = ["pytester"]
