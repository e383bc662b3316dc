"""Topics: creation, subscriptions, gapless offsets, poll/commit, leased queue claims, retention."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from typing import Any

import psycopg.sql
import pytest

import ikigai_store as ik
from ikigai_store import topics
from tests.mailtools import Clock, mail_rows, rows

pytestmark = pytest.mark.db


@pytest.fixture
def hub(ikigai_store: ik.Store) -> ik.Store:
    """pub, a, b, w1, w2 registered; 'news' (broadcast: pub, a, b) and 'jobs' (queue, 2
    attempts: w1, w2)."""
    for name in ("pub", "a", "b", "w1", "w2"):
        ikigai_store.identities.register(name)
    ikigai_store.topics.create("news")
    ikigai_store.topics.create("jobs", "queue", max_attempts=2)
    for who, topic in [
        ("pub", "news"),
        ("a", "news"),
        ("b", "news"),
        ("w1", "jobs"),
        ("w2", "jobs"),
    ]:
        ikigai_store.topics.subscribe(who, topic)
    return ikigai_store


# ---------------------------------------------------------------- topics and subscriptions


def test_create_get_and_defaults(ikigai_store: ik.Store) -> None:
    """create stores kind, retention and max_attempts; get returns it."""
    made = ikigai_store.topics.create("q", "queue", retention=timedelta(hours=2), max_attempts=3)
    assert (made.name, made.kind, made.retention, made.max_attempts) == (
        "q",
        "queue",
        timedelta(hours=2),
        3,
    )
    assert ikigai_store.topics.get("q") == made
    plain = ikigai_store.topics.create("b")
    assert (plain.kind, plain.retention, plain.max_attempts) == ("broadcast", timedelta(days=7), 5)
    assert made.searchable and plain.searchable
    with pytest.raises(ik.NotFound):
        ikigai_store.topics.get("missing")


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("bad name",), {}),
        (("t", "fanout"), {}),
        (("t",), {"retention": timedelta(0)}),
        (("t",), {"retention": "3600"}),
        (("t",), {"max_attempts": 0}),
        (("t",), {"max_attempts": 1001}),
        (("t",), {"max_attempts": True}),
        (("t",), {"searchable": "no"}),
        (("t",), {"searchable": 0}),
    ],
)
def test_create_refuses_bad_input(
    ikigai_store: ik.Store, args: tuple[Any, ...], kwargs: Any
) -> None:
    """Bad names, kinds, retentions and max_attempts are InvalidArgument, nothing written."""
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.topics.create(*args, **kwargs)
    assert rows(ikigai_store, "topics") == 0


def test_max_attempts_refusal_names_its_range(ikigai_store: ik.Store) -> None:
    """max_attempts out of range is refused naming the range it must be in (1 to 1000)."""
    for bad in (0, 1001):
        with pytest.raises(
            ik.InvalidArgument, match=r"max_attempts must be an integer in \[1, 1000\]"
        ):
            ikigai_store.topics.create("t", max_attempts=bad)


def _vectors(store: ik.Store) -> dict[str, bool]:
    """Each mail's subject: whether it has a search vector."""
    with store._connection() as conn:
        got = conn.execute("SELECT subject, search_vector IS NOT NULL AS v FROM mail").fetchall()
    return {r["subject"]: r["v"] for r in got}


def test_an_unsearchable_topic_s_mail_is_read_but_never_found(ikigai_store: ik.Store) -> None:
    """searchable=False is kept on the topic (get, list, subscriptions); its mail is published,
    read and claimed as any other, has no search vector and is never found by search, while
    a searchable topic's mail and direct mail with the same words are."""
    s = ikigai_store
    for name in ("pub", "w"):
        s.identities.register(name)
    quiet = s.topics.create("quiet", "queue", searchable=False)
    assert not quiet.searchable and s.topics.get("quiet") == quiet
    s.topics.create("loud", "queue")
    s.topics.subscribe("w", "quiet")
    assert [t.searchable for t in s.topics.subscriptions("w")] == [False]
    assert {i.topic.name: i.topic.searchable for i in s.topics.list()} == {
        "loud": True,
        "quiet": False,
    }
    one = s.mail.publish("pub", "quiet", "zebra one", "a striped zebra payload")
    many = s.mail.publish_many("pub", "quiet", ["zebra batch"] * 2, subject="zebra many")
    s.mail.publish("pub", "loud", "zebra loud", "a striped zebra payload")
    s.mail.send("pub", ["w"], "zebra direct", "a striped zebra payload")
    assert _vectors(s) == {
        "zebra one": False,
        "zebra many": False,
        "zebra loud": True,
        "zebra direct": True,
    }
    hits = s.mail.search("striped zebra") + s.mail.search("zebra batch")
    assert sorted(h.mail.subject for h in hits) == ["zebra direct", "zebra loud"]
    assert [m.id for m in s.topics.read("quiet")] == [one.id, *(m.id for m in many)]
    claim = s.topics.claim("w", "quiet", ttl=30)
    assert claim is not None and claim.mail.body == "a striped zebra payload"


