"""The engine pool on local engines (temporary folders and local processes): where environments
go, waiting for room, engines left out at the start, an engine lost mid-run and the sandboxed
run made again elsewhere, the settings, and the shares of a cap. The same pool on real Docker
engines (TLS, ssh, one killed) is in ``tests/pool``."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import BackendError, ConfigError, SandboxError, SandboxLost
from pytest_openkata.contracts.results import AgentResult
from pytest_openkata.contracts.sandboxes import EngineCheck, SandboxProvider, SandboxSpec
from pytest_openkata.core import engine_pool
from pytest_openkata.core.engine_pool import EnginePool, build_pool
from pytest_openkata.core.sandboxed import SandboxSetup, run_in_sandbox
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.infra.config import resolve_settings
from pytest_openkata.infra.inflight import SharedSlots
from pytest_openkata.infra.retry import NO_RETRY
from pytest_openkata.infra.shares import Share, apportion
from tests.support.evals import write_scenario, write_skill
from tests.support.local_sandbox import LOCAL_AGENT, LocalEngine

SPEC = SandboxSpec(name="scenario-0", network="host", env={})


def _settings(*hosts: str, per_host: int = 0, cpus: float = 1.0) -> EvalSettings:
    arguments: dict[str, object] = {
        "sandbox": {"hosts": ",".join(hosts), "per_host": per_host, "cpus": cpus}
    }
    return resolve_settings(ini={}, yaml_path=None, environ={}, cli={}, arguments=arguments)


def _pool(engines: dict[str, LocalEngine], per_host: int = 0) -> EnginePool:
    """A pool of the named local engines (the factory hands each its engine by URL)."""
    settings = _settings(*(f"{name}=ssh://{name}" for name in engines), per_host=per_host)

    def factory(single: EvalSettings) -> SandboxProvider:
        ((name, _url),) = single.sandbox.hosts
        return engines[name]

    return build_pool(settings, factory)


def test_each_environment_goes_to_the_least_loaded_engine_with_room() -> None:
    a, b = LocalEngine(cpus=2), LocalEngine(cpus=1)
    pool = _pool({"a": a, "b": b})
    try:
        made = [pool.create(SPEC) for _ in range(3)]
        # a has room for 2 (2 CPUs, 1 per sandbox), b for 1: a, then b (a half full), then a.
        assert [getattr(environment, "engine", "") for environment in made] == ["a", "b", "a"]
        assert pool.lines() == [
            "engine a (ssh://a): local, 2 CPUs; up to 2 sandboxes at once",
            "engine b (ssh://b): local, 1 CPUs; up to 1 sandbox at once",
        ]
    finally:
        pool.close()


def test_a_large_empty_engine_is_used_before_a_small_one_fills() -> None:
    small, medium, large = LocalEngine(cpus=1), LocalEngine(cpus=2), LocalEngine(cpus=4)
    pool = _pool({"small": small, "medium": medium, "large": large})
    try:
        made = [getattr(pool.create(SPEC), "engine", "") for _ in range(4)]
        # Each goes where it leaves the least fraction of room used: 1/4, then 1/2 on the
        # medium engine (as full as the large one would be, and less used), then 2/4, 3/4.
        assert made == ["large", "medium", "large", "large"]
    finally:
        pool.close()


def test_a_full_pool_waits_for_room_and_uses_the_engine_that_freed_it() -> None:
    pool = _pool({"a": LocalEngine(), "b": LocalEngine()}, per_host=1)
    try:
        first, second = pool.create(SPEC), pool.create(SPEC)
        made: list[object] = []
        waiter = threading.Thread(target=lambda: made.append(pool.create(SPEC)))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive(), "created a third environment on a pool with room for two"
        second.remove()
        waiter.join(30)
        assert [getattr(environment, "engine", "") for environment in made] == [
            getattr(second, "engine", "")
        ]
        first.remove()
    finally:
        pool.close()


def test_engines_that_fail_their_check_are_left_out_with_the_reason() -> None:
    class NoImage(LocalEngine):
        def check(self) -> EngineCheck:
            return EngineCheck("local", 2, "image 'x' not found on this engine")

    good, no_image = LocalEngine(), NoImage()
    engines: dict[str, LocalEngine] = {"good": good, "noimage": no_image}
    settings = _settings("good=ssh://good", "gone=ssh://gone", "noimage=ssh://noimage")

    def factory(single: EvalSettings) -> SandboxProvider:
        ((name, _url),) = single.sandbox.hosts
        if name == "gone":
            raise BackendError("no Docker engine answers at ssh://gone (refused)")
        return engines[name]

    pool = build_pool(settings, factory)
    try:
        assert pool.lines()[1:] == [
            "engine gone (ssh://gone): left out: no Docker engine answers at ssh://gone (refused)",
            "engine noimage (ssh://noimage): left out: image 'x' not found on this engine",
        ]
        assert no_image.closed  # left out: its provider is released at once
        assert {getattr(pool.create(SPEC), "engine", "") for _ in range(2)} == {"good"}
    finally:
        pool.close()


def test_a_lost_engine_is_taken_out_and_then_the_pool_runs_dry_naming_each_reason() -> None:
    a, b = LocalEngine(), LocalEngine()
    pool = _pool({"a": a, "b": b}, per_host=1)
    try:
        on_a = pool.create(SPEC)
        assert getattr(on_a, "engine", "") == "a"
        a.stop()
        with pytest.raises(SandboxLost, match=r"^engine a: the engine stopped answering$") as lost:
            on_a.exec(["true"], env={}, workdir="/", timeout=10)
        assert lost.value.elsewhere
        on_a.remove()
        on_b = pool.create(SPEC)
        assert getattr(on_b, "engine", "") == "b"  # never a again
        on_b.remove()
        b.stop()
        with pytest.raises(SandboxError, match=r"^no sandbox engine left \(") as none_left:
            pool.create(SPEC)
        assert not isinstance(none_left.value, SandboxLost)
        assert str(none_left.value) == (
            "no sandbox engine left (engine a: the engine stopped answering; "
            "engine b: the engine stopped answering)"
        )
    finally:
        pool.close()
    assert a.closed
    assert b.closed


def test_a_sandboxed_run_on_a_lost_engine_runs_again_elsewhere_and_says_so(
    tmp_path: Path,
) -> None:
    # Engine a stops while the agent's command (its first) runs.
    a, b = LocalEngine(stops_in_exec=1), LocalEngine()
    pool = _pool({"a": a, "b": b}, per_host=1)
    skill = write_skill(tmp_path, "s", {})
    folder = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True)
    scenario = load_scenario(folder)
    setup = SandboxSetup(pool, LOCAL_AGENT, "host", 60.0)
    try:
        result: AgentResult = run_in_sandbox(scenario, "WRITE out.txt made\n", setup, NO_RETRY)
    finally:
        pool.close()
    assert result.engine == "b"
    assert result.lost_engines == ("run local-agent: engine a: the engine stopped answering",)
    assert result.changes is not None
    assert [path for path, _content in result.changes.added] == ["out.txt"]


# --- settings ---------------------------------------------------------------------------------


def test_hosts_are_named_by_their_urls_or_by_name_and_a_yaml_list_is_taken(
    tmp_path: Path,
) -> None:
    settings = _settings("unix:///run/docker.sock", "tcp://10.0.0.5:2376", "ssh://ci@builder")
    assert settings.sandbox.hosts == (
        ("local", "unix:///run/docker.sock"),
        ("10.0.0.5:2376", "tcp://10.0.0.5:2376"),
        ("builder", "ssh://ci@builder"),
    )
    config = tmp_path / ".openkata-eval.yaml"
    config.write_text("sandbox:\n  hosts:\n    - a=tcp://h:1\n    - b=ssh://u@h\n  per_host: 3\n")
    from_yaml = resolve_settings(ini={}, yaml_path=config, environ={}, cli={})
    assert from_yaml.sandbox.hosts == (("a", "tcp://h:1"), ("b", "ssh://u@h"))
    assert from_yaml.sandbox.per_host == 3


@pytest.mark.parametrize(
    ("hosts", "message"),
    [
        ("http://h:2375", r"'http://h:2375' is not an engine URL; use unix:///PATH"),
        ("a=tcp://h:1,a=tcp://h:2", r"two engines are named 'a': name them, as NAME=URL"),
        ("unix:///a.sock,unix:///b.sock", r"two engines are named 'local'"),
        ("a b=tcp://h:1", r"'a b' is not an engine name"),
    ],
)
def test_a_bad_host_list_is_an_error_naming_its_source(hosts: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^environment OPENKATA_EVAL_SANDBOX_HOSTS: {message}"):
        resolve_settings(
            ini={}, yaml_path=None, environ={"OPENKATA_EVAL_SANDBOX_HOSTS": hosts}, cli={}
        )


def test_an_engines_room_is_per_host_or_its_cpus_over_each_sandboxs() -> None:
    engines = {"a": LocalEngine(cpus=8), "b": LocalEngine(cpus=1)}
    settings = _settings("a=ssh://a", "b=ssh://b", cpus=3.0)

    def factory(single: EvalSettings) -> SandboxProvider:
        return engines[single.sandbox.hosts[0][0]]

    by_cpus = build_pool(settings, factory)
    fixed = build_pool(_settings("a=ssh://a", per_host=5), factory)
    try:
        assert [engine.slots.capacity for engine in by_cpus.engines] == [2, 1]  # 8 // 3, >= 1
        assert [engine.slots.capacity for engine in fixed.engines] == [5]
    finally:
        by_cpus.close()
        fixed.close()


# --- room shared by processes, and shares of a cap ------------------------------------------


def _hold_and_wait(folder: str, held: multiprocessing.synchronize.Event, done) -> None:  # type: ignore[name-defined,no-untyped-def]
    slots = SharedSlots(Path(folder), "a", 2)
    give_back = slots.try_hold()
    assert give_back is not None
    held.set()
    done.wait(30)
    give_back()


def test_an_engines_room_is_counted_across_processes(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    held, done = context.Event(), context.Event()
    other = context.Process(target=_hold_and_wait, args=(str(tmp_path), held, done))
    other.start()
    try:
        assert held.wait(60)
        here = SharedSlots(tmp_path, "a", 2)
        assert here.in_use() == 1  # the other process's
        mine = here.try_hold()
        assert mine is not None
        assert here.try_hold() is None  # both taken: one there, one here
        mine()
        mine()  # given back once only
        assert here.in_use() == 1
    finally:
        done.set()
        other.join(60)
    assert SharedSlots(tmp_path, "a", 2).in_use() == 0
    assert SharedSlots(tmp_path, "b", 0).try_hold() is None  # no room at all


def test_a_cap_is_split_by_workers_and_the_parts_add_up() -> None:
    assert apportion(8, [3, 1]) == [6, 2]
    assert apportion(5, [1, 1, 1]) == [2, 2, 1]
    assert apportion(1, [2, 1]) == [1, 0]
    # Equal remainders go in turn from ``first``: three engines of room 1 over two groups.
    assert [apportion(1, [1, 1], first=k) for k in range(3)] == [[1, 0], [0, 1], [1, 0]]
    for total in range(12):
        for weights in ([1], [2, 3], [1, 1, 1, 4]):
            assert sum(apportion(total, weights)) == total
    share = Share(1, (3, 1))
    assert (share.of(8), share.folder, Share().of(8), Share().folder) == (2, "group-1", 8, "")
    with pytest.raises(ValueError, match="cannot split"):
        apportion(3, [])


def test_an_engine_lost_while_an_environment_is_made_is_named_on_it() -> None:
    a, b = LocalEngine(), LocalEngine()
    pool = _pool({"a": a, "b": b})
    a.stop()  # not known yet: a is checked, then dies
    try:
        environment = pool.create(SPEC)
        assert getattr(environment, "engine", "") == "b"
        assert getattr(environment, "lost_engines", ()) == (
            "engine a: the engine stopped answering",
        )
        assert pool.lines()[0] == "engine a (ssh://a): left out: the engine stopped answering"
    finally:
        pool.close()


class _EngineWithImages(LocalEngine):
    """A local engine that names a scenario's own image as its engine would: by the id the
    image has there."""

    def __init__(self, image_id: str) -> None:
        super().__init__()
        self.image_id = image_id
        self.asked: list[SandboxSpec] = []

    def own_image_id(self, spec: SandboxSpec) -> str:
        self.asked.append(spec)
        return self.image_id


def test_a_scenario_s_own_image_is_named_by_what_it_is_on_each_live_engine() -> None:
    a, b, c = (
        _EngineWithImages("sha256:1"),
        _EngineWithImages("sha256:1"),
        _EngineWithImages("sha256:2"),
    )
    pool = _pool({"a": a, "b": b, "c": c, "plain": LocalEngine()})
    try:
        # One line per distinct image, in order, whichever engine a trial lands on; an engine
        # that cannot name images adds nothing.
        assert pool.own_image_id(SPEC) == "sha256:1\nsha256:2"
        assert [len(e.asked) for e in (a, b, c)] == [1, 1, 1]

        (engine_c,) = [e for e in pool.engines if e.provider is c]
        pool.take_out(engine_c, "the engine stopped answering")

        assert pool.own_image_id(SPEC) == "sha256:1"  # a lost engine runs no trial
        assert len(c.asked) == 1
    finally:
        pool.close()


def test_an_interpreter_exits_while_its_pool_still_connects() -> None:
    # Ctrl-C while a scenario thread connects the pool: the run ends, and the interpreter does
    # not wait for a host that does not answer (a hung connection, here a factory that never
    # returns). The guard is far longer than the exit takes, far shorter than the hang.
    code = """
