"""A pool of sandbox engines behind the one sandbox interface (``sandbox.hosts``).

The pool holds one provider per engine, each made by the configured provider's own factory
pointed at that engine (the Docker provider connects to the one engine it is given), so any
provider whose factory reads ``sandbox.hosts`` can be pooled. At the start every engine is
checked (a provider with a ``check()`` method says what it found: its version, CPUs, the
image); one that cannot be reached or cannot run the image is left out, and the check gives one
line per engine. Each new environment goes to the least-loaded engine with room (the one
least full once it has one more), waiting in turn while all are full.

An engine that stops answering (the provider raises :class:`SandboxLost`) is taken out: its
environments fail with a :class:`SandboxLost` that says whether other engines are left, and the
core then runs the whole sandboxed run again on a new environment elsewhere
(:func:`pytest_openkata.core.sandboxed.again_elsewhere`). When no engine is left, creating an
environment fails with every engine's reason.

Room is counted by :class:`Slots`: in this process by default, or shared by every process of a
run through lock files (:class:`pytest_openkata.infra.inflight.SharedSlots`), so that xdist
workers on one host do not put more sandboxes on an engine than its capacity.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from pytest_openkata.contracts.errors import BackendError, SandboxError, SandboxLost
from pytest_openkata.contracts.sandboxes import (
    EngineCheck,
    ExecResult,
    NamesOwnImages,
    SandboxEnvironment,
    SandboxProvider,
    SandboxSpec,
)

if TYPE_CHECKING:
    from pytest_openkata.contracts.config import EvalSettings

__all__ = ["EnginePool", "LocalSlots", "PoolEngine", "Slots", "SlotsFor", "build_pool"]

T = TypeVar("T")

_FIRST_PAUSE = 0.02
LOST_CLOSE_SECONDS = 10.0
"""How long closing a pool waits, in all, for its lost engines to remove their containers."""
_MAX_PAUSE = 0.5  # waiting for room that another process may free (it cannot wake us)


class Slots(Protocol):
    """An engine's room: ``capacity`` sandboxes at once."""

    capacity: int

    def try_hold(self) -> Callable[[], None] | None:
        """One slot, or None when all are taken; the callable gives it back (once)."""
        ...

    def in_use(self) -> int:
        """How many slots are held now."""
        ...


SlotsFor = Callable[[str, int], Slots]
"""The slots of an engine, from its name and capacity."""


class LocalSlots:
    """Slots counted in this process."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held = 0
        self._lock = threading.Lock()

    def try_hold(self) -> Callable[[], None] | None:
        with self._lock:
            if self._held >= self.capacity:
                return None
            self._held += 1
        return _once(self._give_back)

    def in_use(self) -> int:
        return self._held

    def _give_back(self) -> None:
        with self._lock:
            self._held -= 1


def _once(call: Callable[[], None]) -> Callable[[], None]:
    done = threading.Event()
    lock = threading.Lock()

    def wrapped() -> None:
        with lock:
            if done.is_set():
                return
            done.set()
        call()

    return wrapped


@dataclass
class PoolEngine:
    """One engine of the pool: its name (as reports show it), its URL (the terminal only),
    its provider (None when it could not be made), its room, what its check said and, once it
    is out, why."""

    name: str
    url: str
    provider: SandboxProvider | None
    slots: Slots
    summary: str = ""
    lost: str | None = None
    left_out_at_start: bool = False

    def line(self) -> str:
        """The engine's line at the start of a run."""
        head = f"engine {self.name} ({self.url}): "
        if self.lost is not None:
            return f"{head}left out: {self.lost}"
        capacity = self.slots.capacity
        sandboxes = f"{capacity} sandbox{'' if capacity == 1 else 'es'}"
        room = f"up to {sandboxes} at once" if capacity else "no room for this host's workers"
        return f"{head}{self.summary}; {room}" if self.summary else f"{head}{room}"