def test_no_writer_can_store_another_search_vector(ikigai_store: ik.Store) -> None:
    """mail.search_vector is the content's (or NULL for an unsearchable topic's mail) on raw
    SQL inserts and updates too: a forged vector is recomputed (migration 0046's trigger,
    where the generated column refused it)."""
    s = ikigai_store
    s.identities.register("pub")
    s.identities.register("r")
    s.topics.create("quiet", searchable=False)
    direct = s.mail.send("pub", ["r"], "alpha", "beta")
    quiet = s.mail.publish("pub", "quiet", "gamma", "delta")
    expected = (
        "setweight(to_tsvector('english', left(subject, 10000)), 'A') "
        "|| setweight(to_tsvector('english', left(body, 100000)), 'B')"
    )
    with s._connection() as conn:
        conn.execute("UPDATE mail SET search_vector = 'forged'")
        assert _vectors(s) == {"alpha": True, "gamma": False}
        conn.execute("UPDATE mail SET body = 'epsilon' WHERE id = %s", (direct.id,))
        row = conn.execute(
            f"SELECT search_vector = {expected} AS same FROM mail WHERE id = %s", (direct.id,)
        ).fetchone()
        assert row is not None and row["same"]
        conn.execute(
            "INSERT INTO mail (thread_id, sender_id, subject, body, search_vector, topic_id) "
            "SELECT 't', sender_id, 'forged', 'x', 'forged', topic_id FROM mail WHERE id = %s",
            (quiet.id,),
        )
        conn.execute(
            "INSERT INTO mail (thread_id, sender_id, subject, body, search_vector) "
            "SELECT 't', sender_id, 'raw', 'zeta', 'forged' FROM mail WHERE id = %s",
            (quiet.id,),
        )
        row = conn.execute(
            f"SELECT search_vector = {expected} AS same FROM mail WHERE subject = 'raw'"
        ).fetchone()
        assert row is not None and row["same"]
    assert _vectors(s)["forged"] is False
    assert [h.mail.subject for h in s.mail.search("zeta")] == ["raw"]


def test_duplicate_topic_is_a_conflict(ikigai_store: ik.Store) -> None:
    """A taken topic name is a Conflict (as a taken identity or task list name is)."""
    ikigai_store.topics.create("t")
    with pytest.raises(ik.Conflict, match="already exists"):
        ikigai_store.topics.create("t", "queue")


def test_subscribe_is_idempotent_and_creates_missing_topics(hub: ik.Store) -> None:
    """Subscribing twice is one subscription; a missing topic is created as broadcast."""
    hub.topics.subscribe("a", "news")
    assert [i.name for i in hub.topics.subscribers("news")] == ["a", "b", "pub"]
    hub.topics.subscribe("a", "fresh")
    assert hub.topics.get("fresh").kind == "broadcast"
    assert [t.name for t in hub.topics.subscriptions("a")] == ["fresh", "news"]
    hub.topics.unsubscribe("a", "fresh")
    hub.topics.unsubscribe("a", "fresh")
    assert [t.name for t in hub.topics.subscriptions("a")] == ["news"]
    with pytest.raises(ik.NotFound):
        hub.topics.subscribe("ghost", "news")
    hub.identities.retire("b")
    with pytest.raises(ik.InvalidArgument, match="retired"):
        hub.topics.subscribe("b", "fresh")


def test_list_counts_in_one_query(hub: ik.Store) -> None:
    """list gives subscribers, retained messages and the last offset of every topic."""
    hub.mail.publish("pub", "news", "1", "x")
    hub.mail.publish("pub", "news", "2", "x")
    info = {i.topic.name: (i.subscribers, i.messages, i.last_offset) for i in hub.topics.list()}
    assert info == {"jobs": (2, 0, 0), "news": (3, 2, 2)}


def test_list_counts_a_queue_s_messages_by_state(hub: ik.Store) -> None:
    """A queue's messages available, claimed (an expired lease no claim took over yet too)
    and dead; done ones in none of them; all zero for a broadcast topic."""
    clock = Clock(hub)
    for n in range(4):
        hub.mail.publish("pub", "jobs", str(n), "x")
    hub.mail.publish("pub", "news", "n", "x")

    def counts() -> dict[str, tuple[int, int, int, int]]:
        return {
            i.topic.name: (i.messages, i.available, i.claimed, i.dead) for i in hub.topics.list()
        }

    assert counts() == {"jobs": (4, 4, 0, 0), "news": (1, 0, 0, 0)}
    hub.topics.complete(_claim(hub, "w1"))
    assert hub.topics.release(_claim(hub, "w2"), error="e") == "available"
    _claim(hub, "w1", lease=1)
    assert counts()["jobs"] == (4, 2, 1, 0)
    clock.advance(seconds=2)
    assert counts()["jobs"] == (4, 2, 1, 0)  # expired, not taken over yet
    taken = _claim(hub, "w2")  # its walk settles the expired last attempt: a dead letter
    assert counts()["jobs"] == (4, 1, 1, 1)
    assert hub.topics.release(taken, error="e") == "available"
    assert counts()["jobs"] == (4, 2, 0, 1)


