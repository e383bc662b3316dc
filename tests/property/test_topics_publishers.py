"""Concurrent publishers against the topic reference model (issue 38, migration 0028).

Publishes commit side by side and a sequencer gives offsets after the commit; what must stay
true is what the reference model (tests/reference_topics.py) says of serial publishes, seen by
every reader at every moment: offsets are 1..N with no hole, a reader that read up to N never
later sees a new mail at N or below, a rolled-back publish or a reused idempotency key takes
no offset, and each publisher's offsets increase in its call order. One thing the serial
model has that concurrency does not: offsets in mail id order (an id is taken before the
commit, an offset after it), so the model is given the publishes by id and compared on
everything but the offset. Hypothesis draws what each
of 2-4 publisher threads does (each thread has its own store, so its own connection; every
commit is real) while a follower thread reads the log after its last offset; the committed
log is then replayed into the model, which must agree with what the store reads.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ikigai_store as ik
from tests.reference_topics import RefTopicWorld

pytestmark = [pytest.mark.db, pytest.mark.slow]

_topics = itertools.count()

#: What a publisher does: one publish; a batch of k; k publishes in one committed
#: transaction; a publish rolled back; a keyed publish (repeated keys return the original);
#: a publish or a batch of k that does not wait for its offsets (wait_for_offset=False).
actions = st.one_of(
    st.just(("one",)),
    st.tuples(st.just("many"), st.integers(1, 4)),
    st.tuples(st.just("tx"), st.integers(1, 3)),
    st.just(("rollback",)),
    st.tuples(st.just("key"), st.sampled_from(["k1", "k2"])),
    st.just(("lazy",)),
    st.tuples(st.just("lazy-many"), st.integers(1, 3)),
)
plans = st.lists(st.lists(actions, min_size=1, max_size=6), min_size=2, max_size=4)


@pytest.fixture(scope="module")
def url(ikigai_db_url: str) -> Iterator[str]:
    """This file's migrated database (the publishers commit), shared by the examples; each
    example has a topic of its own."""
    yield ikigai_db_url


class Rollback(Exception):
    """Raised inside ``store.transaction()`` to roll a publish back."""


def _publisher(
    url: str, me: str, topic: str, plan: list[Any], out: dict[str, Any], go: threading.Barrier
) -> None:
    done: list[tuple[str, ik.Mail]] = []  # (action, mail) in call order
    undone: list[int] = []
    with ik.Store(url, pool_size=1) as store:
        store.topics.get(topic)  # connected: all start together
        go.wait(30)
        for n, action in enumerate(plan):
            subject = f"{me}-{n}"
            if action[0] == "one":
                done.append(("one", store.mail.publish(me, topic, subject, "b")))
            elif action[0] == "many":
                bodies = [f"b{k}" for k in range(action[1])]
                for mail in store.mail.publish_many(me, topic, bodies, subject=subject):
                    done.append(("many", mail))
            elif action[0] == "tx":
                with store.transaction():
                    for k in range(action[1]):
                        done.append(("tx", store.mail.publish(me, topic, f"{subject}.{k}", "b")))
            elif action[0] == "lazy":
                done.append(
                    ("lazy", store.mail.publish(me, topic, subject, "b", wait_for_offset=False))
                )
            elif action[0] == "lazy-many":
                bodies = [f"b{k}" for k in range(action[1])]
                for mail in store.mail.publish_many(
                    me, topic, bodies, subject=subject, wait_for_offset=False
                ):
                    done.append(("lazy", mail))
            elif action[0] == "rollback":
                try:
                    with store.transaction():
                        undone.append(store.mail.publish(me, topic, subject, "b").id)
                        raise Rollback
                except Rollback:
                    pass
            else:
                key = f"{topic}-{me}-{action[1]}"
                done.append(
                    ("key", store.mail.publish(me, topic, "keyed", key, idempotency_key=key))
                )
    out[me] = (done, undone)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=plans)
def test_concurrent_publishers_agree_with_serial_publishes(url: str, plan: list[Any]) -> None:
    """Threads publishing to one topic (single, batch, in a transaction, rolled back, keyed,
    not waiting for the offset) leave offsets 1..N; a follower never sees a hole or an offset
    go back; each publisher's offsets increase; the log is what the model makes of the same
    publishes in offset order."""
    topic = f"t{next(_topics)}"
    names = [f"p{k}" for k in range(len(plan))]
    with ik.Store(url, pool_size=2) as store:
        store.topics.create(topic)
        for name in [*names, "reader"]:
            with contextlib.suppress(ik.Conflict):  # registered by an earlier example
                store.identities.register(name)
        store.topics.subscribe("reader", topic)
        out: dict[str, Any] = {}
        errors: list[BaseException] = []
        seen: list[ik.Mail] = []
        stop = threading.Event()

        def follow() -> None:
            last = 0
            while True:
                finished = stop.is_set()
                for mail in store.topics.read(topic, after=last, limit=1000):
                    assert mail.log_offset == last + 1, f"after {last}: {mail.log_offset}"
                    last = mail.log_offset
                    seen.append(mail)
                if finished:
                    return

        def guarded(fn: Any, *args: Any) -> None:
            try:
                fn(*args)
            except BaseException as exc:
                errors.append(exc)

        follower = threading.Thread(target=guarded, args=(follow,))
        go = threading.Barrier(len(plan))
        threads = [
            threading.Thread(target=guarded, args=(_publisher, url, n, topic, p, out, go))
            for n, p in zip(names, plan, strict=True)
        ]
        follower.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        stop.set()
        follower.join(60)
        assert not errors, errors

        log = store.topics.read(topic, limit=1000)
        assert [m.log_offset for m in log] == list(range(1, len(log) + 1))
        assert [m.id for m in seen] == [m.id for m in log]
        ids = [m.id for m in log]
        event("offsets in id order" if ids == sorted(ids) else "offsets out of id order")
        (info,) = [t for t in store.topics.list() if t.topic.name == topic]
        assert info.last_offset == len(log)
        by_id = {m.id: m for m in log}
        committed: set[int] = set()
        for name in names:
            done, undone = out[name]
            # a repeated key returns its original mail: each distinct mail, first call first;
            # a mail returned pending (wait_for_offset=False) has its offset in the log now
            firsts = {m.id: by_id[m.id].log_offset for _, m in done}
            offsets = list(firsts.values())
            assert all(a < b for a, b in itertools.pairwise(offsets)), (name, offsets)
            for action, mail in done:
                if mail.log_offset is not None or action != "lazy":
                    assert by_id[mail.id].log_offset == mail.log_offset
                committed.add(mail.id)
            assert not set(undone) & set(by_id), "a rolled-back publish took an offset"
        assert committed == set(by_id)
        with psycopg.connect(url) as conn:
            pending = conn.execute("SELECT count(*) FROM topic_log WHERE log_offset IS NULL")
            assert pending.fetchone() == (0,)

    # The model is serial: it takes ids in increasing order and gives offsets in that order.
    # Concurrent publishes get offsets in the order their mails were sequenced (after their
    # commits), which need not be id order (ids are taken before commit): so the model gets
    # the committed publishes by id, and must agree on everything but the offsets, which are
    # checked above.
    model = RefTopicWorld()
    for name in [*names, "reader"]:
        model.mail.register(name)
    model.create(topic)
    model.subscribe("reader", topic)
    for mail in sorted(log, key=lambda m: m.id):
        model.publish(
            mail.sender,
            topic,
            mail.subject,
            mail.body,
            idempotency_key=mail.idempotency_key,
            id=mail.id,
            new_thread_id=mail.thread_id,
        )
    fields = ("id", "thread_id", "sender", "to", "subject", "body", "topic", "idempotency_key")
    assert sorted(tuple(getattr(m, f) for f in fields) for m in log) == [
        tuple(model.view(m)[f] for f in fields) for m in model.read(topic, limit=1000)
    ]
