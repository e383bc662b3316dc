"""The listeners' shared core without a database: who is woken, and when the listener starts."""

from __future__ import annotations

import threading

import pytest

from ikigai_store.notify import ANY, LEASE, MAIL, QUEUE, TASK, _BaseListener, _targets


class Core(_BaseListener[threading.Event]):
    """The core with a start that only counts."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = 0

    def _start(self) -> None:
        self.starts += 1


def test_payloads_name_keys_or_everyone() -> None:
    """'1,2' names two ids on its channel; '*' and an unreadable payload mean everyone."""
    assert _targets(MAIL, "1,2") == {(MAIL, 1), (MAIL, 2)}
    assert _targets(QUEUE, "*") is None
    assert _targets(QUEUE, "1,x") is None


def test_first_registration_starts_the_listener_once() -> None:
    """The listener starts on the first register, never again, and never once closed."""
    core = Core()
    core._add((MAIL, 1), threading.Event())
    core._add((MAIL, 2), threading.Event())
    assert core.starts == 1
    closed = Core()
    closed._closed = True
    closed._add((MAIL, 1), threading.Event())
    assert closed.starts == 0


def test_a_start_that_fails_is_tried_again() -> None:
    """A register whose start raised (no running loop) leaves the next one to start it."""
    core = Core()

    def fail() -> None:
        raise RuntimeError("no running event loop")

    core._start = fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        core._add((MAIL, 1), threading.Event())
    del core._start
    core._add((MAIL, 1), threading.Event())
    assert core.starts == 1


def test_notification_wakes_only_the_keys_it_names() -> None:
    """A notification for (mail, 1) sets that waiter's event only; unregistered events stay."""
    core = Core()
    one, two, gone = threading.Event(), threading.Event(), threading.Event()
    core._add((MAIL, 1), one)
    core._add((QUEUE, 1), two)
    core._add((MAIL, 1), gone)
    core.unregister((MAIL, 1), gone)
    core._wake(_targets(MAIL, "1"))
    assert one.is_set()
    assert not two.is_set()
    assert not gone.is_set()


def test_connecting_and_reconnecting_wake_everyone() -> None:
    """A new LISTEN and every wait before a reconnection wake all waiters (nothing was heard)."""
    core = Core()
    event = core._add((MAIL, 1), threading.Event())
    core._connected()
    assert event.is_set() and core.listening
    event.clear()
    core._backoff()
    assert event.is_set()


def test_backoff_doubles_to_five_seconds_and_resets_on_connect() -> None:
    """Reconnections wait 0.1 s, doubling up to 5 s; a successful LISTEN starts over."""
    core = Core()
    delays = [core._backoff() for _ in range(8)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    core._connected()
    assert core._backoff() == 0.1


def test_observers_hear_every_notification_and_each_connection() -> None:
    """An observer is told (channel, ids) for each notification (None for '*') and
    (None, None) on each connection; observing starts the listener; a raising observer does
    not stop the others or the waiters; after stop() it hears nothing."""
    core = Core()
    heard: list[tuple[str | None, set[int] | None]] = []

    def broken(channel: str | None, ids: set[int] | None) -> None:
        raise RuntimeError("observer bug")

    core.observe(broken)
    stop = core.observe(lambda channel, ids: heard.append((channel, ids)))
    assert core.starts == 1
    event = core._add((MAIL, 1), threading.Event())
    core._connected()
    core._heard(MAIL, "1,2")
    core._heard(QUEUE, "*")
    assert heard == [(None, None), (MAIL, {1, 2}), (QUEUE, None)]
    assert event.is_set()
    stop()
    stop()
    core._heard(MAIL, "1")
    assert len(heard) == 3


def test_any_key_hears_its_whole_channel_and_one_event_serves_several_keys() -> None:
    """(channel, ANY) is woken by every notification of its channel, not another's; one event
    registered for several keys is set by any of them."""
    core = Core()
    anything, shared = threading.Event(), threading.Event()
    core._add((TASK, ANY), anything)
    core._add((MAIL, 7), shared)
    core._add((LEASE, 3), shared)
    core._wake(_targets(MAIL, "1"))
    assert not anything.is_set() and not shared.is_set()
    core._wake(_targets(TASK, "42"))
    assert anything.is_set() and not shared.is_set()
    core._wake(_targets(LEASE, "3,9"))
    assert shared.is_set()