class EnginePool:
    """Sandbox environments spread over several engines (see the module docstring)."""

    def __init__(self, engines: Sequence[PoolEngine]) -> None:
        if not engines:
            raise ValueError("an engine pool needs at least one engine")
        self.engines = list(engines)
        self._room = threading.Condition()
        self._queue: deque[object] = deque()  # the callers waiting for room, in turn
        self._closed = False

    def lines(self) -> list[str]:
        """One line per engine: what its check found and its room, or why it is left out."""
        return [engine.line() for engine in self.engines]

    def create(self, spec: SandboxSpec) -> SandboxEnvironment:
        lost: list[str] = []  # engines lost while this environment was being made
        while True:
            engine, give_back = self._hold_room()
            provider = engine.provider
            assert provider is not None  # an engine without one is never live
            try:
                environment = provider.create(spec)
            except SandboxLost as exc:
                give_back()
                self.take_out(engine, str(exc))
                lost.append(f"engine {engine.name}: {exc}")
                continue
            except BaseException:
                give_back()
                raise
            return _PooledEnvironment(self, engine, environment, give_back, tuple(lost))

    def own_image_id(self, spec: SandboxSpec) -> str:
        """What the scenario's own image is on each live engine (each engine builds its own,
        from its own base images), one line per distinct answer
        (:class:`~pytest_openkata.contracts.sandboxes.NamesOwnImages`)."""
        with self._room:
            live = self._live()
        found: set[str] = set()
        for engine in live:
            provider: object = engine.provider
            if isinstance(provider, NamesOwnImages):
                found.add(provider.own_image_id(spec))
        return "\n".join(sorted(found))

    def close(self) -> None:
        """Close every engine's provider (each removes its environments still live). A lost
        engine's provider is closed on a daemon thread, waited for at most
        :data:`LOST_CLOSE_SECONDS` in all: an engine taken out after one dropped connection
        may well answer and remove its containers, but removing them through a connection
        that no longer answers can take many minutes (an ``ssh://`` channel); what is left
        then, the next run's sweep on that engine removes."""
        with self._room:
            self._closed = True
            self._room.notify_all()
        closing: list[threading.Thread] = []
        for engine in self.engines:
            provider = engine.provider
            if provider is None:
                continue
            if engine.lost is None:
                _close_quietly(provider)
            else:
                closer = threading.Thread(
                    target=_close_quietly,
                    args=(provider,),
                    name=f"openkata-close-{engine.name}",
                    daemon=True,
                )
                closer.start()
                closing.append(closer)
        deadline = time.monotonic() + LOST_CLOSE_SECONDS
        for thread in closing:
            thread.join(max(0.0, deadline - time.monotonic()))

    def take_out(self, engine: PoolEngine, why: str) -> None:
        """Take a failed engine out of the pool (once; the first reason stays)."""
        with self._room:
            if engine.lost is None:
                engine.lost = why
            self._room.notify_all()

    def has_live(self) -> bool:
        with self._room:
            return bool(self._live())

    def _live(self) -> list[PoolEngine]:
        return [e for e in self.engines if e.lost is None and e.slots.capacity > 0]

    def _by_load(self, live: list[PoolEngine]) -> list[PoolEngine]:
        """``live``, the engine that would be least full with one more sandbox first (so that
        an empty small engine does not fill before a large one), then the least used, then in
        the order of ``sandbox.hosts``."""
        used = {id(engine): engine.slots.in_use() for engine in live}
        order = {id(engine): index for index, engine in enumerate(self.engines)}
        return sorted(
            live,
            key=lambda e: ((used[id(e)] + 1) / e.slots.capacity, used[id(e)], order[id(e)]),
        )

    def _hold_room(self) -> tuple[PoolEngine, Callable[[], None]]:
        """A slot on the least-loaded engine with room. Callers wait in turn (first come,
        first served): only the first waiter takes a slot; a slot given back in this process
        wakes the waiters at once, one freed by another process is seen at the next poll."""
        pause = _FIRST_PAUSE
        turn = object()
        with self._room:
            self._queue.append(turn)
            try:
                while True:
                    if self._closed:
                        raise SandboxError("the sandbox was closed: the run is over")
                    live = self._live()
                    if not live:
                        raise SandboxError(self._none_left())
                    if self._queue[0] is turn:
                        for engine in self._by_load(live):
                            give_back = engine.slots.try_hold()
                            if give_back is not None:
                                return engine, self._waking(give_back)
                    woken = self._room.wait(pause)  # room given back here: poll afresh
                    pause = _FIRST_PAUSE if woken else min(pause * 2, _MAX_PAUSE)
            finally:
                self._queue.remove(turn)
                self._room.notify_all()  # the next in turn

    def _waking(self, give_back: Callable[[], None]) -> Callable[[], None]:
        def wrapped() -> None:
            give_back()
            with self._room:
                self._room.notify_all()

        return _once(wrapped)

    def _none_left(self) -> str:
        """Every engine and why it is out, for the scenarios' errors (and so the reports):
        engines by their names, never their URLs (a socket's is a machine path)."""
        reasons = "; ".join(
            f"engine {e.name}: "
            + (e.lost.replace(e.url, "its URL") if e.lost is not None else "no room for this host")
            for e in self.engines
        )
        return f"no sandbox engine left ({reasons})"

    def lost(self, engine: PoolEngine, exc: SandboxLost) -> SandboxLost:
        """The error an environment of ``engine`` raises once the engine is lost."""
        self.take_out(engine, str(exc))
        return SandboxLost(f"engine {engine.name}: {exc}", elsewhere=self.has_live())


