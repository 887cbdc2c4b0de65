"""Which signals a run takes over: SIGTERM and SIGHUP where they have their default action, and
none that the application handles or ignores on purpose (``nohup``), put back as they were."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from pytest_openkata.infra.signals import HANDLED_SIGNALS, stop_signals_as_interrupt


@pytest.fixture(autouse=True)
def handlers_put_back() -> Iterator[None]:
    before = {signum: signal.getsignal(signum) for signum in HANDLED_SIGNALS}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_both_signals_with_their_default_action_are_taken_over_and_given_back() -> None:
    for signum in HANDLED_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)

    with stop_signals_as_interrupt() as handler:
        # Taken over (checked first: a signal left at its default would end this process).
        assert all(callable(signal.getsignal(signum)) for signum in HANDLED_SIGNALS)
        with pytest.raises(KeyboardInterrupt, match="SIGHUP"):
            signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGTERM)  # a later one, while stopping: noted, not raised

    assert handler.received is True
    assert [signal.getsignal(signum) for signum in HANDLED_SIGNALS] == [signal.SIG_DFL] * 2


def test_an_ignored_sighup_stays_ignored_and_a_handler_of_the_applications_stays() -> None:
    def own(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    signal.signal(signal.SIGTERM, own)

    with stop_signals_as_interrupt() as handler:
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is own
        signal.raise_signal(signal.SIGHUP)  # ignored: nothing raised

    assert handler.received is False
    assert signal.getsignal(signal.SIGTERM) is own