def test_delete_topic(hub: ik.Store) -> None:
    """A broadcast topic is deleted with its log; a queue with open work is refused."""
    hub.mail.publish("pub", "news", "1", "x")
    hub.topics.delete("news")
    assert mail_rows(hub) == (0, 0)
    assert hub.mail.inbox("a") == []
    job = hub.mail.publish("pub", "jobs", "1", "x")
    with pytest.raises(ik.InvalidArgument, match="1 unfinished"):
        hub.topics.delete("jobs")
    hub.topics.complete(_claim(hub, "w1"))
    hub.topics.delete("jobs")
    assert job.topic == "jobs"
    with pytest.raises(ik.NotFound):
        hub.topics.delete("jobs")


# ---------------------------------------------------------------- publishing and offsets


def test_publish_offsets_and_broadcast_copies(hub: ik.Store) -> None:
    """Offsets count 1, 2, 3; every subscriber but the sender gets an unread copy."""
    sent = [hub.mail.publish("pub", "news", f"n{k}", "x") for k in range(3)]
    assert [(m.topic, m.log_offset) for m in sent] == [("news", 1), ("news", 2), ("news", 3)]
    assert sent[0].to == ("a", "b")
    assert [i.mail.id for i in hub.mail.inbox("a")] == [m.id for m in reversed(sent)]
    assert hub.mail.inbox("pub") == []


def test_publish_skips_retired_subscribers_and_needs_a_topic(hub: ik.Store) -> None:
    """Retired subscribers get no copy; a missing topic or sender is NotFound."""
    hub.identities.retire("b")
    assert hub.mail.publish("pub", "news", "s", "x").to == ("a",)
    with pytest.raises(ik.NotFound, match="topic 'nope'"):
        hub.mail.publish("pub", "nope", "s", "x")
    with pytest.raises(ik.NotFound, match="ghost"):
        hub.mail.publish("ghost", "news", "s", "x")
    with pytest.raises(ik.InvalidArgument, match="retired"):
        hub.mail.publish("b", "news", "s", "x")


def test_idempotent_publish_takes_no_offset(hub: ik.Store) -> None:
    """A repeated publish returns the original and leaves no gap; another request with the key
    (publish or send) is a Conflict."""
    first = hub.mail.publish("pub", "news", "s", "x", idempotency_key="k")
    assert hub.mail.publish("pub", "news", "s", "x", idempotency_key="k") == first
    assert hub.mail.publish("pub", "news", "t", "x").log_offset == 2
    with pytest.raises(ik.Conflict):
        hub.mail.publish("pub", "news", "other", "x", idempotency_key="k")
    with pytest.raises(ik.Conflict):
        hub.mail.send("pub", ["a"], "s", "x", idempotency_key="k")
    assert hub.mail.publish("pub", "news", "u", "x").log_offset == 3


def test_a_keyed_batch_shares_the_key_space_of_publish_and_send(hub: ik.Store) -> None:
    """A batch's key held by a single publish or a send is a Conflict (not another refusal)
    and writes nothing, on both topic kinds, waiting for offsets or not; a batch repeated
    returns its mails; a single publish or send with a batch's key is a Conflict."""
    hub.mail.publish("pub", "news", "s", "x", idempotency_key="single")
    hub.mail.send("pub", ["a"], "s", "x", idempotency_key="sent")
    before = mail_rows(hub)
    for key in ("single", "sent"):
        for topic in ("news", "jobs"):
            for wait in (True, False):
                with pytest.raises(ik.Conflict, match="used for a different request"):
                    hub.mail.publish_many(
                        "pub", topic, ["b1", "b2"], idempotency_key=key, wait_for_offset=wait
                    )
    assert mail_rows(hub) == before
    batch = hub.mail.publish_many("pub", "jobs", ["b1", "b2"], idempotency_key="batch")
    assert [m.idempotency_key for m in batch] == ["batch", None]
    assert hub.mail.publish_many("pub", "jobs", ["b1", "b2"], idempotency_key="batch") == batch
    with pytest.raises(ik.Conflict):
        hub.mail.publish("pub", "jobs", "s", "b1", idempotency_key="batch")
    with pytest.raises(ik.Conflict):
        hub.mail.send("pub", ["a"], "s", "b1", idempotency_key="batch")
    assert [m.log_offset for m in hub.topics.read("jobs")] == [1, 2]


def test_queue_publish_makes_no_inbox_copies(hub: ik.Store) -> None:
    """A queue topic's mail is claimed, not delivered to inboxes."""
    job = hub.mail.publish("pub", "jobs", "job", "x")
    assert (job.to, job.log_offset) == ((), 1)
    assert hub.mail.inbox("w1") == []


