"""Leases under real races (committed databases, threads and processes): of 32 racing exclusive
acquirers exactly one wins; shared and exclusive racers never mix; renewals racing expiry and
takeover never leave two live holders; a grant held up while the lease in its way is swept or
released, or while another lease is renewed or granted and then released, never starts before
that lease ended."""

from __future__ import annotations

import itertools
import multiprocessing
import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import ikigai_store as ik
from ikigai_store import leases as lease_ops
from tests.reference_leases import periods_overlap

pytestmark = pytest.mark.db

RACERS = 32


@pytest.fixture
def url(ikigai_empty_db_url: str) -> Iterator[str]:
    """A fresh, migrated database with identities r0..r31."""
    with ik.open(ikigai_empty_db_url) as store:
        for n in range(RACERS):
            store.identities.register(f"r{n}")
    yield ikigai_empty_db_url


def _race(store: ik.Store, names: list[str], resource: str, exclusive: list[bool]) -> list[Any]:
    """Each name tries once to acquire ``resource`` at the same moment (one thread each);
    returns each outcome: a Lease or the exception."""
    barrier = threading.Barrier(len(names))
    results: list[Any] = [None] * len(names)

    def attempt(k: int) -> None:
        barrier.wait(30)
        try:
            results[k] = store.leases.acquire(names[k], resource, ttl=60, exclusive=exclusive[k])
        except ik.IkigaiStoreError as exc:
            results[k] = exc

    threads = [threading.Thread(target=attempt, args=(k,)) for k in range(len(names))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_32_racing_exclusive_acquirers_one_wins(url: str) -> None:
    """32 threads (32 connections) acquire one resource at once, five times over: each round
    exactly one Lease and 31 Conflicts naming the winner."""
    names = [f"r{n}" for n in range(RACERS)]
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for round_ in range(5):
            resource = f"build-slot-{round_}"
            results = _race(store, names, resource, [True] * RACERS)
            won = [r for r in results if isinstance(r, ik.Lease)]
            lost = [r for r in results if isinstance(r, ik.Conflict)]
            assert len(won) == 1, results
            assert len(lost) == RACERS - 1, results
            assert all(f"'{won[0].holder}'" in str(c) for c in lost)
            assert store.leases.held(resource) == won


def test_shared_and_exclusive_racers_never_mix(url: str) -> None:
    """16 shared and 16 exclusive acquirers race for one resource, five times over: either
    exactly one exclusive lease and nothing else, or only shared ones."""
    names = [f"r{n}" for n in range(RACERS)]
    modes = [n % 2 == 0 for n in range(RACERS)]
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for round_ in range(5):
            resource = f"db-{round_}"
            results = _race(store, names, resource, modes)
            won = [r for r in results if isinstance(r, ik.Lease)]
            assert all(isinstance(r, (ik.Lease, ik.Conflict)) for r in results), results
            assert won
            if any(w.exclusive for w in won):
                assert len(won) == 1
            held = store.leases.held(resource)
            assert sorted(x.token for x in held) == sorted(w.token for w in won)


def _acquire_in_process(url: str, names: list[str], start: Any, out: Any) -> None:
    with ik.open(url, migrate=False, pool_size=len(names)) as store:
        barrier = threading.Barrier(len(names))

        def attempt(name: str) -> None:
            barrier.wait(60)
            try:
                got = store.leases.acquire(name, "port:5432", ttl=60)
                out.put(("lease", name, got.token))
            except ik.Conflict as exc:
                out.put(("conflict", name, str(exc)))
            except ik.IkigaiStoreError as exc:
                out.put(("error", name, repr(exc)))

        start.wait(60)
        threads = [threading.Thread(target=attempt, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)


def test_32_acquirers_in_4_processes_one_wins(url: str) -> None:
    """4 processes of 8 threads each acquire one resource at once: one Lease, 31 Conflicts."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    out: Any = ctx.Queue()
    groups = [[f"r{n}" for n in range(p * 8, p * 8 + 8)] for p in range(4)]
    procs = [ctx.Process(target=_acquire_in_process, args=(url, g, start, out)) for g in groups]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every process import and connect before the start
    start.set()
    results = [out.get(timeout=180) for _ in range(RACERS)]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    kinds = [r[0] for r in results]
    assert kinds.count("lease") == 1, results
    assert kinds.count("conflict") == RACERS - 1, results
    with ik.open(url, migrate=False) as store:
        [held] = store.leases.held("port:5432")
        assert held.token == next(r[2] for r in results if r[0] == "lease")


def test_renew_racing_expiry_and_takeover_never_two_live_holders(url: str) -> None:
    """Four holders fight over one resource with 50 ms leases for about three seconds: each
    renews while it can (pausing at random, sometimes past its lease's end), now and then
    releases, and acquires again when its renewal is refused, while a watcher lists the live
    leases. The watcher never sees two; the periods the database granted (acquired_at to the
    last renewed end of each token, or to the database's time just before its release) never
    overlap; and the race really happened (takeovers, releases and refused renewals)."""
    resource, ttl = "hot/file.c", timedelta(milliseconds=50)
    names = ["r0", "r1", "r2", "r3"]
    periods: dict[str, list[datetime]] = {}  # token -> [acquired_at, latest expires_at]
    counts = {"acquired": 0, "renewed": 0, "released": 0, "renew_refused": 0, "acquire_refused": 0}
    lock = threading.Lock()
    seen_two: list[list[ik.Lease]] = []
    stop = time.monotonic() + 3.0

    with ik.open(url, migrate=False, pool_size=len(names) + 2) as store:

        def holder(name: str, seed: int) -> None:
            rng = random.Random(seed)
            lease: ik.Lease | None = None
            while time.monotonic() < stop:
                if lease is None:
                    try:
                        lease = store.leases.acquire(name, resource, ttl=ttl)
                    except ik.Conflict:
                        with lock:
                            counts["acquire_refused"] += 1
                        time.sleep(rng.uniform(0, 0.02))
                        continue
                    with lock:
                        counts["acquired"] += 1
                        periods[lease.token] = [lease.acquired_at, lease.expires_at]
                time.sleep(rng.uniform(0, 0.07))  # sometimes past the lease's end
                try:
                    lease = store.leases.renew(lease, ttl)
                except ik.Conflict:  # the lease was lost (expired, taken over)
                    with lock:
                        counts["renew_refused"] += 1
                    lease = None
                    continue
                with lock:
                    counts["renewed"] += 1
                    periods[lease.token][1] = max(periods[lease.token][1], lease.expires_at)
                if rng.random() < 0.2:
                    with store._connection() as conn:
                        before = conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
                    if store.leases.release(lease):
                        with lock:
                            counts["released"] += 1
                            periods[lease.token][1] = min(periods[lease.token][1], before)
                    lease = None

        def watcher() -> None:
            while time.monotonic() < stop:
                live = store.leases.held(resource)
                if len(live) > 1:
                    seen_two.append(live)

        threads = [threading.Thread(target=holder, args=(n, k)) for k, n in enumerate(names)] + [
            threading.Thread(target=watcher)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)

    assert seen_two == []
    spans = sorted(periods.values())
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"two live leases overlap: one ends {end}, the next starts {start}"
    assert counts["acquired"] > 1 and counts["renewed"] > 0, counts
    assert counts["renew_refused"] > 0 and counts["acquire_refused"] > 0, counts
    assert counts["released"] > 0, counts


def test_every_lease_write_notifies_its_holders_on_commit(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grants, renewals, releases, force-releases and sweeps notify ikigai_lease with the
    holder ids (what a watcher waiting for a resource and the web view listen to), once
    committed; a refused grant (the holder's own lease kept) notifies nothing."""
    with ik.open(url, migrate=False) as store, psycopg.connect(url, autocommit=True) as ear:
        ids = {r.name: r.id for r in store.identities.list()}
        ear.execute("LISTEN ikigai_lease")

        def heard() -> list[str]:
            return sorted(n.payload for n in ear.notifies(timeout=0.5, stop_after=10))

        first = store.leases.acquire("r0", "a.c", ttl=60, exclusive=False)
        assert heard() == [str(ids["r0"])]
        store.leases.acquire("r1", "a.c", ttl=60, exclusive=False)
        assert heard() == [str(ids["r1"])]
        with pytest.raises(ik.Conflict):  # an upgrade refused by the other sharer
            store.leases.acquire("r0", "a.c", ttl=60)
        assert heard() == []
        assert [lease.token for lease in store.leases.held("a.c", holder="r0")] == [first.token]
        store.leases.renew(first, 120)
        assert heard() == [str(ids["r0"])]
        assert store.leases.release(first) is True
        assert heard() == [str(ids["r0"])]
        store.leases.acquire("r2", "b.c", ttl=timedelta(milliseconds=1))
        assert heard() == [str(ids["r2"])]
        time.sleep(0.01)
        monkeypatch.setattr(lease_ops, "_turns", itertools.count(0))  # the next one sweeps
        store.leases.acquire("r3", "c.c", ttl=60)  # sweeps r2's expired lease
        assert heard() == sorted([str(ids["r2"]), str(ids["r3"])])
        assert store.leases.force_release("a.c") == 1
        assert heard() == [str(ids["r1"])]


#: A test-only hold on the grants of one session: an insert into leases made by a session
#: whose ``test.gate`` is on waits, after its row is built and before the exclusion
#: constraint checks it, while the gate's advisory lock (3939) is held.
GATED_SESSION = """
CREATE FUNCTION test_gated_grant() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('test.gate', true) = 'on' THEN
        PERFORM pg_advisory_xact_lock_shared(3939);
    END IF;
    RETURN NEW;
END
$fn$;
CREATE TRIGGER test_gated_grant BEFORE INSERT ON leases
    FOR EACH ROW EXECUTE FUNCTION test_gated_grant();
"""
HELD_AT_SESSION_GATE = """
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND objid = 3939 AND NOT granted
"""


def _gated(url: str, options: str = "") -> ik.Store:
    """A store whose grants are held at the gate (``test.gate``) while its lock is held."""
    return ik.open(
        psycopg.conninfo.make_conninfo(url, options=f"{options} -c test.gate=on".strip()),
        migrate=False,
    )


@pytest.mark.parametrize("path", ["fast", "sweeping"])
@pytest.mark.parametrize("ender", ["swept", "released"])
def test_a_slowed_grant_never_starts_before_the_lease_it_outwaited_ends(
    url: str, monkeypatch: pytest.MonkeyPatch, ender: str, path: str
) -> None:
    """r1 asks for a resource while r0's lease on it is live; r1's statement is held (after
    its row is built, before the exclusion check) until r0's lease has been swept once
    expired, or released, and that committed: r1 is refused, or granted a period that starts
    no earlier than r0's ended (exclusive holders' periods never overlap)."""
    with (
        ik.open(url, migrate=False, pool_size=4) as store,
        _gated(url) as held_store,
        psycopg.connect(url, autocommit=True) as gate,
    ):
        gate.execute(GATED_SESSION)
        # Swept: it must expire during the test; released: it must still be live when released.
        first = store.leases.acquire("r0", "slow/r", ttl=1.5 if ender == "swept" else 60)
        gate.execute("SELECT pg_advisory_lock(3939)")
        monkeypatch.setattr(lease_ops, "_turns", itertools.count(1 if path == "fast" else 0))
        outcome: list[Any] = []

        def second() -> None:
            try:
                outcome.append(held_store.leases.acquire("r1", "slow/r", ttl=60))
            except ik.IkigaiStoreError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=second)
        thread.start()
        while thread.is_alive() and not gate.execute(HELD_AT_SESSION_GATE).fetchone()[0]:
            time.sleep(0.005)
        held_up = thread.is_alive()
        if ender == "swept":
            while gate.execute("SELECT clock_timestamp()").fetchone()[0] <= first.expires_at:
                time.sleep(0.05)
            monkeypatch.setattr(lease_ops, "_turns", itertools.count(0))  # the next one sweeps
            store.leases.acquire("r2", "elsewhere", ttl=60)
            gone = gate.execute("SELECT count(*) FROM leases WHERE token = %s", (first.token,))
            assert gone.fetchone()[0] == 0, "r0's expired lease was swept"
            ended = first.expires_at
        else:
            ended = gate.execute("SELECT clock_timestamp()").fetchone()[0]
            assert store.leases.release(first) is True
        assert store.leases.held("slow/r", holder="r0") == []
        gate.execute("SELECT pg_advisory_unlock(3939)")
        thread.join(30)
    [got] = outcome
    if isinstance(got, ik.Lease):
        periods = [
            (first.resource, first.holder, True, first.acquired_at, ended),
            (got.resource, got.holder, True, got.acquired_at, got.expires_at),
        ]
        assert periods_overlap(periods) is None, (
            f"r1's lease starts at {got.acquired_at}, before r0's ended at {ended} "
            f"(held up at the exclusion check: {held_up})"
        )
    else:
        assert isinstance(got, ik.Conflict), got


T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _at(url: str, seconds: float, *, gated: bool = False) -> ik.Store:
    """A store whose sessions read the database's clock as T0 + ``seconds`` (``ikigai.now``),
    held at the session gate when ``gated``."""
    options = f"-c ikigai.now={(T0 + timedelta(seconds=seconds)).isoformat()}"
    if gated:
        return _gated(url, options)
    return ik.open(psycopg.conninfo.make_conninfo(url, options=options), migrate=False)


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``call`` in a thread; its outcome (a result or an ikigai_store error) is appended."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except ik.IkigaiStoreError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


#: A statement waiting for a lock other than the gate's (a resource's lease lock, a row).
WAITING_BESIDE_THE_GATE = """
SELECT count(*) FROM pg_locks
WHERE NOT granted AND NOT (locktype = 'advisory' AND classid = 0 AND objid = 3939)
"""


def _held_at_gate(gate: psycopg.Connection[Any], thread: threading.Thread) -> None:
    while thread.is_alive() and not gate.execute(HELD_AT_SESSION_GATE).fetchone()[0]:
        time.sleep(0.005)
    assert thread.is_alive(), "the grant should be held at the gate"


def _done_or_waiting(gate: psycopg.Connection[Any], thread: threading.Thread) -> None:
    """Until ``thread``'s call returned or waits for a lock (behind the held grant)."""
    deadline = time.monotonic() + 30
    while thread.is_alive() and not gate.execute(WAITING_BESIDE_THE_GATE).fetchone()[0]:
        assert time.monotonic() < deadline, "the call neither returned nor waits for a lock"
        time.sleep(0.005)


@pytest.mark.parametrize("path", ["fast", "sweeping"])
def test_a_renewal_committed_while_a_grant_is_on_its_way_never_overlaps_it(
    url: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """r0's lease ends at 10 s. r1 asks at 12 s (r0's lease looks expired to it) and is held
    before the exclusion check; meanwhile r0's renewal sent at 9 s (before its end) and its
    release at 13 s come in. Either r0's renewal is refused or r1's grant is: the two recorded
    periods never overlap. (It happened under load: the grant's snapshot showed the lease
    before the renewal, and the renewed lease was deleted before the check could see it.)"""
    with (
        psycopg.connect(url, autocommit=True) as gate,
        _at(url, 0) as at0,
        _at(url, 9) as at9,
        _at(url, 12, gated=True) as at12,
        _at(url, 13) as at13,
    ):
        gate.execute(GATED_SESSION)
        first = at0.leases.acquire("r0", "slow/r", ttl=10)
        gate.execute("SELECT pg_advisory_lock(3939)")
        monkeypatch.setattr(lease_ops, "_turns", itertools.count(1 if path == "fast" else 0))
        asking, asked = _in_thread(lambda: at12.leases.acquire("r1", "slow/r", ttl=10))
        _held_at_gate(gate, asking)
        renewing, renewed = _in_thread(lambda: at9.leases.renew(first, 10))
        _done_or_waiting(gate, renewing)  # it may wait for r1's grant to end
        released_at = None
        if not renewing.is_alive() and isinstance(renewed[0], ik.Lease):
            assert at13.leases.release(first) is True
            released_at = T0 + timedelta(seconds=13)
        gate.execute("SELECT pg_advisory_unlock(3939)")
        asking.join(30)
        renewing.join(30)
    [got], [again] = asked, renewed
    r0_end = first.expires_at
    if isinstance(again, ik.Lease):
        r0_end = released_at or again.expires_at
    else:
        assert isinstance(again, ik.Conflict), again
    periods = [(first.resource, "r0", True, first.acquired_at, r0_end)]
    if isinstance(got, ik.Lease):
        periods.append((got.resource, "r1", True, got.acquired_at, got.expires_at))
    else:
        assert isinstance(got, ik.Conflict), got
    assert periods_overlap(periods) is None, periods


@pytest.mark.parametrize("path", ["fast", "sweeping"])
def test_a_lease_granted_and_released_while_a_grant_is_on_its_way_never_overlaps_it(
    url: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """r1 asks for a free resource at 12 s and is held before the exclusion check; meanwhile
    r2 asks at 11 s and releases at 12.5 s. One of the two grants is refused, or their
    recorded periods do not overlap (r2's lease came and went outside r1's snapshot)."""
    monkeypatch.setattr(lease_ops, "_turns", itertools.count(1 if path == "fast" else 0))
    with (
        psycopg.connect(url, autocommit=True) as gate,
        _at(url, 11) as at11,
        _at(url, 12, gated=True) as at12,
        _at(url, 12.5) as at12_5,
    ):
        gate.execute(GATED_SESSION)
        gate.execute("SELECT pg_advisory_lock(3939)")
        asking, asked = _in_thread(lambda: at12.leases.acquire("r1", "slow/r", ttl=60))
        _held_at_gate(gate, asking)
        other, others = _in_thread(lambda: at11.leases.acquire("r2", "slow/r", ttl=60))
        _done_or_waiting(gate, other)  # it may wait for r1's grant to end
        r2_end = None
        if not other.is_alive() and isinstance(others[0], ik.Lease):
            assert at12_5.leases.release(others[0]) is True
            r2_end = T0 + timedelta(seconds=12.5)
        gate.execute("SELECT pg_advisory_unlock(3939)")
        asking.join(30)
        other.join(30)
    [got], [theirs] = asked, others
    periods = []
    for name, lease, end in (("r1", got, None), ("r2", theirs, r2_end)):
        if isinstance(lease, ik.Lease):
            periods.append((lease.resource, name, True, lease.acquired_at, end or lease.expires_at))
        else:
            assert isinstance(lease, ik.Conflict), lease
    assert len(periods) >= 1
    assert periods_overlap(periods) is None, periods
