"""Shared fixtures: a real scripted endpoint on loopback, skill folders, the corpus."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import httpcore  # noqa: F401  (see below)
import pytest
import statsmodels.stats.inter_rater
import statsmodels.stats.power
import statsmodels.stats.weightstats  # noqa: F401  (see below)
from hypothesis import settings as hypothesis_settings

from pytest_openkata.local.model import LocalModelServer, prepare
from pytest_openkata.local.sandbox import rootfs_archive
from tests.support.docker_engine import build_standin_image, engine
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript

# httpx imports httpcore on its first client and keeps httpcore's exception classes from then
# on. pytester's in-process runs remove the modules they imported when they end; had the first
# client been made in one, httpcore would be imported anew later and httpx would no longer
# recognise its errors. Imported here, it outlives every in-process run.
# statsmodels (judge agreement, the uplift's power) imports numpy, which cannot be imported a
# second time in one process: imported here, neither is removed by an in-process run.

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("OPENKATA_CORPUS", REPO_ROOT.parent / "shared/corpus/openkata"))


CORPUS_FIXTURES = frozenset({"corpus", "corpus_copy"})
_corpus_note = pytest.StashKey[str]()
_CORPUS_DESELECTED = "openkata_corpus_deselected"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the third-party corpus (a user's clone has no ../shared), the tests that need
    it are deselected, and the summary says so in one line; CI has it (.ci/run checks)."""
    if (CORPUS / "skills").is_dir():
        return
    needing = [i for i in items if CORPUS_FIXTURES & set(getattr(i, "fixturenames", ()))]
    if not needing:
        return
    items[:] = [item for item in items if item not in needing]
    config.hook.pytest_deselected(items=needing)
    config.stash[_corpus_note] = _corpus_note_for(len(needing))
    workeroutput = getattr(config, "workeroutput", None)  # an xdist worker's, for the controller
    if workeroutput is not None:
        workeroutput[_CORPUS_DESELECTED] = len(needing)


def _corpus_note_for(count: int) -> str:
    return (
        f"deselected {count} tests that need the openkata corpus: not found at {CORPUS} "
        "(set OPENKATA_CORPUS)"
    )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Under xdist the workers collect and deselect: the controller says it, from what each
    worker handed back (every worker collects the same tests)."""
    count = getattr(node, "workeroutput", {}).get(_CORPUS_DESELECTED)
    if count:
        node.config.stash[_corpus_note] = _corpus_note_for(count)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    note = terminalreporter.config.stash.get(_corpus_note, None)
    if note is not None:
        terminalreporter.write_line(note, yellow=True)


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OPENKATA_EVAL_* variable of the developer's shell reaches a test run, nor the step
    summary of a CI job that runs the suite (a run in a test would append to it)."""
    for name in list(os.environ):
        if name.startswith("OPENKATA_EVAL_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint() as server:
        yield server


@pytest.fixture
def script(endpoint: ScriptedEndpoint) -> EvalScript:
    """Answers agent calls with a fixed text and judge calls with scripted verdicts."""
    evals = EvalScript()
    endpoint.respond_with(evals)
    return evals


@pytest.fixture
def corpus() -> Path:
    if not (CORPUS / "skills").is_dir():
        pytest.fail(f"the openkata corpus is expected at {CORPUS} (set OPENKATA_CORPUS)")
    return CORPUS


@pytest.fixture
def corpus_copy(corpus: Path, pytester: pytest.Pytester) -> Path:
    """A writable copy of the corpus skills inside the pytester folder."""
    target = pytester.path / "skills"
    shutil.copytree(corpus / "skills", target, symlinks=True)
    return target


# --- the real local model (end-to-end tests) ------------------------------------------------


@pytest.fixture(scope="session")
def local_model_files() -> tuple[Path, Path]:
    """Weights and llama-server, installed and built on first use (cached across runs)."""
    return prepare()


@pytest.fixture(scope="session")
def local_model(local_model_files: tuple[Path, Path]) -> Iterator[LocalModelServer]:
    binary, weights = local_model_files
    with LocalModelServer(binary, weights) as server:
        yield server


@pytest.fixture(scope="session")
def sandbox_archive() -> Path:
    """The local sandbox image's root file system (debootstrap and Codex), built on first use
    and cached across runs."""
    return rootfs_archive()


# --- a real Docker engine (sandbox tests) ----------------------------------------------------


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    with engine() as host:
        yield host


@pytest.fixture(scope="session")
def docker_client(docker_host: str) -> Iterator[docker.DockerClient]:
    client = docker.DockerClient(base_url=docker_host, timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="session")
def standin_image(docker_client: docker.DockerClient) -> str:
    """A local busybox image with the stand-in kiro-cli (no registry is reachable here)."""
    return build_standin_image(docker_client)


@pytest.fixture
def use_engine(docker_host: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the plugin, which reads DOCKER_HOST, at the test engine."""
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    return docker_host


# --- generated examples (hypothesis) -----------------------------------------------------------

# The same examples on every run and machine, none kept between runs: a failure is reproduced by
# running the test again, and the suite writes no example database into the checkout.
hypothesis_settings.register_profile("openkata", derandomize=True, database=None, deadline=None)
hypothesis_settings.load_profile("openkata")