def test_poll_read_and_commit(hub: ik.Store) -> None:
    """poll returns the unread inbox and new topic mail after the stored offset; commit moves
    the offset forward only; read pages the log."""
    sent = [hub.mail.publish("pub", "news", f"n{k}", "x") for k in range(4)]
    direct = hub.mail.send("b", ["a"], "hi", "direct")
    polled = hub.topics.poll("a")
    assert [i.mail.id for i in polled.inbox] == [direct.id] + [m.id for m in reversed(sent)]
    assert [m.log_offset for m in polled.topics["news"]] == [1, 2, 3, 4]
    assert polled.offsets == {"news": 0}
    assert hub.topics.commit("a", "news", 3) == 3
    assert hub.topics.commit("a", "news", 1) == 3  # a late, smaller commit never moves it back
    assert hub.topics.offset("a", "news") == 3
    assert hub.topics.offset("b", "news") == 0
    again = hub.topics.poll("a", limit=10)
    assert ([m.log_offset for m in again.topics["news"]], again.offsets) == ([4], {"news": 3})
    assert [m.log_offset for m in hub.topics.read("news", after=1, limit=2)] == [2, 3]
    with pytest.raises(ik.InvalidArgument, match="past the last offset"):
        hub.topics.commit("a", "news", 5)
    with pytest.raises(ik.InvalidArgument):
        hub.topics.commit("a", "news", -1)


def test_poll_of_quiet_subscriber(hub: ik.Store) -> None:
    """A subscriber with nothing new sees its topics with empty lists and their offsets."""
    polled = hub.topics.poll("b")
    assert (polled.inbox, polled.topics, polled.offsets) == ([], {"news": []}, {"news": 0})
    assert hub.topics.poll("w1") == ik.Poll([], {}, {})  # queue topics are claimed, not polled
    with pytest.raises(ik.NotFound):
        hub.topics.poll("ghost")


def test_late_subscriber_reads_from_zero(hub: ik.Store) -> None:
    """A subscriber that joins later reads the retained log from offset 0."""
    hub.mail.publish("pub", "news", "early", "x")
    hub.identities.register("late")
    hub.topics.subscribe("late", "news")
    assert [m.subject for m in hub.topics.poll("late").topics["news"]] == ["early"]


# ---------------------------------------------------------------- queues


def _claim(store: ik.Store, who: str, lease: float = 30.0) -> ik.Claim:
    held = store.topics.claim(who, "jobs", ttl=lease)
    assert held is not None
    return held


def test_claims_take_the_oldest_and_never_share(hub: ik.Store) -> None:
    """Each claim takes the oldest available message; a held one is not handed out again."""
    jobs = [hub.mail.publish("pub", "jobs", f"j{k}", "x") for k in range(3)]
    first, second = _claim(hub, "w1"), _claim(hub, "w2")
    assert (first.mail.id, second.mail.id) == (jobs[0].id, jobs[1].id)
    assert (first.attempt, first.mail.topic) == (1, "jobs")
    hub.topics.complete(first)
    third = _claim(hub, "w1")
    assert third.mail.id == jobs[2].id
    assert hub.topics.claim("w2", "jobs") is None


def test_lease_expiry_and_stale_tokens(hub: ik.Store) -> None:
    """An expired lease is claimable again; the old holder's token no longer works."""
    clock = Clock(hub)
    job = hub.mail.publish("pub", "jobs", "j", "x")
    old = _claim(hub, "w1", lease=10)
    assert hub.topics.claim("w2", "jobs") is None
    clock.advance(seconds=11)
    new = _claim(hub, "w2", lease=10)
    assert (new.mail.id, new.attempt) == (job.id, 2)
    for stale in (
        lambda: hub.topics.complete(old),
        lambda: hub.topics.release(old),
        lambda: hub.topics.extend(old, 5),
    ):
        with pytest.raises(ik.Conflict, match="lease on mail"):
            stale()
    extended = hub.topics.extend((new.mail.id, new.token), 100)  # a (mail_id, token) pair works
    assert extended.lease_until == clock.now + timedelta(seconds=100)
    assert (extended.mail, extended.token, extended.attempt) == (new.mail, new.token, 2)
    clock.advance(seconds=50)
    assert hub.topics.claim("w1", "jobs") is None
    hub.topics.complete(extended)
    with pytest.raises(ik.Conflict):
        hub.topics.complete(extended)  # completing twice


def _queue_states(store: ik.Store) -> dict[int, tuple[str, int]]:
    with store._connection() as conn:
        rows = conn.execute("SELECT mail_id, state, attempts FROM queue_items").fetchall()
    return {r["mail_id"]: (r["state"], r["attempts"]) for r in rows}


