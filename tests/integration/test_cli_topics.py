"""The ``topic`` commands, run in-process with CliRunner on a committed, shared database (each
test uses fresh names)."""

from __future__ import annotations

import pytest

from tests.integration.test_cli_mail import fails, fresh, ok, ok_json, register, run

pytestmark = pytest.mark.db


def test_broadcast_publish_poll_commit(ikigai_db_url: str) -> None:
    """create, subscribe, publish, poll --commit, read and list work end to end."""
    url, topic = ikigai_db_url, fresh("news")
    pub, reader = register(url), register(url)
    assert ok(url, "topic", "create", topic).strip() == f"{topic} (broadcast)"
    ok(url, "topic", "subscribe", reader, topic)
    first = ok(url, "topic", "publish", topic, "--from", pub, "-s", "Freeze", "no merges")
    assert first.splitlines()[0].isdigit()
    assert f"offset 1 of {topic}, to {reader}" in first
    ok(url, "topic", "publish", topic, "--from", pub, "-s", "Thaw", "-")
    polled = ok_json(url, "topic", "poll", reader, "--commit")
    assert [m["log_offset"] for m in polled["topics"][topic]] == [1, 2]
    assert polled["offsets"] == {topic: 0} and len(polled["inbox"]) == 2
    assert ok_json(url, "topic", "poll", reader)["topics"][topic] == []
    assert ok(url, "topic", "commit", reader, topic, "1").strip() == "2"  # monotone
    assert [m["subject"] for m in ok_json(url, "topic", "read", topic, "--after", "1")] == ["Thaw"]
    [info] = [i for i in ok_json(url, "topic", "list") if i["name"] == topic]
    assert (info["subscribers"], info["messages"], info["last_offset"]) == (1, 2, 2)


def test_create_unsearchable(ikigai_db_url: str) -> None:
    """create --unsearchable makes a topic whose mail search never finds; --json shows it."""
    url, topic = ikigai_db_url, fresh("quiet")
    pub = register(url)
    made = ok_json(url, "topic", "create", topic, "--queue", "--unsearchable", "--json")
    assert (made["name"], made["kind"], made["searchable"]) == (topic, "queue", False)
    word = fresh("xylophone")
    ok(url, "topic", "publish", topic, "--from", pub, "-s", word, "payload")
    assert ok_json(url, "mail", "search", word) == []
    [info] = [i for i in ok_json(url, "topic", "list") if i["name"] == topic]
    assert info["searchable"] is False and info["messages"] == 1


def test_publish_many_publishes_one_mail_per_line(ikigai_db_url: str) -> None:
    """publish-many: one mail per stdin line (blank lines skipped), printed as ID offset N in
    order; an input without lines is refused and writes nothing."""
    url, topic = ikigai_db_url, fresh("batch")
    pub = register(url)
    ok(url, "topic", "create", topic)
    stdin = "a\n\nb\n  \nc\n"
    out = ok(url, "topic", "publish-many", topic, "--from", pub, "-s", "job", stdin=stdin)
    assert [line.split()[1:] for line in out.splitlines()] == [
        ["offset", str(k)] for k in (1, 2, 3)
    ]
    assert [m["body"] for m in ok_json(url, "topic", "read", topic)] == ["a", "b", "c"]
    for empty in ("", "\n \n"):
        result = run(url, "topic", "publish-many", topic, "--from", pub, stdin=empty)
        assert result.exit_code == 1
        assert result.stderr == "Error: standard input holds no lines to publish\n"
    assert len(ok_json(url, "topic", "read", topic)) == 3


def test_publish_many_with_a_key_runs_once(ikigai_db_url: str) -> None:
    """publish-many --idempotency-key run twice with the same input prints the same mails and
    publishes once; with other input the key is refused (exit 1, nothing written)."""
    url, topic = ikigai_db_url, fresh("batch")
    pub = register(url)
    ok(url, "topic", "create", topic)
    args = ("topic", "publish-many", topic, "--from", pub, "--idempotency-key", "nightly-7")
    first = ok(url, *args, stdin="a\nb\n")
    assert ok(url, *args, stdin="a\nb\n") == first
    result = run(url, *args, stdin="a\nc\n")
    assert result.exit_code == 1 and "used for a different request" in result.stderr
    assert [m["body"] for m in ok_json(url, "topic", "read", topic)] == ["a", "b"]


