"""Reviews and plan reviews under real concurrency: threads, asyncio tasks and processes on
their own connections, committing. Iterations are numbered 1..N without gaps or duplicates;
of racing state changes exactly one wins, and only the winner's mail and activity exist."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import ikigai_store as ik
from ikigai_store.migrate import apply as migrate
from ikigai_store.testing import drop_test_database, fresh_database, test_database_name

pytestmark = pytest.mark.db

RACERS = 8


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(ikigai_db_url: str) -> Iterator[ik.Store]:
    """A committing store with a connection per racer."""
    with ik.Store(ikigai_db_url, pool_size=RACERS) as s:
        yield s


@pytest.fixture
def people(store: ik.Store) -> tuple[str, str, str]:
    """(requester, first reviewer, second reviewer), fresh names."""
    names = (fresh("req"), fresh("rev"), fresh("rev2"))
    for name in names:
        store.identities.register(name)
    return names


def review_in(store: ik.Store, people: tuple[str, str, str], state: str) -> ik.Review:
    requester, *reviewers = people
    review = store.reviews.create(requester, reviewers=reviewers, branch="race")
    for event in {"new": [], "under_review": ["submit", "start"]}[state]:
        review = store.reviews.fire(review, event)
    return review


def race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls at once (one thread each, released together); their results or the
    exceptions they raised, in order."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(k: int) -> None:
        barrier.wait()
        try:
            out[k] = calls[k]()
        except Exception as exc:  # the refusals are the point
            out[k] = exc

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


def written(url: str, review_id: str, thread_id: str) -> tuple[int, list[tuple[str, str]]]:
    """(mails on the thread, [(identity, activity type)] of the review) as committed."""
    with psycopg.connect(url) as conn:
        mails = conn.execute("SELECT count(*) FROM mail WHERE thread_id = %s", (thread_id,))
        n = int(mails.fetchone()[0])  # type: ignore[index]
        acts = conn.execute(
            "SELECT i.name, a.type FROM activities AS a JOIN identities AS i "
            "ON i.id = a.identity_id WHERE a.metadata ->> 'review_id' = %s ORDER BY a.id",
            (review_id,),
        ).fetchall()
    return n, [(a, b) for a, b in acts]


def test_racing_iterations_are_numbered_1_to_8(
    store: ik.Store, people: tuple[str, str, str], ikigai_db_url: str
) -> None:
    """8 threads record an iteration of one review at once: numbers 1..8, each once, and one
    mail and one activity per iteration."""
    review = review_in(store, people, "under_review")
    got = race(
        [
            lambda k=k: store.reviews.record_iteration(review, people[1], "comment", f"pass {k}")
            for k in range(RACERS)
        ]
    )
    assert sorted(it.iteration_num for it in got) == list(range(1, RACERS + 1))
    assert [it.iteration_num for it in store.reviews.iterations(review)] == list(
        range(1, RACERS + 1)
    )
    assert store.reviews.get(review).iterations == RACERS
    mails, acts = written(ikigai_db_url, review.review_id, review.thread_id)
    assert mails == 1 + RACERS  # the request, then one per iteration
    assert acts.count((people[1], "review_completed")) == RACERS


def test_racing_iterations_async(ikigai_db_url: str, people: tuple[str, str, str]) -> None:
    """The same on the async face: 8 tasks on an AsyncStore with 8 connections."""

    async def main() -> list[int]:
        async with ik.open_async(ikigai_db_url, pool_size=RACERS) as s:
            requester, *reviewers = people
            review = await s.reviews.create(requester, reviewers=reviewers)
            review = await s.reviews.start(await s.reviews.submit(review))
            got = await asyncio.gather(
                *(
                    s.reviews.record_iteration(review, reviewers[0], "comment", f"{k}")
                    for k in range(RACERS)
                )
            )
            stored = await s.reviews.iterations(review)
            assert [it.iteration_num for it in stored] == list(range(1, RACERS + 1))
            return [it.iteration_num for it in got]

    assert sorted(asyncio.run(main())) == list(range(1, RACERS + 1))


def _record_in_process(url: str, review_id: str, reviewer: str, start: Any, out: Any) -> None:
    with ik.Store(url, pool_size=1) as s:
        start.wait()
        for k in range(2):
            out.put(
                s.reviews.record_iteration(review_id, reviewer, "comment", f"{k}").iteration_num
            )


def test_racing_iterations_across_processes(
    store: ik.Store, people: tuple[str, str, str], ikigai_db_url: str
) -> None:
    """4 processes record 2 iterations each: numbers 1..8, each once."""
    review = review_in(store, people, "under_review")
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_record_in_process,
            args=(ikigai_db_url, review.review_id, people[1], start, out),
        )
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    start.set()
    numbers = [out.get(timeout=120) for _ in range(8)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(numbers) == list(range(1, 9))
    assert store.reviews.get(review).iterations == 8


@pytest.mark.parametrize("decision", ["approve", "iteration"])
def test_a_decision_racing_a_cancel(
    store: ik.Store, people: tuple[str, str, str], ikigai_db_url: str, decision: str
) -> None:
    """approve (or an approving iteration) and cancel at once, 10 times: exactly one applies
    each time, the loser is InvalidArgument naming the winner's state, and only the winner's
    mail and activity were written."""
    requester, reviewer, _ = people
    wins: dict[str, int] = {"approved": 0, "cancelled": 0}
    for _ in range(10):
        review = review_in(store, people, "under_review")
        before = written(ikigai_db_url, review.review_id, review.thread_id)

        def decide(review: ik.Review = review) -> Any:
            if decision == "approve":
                return store.reviews.approve(review)
            return store.reviews.record_iteration(review, reviewer, "approve", "ok")

        got = race([decide, lambda review=review: store.reviews.cancel(review)])
        errors = [g for g in got if isinstance(g, Exception)]
        assert len(errors) == 1 and isinstance(errors[0], ik.InvalidArgument), got
        final = store.reviews.get(review)
        wins[final.state] += 1
        assert f"is {final.state} (terminal)" in str(errors[0])
        mails, acts = written(ikigai_db_url, review.review_id, review.thread_id)
        assert mails == before[0] + 1
        winner = (
            (reviewer, "review_approved")
            if final.state == "approved"
            else (requester, "review_completed")
        )
        assert acts == [*before[1], winner]
        assert (final.iterations == 1) == (decision == "iteration" and final.state == "approved")
    assert sum(wins.values()) == 10


def test_a_decision_racing_a_cancel_async(ikigai_db_url: str, people: tuple[str, str, str]) -> None:
    """The same race on the async face, 10 times: exactly one of approve and cancel applies,
    and only its mail exists."""

    async def main() -> list[str]:
        states = []
        async with ik.open_async(ikigai_db_url, pool_size=2) as s:
            requester, *reviewers = people
            for _ in range(10):
                review = await s.reviews.create(requester, reviewers=reviewers)
                review = await s.reviews.start(await s.reviews.submit(review))
                got = await asyncio.gather(
                    s.reviews.approve(review), s.reviews.cancel(review), return_exceptions=True
                )
                assert sum(isinstance(g, ik.InvalidArgument) for g in got) == 1, got
                final = await s.reviews.get(review)
                mails = await s.mail.thread(review.thread_id)
                assert [m.metadata["event"] for m in mails] == [
                    "submit",
                    "approve" if final.state == "approved" else "cancel",
                ]
                states.append(final.state)
        return states

    assert set(asyncio.run(main())) <= {"approved", "cancelled"}


def test_racing_starts_have_one_winner(
    store: ik.Store, people: tuple[str, str, str], ikigai_db_url: str
) -> None:
    """8 reviewers start one review at once: one wins, 7 are told it is under_review; one
    review_started activity."""
    review = review_in(store, people, "new")
    review = store.reviews.submit(review)
    got = race([lambda: store.reviews.start(review) for _ in range(RACERS)])
    won = [g for g in got if isinstance(g, ik.Review)]
    lost = [g for g in got if isinstance(g, ik.InvalidArgument)]
    assert len(won) == 1 and len(lost) == RACERS - 1
    assert all("is under_review; cannot start" in str(e) for e in lost)
    _, acts = written(ikigai_db_url, review.review_id, review.thread_id)
    assert [t for _, t in acts].count("review_started") == 1


def test_racing_resolutions_have_one_winner(store: ik.Store, people: tuple[str, str, str]) -> None:
    """8 callers resolve one issue at once (various statuses): one wins; the rest are told it
    is already resolved."""
    review = review_in(store, people, "under_review")
    [issue] = store.reviews.record_iteration(
        review,
        people[1],
        "comment",
        "x",
        issues=[{"issue_type": "bug", "severity": "low", "title": "t", "description": "d"}],
    ).issues
    statuses = ["fixed", "wont_fix", "duplicate"] * 3
    got = race([lambda s=s: store.reviews.resolve_issue(issue.id, s) for s in statuses[:RACERS]])
    won = [g for g in got if isinstance(g, ik.ReviewIssue)]
    assert len(won) == 1
    assert all("already" in str(g) for g in got if isinstance(g, Exception))
    assert store.reviews.issues(review)[0].status == won[0].status


def test_racing_plan_decisions_have_one_winner(store: ik.Store, ikigai_db_url: str) -> None:
    """8 deciders decide one plan at once: one decision stands, one mail and one plan_decided."""
    requester, reviewer = fresh("planner"), fresh("lead")
    for name in (requester, reviewer):
        store.identities.register(name)
    plan = store.plans.submit(requester, "p.md", "T", "s", reviewer=reviewer)
    states = ["approved", "rejected", "changes_requested"] * 3
    got = race([lambda s=s: store.plans.decide(plan, s) for s in states[:RACERS]])
    won = [g for g in got if isinstance(g, ik.PlanReview)]
    assert len(won) == 1
    assert sum(isinstance(g, ik.InvalidArgument) for g in got) == RACERS - 1
    assert store.plans.get(plan).state == won[0].state
    with psycopg.connect(ikigai_db_url) as conn:
        mails = conn.execute("SELECT count(*) FROM mail WHERE thread_id = %s", (plan.thread_id,))
        decided = conn.execute(
            "SELECT count(*) FROM activities WHERE type = 'plan_decided' "
            "AND metadata ->> 'plan_review_id' = %s",
            (plan.plan_review_id,),
        )
        assert (mails.fetchone()[0], decided.fetchone()[0]) == (2, 1)  # type: ignore[index]


@pytest.fixture
def humanless_db(ikigai_server_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated database of its own, where no "User" identity exists yet."""
    name = test_database_name(request.path, "human")
    url = fresh_database(ikigai_server_url, name)
    migrate(url)
    yield url
    drop_test_database(ikigai_server_url, name)