import threading
from pytest_openkata.core.engine_pool import build_pool
from pytest_openkata.infra.config import resolve_settings

arguments = {"sandbox": {"hosts": "a=ssh://a,b=ssh://b"}}
settings = resolve_settings(ini={}, yaml_path=None, environ={}, cli={}, arguments=arguments)
connecting = threading.Event()

def never_answers(single):
    connecting.set()
    threading.Event().wait(3600)

threading.Thread(target=build_pool, args=(settings, never_answers), daemon=True).start()
assert connecting.wait(60)
print("leaving", flush=True)
"""
    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )

    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "leaving\n"


class _EngineThatHangsOnClose(LocalEngine):
    """An engine whose connection stopped answering: closing it never returns (until let go)."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = threading.Event()
        self.let_go = threading.Event()

    def close(self) -> None:
        self.closing.set()
        self.let_go.wait(3600)
        super().close()


def test_closing_the_pool_waits_for_a_lost_engine_only_so_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_pool, "LOST_CLOSE_SECONDS", 0.2)
    hung, live = _EngineThatHangsOnClose(), LocalEngine()
    pool = _pool({"hung": hung, "live": live})
    [engine_hung] = [engine for engine in pool.engines if engine.name == "hung"]
    pool.take_out(engine_hung, "the engine stopped answering")
    closer = threading.Thread(target=pool.close, daemon=True)
    try:
        closer.start()
        closer.join(60)  # a guard far beyond what closing takes

        assert not closer.is_alive()  # it returned while the lost engine still closes
        assert live.closed
        assert hung.closing.wait(60)  # the lost engine's close was started all the same
        assert not hung.closed
    finally:
        hung.let_go.set()


