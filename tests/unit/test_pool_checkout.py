"""The pools' checkout, driven by hand: its decisions without a database (both shells run it)."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import PoolClosed, PoolTimeout

from ikigai_store.errors import ConnectError, StoreClosed
from ikigai_store.pool import _BasePool, _Checkout, _Do, _Take

OLD: Any = object()  # stand-ins: the core only compares and hands them back
NEW: Any = object()
CONN: Any = object()
DOWN = ConnectError("cannot connect to postgresql://: server down")


def pool(*, suspect: bool = False, hook: bool = False) -> _BasePool[Any, Any]:
    """A pool core holding ``OLD``; nothing is opened (the core does no I/O)."""
    core: _BasePool[Any, Any] = _BasePool(
        "postgresql://", max_size=2, timeout=0.5, on_unavailable=(lambda: None) if hook else None
    )
    core._pool = OLD
    core._suspect = suspect
    return core


def finish(checkout: _Checkout[Any, Any], answer: object) -> object:
    """Answer the last step; return what the checkout returns."""
    with pytest.raises(StopIteration) as done:
        checkout.send(answer)
    return done.value.value


def test_healthy_pool_is_taken_from_directly() -> None:
    """Nothing suspect: the only step takes a connection, returned with its pool."""
    checkout = pool()._checkout()
    assert next(checkout) == _Take(OLD)
    assert finish(checkout, CONN) == (OLD, CONN)


def test_closed_store_refuses_before_any_step() -> None:
    """A closed store raises StoreClosed at once, whatever else holds."""
    core = pool(suspect=True)
    core._closed = True
    with pytest.raises(StoreClosed):
        next(core._checkout())


def test_lost_connection_and_server_down_fails_at_once_and_stays_suspect() -> None:
    """After a loss, a failed probe without a hook raises its ConnectError; no pool wait."""
    core = pool(suspect=True)
    checkout = core._checkout()
    assert next(checkout) is _Do.PROBE
    with pytest.raises(ConnectError) as raised:
        checkout.throw(DOWN)
    assert raised.value is DOWN
    assert core._suspect


def test_hook_gets_one_chance_then_the_pool_is_renewed() -> None:
    """Probe fails, hook, probe again, renew; the checkout then takes from the new pool."""
    core = pool(suspect=True, hook=True)
    checkout = core._checkout()
    assert next(checkout) is _Do.PROBE
    assert checkout.throw(DOWN) is _Do.HOOK
    assert checkout.send(None) is _Do.PROBE
    assert checkout.send(None) is _Do.RENEW
    assert core._must_renew()
    assert core._renew(NEW) is OLD  # what a shell does under its lock
    assert not core._must_renew()
    assert checkout.send(None) == _Take(NEW)
    assert finish(checkout, CONN) == (NEW, CONN)


def test_timeout_with_the_server_up_says_every_connection_is_busy() -> None:
    """A pool timeout, then a probe that connects: ConnectError naming the pool size."""
    core = pool()
    checkout = core._checkout()
    next(checkout)
    assert checkout.throw(PoolTimeout("timeout")) is _Do.PROBE
    with pytest.raises(ConnectError, match=r"within 0.5 s \(all 2 in use"):
        checkout.send(None)
    assert not core._suspect


def test_timeout_with_the_server_down_marks_the_pool_suspect() -> None:
    """A pool timeout, then a failed probe: libpq's reason, and the next checkout probes first."""
    core = pool()
    checkout = core._checkout()
    next(checkout)
    checkout.throw(PoolTimeout("timeout"))
    with pytest.raises(ConnectError) as raised:
        checkout.throw(DOWN)
    assert raised.value is DOWN
    assert core._suspect


def test_pool_closed_under_a_waiter_retries_only_on_a_renewed_pool() -> None:
    """PoolClosed: retried on the renewed pool; re-raised on the current one; StoreClosed once
    the store closed."""
    core = pool()
    checkout = core._checkout()
    next(checkout)
    core._pool = NEW  # renewed by another checkout while this one waited
    assert checkout.throw(PoolClosed("closed")) == _Take(NEW)
    with pytest.raises(PoolClosed):
        checkout.throw(PoolClosed("closed"))
    checkout = core._checkout()
    next(checkout)
    core._closed = True
    with pytest.raises(StoreClosed):
        checkout.throw(PoolClosed("closed"))


@pytest.mark.parametrize(
    ("text", "sqlstate", "refused"),
    [
        ('FATAL:  password authentication failed for user "ann"', "28P01", True),
        ('FATAL:  no pg_hba.conf entry for host "10.0.0.1", user "ann"', "28000", True),
        ('FATAL:  role "ann" does not exist', "28000", True),
        ('FATAL:  database "nope" does not exist', "3D000", True),
        ("FATAL:  the database system is starting up", "57P03", False),
        ("FATAL:  the database system is in recovery mode", "57P03", False),
        ("FATAL:  sorry, too many clients already", None, False),
        ("Connection refused", None, False),
    ],
)
def test_a_failed_connection_says_whether_the_server_refused_it(
    text: str, sqlstate: str | None, refused: bool
) -> None:
    """libpq gives no SQLSTATE for a failed connection: the server's answer is read from its
    message; only a refusal (authentication, no such database or role) is ``refused``."""
    import psycopg

    from ikigai_store.pool import _cannot_connect

    error = _cannot_connect(
        "postgresql://ann:secret@db/x",
        psycopg.OperationalError(
            f'connection failed: connection to server at "db", port 5432 failed: {text}'
        ),
    )
    assert (error.sqlstate, error.refused) == (sqlstate, refused)
    assert "secret" not in str(error)