def test_first_submissions_to_the_human_race(humanless_db: str) -> None:
    """8 first plan submissions to "User" at once all succeed, and register it once."""
    with ik.Store(humanless_db, pool_size=RACERS) as s:
        s.identities.register("planner")
        got = race([lambda: s.plans.submit("planner", "p.md", "T", "s") for _ in range(RACERS)])
        assert all(isinstance(g, ik.PlanReview) for g in got), got
        assert len({g.plan_review_id for g in got}) == RACERS
        assert [i.name for i in s.identities.list()].count("User") == 1


def test_a_decision_wakes_the_requester(
    store: ik.Store, people: tuple[str, str, str], ikigai_db_url: str
) -> None:
    """The decision mail is real mail: a requester waiting in mail.wait (another store) wakes
    on the decision's commit."""
    review = review_in(store, people, "under_review")
    got: list[ik.InboxItem | None] = []
    with ik.Store(ikigai_db_url, pool_size=2) as other:
        for item in other.mail.inbox(people[0]):
            other.mail.read(people[0], item.mail.id)
        waiter = threading.Thread(target=lambda: got.append(other.mail.wait(people[0], 20)))
        waiter.start()
        threading.Event().wait(0.2)
        store.reviews.approve(review)
        waiter.join(timeout=30)
    assert got and got[0] is not None
    assert got[0].mail.thread_id == review.thread_id and got[0].mail.sender == people[1]