def test_claim_can_complete_the_previous_claim_in_the_same_statement(hub: ik.Store) -> None:
    """claim(complete=held) finishes held and takes the next message; at the end of the queue
    it still completes and returns None; a (mail_id, token) pair works too."""
    jobs = [hub.mail.publish("pub", "jobs", f"j{k}", "x") for k in range(3)]
    held = _claim(hub, "w1")
    taken = [held.mail.id]
    while (held := hub.topics.claim("w1", "jobs", complete=held)) is not None:
        taken.append(held.mail.id)
        if len(taken) == 2:
            held = hub.topics.claim("w1", "jobs", complete=(held.mail.id, held.token))
            assert held is not None
            taken.append(held.mail.id)
    assert taken == [j.id for j in jobs]
    assert _queue_states(hub) == {j.id: ("done", 1) for j in jobs}


def _claim_plan(store: ik.Store, held: tuple[int, str], mode: str) -> list[str]:
    """EXPLAIN ANALYZE of claim_queue_item by w1 completing ``held`` (mail id, token), as a
    prepared statement under plan_cache_mode ``mode`` (a worker's loop runs the generic plan)."""
    names = ["identity", "topic", "lease", "done_id", "done_token"]
    sql = re.sub(
        r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", ik.queries.claim_queue_item.sql
    )
    with store._connection() as conn:
        conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
        conn.execute("PREPARE claim_probe (text, text, float8, bigint, text) AS " + sql)
        probe = psycopg.sql.SQL(  # literals: a utility statement takes no parameters
            "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE claim_probe('w1', 'jobs', 30, {}, {})"
        ).format(*map(psycopg.sql.Literal, held))
        plan = conn.execute(probe).fetchall()
        conn.execute("DEALLOCATE claim_probe")
    return [r["QUERY PLAN"] for r in plan]


def test_claim_does_not_walk_the_done_history(hub: ik.Store) -> None:
    """With statistics taken while the whole backlog was available (a fresh backlog), a claim
    after most of it is done finds its row through queue_items_open_idx, in its custom and its
    generic plan, filtering out no done row (through the primary key it walked every one:
    O(N^2) to drain N messages)."""
    for k in range(120):
        hub.mail.publish("pub", "jobs", f"j{k}", "x")
    with hub._connection() as conn:
        conn.execute("ANALYZE queue_items")
    held = _claim(hub, "w1")
    for _ in range(100):
        held = hub.topics.claim("w1", "jobs", complete=held)
        assert held is not None
    current = (held.mail.id, held.token)
    for mode in ("force_custom_plan", "force_generic_plan"):
        plan = _claim_plan(hub, current, mode)
        text = "\n".join(plan)
        scans = [k for k, line in enumerate(plan) if "queue_items_open_idx on queue_items" in line]
        assert len(scans) == 1, text
        node = list(itertools.takewhile(lambda line: "->" not in line, plan[scans[0] + 1 :]))
        removed = [int(line.rsplit(":", 1)[1]) for line in node if "Rows Removed by" in line]
        assert max(removed, default=0) <= 2, text  # the claimed row (and the one completed)
        assert _queue_states(hub)[current[0]] == ("done", 1)
        with hub._connection() as conn:
            row = conn.execute(
                "SELECT mail_id, CAST(token AS text) AS token FROM queue_items "
                "WHERE state = 'claimed'"
            ).fetchone()
        current = (row["mail_id"], row["token"])


def test_publish_probes_pending_mail_through_its_index(hub: ik.Store) -> None:
    """With statistics saying half the log is pending (another topic's publisher died before
    sequencing), a publish to a topic with nothing pending, and a reader's sequence_pending,
    look for pending mail through topic_log_pending_idx, in their custom and generic plans:
    an EXISTS was planned as a scan of the whole log, on every publish."""
    for k in range(100):
        hub.mail.publish("pub", "news", f"n{k}", "x")
    jobs = hub.topics.get("jobs").id
    with hub._connection() as conn:
        for k in range(100):  # committed, never sequenced: what a dead publisher leaves
            conn.execute(
                "INSERT INTO topic_log (mail_id, topic_id) "
                "SELECT (post_mail(thread_id => %s, sender_id => i.id, recipient_ids => '{}',"
                " recipients => '{}', subject => 's', body => 'b', priority => 'normal',"
                " metadata => '{}', topic_id => %s)).id, %s FROM identities AS i "
                "WHERE i.name = 'pub'",
                (f"dead-{k}", jobs, jobs),
            )
        conn.execute("ANALYZE topic_log")
    statements = {
        "publish_mail": (
            ik.queries.publish_mail.sql,
            {
                "sender": "pub", "topic": "news", "subject": "s", "body": "b",
                "priority": "normal", "attachments": None, "metadata": "{}",
                "idempotency_key": None, "request_hash": None, "new_thread_id": "probe",
                "delay": None,
            },
        ),
        "sequence_pending": (ik.queries.sequence_pending.sql, {"topic": "news"}),
    }  # fmt: skip
    for name, (sql, params) in statements.items():
        names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
        prepared = re.sub(r"%\((\w+)\)s", lambda m, n=names: f"${n.index(m[1]) + 1}", sql)
        for mode in ("force_custom_plan", "force_generic_plan"):
            with hub._connection() as conn:
                conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                conn.execute(f"PREPARE pending_probe AS {prepared}")
                args = psycopg.sql.SQL(", ").join(psycopg.sql.Literal(params[n]) for n in names)
                plan = "\n".join(
                    r["QUERY PLAN"]
                    for r in conn.execute(
                        psycopg.sql.SQL(
                            "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE pending_probe({})"
                        ).format(args)
                    )
                )
                conn.execute("DEALLOCATE pending_probe")
            assert "Seq Scan on topic_log" not in plan, (name, mode, plan)
            assert "topic_log_pending_idx on topic_log" in plan, (name, mode, plan)


