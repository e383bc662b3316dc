"""Tasks across connections and processes (committed databases): racing claimers, racing
dependency changes that would each close half of a cycle, racing creators of one task."""

from __future__ import annotations

import functools
import multiprocessing
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ikigai_store as ik
from tests.locks import waiting_on_a_lock

pytestmark = pytest.mark.db

RACERS = 8


@pytest.fixture
def url(ikigai_empty_db_url: str) -> Iterator[str]:
    """A fresh, migrated database with identity 'lead' and task list 'L' owned by it."""
    with ik.open(ikigai_empty_db_url) as store:
        store.identities.register("lead")
        store.tasks.create_list("L", "lead")
    yield ikigai_empty_db_url


def race(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(k)`` for k < count on that many threads, released together; each result or
    the exception it raised."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(k: int) -> None:
        barrier.wait(30)
        try:
            results[k] = work(k)
        except Exception as exc:
            results[k] = exc

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


CLAIM_ROUNDS = 10


def _claim(url: str, who: str, barrier: Any, out: Any) -> None:
    with ik.open(url, migrate=False, pool_size=1) as store:
        store.tasks.get("L", "prize0")  # connected and warm before the first round
        for r in range(CLAIM_ROUNDS):
            barrier.wait(60)
            try:
                task = store.tasks.claim("L", f"prize{r}", who)
                out.put((r, who, "won", task.owner))
            except ik.Conflict as exc:
                out.put((r, who, "conflict", str(exc)))
            except ik.IkigaiStoreError as exc:
                out.put((r, who, type(exc).__name__, str(exc)))


@pytest.mark.slow
def test_racing_claimers_in_processes_one_wins(url: str) -> None:
    """8 processes claim the same task at once, for 10 tasks in turn (a barrier starts each
    round): each time exactly one wins and the 7 others get Conflict naming the winner."""
    ctx = multiprocessing.get_context("spawn")
    with ik.open(url, migrate=False) as store:
        for r in range(CLAIM_ROUNDS):
            store.tasks.upsert("L", f"prize{r}", subject=f"prize {r}")
        barrier, out = ctx.Barrier(RACERS), ctx.Queue()
        procs = [
            ctx.Process(target=_claim, args=(url, f"w{k}", barrier, out)) for k in range(RACERS)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in range(RACERS * CLAIM_ROUNDS)]
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        for r in range(CLAIM_ROUNDS):
            this = [(who, what, text) for n, who, what, text in results if n == r]
            winners = [who for who, what, _ in this if what == "won"]
            assert len(winners) == 1, this
            assert all(
                what == "conflict" and f"held by {winners[0]!r}" in text
                for who, what, text in this
                if who != winners[0]
            ), this
            assert store.tasks.get("L", f"prize{r}").owner == winners[0]


def test_racing_claimers_in_threads_one_wins(url: str) -> None:
    """8 threads, each on its own connection, claim each of 20 tasks at once: one winner per
    task, the others Conflict."""
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for n in range(20):
            store.tasks.upsert("L", f"t{n}", subject=f"task {n}")

            def claim(k: int, n: int = n) -> ik.Task:
                return store.tasks.claim("L", f"t{n}", f"w{k}")

            results = race(RACERS, claim)
            won = [r for r in results if isinstance(r, ik.Task)]
            assert len(won) == 1, results
            assert all(isinstance(r, ik.Conflict) for r in results if r is not won[0]), results
            assert store.tasks.get("L", f"t{n}").owner == won[0].owner


def _hold_lock_then_commit(store: ik.Store, locked: threading.Event, done: threading.Event) -> None:
    with store.transaction():
        store.tasks.upsert("L", "a", blocked_by=["b"])
        locked.set()
        done.wait(60)


def test_cycle_halves_in_overlapping_transactions(url: str) -> None:
    """a blocked by b is written in a transaction still open when b blocked by a is tried on
    another connection: the second waits for the list's lock, then sees the committed edge and
    is refused naming the cycle."""
    with ik.open(url, migrate=False, pool_size=4) as store:
        store.tasks.upsert("L", "a", subject="a")
        store.tasks.upsert("L", "b", subject="b")
        locked, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=_hold_lock_then_commit, args=(store, locked, release))
        outcome: list[Any] = []
        second = threading.Thread(
            target=lambda: outcome.append(
                _catch(lambda: store.tasks.upsert("L", "b", blocked_by=["a"]))
            )
        )
        holder.start()
        try:
            assert locked.wait(30)
            assert store.tasks.get("L", "a").blocked_by == ()  # not committed yet
            second.start()
            deadline = time.monotonic() + 10
            while not waiting_on_a_lock(url, "%task_lists%") and time.monotonic() < deadline:
                time.sleep(0.01)
            assert waiting_on_a_lock(url, "%task_lists%"), (
                "the second change did not wait for the list's lock"
            )
        finally:
            release.set()
            holder.join(30)
            if second.ident is not None:  # started
                second.join(30)
        assert isinstance(outcome[0], ik.InvalidArgument), outcome
        assert "b -> a -> b" in str(outcome[0])
        assert store.tasks.get("L", "a").blocked_by == ("b",)
        assert store.tasks.get("L", "b").blocked_by == ()