class _PooledEnvironment:
    """An environment of one engine of the pool; its room is given back when it is removed."""

    def __init__(
        self,
        pool: EnginePool,
        engine: PoolEngine,
        environment: SandboxEnvironment,
        give_back: Callable[[], None],
        lost: tuple[str, ...] = (),
    ) -> None:
        self._pool = pool
        self._engine = engine
        self._environment = environment
        self._give_back = give_back
        # The engines lost while it was being made ("engine <name>: why"), for the report.
        self.lost_engines = lost
        # What its engine's environment was given and runs, where that one says.
        self.cpus: float | None = getattr(environment, "cpus", None)
        self.memory_mb: int | None = getattr(environment, "memory_mb", None)
        self.image_id: str = str(getattr(environment, "image_id", ""))
        self.workdir: str = str(getattr(environment, "workdir", ""))

    @property
    def engine(self) -> str:
        """The name of the engine it runs on (reports show it)."""
        return self._engine.name

    def _guarded(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except SandboxLost as exc:
            raise self._pool.lost(self._engine, exc) from exc

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        return self._guarded(
            lambda: self._environment.exec(argv, env=env, workdir=workdir, timeout=timeout)
        )

    def put_archive(self, path: str, data: bytes) -> None:
        self._guarded(lambda: self._environment.put_archive(path, data))

    def get_archive(self, path: str) -> Iterable[bytes]:
        return self._chunks(self._guarded(lambda: self._environment.get_archive(path)))

    def _chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        try:
            yield from chunks
        except SandboxLost as exc:
            raise self._pool.lost(self._engine, exc) from exc

    def remove(self) -> None:
        try:
            self._environment.remove()
        finally:
            self._give_back()


def _single_engine(settings: EvalSettings, name: str, url: str) -> EvalSettings:
    box = settings.sandbox.model_copy(update={"hosts": ((name, url),)})
    return settings.model_copy(update={"sandbox": box})


def _capacity(settings: EvalSettings, cpus: int | None) -> int:
    """``sandbox.per_host``, else the engine's CPUs divided by each sandbox's (at least 1)."""
    box = settings.sandbox
    if box.per_host:
        return box.per_host
    if not cpus:
        return 1
    return max(1, int(cpus // box.cpus))


def _engine(
    settings: EvalSettings,
    factory: Callable[[EvalSettings], SandboxProvider],
    slots_for: SlotsFor,
    name: str,
    url: str,
) -> PoolEngine:
    """Make and check one engine's provider; an engine that fails is left out, with why."""
    try:
        provider = factory(_single_engine(settings, name, url))
    except Exception as exc:  # any failure of one engine leaves it out, not the run
        why = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        return PoolEngine(name, url, None, LocalSlots(0), lost=why, left_out_at_start=True)
    check = EngineCheck("")
    checker = getattr(provider, "check", None)
    if callable(checker):
        try:
            check = checker()
        except Exception as exc:
            why = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
            check = EngineCheck("", problem=why)
    if check.problem is not None:
        with contextlib.suppress(Exception):
            provider.close()
        return PoolEngine(
            name, url, None, LocalSlots(0), check.summary, check.problem, left_out_at_start=True
        )
    slots = slots_for(name, _capacity(settings, check.cpus))
    return PoolEngine(name, url, provider, slots, check.summary)


def _close_quietly(provider: SandboxProvider) -> None:
    with contextlib.suppress(Exception):  # what it leaves, the next run's sweep removes
        provider.close()


def build_pool(
    settings: EvalSettings,
    factory: Callable[[EvalSettings], SandboxProvider],
    slots_for: SlotsFor | None = None,
) -> EnginePool:
    """The pool of ``sandbox.hosts``, each engine made by ``factory`` (given the settings with
    that one engine) and checked, at once; ``slots_for`` counts each engine's room (default:
    in this process).

    The engines are connected on a pool of daemon threads (``multiprocessing``'s
    ``ThreadPool``; :class:`~concurrent.futures.ThreadPoolExecutor` joins its threads as the
    interpreter exits): a run interrupted while its pool connects exits without waiting for
    connections to hosts that may not answer for minutes."""
    from multiprocessing.pool import ThreadPool  # only a run with a pool pays its import

    hosts = settings.sandbox.hosts
    counted: SlotsFor = slots_for or (lambda _name, capacity: LocalSlots(capacity))

    def connect(host: tuple[str, str]) -> PoolEngine | BaseException:
        # Handed back, not raised: the pool's threads pass on an Exception, but one that is
        # not (SystemExit, a test framework's outcome) would end the thread and its answer.
        try:
            return _engine(settings, factory, counted, *host)
        except BaseException as exc:
            return exc

    with ThreadPool(min(8, len(hosts)) or 1) as connecting:
        made = connecting.map(connect, hosts)
    engines = [outcome for outcome in made if isinstance(outcome, PoolEngine)]
    failed = next((outcome for outcome in made if isinstance(outcome, BaseException)), None)
    if failed is not None:  # no pool: the engines made are closed here
        for engine in engines:
            if engine.provider is not None:
                _close_quietly(engine.provider)
        raise failed
    return EnginePool(engines)


if TYPE_CHECKING:  # the protocols this module implements, checked by mypy
    _provider: type[SandboxProvider] = EnginePool
    _environment: type[SandboxEnvironment] = _PooledEnvironment
    _slots: type[Slots] = LocalSlots