def test_claim_with_a_lost_claim_to_complete_claims_nothing(hub: ik.Store) -> None:
    """If the claim to complete lost its lease, claim raises Conflict and takes
    nothing (even while waiting); an expired but untaken lease still completes, and is not
    handed straight back."""
    clock = Clock(hub)
    a, b = (hub.mail.publish("pub", "jobs", f"j{k}", "x") for k in range(2))
    old = _claim(hub, "w1", lease=10)
    clock.advance(seconds=11)
    new = _claim(hub, "w2", lease=10)  # old's message again, attempt 2
    assert new.mail.id == a.id
    before = _queue_states(hub)
    for kwargs in ({}, {"wait": 0.2}):
        with pytest.raises(ik.Conflict, match="lease on mail"):
            hub.topics.claim("w1", "jobs", complete=old, **kwargs)
    assert _queue_states(hub) == before
    clock.advance(seconds=11)  # new's lease expired too, nobody took it
    nxt = hub.topics.claim("w2", "jobs", complete=new)
    assert nxt is not None and nxt.mail.id == b.id
    assert _queue_states(hub) == {a.id: ("done", 2), b.id: ("claimed", 1)}
    assert hub.topics.claim("w2", "jobs", complete=nxt, wait=0.05) is None
    assert _queue_states(hub)[b.id] == ("done", 1)
    for bad in ("x", (1,), (a.id, "not-a-token"), 5):
        with pytest.raises(ik.InvalidArgument):
            hub.topics.claim("w1", "jobs", complete=bad)  # type: ignore[arg-type]


def test_claims_take_the_most_urgent_first_then_the_oldest(hub: ik.Store) -> None:
    """urgent before normal before low, the oldest first within one; a released message keeps
    its place; a delayed urgent one waits for its due time."""
    clock = Clock(hub)
    low = hub.mail.publish("pub", "jobs", "low", "x", priority="low")
    first = hub.mail.publish("pub", "jobs", "first", "x")
    urgent = hub.mail.publish("pub", "jobs", "urgent", "x", priority="urgent")
    second = hub.mail.publish("pub", "jobs", "second", "x")
    later = hub.mail.publish("pub", "jobs", "later", "x", priority="urgent", delay=10)
    took = _claim(hub, "w1", lease=3600)
    assert took.mail.id == urgent.id
    assert hub.topics.release(took) == "available"
    order = [_claim(hub, "w1", lease=3600).mail.id for _ in range(4)]
    assert order == [urgent.id, first.id, second.id, low.id]
    assert hub.topics.claim("w2", "jobs") is None
    clock.advance(seconds=10)
    assert _claim(hub, "w2").mail.id == later.id


def test_a_delayed_message_is_claimable_once_due(hub: ik.Store) -> None:
    """publish(delay=) and publish_many(delay=): the message is in the log and counted
    available at once, but a claim passes it (taking younger work) until it is due."""
    clock = Clock(hub)
    later = hub.mail.publish("pub", "jobs", "later", "x", delay=timedelta(seconds=60))
    batch = hub.mail.publish_many("pub", "jobs", ["b1", "b2"], subject="batch", delay=30)
    now = hub.mail.publish("pub", "jobs", "now", "x", delay=0)
    assert [m.id for m in hub.topics.read("jobs")] == [later.id, *(m.id for m in batch), now.id]
    assert [i.available for i in hub.topics.list() if i.topic.name == "jobs"] == [4]
    assert _claim(hub, "w1", lease=3600).mail.id == now.id
    assert hub.topics.claim("w2", "jobs") is None
    clock.advance(seconds=30)  # due exactly at 30 s
    assert [_claim(hub, "w2", lease=3600).mail.id for _ in batch] == [m.id for m in batch]
    clock.advance(seconds=29)
    assert hub.topics.claim("w2", "jobs") is None
    clock.advance(seconds=1)
    assert _claim(hub, "w2").mail.id == later.id


def test_release_with_a_delay_is_a_backoff(hub: ik.Store) -> None:
    """release(delay=): the message goes back available, claimable only once the delay
    passed; a dead letter ignores it; requeue makes a message due at once."""
    clock = Clock(hub)
    first = hub.mail.publish("pub", "jobs", "first", "x")
    second = hub.mail.publish("pub", "jobs", "second", "x")
    held = _claim(hub, "w1")
    assert held.mail.id == first.id
    assert hub.topics.release(held, error="retry later", delay=10) == "available"
    assert _claim(hub, "w2").mail.id == second.id  # the first is not due: the walk passes it
    assert hub.topics.claim("w1", "jobs") is None
    clock.advance(seconds=10)
    again = _claim(hub, "w1")
    assert (again.mail.id, again.attempt) == (first.id, 2)
    assert hub.topics.release(again, delay=3600) == "dead"  # its last attempt: no backoff
    hub.topics.requeue(first.id)
    assert _claim(hub, "w2").mail.id == first.id


def test_delays_are_refused_where_they_mean_nothing(hub: ik.Store) -> None:
    """A delay to a broadcast topic, a negative, too long or non-number delay: InvalidArgument,
    nothing written; a keyed publish retried with another delay is another request."""
    clock = Clock(hub)
    before = (mail_rows(hub), rows(hub, "queue_items"))
    with pytest.raises(ik.InvalidArgument, match="broadcast topic: only a queue"):
        hub.mail.publish("pub", "news", "s", "b", delay=5)
    with pytest.raises(ik.InvalidArgument, match="broadcast topic: only a queue"):
        hub.mail.publish_many("pub", "news", ["b"], delay=5)
    for bad in (-1, timedelta(days=366), "5", True, float("nan")):
        with pytest.raises(ik.InvalidArgument, match="delay"):
            hub.mail.publish("pub", "jobs", "s", "b", delay=bad)  # type: ignore[arg-type]
        with pytest.raises(ik.InvalidArgument, match="delay"):
            hub.mail.publish_many("pub", "jobs", ["b"], delay=bad)  # type: ignore[arg-type]
    assert (mail_rows(hub), rows(hub, "queue_items")) == before
    held = hub.mail.publish("pub", "jobs", "s", "b", idempotency_key="k", delay=5)
    assert hub.mail.publish("pub", "jobs", "s", "b", idempotency_key="k", delay=5) == held
    with pytest.raises(ik.Conflict, match="different request"):
        hub.mail.publish("pub", "jobs", "s", "b", idempotency_key="k", delay=6)
    with pytest.raises(ik.Conflict, match="different request"):
        hub.mail.publish("pub", "jobs", "s", "b", idempotency_key="k")
    assert hub.topics.claim("w1", "jobs") is None  # the keyed message is not due
    clock.advance(seconds=5)
    taken = _claim(hub, "w1")
    with pytest.raises(ik.InvalidArgument, match="delay"):
        hub.topics.release(taken, delay=-1)
    assert _queue_states(hub)[taken.mail.id] == ("claimed", 1)


def test_a_refusal_names_a_delay_only_when_there_was_one(hub: ik.Store) -> None:
    """Why a publish wrote nothing: a delay to a broadcast topic is named only when the
    publish had one; a refusal with no known reason (the mail holding its key deleted by
    retention between the insert and the lookup) is a Conflict asking to try again."""
    why = hub._run(topics._refusal("pub", "news", True))
    assert isinstance(why, ik.InvalidArgument) and "only a queue" in str(why)
    for topic, delayed in (("news", False), ("jobs", False), ("jobs", True)):
        why = hub._run(topics._refusal("pub", topic, delayed))
        assert isinstance(why, ik.Conflict) and "try again" in str(why), (topic, why)
    assert isinstance(hub._run(topics._refusal("nobody", "jobs", False)), ik.NotFound)


def test_release_and_dead_letters(hub: ik.Store) -> None:
    """release makes work claimable again until max_attempts; then it is a dead letter that
    requeue revives."""
    clock = Clock(hub)
    job = hub.mail.publish("pub", "jobs", "j", "x")
    assert hub.topics.release(_claim(hub, "w1"), error="flaky") == "available"
    assert hub.topics.release(_claim(hub, "w2"), error="boom") == "dead"
    assert hub.topics.claim("w1", "jobs") is None
    [dead] = hub.topics.dead_letters("jobs")
    assert (dead.mail.id, dead.attempts, dead.last_error) == (job.id, 2, "boom")
    hub.topics.requeue(job.id)
    assert _claim(hub, "w1", lease=1).attempt == 1
    with pytest.raises(ik.InvalidArgument, match="not a dead letter"):
        hub.topics.requeue(job.id)
    clock.advance(seconds=2)
    _claim(hub, "w2", lease=1)  # attempt 2
    clock.advance(seconds=2)
    assert hub.topics.claim("w1", "jobs") is None  # the expired last attempt died
    assert [d.last_error for d in hub.topics.dead_letters("jobs")] == ["lease expired"]
    with pytest.raises(ik.NotFound, match="mail 999999 does not exist"):
        hub.topics.requeue(999999)
    direct = hub.mail.send("pub", ["w1"], "s", "not queued")
    with pytest.raises(ik.NotFound, match="is not a queue message"):
        hub.topics.requeue(direct.id)


