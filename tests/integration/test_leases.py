"""Leases on both faces: exclusive and shared grants, refusals naming the holder, expiry on the
database clock, renew/release with tokens, force-release, literal prefixes, bad input."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store import leases as lease_ops
from ikigai_store.leases import MAX_TTL
from tests.mailtools import EPOCH, Clock, rows

pytestmark = pytest.mark.db

SECOND = timedelta(seconds=1)


@pytest.fixture
def clock(ikigai_store: Any) -> Clock:
    """ann, bob and cat exist; the database clock stands at EPOCH."""
    for name in ("ann", "bob", "cat"):
        ikigai_store.identities.register(name)
    return Clock(ikigai_store, EPOCH)


@pytest.fixture(params=["fast", "sweeping"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every acquire of the test takes one path first: the fast INSERT (leases_grant), or the
    statement that replaces and sweeps (leases_acquire)."""
    fast = request.param == "fast"
    monkeypatch.setattr(lease_ops, "SWEEP_EVERY", 2**62 if fast else 1)
    monkeypatch.setattr(lease_ops, "_turns", itertools.count(1))
    return str(request.param)


def table(store: Any) -> list[tuple[Any, ...]]:
    """Every row of leases, as stored."""
    with store._connection() as conn:
        return [
            tuple(r.values()) for r in conn.execute("SELECT * FROM leases ORDER BY id").fetchall()
        ]


@pytest.mark.usefixtures("path")
def test_acquire_returns_the_lease(ikigai_store: Any, clock: Clock) -> None:
    """A grant starts now and ends ttl later (timedelta or seconds); exclusive by default."""
    got = ikigai_store.leases.acquire("ann", "src/main.c", ttl=30)
    assert (got.resource, got.holder, got.exclusive) == ("src/main.c", "ann", True)
    assert (got.acquired_at, got.expires_at) == (EPOCH, EPOCH + 30 * SECOND)
    shared = ikigai_store.leases.acquire(
        ikigai_store.identities.get("bob"), "docs", ttl=timedelta(minutes=2), exclusive=False
    )
    assert (shared.holder, shared.exclusive, shared.expires_at) == (
        "bob",
        False,
        EPOCH + timedelta(minutes=2),
    )
    assert got.token != shared.token
    assert ikigai_store.leases.held() == [shared, got]  # by resource


@pytest.mark.usefixtures("path")
def test_a_second_exclusive_holder_is_refused_naming_the_holder(
    ikigai_store: Any, clock: Clock
) -> None:
    """Conflict names the holder and when its lease ends; nothing is written."""
    held = ikigai_store.leases.acquire("ann", "build", ttl=60)
    before = table(ikigai_store)
    for exclusive in (True, False):
        with pytest.raises(ik.Conflict) as refused:
            ikigai_store.leases.acquire("bob", "build", ttl=5, exclusive=exclusive)
        assert "'ann'" in str(refused.value)
        assert held.expires_at.isoformat() in str(refused.value)
        assert refused.value.constraint == "leases_exclusion"
    assert table(ikigai_store) == before


@pytest.mark.usefixtures("path")
def test_shared_leases_coexist_but_exclude_an_exclusive_one(
    ikigai_store: Any, clock: Clock
) -> None:
    """Shared leases coexist; an exclusive request is refused while any other holder shares,
    naming them all; once they end it is granted."""
    a = ikigai_store.leases.acquire("ann", "port:8080", ttl=10, exclusive=False)
    b = ikigai_store.leases.acquire("bob", "port:8080", ttl=20, exclusive=False)
    with pytest.raises(ik.Conflict) as refused:
        ikigai_store.leases.acquire("cat", "port:8080", ttl=5)
    assert "'ann'" in str(refused.value) and "'bob'" in str(refused.value)
    assert b.expires_at.isoformat() in str(refused.value)  # free when the last one ends
    assert ikigai_store.leases.release(a) is True
    clock.set(b.expires_at)
    got = ikigai_store.leases.acquire("cat", "port:8080", ttl=5)
    assert got.exclusive and ikigai_store.leases.held("port") == [got]