class _EngineSlowToClose(LocalEngine):
    """An engine that answers, taking a moment to remove its containers."""

    def close(self) -> None:
        time.sleep(0.3)
        super().close()


def test_a_lost_engine_that_still_answers_is_closed_before_the_pool_is() -> None:
    # Taken out after one dropped connection, it may answer again: its containers are removed
    # at the end of this run, not left for the next one's sweep.
    answering, live = _EngineSlowToClose(), LocalEngine()
    pool = _pool({"answering": answering, "live": live})
    [taken_out] = [engine for engine in pool.engines if engine.name == "answering"]
    pool.take_out(taken_out, "a connection dropped")

    pool.close()

    assert answering.closed
    assert live.closed


def test_a_factory_that_exits_ends_the_pools_making_and_closes_the_engines_made() -> None:
    # Not an Exception: it would end a pool thread without an answer, and the run would wait
    # for that answer for good.
    made = LocalEngine()
    settings = _settings("good=ssh://good", "bad=ssh://bad")

    def factory(single: EvalSettings) -> SandboxProvider:
        ((name, _url),) = single.sandbox.hosts
        if name == "bad":
            raise SystemExit("the factory gives up")
        return made

    outcome: list[BaseException] = []

    def build() -> None:
        try:
            build_pool(settings, factory)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    builder.join(60)  # a guard far beyond what making the pool takes

    assert not builder.is_alive()
    assert [str(exc) for exc in outcome] == ["the factory gives up"]
    assert made.closed