def _catch(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ik.IkigaiStoreError as exc:
        return exc


def test_racing_cycle_halves_at_most_one_succeeds(url: str) -> None:
    """Pairs of threads released together each add one edge of a 2-cycle (and triples one
    edge of a 3-cycle), 30 rounds: never more than the edges that keep the list acyclic
    succeed; every refusal is InvalidArgument naming a cycle."""
    with ik.open(url, migrate=False, pool_size=4) as store:
        for r in range(30):
            size = 2 + r % 2
            names = [f"r{r}n{k}" for k in range(size)]
            for n in names:
                store.tasks.upsert("L", n, subject=n)

            def half(k: int, names: list[str] = names) -> ik.Task:
                return store.tasks.upsert("L", names[k], blocked_by=[names[(k + 1) % len(names)]])

            results = race(size, half)
            done = [x for x in results if isinstance(x, ik.Task)]
            refusals = [x for x in results if not isinstance(x, ik.Task)]
            assert len(done) == size - 1, results
            assert all(isinstance(x, ik.InvalidArgument) and "cycle" in str(x) for x in refusals), (
                results
            )
        assert_acyclic(store)


def test_random_edges_from_many_threads_keep_the_graph_acyclic(url: str) -> None:
    """8 threads add random dependencies among 8 tasks for a while: every success leaves the
    committed graph acyclic (checked at the end by a depth-first search)."""
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        names = [f"g{k}" for k in range(8)]
        for n in names:
            store.tasks.upsert("L", n, subject=n)
        outcomes: list[str] = []
        lock = threading.Lock()

        def work(k: int) -> None:
            rng = random.Random(k)
            for _ in range(40):
                me = rng.choice(names)
                blockers = rng.sample([n for n in names if n != me], rng.randint(0, 3))
                got = _catch(functools.partial(store.tasks.upsert, "L", me, blocked_by=blockers))
                with lock:
                    outcomes.append(type(got).__name__)
                assert isinstance(got, (ik.Task, ik.InvalidArgument)), got

        race(RACERS, work)
        assert len(outcomes) == RACERS * 40
        assert {"Task", "InvalidArgument"} <= set(outcomes)
        assert_acyclic(store)


def assert_acyclic(store: ik.Store) -> None:
    """Depth-first search of the committed graph of list 'L'."""
    edges = {t.external_id: t.blocked_by for t in store.tasks.list("L")}
    state: dict[str, int] = {}

    def visit(node: str) -> None:
        state[node] = 1
        for nxt in edges[node]:
            assert state.get(nxt) != 1, f"cycle through {node} -> {nxt}"
            if nxt not in state:
                visit(nxt)
        state[node] = 2

    for node in edges:
        if node not in state:
            visit(node)


def test_racing_creators_make_one_row(url: str) -> None:
    """8 threads upsert the same new external id at once: one row, every caller gets its id."""
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for n in range(10):
            key = f"new{n}"

            def create(k: int, key: str = key) -> ik.Task:
                return store.tasks.upsert("L", key, subject=f"from {k}", metadata={f"k{k}": k})

            results = race(RACERS, create)
            assert all(isinstance(r, ik.Task) for r in results), results
            assert len({r.id for r in results}) == 1
            stored = store.tasks.get("L", key)
            assert stored.metadata == {f"k{k}": k for k in range(RACERS)}  # every merge landed
        with store._connection() as conn:
            count = conn.execute(
                "SELECT count(*) AS n FROM tasks WHERE external_id LIKE 'new%'"
            ).fetchone()
            assert count is not None and count["n"] == 10


def task_completions(store: ik.Store, external_id: str) -> int:
    """How many task_complete activities name ``external_id`` of list 'L'."""
    found = store.activities.feed(activity_type="task_complete", limit=1000)
    return sum(
        a.metadata == {**a.metadata, "list_id": "L", "external_id": external_id} for a in found
    )


def test_racing_completers_record_one_activity(url: str) -> None:
    """8 threads complete the same task at once (10 tasks, existing ones and new ones created
    completed): each task gets exactly one task_complete activity."""
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for n in range(10):
            key = f"done{n}"
            if n % 2 == 0:
                store.tasks.upsert("L", key, subject=f"task {n}", owner="lead")

            def complete(k: int, key: str = key) -> ik.Task:
                return store.tasks.upsert(
                    "L", key, subject=f"from {k}", status="completed", owner="lead"
                )

            results = race(RACERS, complete)
            assert all(isinstance(r, ik.Task) for r in results), results
            assert len({(r.id, r.completed_at) for r in results}) == 1, results
            assert task_completions(store, key) == 1


def _waiting_to_complete(url: str) -> bool:
    """Whether a completing upsert waits for a lock (another transaction's row). Matched on
    the function task_upsert calls (migration 0036); on Citus the wait is on the list's
    worker (``waiting_on_a_lock`` asks there too)."""
    return waiting_on_a_lock(url, "%ikigai_task_upsert(%")


@pytest.mark.parametrize(
    ("exists", "first_status"),
    [(True, "completed"), (False, "completed"), (False, None)],
    ids=["completed by the first", "created completed by the first", "created by the first"],
)
def test_completion_waiting_for_another_records_once(
    url: str, exists: bool, first_status: str | None
) -> None:
    """A task is completed, created completed, or created pending in a transaction still open
    when another connection completes it: the second waits for the first, then decides on the
    committed row, not on its older snapshot: one task_complete activity in all (the first's,
    or the second's when the first did not complete it)."""
    with ik.open(url, migrate=False, pool_size=4) as store:
        if exists:
            store.tasks.upsert("L", "x", subject="x", owner="lead")
        opened, finish = threading.Event(), threading.Event()

        def first() -> None:
            with store.transaction():
                store.tasks.upsert("L", "x", subject="x", status=first_status, owner="lead")
                opened.set()
                finish.wait(60)

        holder = threading.Thread(target=first)
        outcome: list[Any] = []
        second = threading.Thread(
            target=lambda: outcome.append(
                _catch(lambda: store.tasks.upsert("L", "x", subject="y", status="completed"))
            )
        )
        holder.start()
        try:
            assert opened.wait(30)
            second.start()
            deadline = time.monotonic() + 10
            while not _waiting_to_complete(url) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _waiting_to_complete(url), "the second completion did not wait"
        finally:
            finish.set()
            holder.join(30)
            if second.ident is not None:
                second.join(30)
        [got] = outcome
        assert isinstance(got, ik.Task), got
        assert (got.subject, got.owner, got.status) == ("y", "lead", "completed")
        assert got.completed_at == store.tasks.get("L", "x").completed_at
        assert task_completions(store, "x") == 1


def test_racing_releases_one_wins(url: str) -> None:
    """8 threads release the same in_progress task as its holder: one succeeds, the others
    find it pending (InvalidArgument)."""
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for n in range(10):
            key = f"rel{n}"
            store.tasks.upsert("L", key, subject=key)
            store.tasks.claim("L", key, "holder")
            results = race(RACERS, lambda k, key=key: store.tasks.release("L", key, "holder"))
            won = [r for r in results if isinstance(r, ik.Task)]
            assert len(won) == 1, results
            assert all(
                isinstance(r, ik.InvalidArgument) and "pending" in str(r)
                for r in results
                if r is not won[0]
            ), results


def test_release_racing_claims_never_two_owners(url: str) -> None:
    """The holder releases while 7 threads claim the task (20 rounds): the release succeeds,
    at most one claimer wins, every other claimer gets Conflict naming the holder or the
    winner, and the task ends owned by the winner (or by nobody)."""
    with ik.open(url, migrate=False, pool_size=RACERS) as store:
        for n in range(20):
            key = f"swap{n}"
            store.tasks.upsert("L", key, subject=key)
            store.tasks.claim("L", key, "holder")

            def work(k: int, key: str = key) -> ik.Task:
                if k == 0:
                    return store.tasks.release("L", key, "holder")
                return store.tasks.claim("L", key, f"w{k}")

            results = race(RACERS, work)
            assert isinstance(results[0], ik.Task), results
            won = [r for r in results[1:] if isinstance(r, ik.Task)]
            assert len(won) <= 1, results
            owners = {"holder", *(w.owner for w in won)}
            assert all(
                isinstance(r, ik.Conflict) and any(f"held by {o!r}" in str(r) for o in owners)
                for r in results[1:]
                if not isinstance(r, ik.Task)
            ), results
            final = store.tasks.get("L", key)
            assert final.owner == (won[0].owner if won else None)
            assert final.status == ("in_progress" if won else "pending")