def test_queue_claim_complete_release_dead_requeue(ikigai_db_url: str) -> None:
    """claim prints MAIL_ID TOKEN; complete/release/extend take them; dead letters requeue."""
    url, queue = ikigai_db_url, fresh("jobs")
    boss, worker = register(url), register(url)
    ok(url, "topic", "create", queue, "--queue", "--max-attempts", "1")
    ok(url, "topic", "subscribe", worker, queue)
    job = ok(url, "topic", "publish", queue, "--from", boss, "-s", "build", "make").split()[0]
    mail_id, token = ok(url, "topic", "claim", worker, queue).splitlines()[0].split()
    assert mail_id == job
    assert f"lease of {mail_id} until" in ok(
        url, "topic", "extend", mail_id, token, "--lease", "60"
    )
    assert ok(url, "topic", "release", mail_id, token, "--error", "boom").strip().endswith("dead")
    assert "boom" in ok(url, "topic", "dead", queue)
    ok(url, "topic", "requeue", mail_id)
    claimed = ok_json(url, "topic", "claim", worker, queue)
    ok(url, "topic", "complete", str(claimed["mail"]["id"]), claimed["token"])
    assert "lost" in fails(url, "topic", "complete", str(claimed["mail"]["id"]), claimed["token"])
    assert "nothing to claim" in fails(url, "topic", "claim", worker, queue)
    ok(url, "topic", "delete", queue)


def test_delayed_publish_and_release_backoff(ikigai_db_url: str) -> None:
    """publish --delay and publish-many --delay: not claimable yet (listed available);
    release --delay: a backoff; a delay to a broadcast topic is one Error line."""
    url, queue, news = ikigai_db_url, fresh("later"), fresh("news")
    boss, worker = register(url), register(url)
    ok(url, "topic", "create", queue, "--queue")
    ok(url, "topic", "create", news)
    ok(url, "topic", "subscribe", worker, queue)
    ok(url, "topic", "publish", queue, "--from", boss, "--delay", "1h", "later")
    ok(url, "topic", "publish-many", queue, "--from", boss, "--delay", "2h", stdin="a\nb\n")
    assert "nothing to claim" in fails(url, "topic", "claim", worker, queue)
    [info] = [i for i in ok_json(url, "topic", "list") if i["name"] == queue]
    assert (info["available"], info["claimed"]) == (3, 0)
    now = ok(url, "topic", "publish", queue, "--from", boss, "now").split()[0]
    mail_id, token = ok(url, "topic", "claim", worker, queue).splitlines()[0].split()
    assert mail_id == now
    released = ok(url, "topic", "release", mail_id, token, "--delay", "30m")
    assert released.strip().endswith("available")
    assert "nothing to claim" in fails(url, "topic", "claim", worker, queue)
    assert "only a queue" in fails(
        url, "topic", "publish", news, "--from", boss, "--delay", "5s", "x"
    )


def test_topic_errors_are_one_line(ikigai_db_url: str) -> None:
    """Bad input: one Error line, exit 1."""
    url = ikigai_db_url
    who = register(url)
    fails(url, "topic", "create", "bad name")
    fails(url, "topic", "create", fresh("t"), "--retention", "soon")
    fails(url, "topic", "publish", fresh("missing"), "--from", who, "x")
    fails(url, "topic", "claim", who, fresh("missing"))
    fails(url, "topic", "complete", "1", "not-a-token")
    assert "retention" in ok(url, "topic", "--help")
    # The library's limits, named as the options were typed.
    queue = fresh("q")
    ok(url, "topic", "create", queue, "--queue")
    ok(url, "topic", "subscribe", who, queue)
    err = fails(url, "topic", "claim", who, queue, "--ttl", "-5")
    assert err.startswith("Error: --ttl must be at least 1 microsecond and at most 86400 "), err
    err = fails(url, "topic", "create", fresh("t"), "--retention", "0s")
    assert err.startswith("Error: --retention must be at least 1 microsecond"), err
    assert "got 0 seconds" in err
    err = fails(url, "topic", "publish", queue, "--from", who, "--delay", "400d", "x")
    assert err.startswith("Error: --delay must be from 0 to 31536000 seconds (365 days)"), err
    err = fails(url, "topic", "claim", register(url), queue)
    assert "subscribes to a queue before it claims" in err