@pytest.mark.usefixtures("path")
def test_an_expired_lease_frees_the_resource_by_itself(ikigai_store: Any, clock: Clock) -> None:
    """At its expires_at a lease is no longer live: another holder takes the resource, and the
    old token can neither renew nor release it."""
    old = ikigai_store.leases.acquire("ann", "src/a.c", ttl=10)
    clock.set(old.expires_at - timedelta(microseconds=1))
    with pytest.raises(ik.Conflict):
        ikigai_store.leases.acquire("bob", "src/a.c", ttl=10)
    clock.set(old.expires_at)
    assert ikigai_store.leases.held() == []
    new = ikigai_store.leases.acquire("bob", "src/a.c", ttl=10)
    with pytest.raises(ik.Conflict, match=r"src/a\.c"):
        ikigai_store.leases.renew(old, 60)
    assert ikigai_store.leases.release(old) is False
    assert ikigai_store.leases.held() == [new]


def test_renew_extends_a_live_lease_only(ikigai_store: Any, clock: Clock) -> None:
    """renew keeps the token and the start and moves the end to ttl from now; an expired lease
    is Conflict (saying when it expired) even when nobody took the resource."""
    got = ikigai_store.leases.acquire("ann", "src/a.c", ttl=10)
    clock.advance(seconds=8)
    renewed = ikigai_store.leases.renew(got, 10)
    assert (renewed.token, renewed.acquired_at) == (got.token, got.acquired_at)
    assert renewed.expires_at == EPOCH + 18 * SECOND
    assert ikigai_store.leases.renew((got.resource, got.token), 1).expires_at == (
        EPOCH + 9 * SECOND
    )
    clock.advance(seconds=1)
    before = table(ikigai_store)
    with pytest.raises(ik.Conflict, match="expired at"):
        ikigai_store.leases.renew(got, 60)
    assert table(ikigai_store) == before


@pytest.mark.usefixtures("path")
def test_acquiring_again_replaces_the_holders_own_lease(ikigai_store: Any, clock: Clock) -> None:
    """The same holder acquiring again gets a new token, mode and expiry; its old token is dead.
    An upgrade refused by another sharer leaves the holder's lease as it was."""
    first = ikigai_store.leases.acquire("ann", "db", ttl=10, exclusive=False)
    again = ikigai_store.leases.acquire("ann", "db", ttl=10, exclusive=False)  # shared on shared
    assert ikigai_store.leases.held() == [again]
    second = ikigai_store.leases.acquire("ann", "db", ttl=30)
    assert second.token != again.token and second.exclusive
    assert ikigai_store.leases.held() == [second]
    for old in (first, again):
        with pytest.raises(ik.Conflict):
            ikigai_store.leases.renew(old, 10)
    third = ikigai_store.leases.acquire("ann", "db", ttl=30, exclusive=False)
    bob = ikigai_store.leases.acquire("bob", "db", ttl=30, exclusive=False)
    with pytest.raises(ik.Conflict, match="'bob'"):
        ikigai_store.leases.acquire("ann", "db", ttl=30)
    assert ikigai_store.leases.held("db") == [third, bob]


def test_release_is_idempotent_and_token_guarded(ikigai_store: Any, clock: Clock) -> None:
    """release returns True for a live lease, then False; a wrong token or resource ends
    nothing; releasing an expired lease returns False."""
    got = ikigai_store.leases.acquire("ann", "a", ttl=10)
    assert ikigai_store.leases.release(("a", "00000000-0000-4000-8000-000000000000")) is False
    assert ikigai_store.leases.release(("b", got.token)) is False
    assert ikigai_store.leases.held() == [got]
    assert ikigai_store.leases.release(got) is True
    assert ikigai_store.leases.release(got) is False
    late = ikigai_store.leases.acquire("ann", "a", ttl=1)
    clock.advance(seconds=2)
    assert ikigai_store.leases.release(late) is False


def test_force_release_ends_every_lease_on_the_resource(ikigai_store: Any, clock: Clock) -> None:
    """force_release removes live and expired leases of one exact resource and counts the
    live ones; other resources (even under it) are untouched."""
    ikigai_store.leases.acquire("ann", "r", ttl=1, exclusive=False)
    clock.advance(seconds=2)
    b = ikigai_store.leases.acquire("bob", "r", ttl=10, exclusive=False)
    c = ikigai_store.leases.acquire("cat", "r", ttl=10, exclusive=False)
    other = ikigai_store.leases.acquire("ann", "r/x", ttl=10)
    assert ikigai_store.leases.force_release("r") == 2
    assert ikigai_store.leases.held() == [other]
    assert ikigai_store.leases.force_release("r") == 0
    assert not ikigai_store.leases.release(b) and not ikigai_store.leases.release(c)


def test_held_prefixes_are_literal(ikigai_store: Any, clock: Clock) -> None:
    """% and _ in a prefix are plain characters; held filters by holder; an unknown holder is
    NotFound; the order is bytewise by resource."""
    names = ["src/a%b", "src/a_b", "src/axb", "src/b", "srd", "Z", "é"]
    made = {n: ikigai_store.leases.acquire("ann", n, ttl=10) for n in names}
    bob = ikigai_store.leases.acquire("bob", "src/c", ttl=10)

    def held(prefix: str, **kw: Any) -> list[str]:
        return [x.resource for x in ikigai_store.leases.held(prefix, **kw)]

    assert held("src/a%") == ["src/a%b"]
    assert held("src/a_") == ["src/a_b"]
    assert held("src/") == ["src/a%b", "src/a_b", "src/axb", "src/b", "src/c"]
    assert held("") == ["Z", "src/a%b", "src/a_b", "src/axb", "src/b", "src/c", "srd", "é"]
    assert held("%") == [] and held("_") == []
    assert ikigai_store.leases.held(holder="bob") == [bob]
    assert held("src/", holder="ann") == ["src/a%b", "src/a_b", "src/axb", "src/b"]
    assert ikigai_store.leases.held(holder="cat") == []
    with pytest.raises(ik.NotFound, match="ghost"):
        ikigai_store.leases.held(holder="ghost")
    assert made["é"].resource == "é"


@pytest.mark.usefixtures("path")
def test_unknown_and_retired_holders(ikigai_store: Any, clock: Clock) -> None:
    """An unknown holder is NotFound, a retired one InvalidArgument; a retired holder's lease
    lives until it ends."""
    kept = ikigai_store.leases.acquire("cat", "x", ttl=10)
    ikigai_store.identities.retire("cat")
    with pytest.raises(ik.NotFound, match="ghost"):
        ikigai_store.leases.acquire("ghost", "x", ttl=10)
    with pytest.raises(ik.InvalidArgument, match="retired"):
        ikigai_store.leases.acquire("cat", "y", ttl=10)
    assert ikigai_store.leases.held() == [kept]
    assert ikigai_store.leases.renew(kept, 20).expires_at == EPOCH + 20 * SECOND


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        (("bad name", "r"), {"ttl": 1}, "holder"),
        ((None, "r"), {"ttl": 1}, "holder"),
        (("ann", ""), {"ttl": 1}, "resource"),
        (("ann", "x" * 513), {"ttl": 1}, "resource"),
        (("ann", "a\x00b"), {"ttl": 1}, "NUL"),
        (("ann", b"r"), {"ttl": 1}, "resource"),
        (("ann", "r"), {"ttl": 0}, "ttl"),
        (("ann", "r"), {"ttl": -5}, "ttl"),
        (("ann", "r"), {"ttl": float("inf")}, "ttl"),
        (("ann", "r"), {"ttl": float("nan")}, "ttl"),
        (("ann", "r"), {"ttl": 1e-9}, "ttl must be at least 1 microsecond"),
        (("ann", "r"), {"ttl": 1e-7}, "ttl must be at least 1 microsecond"),
        (("ann", "r"), {"ttl": True}, "ttl"),
        (("ann", "r"), {"ttl": "60"}, "ttl"),
        (("ann", "r"), {"ttl": MAX_TTL + timedelta(microseconds=1)}, "ttl"),
        (("ann", "r"), {"ttl": MAX_TTL.total_seconds() + 1}, "ttl"),
        (("ann", "r"), {"ttl": timedelta(seconds=-1)}, "ttl"),
        (("ann", "r"), {"ttl": 1, "exclusive": 1}, "exclusive"),
    ],
)
def test_bad_acquire_arguments(
    ikigai_store: Any, clock: Clock, args: tuple[Any, ...], kwargs: dict[str, Any], named: str
) -> None:
    """Each bad argument is InvalidArgument naming it, and nothing is written."""
    with pytest.raises(ik.InvalidArgument, match=named):
        ikigai_store.leases.acquire(*args, **kwargs)
    assert rows(ikigai_store, "leases") == 0


def test_bad_lease_arguments(ikigai_store: Any, clock: Clock) -> None:
    """renew/release/force_release/held refuse what is not a lease, a resource or a prefix."""
    got = ikigai_store.leases.acquire("ann", "r", ttl=MAX_TTL)
    assert got.expires_at == EPOCH + MAX_TTL
    before = table(ikigai_store)
    for bad in [("r",), ("r", "nope"), ("", got.token), "r", None, (1, got.token)]:
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.leases.renew(bad, 10)
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.leases.release(bad)
    with pytest.raises(ik.InvalidArgument, match="ttl"):
        ikigai_store.leases.renew(got, 0)
    for bad_resource in ["", None, "x" * 513]:
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.leases.force_release(bad_resource)
    for bad_prefix in [None, 3, "a\x00", "x" * 513]:
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.leases.held(bad_prefix)
    with pytest.raises(ik.InvalidArgument, match="holder"):
        ikigai_store.leases.held(holder="bad name")
    assert table(ikigai_store) == before


def test_the_database_refuses_overlapping_leases_itself(ikigai_store: Any, clock: Clock) -> None:
    """Whatever the code does: a raw INSERT of a lease overlapping a live exclusive one (or an
    exclusive one over a live shared one) violates leases_exclusion."""
    ikigai_store.leases.acquire("ann", "x", ttl=60)
    ikigai_store.leases.acquire("ann", "y", ttl=60, exclusive=False)
    insert = (
        "INSERT INTO leases (resource, holder_id, exclusive, expires_at) "
        "SELECT %s, id, %s, ikigai_now() + interval '1 second' FROM identities WHERE name = 'bob'"
    )
    for resource, exclusive in [("x", True), ("x", False), ("y", True)]:
        with pytest.raises(ik.Conflict) as refused, ikigai_store._connection() as conn:
            conn.execute(insert, [resource, exclusive])
        assert refused.value.constraint == "leases_exclusion"
    with ikigai_store._connection() as conn:  # a shared lease beside a shared one is fine
        conn.execute(insert, ["y", False])
        # a lease that starts after another ends does not overlap it
        conn.execute(
            "INSERT INTO leases (resource, holder_id, exclusive, acquired_at, expires_at) "
            "SELECT 'x', id, true, ikigai_now() + interval '60 seconds', "
            "ikigai_now() + interval '61 seconds' FROM identities WHERE name = 'bob'"
        )


def test_acquire_sweeps_expired_leases(ikigai_store: Any, clock: Clock) -> None:
    """Expired leases are removed by later acquires (up to 32 by one call in SWEEP_EVERY), so
    the table holds little more than the live leases without a cleanup job."""
    for n in range(40):
        ikigai_store.leases.acquire("ann", f"tmp/{n}", ttl=1)
    clock.advance(seconds=5)
    for n in range(lease_ops.SWEEP_EVERY):  # one of them sweeps 32 of the 40
        ikigai_store.leases.acquire("bob", f"live/{n}", ttl=60)
    assert rows(ikigai_store, "leases") == lease_ops.SWEEP_EVERY + 8
    for n in range(lease_ops.SWEEP_EVERY, 2 * lease_ops.SWEEP_EVERY):  # and one the last 8
        ikigai_store.leases.acquire("bob", f"live/{n}", ttl=60)
    assert rows(ikigai_store, "leases") == 2 * lease_ops.SWEEP_EVERY
    assert len(ikigai_store.leases.held()) == 2 * lease_ops.SWEEP_EVERY


def test_acquire_only_sweeps_one_call_in_sweep_every(
    ikigai_store: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other calls grant by the fast INSERT alone: expired leases stay until a sweeping
    call (they free their resource by themselves meanwhile)."""
    ikigai_store.leases.acquire("ann", "tmp", ttl=1)
    clock.advance(seconds=5)
    monkeypatch.setattr(lease_ops, "_turns", itertools.count(1))
    for n in range(lease_ops.SWEEP_EVERY - 1):
        ikigai_store.leases.acquire("bob", f"live/{n}", ttl=60)
    assert rows(ikigai_store, "leases") == lease_ops.SWEEP_EVERY  # ann's expired one is kept
    assert ikigai_store.leases.acquire("bob", "tmp", ttl=60).holder == "bob"  # expired: free
    assert rows(ikigai_store, "leases") == lease_ops.SWEEP_EVERY  # ann's swept: the turn came


def test_times_follow_the_database_clock(ikigai_store: Any) -> None:
    """Without a test clock, a lease starts at the database's now (not this process's)."""
    ikigai_store.identities.register("dan")
    before = datetime.now(UTC)
    got = ikigai_store.leases.acquire("dan", "clockless", ttl=5)
    assert abs((got.acquired_at - before).total_seconds()) < 60
    assert got.expires_at - got.acquired_at == 5 * SECOND
