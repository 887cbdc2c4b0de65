"""IdleThreads: every job starts at once on a daemon thread, and a thread that finished a job
takes the next one instead of a new thread being started."""

from __future__ import annotations

import threading

from pytest_openkata.infra.idle_threads import IdleThreads


def _run_and_wait(threads: IdleThreads) -> threading.Thread:
    ran = threading.Event()
    seen: list[threading.Thread] = []

    def job() -> None:
        seen.append(threading.current_thread())
        ran.set()

    threads.run(job)
    assert ran.wait(10)
    return seen[0]


def test_a_thread_that_finished_its_job_runs_the_next_one() -> None:
    threads = IdleThreads("test-idle")
    first = _run_and_wait(threads)
    for _ in range(20):  # the first thread is back among the idle ones soon after its job
        if threads._idle:
            break
        threading.Event().wait(0.05)
    second = _run_and_wait(threads)
    assert second is first
    assert first.daemon
    assert first.name == "test-idle-1"


def test_a_job_never_waits_for_a_busy_thread() -> None:
    threads = IdleThreads("test-busy")
    release = threading.Event()
    all_running = threading.Barrier(3, timeout=10)  # both jobs and this test, at once

    def job() -> None:
        all_running.wait()
        release.wait(10)

    threads.run(job)
    threads.run(job)
    try:
        all_running.wait()  # raises BrokenBarrierError unless both jobs run side by side
    finally:
        release.set()


def test_an_idle_thread_ends_after_its_wait() -> None:
    threads = IdleThreads("test-ends", idle_seconds=0.05)
    thread = _run_and_wait(threads)
    thread.join(10)
    assert not thread.is_alive()
    assert threads._idle == []
    assert _run_and_wait(threads) is not thread