def test_claim_settles_the_expired_last_attempts_its_walk_passes(hub: ik.Store) -> None:
    """A claim's walk of the open work (lowest id first) makes the expired last attempts it
    passes dead letters (each in its own statement) and takes the next claimable message; an
    expired last attempt after that one is still its holder's until a claim walks to it."""
    clock = Clock(hub)
    jobs = [hub.mail.publish("pub", "jobs", f"j{k}", "x").id for k in range(4)]
    for _ in range(2):  # 'jobs' has 2 attempts: every job on its last one
        held = {c.mail.id: c for c in (_claim(hub, "w1", lease=1) for _ in jobs)}
        clock.advance(seconds=2)
    assert hub.topics.release(held[jobs[2]]) == "dead"
    hub.topics.requeue(jobs[2])  # available, after two and before one expired last attempts
    assert _claim(hub, "w2").mail.id == jobs[2]
    dead = hub.topics.dead_letters("jobs")
    assert [(d.mail.id, d.attempts, d.last_error) for d in dead] == [
        (jobs[0], 2, "lease expired"),
        (jobs[1], 2, "lease expired"),
    ]
    hub.topics.complete(held[jobs[3]])  # not walked to: still its holder's
    assert hub.topics.claim("w1", "jobs") is None
    assert _queue_states(hub) == {
        jobs[0]: ("dead", 2),
        jobs[1]: ("dead", 2),
        jobs[2]: ("claimed", 1),
        jobs[3]: ("done", 2),
    }


def test_claim_refusals(hub: ik.Store) -> None:
    """Claiming needs an existing queue topic the identity subscribes to."""
    for who, topic, error in [
        ("a", "jobs", ik.InvalidArgument),
        ("a", "news", ik.InvalidArgument),
        ("ghost", "jobs", ik.NotFound),
        ("w1", "nope", ik.NotFound),
    ]:
        with pytest.raises(error):
            hub.topics.claim(who, topic)


# ---------------------------------------------------------------- retention


def test_retention_keeps_unread_by_offset_and_unfinished_work(hub: ik.Store) -> None:
    """Old broadcast mail goes once every subscriber passed it; open queue work and direct
    mail stay; the counts are per topic."""
    clock = Clock(hub)
    old = [hub.mail.publish("pub", "news", f"n{k}", "x") for k in range(3)]
    done, open_job = (
        hub.mail.publish("pub", "jobs", "d", "x"),
        hub.mail.publish("pub", "jobs", "o", "x"),
    )
    hub.topics.complete(_claim(hub, "w1"))
    direct = hub.mail.send("a", ["b"], "keep", "me")
    clock.advance(days=8)
    for who in ("a", "b", "pub"):
        hub.topics.commit(who, "news", 2)
    assert hub.topics.prune() == {"jobs": 1, "news": 2}
    assert [m.id for m in hub.topics.read("news")] == [old[2].id]
    assert hub.mail.thread(direct.thread_id) == [direct]
    assert hub.topics.claim("w2", "jobs") is not None  # the open one is still there
    assert done.id not in [m.id for m in hub.topics.read("jobs")]
    assert open_job.id in [m.id for m in hub.topics.read("jobs")]
    assert hub.topics.prune() == {"jobs": 0, "news": 0}


def test_hostile_arguments_on_every_topic_call(hub: ik.Store) -> None:
    """Every topics call refuses bad names, ints, leases and claims with InvalidArgument and
    writes nothing."""
    fake = ik.Claim(hub.mail.send("a", ["b"], "s", "b"), 1, hub.identities.get("a").created_at, "x")
    t = hub.topics
    calls: list[Any] = [
        lambda: t.get("a b"),
        lambda: t.delete(5),
        lambda: t.subscribe("a", "-x"),
        lambda: t.unsubscribe("\ud800", "news"),
        lambda: t.subscribers(None),
        lambda: t.subscriptions(""),
        lambda: t.poll("a", limit=0),
        lambda: t.read("news", after=-1),
        lambda: t.read("news", limit=2**63),
        lambda: t.commit("a", "news", 2**63),
        lambda: t.commit("a", "news", 1.5),
        lambda: t.offset("a", "x" * 65),
        lambda: t.claim("w1", "jobs", ttl=0),
        lambda: t.claim("w1", "jobs", ttl=float("inf")),
        lambda: t.claim("w1", "jobs", wait=-1),
        lambda: t.complete("token"),
        lambda: t.complete(fake),
        lambda: t.release(fake, error="\x00"),
        lambda: t.extend(fake, 10**9),
        lambda: t.dead_letters("a/b"),
        lambda: t.requeue(0),
        lambda: hub.mail.publish("pub", "news", "s", "\x00"),
        lambda: hub.mail.publish("pub", "news", "s", "b", priority="now"),
    ]
    before = (mail_rows(hub), rows(hub, "topics"), rows(hub, "subscriptions"))
    for n, call in enumerate(calls):
        with pytest.raises(ik.InvalidArgument):
            call()
            pytest.fail(f"call {n} was accepted")
    assert (mail_rows(hub), rows(hub, "topics"), rows(hub, "subscriptions")) == before
