"""Hand-checked cases for the topics reference model (tests/reference_topics.py); no database."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.reference_mail import EPOCH, RefConflict, RefInvalid, RefNotFound
from tests.reference_topics import LEASE_EXPIRED, RefTopicWorld

SECOND = timedelta(seconds=1)
TOKEN = "00000000-0000-4000-8000-000000000000"


def world(*names: str) -> RefTopicWorld:
    """A model with these identities, 'news' (broadcast: every name) and 'jobs' (queue, 2
    attempts: every name)."""
    w = RefTopicWorld()
    w.create("news")
    w.create("jobs", "queue", max_attempts=2)
    for name in names:
        w.mail.register(name)
        w.subscribe(name, "news")
        w.subscribe(name, "jobs")
    return w


# -- topics and subscriptions ----------------------------------------------------------------


def test_create_validates_and_refuses_taken_names() -> None:
    """Bad names, kinds, retentions and max_attempts are RefInvalid, a taken name RefConflict;
    a retention may be given in seconds."""
    w = RefTopicWorld()
    made = w.create("q", "queue", retention=timedelta(hours=2), max_attempts=3)
    assert made.view() == ("q", "queue", timedelta(hours=2), 3, EPOCH)
    assert w.create("b").view() == ("b", "broadcast", timedelta(days=7), 5, EPOCH)
    for args, kwargs in [
        (("a b",), {}),
        (("t", "fanout"), {}),
        (("t",), {"retention": timedelta(0)}),
        (("t",), {"retention": "3600"}),
        (("t",), {"retention": -1}),
        (("t",), {"max_attempts": 0}),
        (("t",), {"max_attempts": 1001}),
        (("t",), {"max_attempts": True}),
    ]:
        with pytest.raises(RefInvalid):
            w.create(*args, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(RefConflict):
        w.create("q")
    assert w.create("s", retention=60).retention == timedelta(seconds=60)
    assert sorted(w.topics) == ["b", "q", "s"]


def test_subscribe_is_idempotent_and_creates_broadcast_topics() -> None:
    """Subscribing twice is one subscription; a missing topic becomes a broadcast topic, but not
    when the identity is missing or retired."""
    w = world("ann", "bob")
    w.subscribe("ann", "news")
    assert w.subscribers("news") == ["ann", "bob"]
    w.subscribe("ann", "fresh")
    assert w.topic("fresh").kind == "broadcast"
    assert [t[0] for t in w.subscriptions("ann")] == ["fresh", "jobs", "news"]
    w.unsubscribe("ann", "fresh")
    w.unsubscribe("ann", "fresh")
    assert w.subscribers("fresh") == []
    with pytest.raises(RefNotFound):
        w.subscribe("ghost", "other")
    w.mail.retire("bob")
    with pytest.raises(RefInvalid):
        w.subscribe("bob", "other")
    assert "other" not in w.topics
    w.unsubscribe("bob", "news")  # a retired identity may still leave
    with pytest.raises(RefNotFound):
        w.unsubscribe("ann", "nope")
    with pytest.raises(RefNotFound):
        w.subscriptions("ghost")


def test_delete_refused_with_open_work_and_drops_everything() -> None:
    """A topic with available or claimed work is kept; deleting removes log, copies, offsets."""
    w = world("ann", "bob")
    w.publish("ann", "news", "s", "b")
    w.commit("bob", "news", 1)
    w.publish("ann", "jobs", "j", "b")
    w.delete("news")
    assert w.mail.copies == {} and w.offsets == {}
    with pytest.raises(RefInvalid) as refused:
        w.delete("jobs")
    assert refused.value.named == ("1 unfinished",)
    held = w.claim("bob", "jobs")
    assert held is not None
    w.complete(held.mail["id"], held.token)
    w.delete("jobs")
    assert w.topics == {} and w.mail.mails == {} and w.work == {}
    with pytest.raises(RefNotFound):
        w.delete("jobs")
    w.create("jobs")
    assert w.publish("ann", "jobs", "again", "b").id == 3
    assert w.placed[3] == ("jobs", 1)


# -- publishing, reading, offsets ------------------------------------------------------------


def test_publish_offsets_copies_and_refusals() -> None:
    """Offsets count from 1; live subscribers but the sender get copies; refusals in order."""
    w = world("ann", "bob", "cat")
    w.mail.retire("cat")
    sent = [w.publish("ann", "news", f"n{k}", "x") for k in range(3)]
    assert [w.placed[m.id] for m in sent] == [("news", 1), ("news", 2), ("news", 3)]
    assert sent[0].to == ("bob",)
    assert [i.mail.id for i in w.poll("bob")[0]] == [3, 2, 1]
    job = w.publish("ann", "jobs", "j", "x")
    assert (job.to, w.work[job.id].state) == ((), "available")
    with pytest.raises(RefNotFound):
        w.publish("ghost", "news", "s", "x")
    with pytest.raises(RefInvalid):
        w.publish("cat", "nope", "s", "x")  # a retired sender before a missing topic
    with pytest.raises(RefNotFound):
        w.publish("ann", "nope", "s", "x")
    with pytest.raises(RefInvalid):
        w.publish("ann", "news", "s", "x", priority="now")
    assert w.topic("news").last_offset == 3


def test_idempotent_publish_takes_no_offset() -> None:
    """The same keyed request returns the original; another with the key is a conflict."""
    w = world("ann", "bob")
    first = w.publish("ann", "news", "s", "x", idempotency_key="k")
    assert w.publish("ann", "news", "s", "x", idempotency_key="k") is first
    with pytest.raises(RefConflict):
        w.publish("ann", "news", "t", "x", idempotency_key="k")
    with pytest.raises(RefConflict):
        w.mail.send("ann", ["bob"], "s", "x", idempotency_key="k")
    assert w.placed[w.publish("ann", "news", "u", "x").id] == ("news", 2)


def test_read_poll_commit_and_offset() -> None:
    """read pages by offset; commit is monotone and refuses the past-the-end; poll shows the
    unread inbox and broadcast topics after the stored offset."""
    w = world("ann", "bob")
    for k in range(4):
        w.publish("ann", "news", f"n{k}", "x")
    assert [w.placed[m.id][1] for m in w.read("news", after=1, limit=2)] == [2, 3]
    assert w.commit("bob", "news", 3) == 3
    assert w.commit("bob", "news", 1) == 3
    with pytest.raises(RefInvalid):
        w.commit("bob", "news", 5)
    with pytest.raises(RefInvalid):
        w.commit("bob", "news", -1)
    with pytest.raises(RefNotFound):
        w.commit("ghost", "nope", 0)
    assert w.commit("ann", "jobs", 0) == 0  # no subscription needed, any topic kind
    inbox, news, offsets = w.poll("bob", limit=10)
    assert [w.placed[m.id][1] for m in news["news"]] == [4]
    assert (offsets, len(inbox)) == ({"news": 3}, 4)
    w.mail.read("bob", inbox[0].mail.id)
    assert len(w.poll("bob")[0]) == 3
    assert w.offset("ann", "news") == 0
    with pytest.raises(RefNotFound):
        w.poll("ghost")


# -- queues ----------------------------------------------------------------------------------


def test_claim_oldest_lease_expiry_and_stale_tokens() -> None:
    """Claims take the oldest; an expired lease is taken over (recording why) and the old token
    stops working; until then the holder may still finish."""
    w = world("ann", "bob")
    jobs = [w.publish("ann", "jobs", f"j{k}", "x") for k in range(2)]
    old = w.claim("ann", "jobs", lease=10)
    assert old is not None and (old.mail["id"], old.attempt) == (jobs[0].id, 1)
    assert old.lease_until == EPOCH + 10 * SECOND
    w.mail.advance(10 * SECOND)
    w.extend(old.mail["id"], old.token, 1)  # expired, but nobody took it: still the holder's
    w.mail.advance(SECOND)
    new = w.claim("bob", "jobs", lease=10, token=TOKEN)
    assert new is not None and (new.mail["id"], new.attempt, new.token) == (jobs[0].id, 2, TOKEN)
    assert w.work[jobs[0].id].last_error == LEASE_EXPIRED
    for stale in (w.complete, w.release, lambda m, t: w.extend(m, t, 5)):
        with pytest.raises(RefConflict):
            stale(old.mail["id"], old.token)
    with pytest.raises(RefInvalid):
        w.complete(new.mail["id"], "not-a-uuid")
    w.complete(new.mail["id"], new.token)
    second = w.claim("ann", "jobs")
    assert second is not None and second.mail["id"] == jobs[1].id
    assert w.claim("bob", "jobs") is None


def test_claim_refusals_in_order() -> None:
    """Missing identity, missing topic, retired, not a queue, not subscribed, bad lease."""
    w = world("ann", "bob")
    w.mail.register("cat")
    w.mail.retire("bob")
    for who, topic, lease, error in [
        ("ghost", "nope", 30, RefNotFound),
        ("ann", "nope", 30, RefNotFound),
        ("bob", "news", 30, RefInvalid),
        ("ann", "news", 30, RefInvalid),
        ("cat", "jobs", 30, RefInvalid),
        ("ann", "jobs", 0, RefInvalid),
        ("ann", "jobs", float("nan"), RefInvalid),
        ("ann", "jobs", 86401, RefInvalid),
    ]:
        with pytest.raises(error):
            w.claim(who, topic, lease=lease)


def test_claim_settles_the_expired_last_attempts_its_walk_passes() -> None:
    """A claim's walk (lowest id first) makes the expired last attempts before the message it
    takes dead letters and stops there: one after it stays claimed (its holder may still
    complete it) until a claim walks to it."""
    w = world("ann")
    jobs = [w.publish("ann", "jobs", f"j{k}", "x").id for k in range(3)]
    for _ in range(2):  # jobs has 2 attempts: every job on its last one
        held = {c.mail["id"]: c for c in (w.claim("ann", "jobs", lease=1) for _ in jobs) if c}
        w.mail.advance(SECOND)
    assert w.release(jobs[1], held[jobs[1]].token) == "dead"
    w.requeue(jobs[1])  # available, between two expired last attempts
    taken = w.claim("ann", "jobs")
    assert taken is not None and taken.mail["id"] == jobs[1]
    assert [d[0]["id"] for d in w.dead_letters("jobs")] == [jobs[0]]
    w.complete(jobs[2], held[jobs[2]].token)  # not walked to: still its holder's
    assert w.claim("ann", "jobs") is None
    assert [d[0]["id"] for d in w.dead_letters("jobs")] == [jobs[0]]
    w.check()


def test_release_dead_letters_requeue_and_expired_last_attempt() -> None:
    """Release until max_attempts, then dead; requeue revives with 0 attempts; an expired last
    attempt becomes a dead letter at the next claim."""
    w = world("ann")
    job = w.publish("ann", "jobs", "j", "x")
    held = w.claim("ann", "jobs")
    assert held is not None
    assert w.release(held.mail["id"], held.token, "flaky") == "available"
    held = w.claim("ann", "jobs")
    assert held is not None
    assert w.release(held.mail["id"], held.token) == "dead"
    assert w.claim("ann", "jobs") is None
    assert [(d[0]["id"], d[1], d[2]) for d in w.dead_letters("jobs")] == [(job.id, 2, None)]
    w.requeue(job.id)
    with pytest.raises(RefInvalid):
        w.requeue(job.id)
    with pytest.raises(RefNotFound):
        w.requeue(999)
    for _ in range(2):
        assert w.claim("ann", "jobs", lease=1) is not None
        w.mail.advance(SECOND)
    assert w.dead_letters("jobs") == []  # not settled until the next claim
    assert w.claim("ann", "jobs") is None
    assert [d[2] for d in w.dead_letters("jobs")] == [LEASE_EXPIRED]
    assert w.dead_letters("news") == []
    w.check()


# -- retention -------------------------------------------------------------------------------


def test_retention_keeps_unpassed_mail_and_open_work() -> None:
    """Old broadcast mail goes once every subscriber passed it; open queue work and direct mail
    stay; the last offset never goes back."""
    w = world("ann", "bob")
    old = [w.publish("ann", "news", f"n{k}", "x") for k in range(3)]
    done = w.publish("ann", "jobs", "d", "x")
    w.publish("ann", "jobs", "o", "x")
    held = w.claim("bob", "jobs")
    assert held is not None and held.mail["id"] == done.id
    w.complete(done.id, held.token)
    direct = w.mail.send("ann", ["bob"], "keep", "me")
    w.mail.advance(timedelta(days=7))
    assert w.apply_retention() == {"news": 0, "jobs": 0}  # exactly 7 days: not older
    w.mail.advance(SECOND)
    for who in ("ann", "bob"):
        w.commit(who, "news", 2)
    assert w.apply_retention() == {"news": 2, "jobs": 1}
    assert [m.id for m in w.read("news")] == [old[2].id]
    assert direct.id in w.mail.mails and ("bob", old[0].id) not in w.mail.copies
    assert w.list_topics()[1][1:] == (2, 1, 3, 0, 0, 0)
    assert w.list_topics()[0][4:] == (1, 0, 0)  # jobs: "o" still available
    w.unsubscribe("bob", "news")  # ann passed offset 2 only: 3 stays for her
    assert w.apply_retention() == {"news": 0, "jobs": 0}
    w.commit("ann", "news", 3)
    assert w.apply_retention() == {"news": 1, "jobs": 0}
    w.check()
