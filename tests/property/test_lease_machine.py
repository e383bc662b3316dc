"""Leases through the real database agree with the model, on a controlled clock.

A Hypothesis state machine acquires (exclusive and shared, by live, retired and unknown holders,
on resources whose names contain LIKE wildcards, with good and bad ttls), renews and releases
with current and stale leases (every ``Lease`` ever returned is kept and replayed, as an object
or a ``(resource, token)`` pair, plus made-up tokens), force-releases, lists ``held`` under
literal prefixes, retires identities, and moves the database clock (``ikigai.now``, see
tests/mailtools.py) by steps, or exactly to a live lease's expiry (or a microsecond past it).
Every call is mirrored in ``RefLeaseWorld`` (tests/reference_leases.py). A refusal must be the
same ``ik`` error as the model's, name what the model names, and write nothing. After each step
every live lease (``held()``), one rotating prefix and one rotating holder's leases equal the
model's, and no two live leases on one resource conflict in the table itself.

Each example runs in the ``ikigai_store`` fixture's rolled-back transaction (on each face).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ikigai_store as ik
from ikigai_store import leases as lease_ops
from tests.mailtools import EPOCH, Clock
from tests.reference_leases import RefLease, RefLeaseWorld
from tests.reference_mail import RefConflict, RefError, RefInvalid, RefNotFound

pytestmark = pytest.mark.db

#: The first three are registered at the start; "ghost" never is.
NAMES = ["ann", "bob", "cat", "dan"]
GHOST = "ghost"
RESOURCES = ["src/a.c", "src/a_b", "src/axb", "src/a%b", "build", "port:8080", "ü/ß"]
BAD_RESOURCES: list[Any] = ["", "x" * 513, "nul\x00", 7]
PREFIXES = ["", "src/", "src/a_", "src/a%", "src/a", "port", "ü", "zzz", "%", "_"]
TTLS: list[Any] = [1, 2.5, 10, timedelta(seconds=30), timedelta(hours=1), 86400]
BAD_TTLS: list[Any] = [0, -1, 86401, float("nan"), timedelta(0), timedelta(days=2), "10", True]
STEPS = [
    timedelta(microseconds=1),
    timedelta(seconds=1),
    timedelta(seconds=5),
    timedelta(seconds=30),
    timedelta(hours=2),
    timedelta(days=2),
]
FAKE_TOKEN = "00000000-0000-4000-8000-000000000000"

ERRORS: dict[type[RefError], type[Exception]] = {
    RefInvalid: ik.InvalidArgument,
    RefNotFound: ik.NotFound,
    RefConflict: ik.Conflict,
}
STORE_ERRORS = (ik.InvalidArgument, ik.NotFound, ik.Conflict)

#: Everything a lease call may write (a refusal must change none of it).
FOOTPRINT = """
SELECT (SELECT string_agg(id || ':' || resource || ':' || holder_id || ':' || exclusive || ':'
                          || token || ':' || acquired_at || ':' || expires_at, ',' ORDER BY id)
        FROM leases) AS leases,
       (SELECT string_agg(name || coalesce(retired_at::text, ''), ',' ORDER BY id)
        FROM identities) AS identities
"""

#: Pairs of live leases on one resource that may not coexist, straight from the table.
CONFLICTS = """
SELECT count(*) AS n
FROM leases AS a JOIN leases AS b
  ON a.resource = b.resource AND a.id < b.id AND (a.exclusive OR b.exclusive)
WHERE a.expires_at > ikigai_now() AND b.expires_at > ikigai_now()
"""


class Refused(Exception):
    """Both store and model refused the call (the same way)."""


def lease_view(lease: ik.Lease) -> tuple[Any, ...]:
    return (
        lease.resource,
        lease.holder,
        lease.exclusive,
        lease.token,
        lease.acquired_at,
        lease.expires_at,
    )


def ref_views(leases: list[RefLease]) -> list[tuple[Any, ...]]:
    return [x.view() for x in leases]


class LeaseMachine(RuleBasedStateMachine):
    """Drives leases through the store and checks them against the model."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefLeaseWorld()
        self.scope = ExitStack()
        self.scope.enter_context(store.transaction(force_rollback=True))
        self.clock = Clock(store, EPOCH)
        self.granted: list[ik.Lease] = []
        self.steps = 0

    def teardown(self) -> None:
        self.scope.close()

    # -- helpers -----------------------------------------------------------------------------

    def pick(self, data: st.DataObject, choices: list[Any], label: str) -> Any:
        return data.draw(st.sampled_from(choices), label=label)

    def footprint(self) -> dict[str, Any]:
        with self.store._connection() as conn:
            return dict(conn.execute(FOOTPRINT).fetchone())

    def both(self, store_call: Callable[[], Any], model_call: Callable[[Any], Any]) -> Any:
        """Run the call on the store, then on the model (given the store's result): both
        succeed (returns both results), or both refuse alike, writing nothing (``Refused``)."""
        before = self.footprint()
        try:
            got = store_call()
        except STORE_ERRORS as exc:
            try:
                model_call(None)
            except RefError as ref:
                wanted = ERRORS[type(ref)]
                assert type(exc) is wanted, f"store raised {exc!r}, model {ref!r}"
                for named in ref.named:
                    assert named in str(exc), f"{exc!r} does not name {named!r} ({ref!r})"
                assert self.footprint() == before, "a refused call wrote rows"
                raise Refused from exc
            raise AssertionError(f"store raised {exc!r}; the model accepted") from exc
        try:
            expected = model_call(got)
        except RefError as ref:
            raise AssertionError(f"store returned {got!r}; the model refused: {ref!r}") from ref
        return got, expected

    def a_holder(self, data: st.DataObject) -> Any:
        """Mostly a registered identity (retired or not), sometimes unknown or invalid."""
        how = data.draw(st.integers(0, 9), label="holder kind")
        if how == 0:
            return self.pick(data, [GHOST, "bad name", ""], "odd holder")
        return self.pick(data, sorted(self.model.identities), "holder")

    def a_lease(self, data: st.DataObject) -> tuple[Any, str, str]:
        """A lease ever granted (current or stale), as a Lease or a pair, or a made-up one."""
        if not self.granted or data.draw(st.integers(0, 7), label="made up?") == 0:
            resource = self.pick(data, RESOURCES, "resource")
            token = self.pick(data, [FAKE_TOKEN, "not-a-token"], "token")
            return (resource, token), resource, token
        if data.draw(st.booleans(), label="the latest lease?"):
            lease = self.granted[-1]
        else:
            lease = self.pick(data, self.granted, "lease")
        if data.draw(st.booleans(), label="as pair?"):
            return (lease.resource, lease.token), lease.resource, lease.token
        return lease, lease.resource, lease.token

    # -- rules ---------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """ann, bob and cat exist."""
        for name in NAMES[:3]:
            self.store.identities.register(name)
            self.model.register(name)

    @precondition(lambda self: len(self.model.identities) < len(NAMES))
    @rule()
    def register(self) -> None:
        """A late identity joins."""
        name = next(n for n in NAMES if n not in self.model.identities)
        self.store.identities.register(name)
        self.model.register(name)

    @precondition(lambda self: sum(not r for r in self.model.identities.values()) > 1)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        """A retired identity keeps its leases until they end but gets no new ones."""
        name = self.pick(data, [n for n, r in self.model.identities.items() if not r], "name")
        self.store.identities.retire(name)
        self.model.retire(name)

    @rule(
        data=st.data(),
        exclusive=st.sampled_from([True, True, False, "yes"]),
        bad_ttl=st.integers(0, 9),
    )
    def acquire(self, data: st.DataObject, exclusive: Any, bad_ttl: int) -> None:
        """acquire grants, replaces the holder's own lease, or refuses with Conflict naming the
        holders in the way."""
        holder = self.a_holder(data)
        if data.draw(st.integers(0, 12), label="bad resource?") == 0:
            resource = self.pick(data, BAD_RESOURCES, "bad resource")
        else:
            resource = self.pick(data, RESOURCES, "resource")
        ttl = self.pick(data, BAD_TTLS if bad_ttl == 0 else TTLS, "ttl")
        # Which statement goes first: the fast INSERT (leases_grant), or the sweeping one
        # (leases_acquire: one call in SWEEP_EVERY). Both must agree with the model.
        fast = data.draw(st.booleans(), label="fast path first?")
        lease_ops._turns = itertools.count(1 if fast else 0)
        try:
            got, expected = self.both(
                lambda: self.store.leases.acquire(holder, resource, ttl=ttl, exclusive=exclusive),
                lambda got: self.model.acquire(
                    holder, resource, ttl, exclusive, None if got is None else got.token
                ),
            )
        except Refused as refused:
            event(f"acquire: refused ({type(refused.__cause__).__name__})")
            return
        path = "fast" if fast else "sweeping"
        event(f"acquire: {'exclusive' if exclusive else 'shared'}, {path}")
        assert lease_view(got) == expected.view()
        self.granted.append(got)

    @rule(data=st.data(), bad_ttl=st.integers(0, 9))
    def renew(self, data: st.DataObject, bad_ttl: int) -> None:
        """renew extends a live lease with its token; expired, released, replaced and made-up
        leases are Conflict (the lease was lost)."""
        value, resource, token = self.a_lease(data)
        ttl = self.pick(data, BAD_TTLS if bad_ttl == 0 else TTLS, "ttl")
        try:
            got, expected = self.both(
                lambda: self.store.leases.renew(value, ttl),
                lambda _: self.model.renew(resource, token, ttl),
            )
        except Refused:
            event("renew: refused")
            return
        event("renew: done")
        assert lease_view(got) == expected.view()
        self.granted.append(got)

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        """release ends a lease (True when it was live) and is idempotent."""
        value, resource, token = self.a_lease(data)
        try:
            got, expected = self.both(
                lambda: self.store.leases.release(value),
                lambda _: self.model.release(resource, token),
            )
        except Refused:
            return
        event(f"release: {got}")
        assert got == expected

    @rule(data=st.data())
    def force_release(self, data: st.DataObject) -> None:
        """force_release ends every lease on a resource and counts the live ones."""
        resource = self.pick(data, [*RESOURCES, *BAD_RESOURCES[:2]], "resource")
        try:
            got, expected = self.both(
                lambda: self.store.leases.force_release(resource),
                lambda _: self.model.force_release(resource),
            )
        except Refused:
            return
        assert got == expected

    @rule(data=st.data())
    def held(self, data: st.DataObject) -> None:
        """held lists live leases under a literal prefix (wildcards are plain characters), of
        one holder when given."""
        prefix = self.pick(data, [*PREFIXES, "nul\x00", 3], "prefix")
        holder = None if data.draw(st.booleans(), label="any holder?") else self.a_holder(data)
        try:
            got, expected = self.both(
                lambda: self.store.leases.held(prefix, holder=holder),
                lambda _: self.model.held(prefix, holder),
            )
        except Refused:
            return
        assert [lease_view(x) for x in got] == ref_views(expected)

    @rule(delta=st.sampled_from(STEPS))
    def advance_clock(self, delta: timedelta) -> None:
        """Time passes: leases run out."""
        self.clock.set(self.model.advance(delta))

    @precondition(lambda self: self.model.held())
    @rule(data=st.data(), extra=st.sampled_from([timedelta(0), timedelta(microseconds=1)]))
    def lease_runs_out(self, data: st.DataObject, extra: timedelta) -> None:
        """The clock moves exactly to a live lease's end (it is no longer live then) or just
        past it, and another identity takes the resource exclusively."""
        live = self.model.held()
        lease = self.pick(data, live, "lease")
        self.clock.set(self.model.advance(lease.expires_at + extra - self.model.now))
        others = [n for n, r in sorted(self.model.identities.items()) if not r]
        taker = self.pick(data, others, "taker")
        try:
            got, expected = self.both(
                lambda: self.store.leases.acquire(taker, lease.resource, ttl=10),
                lambda got: self.model.acquire(
                    taker, lease.resource, 10, True, None if got is None else got.token
                ),
            )
        except Refused:
            event("lease_runs_out: still held by others")
            return
        event("lease_runs_out: taken over")
        assert lease_view(got) == expected.view()
        self.granted.append(got)

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def leases_match(self) -> None:
        """Every live lease, one prefix's and one holder's equal the model's; the table holds
        no two conflicting live leases."""
        self.steps += 1
        self.model.check()
        assert [lease_view(x) for x in self.store.leases.held()] == ref_views(self.model.held())
        prefix = PREFIXES[self.steps % len(PREFIXES)]
        assert [lease_view(x) for x in self.store.leases.held(prefix)] == ref_views(
            self.model.held(prefix)
        )
        names = sorted(self.model.identities)
        who = names[self.steps % len(names)]
        assert [lease_view(x) for x in self.store.leases.held(holder=who)] == ref_views(
            self.model.held("", who)
        )
        with self.store._connection() as conn:
            assert conn.execute(CONFLICTS).fetchone()["n"] == 0


def test_lease_machine(ikigai_store: ik.Store) -> None:
    """Acquire, renew, release, force-release, held and expiry equal the model after every
    step, exclusive and shared."""

    class OnThisStore(LeaseMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )
