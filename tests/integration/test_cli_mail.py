"""The ``identity`` and ``mail`` commands and the demo's mail part, run in-process with CliRunner.

The database is shared by every test here and the CLI commits for real: each test registers
identities under fresh names and compares by id, never assuming an empty database.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result

import ikigai_store as ik
from ikigai_store.cli import cli
from ikigai_store.cli.params import parse_duration

pytestmark = pytest.mark.db


def run(url: str, *args: str, stdin: str | bytes | None = None) -> Result:
    """Run the CLI on ``url``; unexpected exceptions propagate instead of becoming exit code 1."""
    return CliRunner().invoke(cli, ["--database", url, *args], input=stdin, catch_exceptions=False)


def ok(url: str, *args: str, stdin: str | bytes | None = None) -> str:
    """Run the CLI, assert it succeeded, return its stdout."""
    result = run(url, *args, stdin=stdin)
    assert result.exit_code == 0, result.output
    return result.stdout


def ok_json(url: str, *args: str) -> Any:
    """Run the CLI with --json, assert it succeeded, return the one JSON document it printed."""
    return json.loads(ok(url, *args, "--json"))


def fails(url: str, *args: str) -> str:
    """Run the CLI, assert a user error: exit 1, one `Error:` line, nothing on stdout."""
    result = run(url, *args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("Error: ")
    return result.stderr


def fresh(prefix: str = "id") -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def register(url: str, *args: str) -> str:
    """Register an identity (fresh name unless given) and return its name."""
    if not args or args[0].startswith("-"):
        args = (fresh(), *args)
    return ok(url, "identity", "register", *args).splitlines()[0]


def send(url: str, sender: str, to: str, *args: str) -> int:
    """`mail send` from ``sender`` to ``to``; the mail's id (the first line)."""
    return int(ok(url, "mail", "send", "--from", sender, "--to", to, *args).splitlines()[0])


def inbox_rows(text: str) -> list[tuple[str, int, str, str, str]]:
    """(marker, id, state, priority, sender) of each row of a rendered inbox."""
    return [
        (m[1], int(m[2]), m[3], m[4], m[5])
        for m in re.finditer(r"^([* ])\s+(\d+)\s+(\w+)\s+(\w+)\s+(\S+)\s", text, re.MULTILINE)
    ]


def thread_of(url: str, name: str, mail_id: int) -> str:
    return str(ok_json(url, "mail", "read", name, str(mail_id))["mail"]["thread_id"])


MAIL_KEYS = {
    "id",
    "thread_id",
    "parent_id",
    "sender",
    "to",
    "subject",
    "body",
    "priority",
    "deadline_at",
    "attachments",
    "metadata",
    "idempotency_key",
    "deleted_by_sender",
    "created_at",
    "topic",
    "log_offset",
}
ITEM_KEYS = {"mail", "state", "read_at", "acked_at", "snoozed_until"}
IDENTITY_KEYS = {
    "id",
    "name",
    "project_key",
    "git_branch",
    "purpose",
    "working_dir",
    "hostname",
    "agent_uuid",
    "created_at",
    "last_active_at",
    "retired_at",
    "parent",
}


# ------------------------------------------------------------------------------ identity


def test_identity_register_prints_the_name_and_list_shows_it(ikigai_db_url: str) -> None:
    """`identity register NAME` prints NAME alone; `identity list` shows its project and purpose."""
    project = fresh("proj")
    name = fresh("alice")
    out = ok(
        ikigai_db_url,
        *("identity", "register", name, "--project", project, "--branch", "main"),
        *("--purpose", "reviews parsers", "--working-dir", "/src", "--hostname", "box"),
    )
    assert out == f"{name}\n"
    listing = ok(ikigai_db_url, "identity", "list", "--project", project)
    header, row = listing.splitlines()
    assert header.split() == ["name", "project", "branch", "active", "purpose"]
    assert row.split() == [name, project, "main", row.split()[3], "reviews", "parsers"]
    assert re.fullmatch(r"\d+[smhd]", row.split()[3])


def test_identity_register_without_name_is_memorable(ikigai_db_url: str) -> None:
    """`identity register` with no NAME prints a generated valid name, and it exists."""
    name = ok(ikigai_db_url, "identity", "register").strip()
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name)
    assert name in ok(ikigai_db_url, "identity", "list").split()


def test_identity_register_json(ikigai_db_url: str) -> None:
    """`identity register --json` prints the identity, bound to an agent with --agent."""
    name = fresh("bound")
    with ik.open(ikigai_db_url, migrate=False) as store:
        sid = store.create_session("cli identity json")
        agent = store.create_agent(sid)
        doc = ok_json(ikigai_db_url, "identity", "register", name, "--agent", agent.uuid)
        assert store.identities.for_agent(agent.uuid).name == name
        store.end_session(sid)
    assert set(doc) == IDENTITY_KEYS
    assert (doc["name"], doc["agent_uuid"], doc["retired_at"]) == (name, agent.uuid, None)
    assert datetime.fromisoformat(doc["created_at"]).utcoffset() is not None


def test_identity_register_errors(ikigai_db_url: str) -> None:
    """A taken name or an invalid one is a one-line error."""
    name = register(ikigai_db_url)
    assert "already exists" in fails(ikigai_db_url, "identity", "register", name)
    assert name in fails(ikigai_db_url, "identity", "register", name)
    fails(ikigai_db_url, "identity", "register", "bad name!")
    fails(ikigai_db_url, "identity", "register", fresh(), "--agent", "no-such-agent")


def test_identity_list_json_and_retired(ikigai_db_url: str) -> None:
    """`identity list --json` is a list of identities; retired ones appear only with --all."""
    project = fresh("proj")
    a = register(ikigai_db_url, "--project", project)
    b = register(ikigai_db_url, "--project", project)
    ok(ikigai_db_url, "identity", "retire", a)
    docs = ok_json(ikigai_db_url, "identity", "list", "--project", project)
    assert [d["name"] for d in docs] == [b]
    assert set(docs[0]) == IDENTITY_KEYS
    docs = ok_json(ikigai_db_url, "identity", "list", "--project", project, "--all")
    assert {d["name"]: d["retired_at"] is not None for d in docs} == {a: True, b: False}
    listing = ok(ikigai_db_url, "identity", "list", "--project", project, "--all")
    assert "retired" in listing.splitlines()[0].split()
    assert ok(ikigai_db_url, "identity", "list", "--project", fresh()) == "no identities\n"


def test_identity_discover(ikigai_db_url: str) -> None:
    """`identity discover` shows each identity's status and unread count, text and JSON."""
    project = fresh("proj")
    a = register(ikigai_db_url, "--project", project)
    b = register(ikigai_db_url, "--project", project)
    send(ikigai_db_url, a, b, "hello")
    send(ikigai_db_url, a, b, "again")
    rows = {
        line.split()[0]: line.split()[1:3]
        for line in ok(ikigai_db_url, "identity", "discover", "--project", project).splitlines()
    }
    assert rows == {"name": ["status", "unread"], a: ["active", "0"], b: ["active", "2"]}
    docs = ok_json(ikigai_db_url, "identity", "discover", "--project", project)
    assert {d["identity"]["name"]: (d["status"], d["unread"]) for d in docs} == {
        a: ("active", 0),
        b: ("active", 2),
    }
    assert set(docs[0]) == {"identity", "unread", "status"}
    assert ok(ikigai_db_url, "identity", "discover", "--project", fresh()) == "no identities\n"


def test_identity_retire_idle_and_prune(ikigai_db_url: str) -> None:
    """`identity retire-idle` prints the project's idle identities it retired (not those active
    since); `identity prune` deletes the retired ones nothing refers to, keeps a sender."""
    project = fresh("proj")
    quiet = register(ikigai_db_url, "--project", project)
    talker = register(ikigai_db_url, "--project", project)
    send(ikigai_db_url, talker, register(ikigai_db_url), "hi")
    time.sleep(1.2)
    busy = register(ikigai_db_url, "--project", project)
    out = ok(ikigai_db_url, "identity", "retire-idle", "--idle", "1s", "--project", project)
    assert sorted(out.split()) == sorted([quiet, talker])
    assert (
        ok_json(ikigai_db_url, "identity", "retire-idle", "--idle", "1s", "--project", project)
        == []
    )
    pruned = ok(ikigai_db_url, "identity", "prune", "--retired-for", "0s").split()
    assert quiet in pruned and talker not in pruned and busy not in pruned
    assert quiet in fails(ikigai_db_url, "identity", "retire", quiet)


def test_identity_retire(ikigai_db_url: str) -> None:
    """`identity retire` is idempotent, keeps the mail, and the identity can no longer receive."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    mid = send(ikigai_db_url, a, b, "before retiring")
    out = ok(ikigai_db_url, "identity", "retire", b)
    assert re.fullmatch(rf"retired {b} \(since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\)\n", out)
    doc = ok_json(ikigai_db_url, "identity", "retire", b)
    assert doc["name"] == b
    assert doc["retired_at"] is not None
    assert ok(ikigai_db_url, "identity", "retire", b) == out  # the first retired_at is kept
    assert b in fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "x")
    assert "retired" in fails(ikigai_db_url, "mail", "send", "--from", b, "--to", a, "x")
    assert ok_json(ikigai_db_url, "mail", "read", b, str(mid))["mail"]["body"] == "before retiring"
    assert "does not exist" in fails(ikigai_db_url, "identity", "retire", fresh())


# ------------------------------------------------------------------------------ send, reply


def test_mail_send_prints_id_then_thread(ikigai_db_url: str) -> None:
    """`mail send` prints the id alone, then the thread and recipients; the mail is stored."""
    a, b, c = register(ikigai_db_url), register(ikigai_db_url), register(ikigai_db_url)
    out = ok(
        ikigai_db_url,
        *("mail", "send", "--from", a, "--to", c, "--to", b, "--to", c),
        *("--subject", "Build broken", "-p", "urgent", "main fails since #41"),
    )
    first, second = out.splitlines()
    mid = int(first)
    doc = ok_json(ikigai_db_url, "mail", "read", b, first)
    m = doc["mail"]
    assert second == f"thread {m['thread_id']}, to {', '.join(sorted([b, c]))}"
    assert (m["id"], m["sender"], m["to"]) == (mid, a, sorted([b, c]))
    assert (m["subject"], m["body"], m["priority"]) == (
        "Build broken",
        "main fails since #41",
        "urgent",
    )
    assert m["parent_id"] is None


def test_mail_send_json_and_options(ikigai_db_url: str) -> None:
    """`mail send --json` prints the mail with its thread, parent, deadline and JSON fields."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    root = send(ikigai_db_url, a, b, "root")
    thread = thread_of(ikigai_db_url, b, root)
    doc = ok_json(
        ikigai_db_url,
        *("mail", "send", "--from", b, "--to", a, "--thread", thread, "--parent", str(root)),
        *("--deadline", "2031-02-03T04:05:06+01:00", "--priority", "low"),
        *("--metadata", '{"pr": 7}', "--attachments", '[{"path": "a.diff"}]', "the body"),
    )
    assert set(doc) == MAIL_KEYS
    assert (doc["thread_id"], doc["parent_id"], doc["priority"]) == (thread, root, "low")
    assert datetime.fromisoformat(doc["deadline_at"]) == datetime(2031, 2, 3, 3, 5, 6, tzinfo=UTC)
    assert (doc["metadata"], doc["attachments"]) == ({"pr": 7}, [{"path": "a.diff"}])
    rel = ok_json(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "--deadline", "2h", "x")
    due = datetime.fromisoformat(rel["deadline_at"]) - datetime.now(UTC)
    assert timedelta(hours=1, minutes=59) < due <= timedelta(hours=2)
    shown = ok(ikigai_db_url, "mail", "read", a, str(doc["id"]))
    assert re.search(r"^metadata:\s+\{\"pr\": 7\}$", shown, re.M)
    assert re.search(rf"^reply to:\s+#{root}$", shown, re.M)
    assert re.search(r"^deadline:\s+\d{4}-", shown, re.M)


def test_mail_send_reads_body_from_stdin(ikigai_db_url: str) -> None:
    """BODY `-` reads standard input verbatim; a BODY starting with '-' is the body."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    out = ok(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "-", stdin="log\nline 2\n")
    mid = int(out.splitlines()[0])
    assert ok_json(ikigai_db_url, "mail", "read", b, str(mid))["mail"]["body"] == "log\nline 2\n"
    dash = send(ikigai_db_url, a, b, "- a list item")
    assert ok_json(ikigai_db_url, "mail", "read", b, str(dash))["mail"]["body"] == "- a list item"
    result = run(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "-", stdin=b"caf\xe9")
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: standard input is not valid UTF-8 text\n",
    )


def test_mail_send_idempotency_key(ikigai_db_url: str) -> None:
    """The same send with a used --idempotency-key prints the original id; a different one fails."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    key = ("--idempotency-key", "k-1")
    first = send(ikigai_db_url, a, b, *key, "-s", "s", "body")
    assert send(ikigai_db_url, a, b, *key, "-s", "s", "body") == first
    fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, *key, "-s", "s", "other body")
    assert len(ok_json(ikigai_db_url, "mail", "inbox", b)["items"]) == 1
    # The library's parameter is named as the user typed it.
    err = fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "--idempotency-key", "", "x")
    assert err.startswith("Error: --idempotency-key must be text"), err
    assert "idempotency_key" not in err


def test_mail_send_errors_write_nothing(ikigai_db_url: str) -> None:
    """Unknown identities, missing options or bad values are one-line errors; nothing is sent."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    ghost = fresh("ghost")
    err = fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "--to", ghost, "x")
    assert ghost in err
    assert "Missing option '--to'" in fails(ikigai_db_url, "mail", "send", "--from", a, "x")
    assert "Missing option '--from'" in fails(ikigai_db_url, "mail", "send", "--to", b, "x")
    assert "Missing argument 'BODY'" in fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b)
    err = fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "--metadata", "{x", "y")
    assert "--metadata is not valid JSON" in err
    assert "does not exist" in fails(ikigai_db_url, "mail", "send", "--from", ghost, "--to", b, "x")
    err = fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "-p", "huge", "x")
    assert "'huge' is not one of" in err
    err = fails(ikigai_db_url, "mail", "send", "--from", a, "--to", b, "--deadline", "soon", "x")
    assert "'soon' is not an ISO-8601 time" in err
    assert ok_json(ikigai_db_url, "mail", "inbox", b)["items"] == []


def test_mail_reply(ikigai_db_url: str) -> None:
    """`mail reply` answers every participant but the replier, in the thread, with "Re:"."""
    a, b, c = register(ikigai_db_url), register(ikigai_db_url), register(ikigai_db_url)
    root = int(
        ok(
            ikigai_db_url, "mail", "send", "--from", a, "--to", b, "--to", c, "-s", "Plan", "x"
        ).splitlines()[0]
    )
    out = ok(ikigai_db_url, "mail", "reply", "--from", b, str(root), "sounds good")
    first, second = out.splitlines()
    thread = thread_of(ikigai_db_url, b, root)
    assert second == f"thread {thread}, to {', '.join(sorted([a, c]))}"
    doc = ok_json(ikigai_db_url, "mail", "reply", "--from", c, first, "me too", "-p", "urgent")
    assert set(doc) == MAIL_KEYS
    assert (doc["thread_id"], doc["parent_id"], doc["subject"]) == (thread, int(first), "Re: Plan")
    assert (doc["to"], doc["priority"]) == (sorted([a, b]), "urgent")
    custom = ok_json(ikigai_db_url, "mail", "reply", "--from", a, str(root), "-s", "New", "ok")
    assert custom["subject"] == "New"
    stranger = register(ikigai_db_url)
    fails(ikigai_db_url, "mail", "reply", "--from", stranger, str(root), "hi")
    assert "Missing option '--from'" in fails(ikigai_db_url, "mail", "reply", str(root), "x")


# ------------------------------------------------------------------------------ inbox, read


def test_mail_inbox_text(ikigai_db_url: str) -> None:
    """`mail inbox` shows counts, then the mail newest first with `*` on unread ones."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    m1 = send(ikigai_db_url, a, b, "-s", "first", "one")
    m2 = send(ikigai_db_url, a, b, "-s", "second", "-p", "urgent", "two")
    m3 = send(ikigai_db_url, a, b, "-s", "", "three")
    ok(ikigai_db_url, "mail", "read", b, str(m1))
    out = ok(ikigai_db_url, "mail", "inbox", b)
    assert out.splitlines()[0] == (
        f"{b}: 2 unread (1 urgent), 0 starred, 0 snoozed, 0 archived, 0 trash"
    )
    assert out.splitlines()[1].split() == ["id", "state", "priority", "from", "age", "subject"]
    assert inbox_rows(out) == [
        ("*", m3, "unread", "normal", a),
        ("*", m2, "unread", "urgent", a),
        (" ", m1, "read", "normal", a),
    ]
    assert "(no subject)" in out.splitlines()[2]
    assert out.splitlines()[3].endswith("second")
    assert ok(ikigai_db_url, "mail", "inbox", a).splitlines()[1:] == ["no mail"]


def test_mail_inbox_filters_and_pages(ikigai_db_url: str) -> None:
    """--state, --priority, --limit and --before select mail; a full page names the next one."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    ids = [send(ikigai_db_url, a, b, f"m{i}") for i in range(5)]
    urgent = send(ikigai_db_url, a, b, "-p", "urgent", "now")
    ok(ikigai_db_url, "mail", "archive", b, str(ids[0]))
    page = ok(ikigai_db_url, "mail", "inbox", b, "--limit", "2")
    assert [r[1] for r in inbox_rows(page)] == [urgent, ids[4]]
    assert page.splitlines()[-1] == f"more: --before {ids[4]}"
    page = ok(ikigai_db_url, "mail", "inbox", b, "-n", "3", "--before", str(ids[4]))
    assert [r[1] for r in inbox_rows(page)] == [ids[3], ids[2], ids[1]]
    last = ok(ikigai_db_url, "mail", "inbox", b, "-n", "3", "--before", str(ids[1]))
    assert inbox_rows(last) == []
    assert "more:" not in last
    archived = ok(ikigai_db_url, "mail", "inbox", b, "--state", "archived")
    assert inbox_rows(archived) == [(" ", ids[0], "archived", "normal", a)]
    assert [r[1] for r in inbox_rows(ok(ikigai_db_url, "mail", "inbox", b, "-p", "urgent"))] == [
        urgent
    ]
    assert "'bogus' is not one of" in fails(ikigai_db_url, "mail", "inbox", b, "--state", "bogus")
    assert "limit" in fails(ikigai_db_url, "mail", "inbox", b, "--limit", "0")


def test_mail_inbox_json(ikigai_db_url: str) -> None:
    """`mail inbox --json` prints the identity, its counts and the items."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    m1 = send(ikigai_db_url, a, b, "-p", "urgent", "one")
    m2 = send(ikigai_db_url, a, b, "two")
    ok(ikigai_db_url, "mail", "star", b, str(m2))
    doc = ok_json(ikigai_db_url, "mail", "inbox", b)
    assert doc["identity"] == b
    assert doc["counts"] == {
        "unread": 1,
        "urgent_unread": 1,
        "starred": 1,
        "snoozed": 0,
        "archived": 0,
        "trash": 0,
    }
    assert [(i["mail"]["id"], i["state"]) for i in doc["items"]] == [
        (m2, "starred"),
        (m1, "unread"),
    ]
    assert set(doc["items"][0]) == ITEM_KEYS
    assert set(doc["items"][0]["mail"]) == MAIL_KEYS


def test_mail_read(ikigai_db_url: str) -> None:
    """`mail read` shows the headers and the body verbatim and marks the mail read."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    mid = send(ikigai_db_url, a, b, "-s", "Report", "line 1\n\n  line 3\n")
    out = ok(ikigai_db_url, "mail", "read", b, str(mid))
    head, body = out.split("\n\n", 1)
    assert re.search(rf"^mail:\s+{mid}$", head, re.M)
    assert re.search(rf"^from:\s+{a}$", head, re.M)
    assert re.search(rf"^to:\s+{b}$", head, re.M)
    assert re.search(r"^subject:\s+Report$", head, re.M)
    assert re.search(r"^state:\s+read$", head, re.M)
    assert body == "line 1\n\n  line 3\n"
    doc = ok_json(ikigai_db_url, "mail", "read", b, str(mid))
    assert set(doc) == ITEM_KEYS
    assert (doc["state"], doc["mail"]["body"]) == ("read", "line 1\n\n  line 3\n")
    assert doc["read_at"] is not None
    assert "does not exist" in fails(ikigai_db_url, "mail", "read", fresh(), str(mid))
    fails(ikigai_db_url, "mail", "read", a, str(mid))  # the sender is not a recipient
    assert "not a valid integer" in fails(ikigai_db_url, "mail", "read", b, "x")


# ------------------------------------------------------------------------------ states


def test_mail_ack(ikigai_db_url: str) -> None:
    """`mail ack` records the first ack, reads an unread mail, and is idempotent."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    mid = send(ikigai_db_url, a, b, "please ack")
    out = ok(ikigai_db_url, "mail", "ack", b, str(mid))
    assert re.fullmatch(rf"mail {mid} for {b}: read \(acked \d{{4}}-.*\)\n", out)
    doc = ok_json(ikigai_db_url, "mail", "ack", b, str(mid))
    assert set(doc) == ITEM_KEYS
    assert doc["state"] == "read"
    again = ok_json(ikigai_db_url, "mail", "ack", b, str(mid))
    assert again["acked_at"] == doc["acked_at"] is not None
    fails(ikigai_db_url, "mail", "ack", a, str(mid))


def test_mail_star_archive_trash_and_mark(ikigai_db_url: str) -> None:
    """star, archive, trash and mark move a mail along the allowed transitions (text and JSON)."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    mid = str(send(ikigai_db_url, a, b, "x"))
    assert ok(ikigai_db_url, "mail", "star", b, mid) == f"mail {mid} for {b}: starred\n"
    assert ok(ikigai_db_url, "mail", "mark", b, mid, "read") == f"mail {mid} for {b}: read\n"
    assert ok_json(ikigai_db_url, "mail", "archive", b, mid)["state"] == "archived"
    assert ok(ikigai_db_url, "mail", "trash", b, mid) == f"mail {mid} for {b}: trash\n"
    assert ok_json(ikigai_db_url, "mail", "mark", b, mid, "unread")["state"] == "unread"
    assert ok_json(ikigai_db_url, "mail", "star", b, mid)["state"] == "starred"
    assert ok_json(ikigai_db_url, "mail", "trash", b, mid)["state"] == "trash"
    assert set(ok_json(ikigai_db_url, "mail", "mark", b, mid, "unread")) == ITEM_KEYS


def test_mail_prune_deletes_copies_long_in_the_trash(ikigai_db_url: str) -> None:
    """`mail prune` deletes the trashed copies older than --older-than (the text form prints
    the count alone, --json an object), keeps a fresher one and the other recipient's copy;
    a bad duration writes nothing."""
    a, b, c = register(ikigai_db_url), register(ikigai_db_url), register(ikigai_db_url)
    old = str(send(ikigai_db_url, a, b, "old", "--to", c))
    ok(ikigai_db_url, "mail", "trash", b, old)
    assert "--older-than" in fails(ikigai_db_url, "mail", "prune", "--older-than", "soon")
    assert ok(ikigai_db_url, "mail", "prune", "--older-than", "1h").strip().isdigit()
    trash = ("mail", "inbox", b, "--state", "trash")
    assert [i["mail"]["id"] for i in ok_json(ikigai_db_url, *trash)["items"]] == [int(old)]
    time.sleep(1.1)
    new = str(send(ikigai_db_url, a, b, "new"))
    ok(ikigai_db_url, "mail", "trash", b, new)
    assert ok_json(ikigai_db_url, "mail", "prune", "--older-than", "1s")["deleted"] >= 1
    assert [i["mail"]["id"] for i in ok_json(ikigai_db_url, *trash)["items"]] == [int(new)]
    assert ok_json(ikigai_db_url, "mail", "inbox", c)["items"][0]["mail"]["id"] == int(old)


def test_mail_illegal_transition_is_a_user_error(ikigai_db_url: str) -> None:
    """A transition the state machine forbids names both states and changes nothing."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    mid = str(send(ikigai_db_url, a, b, "x"))
    ok(ikigai_db_url, "mail", "trash", b, mid)
    err = fails(ikigai_db_url, "mail", "archive", b, mid)
    assert "trash" in err
    assert "archived" in err
    err = fails(ikigai_db_url, "mail", "star", b, mid)
    assert "trash" in err
    assert "starred" in err
    ok(ikigai_db_url, "mail", "mark", b, mid, "unread")
    err = fails(ikigai_db_url, "mail", "mark", b, mid, "unread")
    assert "unread" in err
    assert ok_json(ikigai_db_url, "mail", "inbox", b)["items"][0]["state"] == "unread"
    assert "'snoozed' is not one of" in fails(ikigai_db_url, "mail", "mark", b, mid, "snoozed")
    assert "does not exist" in fails(ikigai_db_url, "mail", "star", fresh(), mid)


def test_mail_snooze(ikigai_db_url: str) -> None:
    """`mail snooze --for/--until` hides a mail until then; `inbox --state snoozed` lists it."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    m1, m2 = str(send(ikigai_db_url, a, b, "one")), str(send(ikigai_db_url, a, b, "two"))
    before = datetime.now(UTC)
    out = ok(ikigai_db_url, "mail", "snooze", b, m1, "--for", "1h30m")
    assert re.fullmatch(
        rf"mail {m1} for {b}: snoozed until \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\n", out
    )
    doc = ok_json(ikigai_db_url, "mail", "snooze", b, m2, "--until", "2040-01-01T00:00:00Z")
    assert doc["state"] == "snoozed"
    assert datetime.fromisoformat(doc["snoozed_until"]) == datetime(2040, 1, 1, tzinfo=UTC)
    inbox = ok_json(ikigai_db_url, "mail", "inbox", b, "--state", "snoozed")
    until = {i["mail"]["id"]: datetime.fromisoformat(i["snoozed_until"]) for i in inbox["items"]}
    assert set(until) == {int(m1), int(m2)}
    assert timedelta(minutes=89) < until[int(m1)] - before < timedelta(minutes=91)
    assert ok_json(ikigai_db_url, "mail", "inbox", b)["items"] == []
    assert "(until 2040-01-01" in ok(ikigai_db_url, "mail", "inbox", b, "--state", "snoozed")
    # re-snoozing a snoozed mail is allowed
    assert ok_json(ikigai_db_url, "mail", "snooze", b, m2, "--for", "1d")["state"] == "snoozed"
    # --until takes a duration from now as well as a time
    later = ok_json(ikigai_db_url, "mail", "snooze", b, m2, "--until", "2h")
    ahead = datetime.fromisoformat(later["snoozed_until"]) - datetime.now(UTC)
    assert timedelta(minutes=119) < ahead <= timedelta(hours=2)


def test_mail_snooze_errors(ikigai_db_url: str) -> None:
    """A bad duration, a time in the past, or neither/both options fail; a time without an
    offset is local time."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    mid = str(send(ikigai_db_url, a, b, "x"))
    snooze = ("mail", "snooze", b, mid)
    assert "'soon' is not a duration" in fails(ikigai_db_url, *snooze, "--for", "soon")
    assert "is not a duration" in fails(ikigai_db_url, *snooze, "--for", "5")
    assert "is not a duration" in fails(ikigai_db_url, *snooze, "--for", "")
    later = str(send(ikigai_db_url, a, b, "y"))
    local = ok_json(ikigai_db_url, "mail", "snooze", b, later, "--until", "2040-01-01T00:00:00")
    assert datetime.fromisoformat(local["snoozed_until"]) == datetime(2040, 1, 1).astimezone()
    # (no offset: local time)
    assert "not an ISO-8601 time" in fails(ikigai_db_url, *snooze, "--until", "tomorrow")
    assert "future" in fails(ikigai_db_url, *snooze, "--until", "2001-01-01T00:00:00+00:00")
    assert "future" in fails(ikigai_db_url, *snooze, "--for", "0s")
    assert "--for DURATION or --until" in fails(ikigai_db_url, *snooze)
    assert "--for DURATION or --until" in fails(
        ikigai_db_url, *snooze, "--for", "1h", "--until", "2040-01-01T00:00:00Z"
    )
    assert ok_json(ikigai_db_url, "mail", "inbox", b)["items"][0]["state"] == "unread"


def test_parse_duration() -> None:
    """Durations are one or more of <n>d, <n>h, <n>m, <n>s in that order."""
    assert parse_duration("30s") == timedelta(seconds=30)
    assert parse_duration("10m") == timedelta(minutes=10)
    assert parse_duration("2h") == timedelta(hours=2)
    assert parse_duration("1d") == timedelta(days=1)
    assert parse_duration("1d2h3m4s") == timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert parse_duration("1H30M") == timedelta(hours=1, minutes=30)
    for bad in ("", "h", "1.5h", "30", "1m1h", "-1h", "1 h", "99999999999d"):
        with pytest.raises(ValueError):
            parse_duration(bad)


# ------------------------------------------------------------------------------ thread, search


def test_mail_thread(ikigai_db_url: str) -> None:
    """`mail thread` shows every mail in order with bodies; --as keeps one identity's part."""
    a, b, c = register(ikigai_db_url), register(ikigai_db_url), register(ikigai_db_url)
    root = send(ikigai_db_url, a, b, "-s", "Plan", "step one\nstep two")
    answer = int(ok(ikigai_db_url, "mail", "reply", "--from", b, str(root), "ok").split()[0])
    thread = thread_of(ikigai_db_url, b, root)
    aside = send(ikigai_db_url, a, c, "--thread", thread, "fyi")
    out = ok(ikigai_db_url, "mail", "thread", thread)
    assert out.splitlines()[0] == f"thread {thread}: 3 mail(s)"
    heads = re.findall(r"^#(\d+)\s+(\S+) -> (\S+)\s+\((.*)\)$", out, re.M)
    assert [(int(i), s, t) for i, s, t, _ in heads] == [(root, a, b), (answer, b, a), (aside, a, c)]
    assert heads[1][3].startswith(f"reply to #{root}, ")
    assert "Subject: Plan\n    step one\n    step two\n" in out
    assert "Subject: Re: Plan\n    ok\n" in out
    docs = ok_json(ikigai_db_url, "mail", "thread", thread, "--as", c)
    assert [d["id"] for d in docs] == [aside]
    assert set(docs[0]) == MAIL_KEYS
    assert [d["id"] for d in ok_json(ikigai_db_url, "mail", "thread", thread)] == [
        root,
        answer,
        aside,
    ]
    d = register(ikigai_db_url)
    assert ok(ikigai_db_url, "mail", "thread", thread, "--as", d) == (
        f"{d} sent or received no mail of thread {thread}\n"
    )
    assert ok_json(ikigai_db_url, "mail", "thread", thread, "--as", d) == []
    assert "has no mail" in fails(ikigai_db_url, "mail", "thread", fresh("thread"))
    assert "does not exist" in fails(ikigai_db_url, "mail", "thread", thread, "--as", fresh())


def test_mail_search(ikigai_db_url: str) -> None:
    """`mail search` ranks hits with snippets, text and JSON; --as keeps one identity's mail."""
    a, b, c = register(ikigai_db_url), register(ikigai_db_url), register(ikigai_db_url)
    word = "zorblax" + uuid.uuid4().hex[:6]
    in_subject = send(ikigai_db_url, a, b, "-s", f"{word} broken", "see logs")
    in_body = send(ikigai_db_url, a, c, "-s", "misc", f"the {word} is fine now")
    out = ok(ikigai_db_url, "mail", "search", word)
    assert out.splitlines()[0].split() == ["rank", "id", "from", "snippet"]
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [int(r[1]) for r in rows] == [in_subject, in_body]  # subject weighs more
    assert f"[{word}]" in out
    hits = ok_json(ikigai_db_url, "mail", "search", word, "--as", c)
    assert [h["mail"]["id"] for h in hits] == [in_body]
    assert set(hits[0]) == {"mail", "rank", "snippet"}
    assert set(hits[0]["mail"]) == MAIL_KEYS
    assert [
        int(x.split()[1])
        for x in ok(ikigai_db_url, "mail", "search", word, "-n", "1").splitlines()[1:]
    ] == [in_subject]
    recent = ok(ikigai_db_url, "mail", "search", word, "--order", "recent")
    assert [int(x.split()[1]) for x in recent.splitlines()[1:]] == [in_body, in_subject]
    assert "Invalid value for '--order'" in fails(
        ikigai_db_url, "mail", "search", word, "--order", "best"
    )
    excluded = ok(ikigai_db_url, "mail", "search", f"-broken {word}")
    assert [int(x.split()[1]) for x in excluded.splitlines()[1:]] == [in_body]
    assert ok(ikigai_db_url, "mail", "search", "zzzunfindablezzz") == "no matches\n"
    assert ok_json(ikigai_db_url, "mail", "search", "zzzunfindablezzz") == []
    assert "nothing to search" in fails(ikigai_db_url, "mail", "search", "the and of")
    assert "does not exist" in fails(ikigai_db_url, "mail", "search", word, "--as", fresh())


# ------------------------------------------------------------------------------ wait


def test_mail_wait_prints_the_oldest_unread(ikigai_db_url: str) -> None:
    """`mail wait` prints the oldest unread mail at once and marks it read (text and JSON)."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    m1 = send(ikigai_db_url, a, b, "-s", "first", "one")
    m2 = send(ikigai_db_url, a, b, "-s", "second", "two")
    out = ok(ikigai_db_url, "mail", "wait", b, "--timeout", "5")
    assert re.search(rf"^mail:\s+{m1}$", out, re.M)
    assert re.search(r"^state:\s+read$", out, re.M)
    assert out.endswith("\n\none\n")
    doc = ok_json(ikigai_db_url, "mail", "wait", b, "-t", "0")
    assert set(doc) == ITEM_KEYS
    assert (doc["mail"]["id"], doc["state"]) == (m2, "read")


def test_mail_wait_times_out(ikigai_db_url: str) -> None:
    """With no mail, `mail wait` exits 1 after the timeout with one line and no stdout."""
    b = register(ikigai_db_url)
    started = time.monotonic()
    err = fails(ikigai_db_url, "mail", "wait", b, "--timeout", "0.3")
    assert time.monotonic() - started >= 0.3
    assert err == f"Error: no mail for {b} within 0.3 s\n"
    assert fails(ikigai_db_url, "mail", "wait", b, "--timeout", "0", "--json") == (
        f"Error: no mail for {b} within 0 s\n"
    )
    assert "does not exist" in fails(ikigai_db_url, "mail", "wait", fresh(), "-t", "0")
    assert "--timeout" in fails(ikigai_db_url, "mail", "wait", b, "-t", "-1")


def test_mail_wait_wakes_when_mail_is_sent(ikigai_db_url: str) -> None:
    """A waiting `mail wait` returns the mail another process sends, long before its timeout."""
    a, b = register(ikigai_db_url), register(ikigai_db_url)
    sent: list[int] = []

    def sender() -> None:
        with ik.open(ikigai_db_url, migrate=False) as store:
            time.sleep(0.3)
            sent.append(store.mail.send(a, [b], "wake", "up").id)

    thread = threading.Thread(target=sender)
    thread.start()
    started = time.monotonic()
    doc = ok_json(ikigai_db_url, "mail", "wait", b, "--timeout", "20")
    elapsed = time.monotonic() - started
    thread.join()
    assert doc["mail"]["id"] == sent[0]
    assert elapsed < 5


# ------------------------------------------------------------------------------ help, usage


@pytest.mark.parametrize("group", ["identity", "mail"])
def test_groups_print_help_and_every_command_has_help(ikigai_db_url: str, group: str) -> None:
    """`identity` and `mail` alone print their help listing every command, each with help."""
    commands = {
        "identity": ["register", "list", "discover", "retire"],
        "mail": [
            *("send", "reply", "inbox", "read", "ack", "star", "snooze", "archive", "trash"),
            *("mark", "thread", "search", "prune", "wait"),
        ],
    }[group]
    out = ok(ikigai_db_url, group)
    assert out.startswith("Usage: ")
    listed = out.split("Commands:")[1].split()
    for name in commands:
        assert name in listed
        assert "Usage: " in ok(ikigai_db_url, group, name, "--help")
        assert "--json" in ok(ikigai_db_url, group, name, "--help")
    assert group in ok(ikigai_db_url, "--help")
    assert "exit status" in ok(ikigai_db_url, "mail", "wait", "--help").lower()


# ------------------------------------------------------------------------------ demo


def test_demo_exchanges_mail_and_wakes_a_waiter(ikigai_db_url: str) -> None:
    """The demo's identities exchange mail, a waiter wakes, and the identities end retired."""
    out = ok(ikigai_db_url, "demo")
    part9 = out.split("9. Mail")[1].split("10. A waiting")[0]
    part10 = out.split("10. A waiting")[1]
    me = re.search(r"main\s+-> identity (\S+) \(bound to agent", part9)[1]  # type: ignore[index]
    other = re.search(r"explorer\s+-> identity (\S+) \(bound", part9)[1]  # type: ignore[index]
    assert re.fullmatch(r"demo-[0-9a-f]{6}-main", me)
    assert f"{me} -> {other}: Lexer API" in part9
    assert f"{other} -> {me}: Re: Lexer API" in part9
    assert f"{other}: 1 unread (0 urgent)" in part9
    assert re.search(rf"^\s+\*\s+\d+\s+unread\s+normal\s+{me}\s", part9, re.M)
    assert "Subject: Re: Lexer API" in part9
    woke = re.search(r"woke ([\d.]+) ms after the send began", part10)
    assert woke is not None, part10
    assert float(woke[1]) < 5000
    assert '"Parser done", now read' in part10
    assert f"{me}: 0 unread (0 urgent), 1 starred" in part10
    # the identities are retired: gone from discover, listed as retired with --all
    project = me.removesuffix("-main")
    assert ok(ikigai_db_url, "identity", "discover", "--project", project) == "no identities\n"
    docs = ok_json(ikigai_db_url, "identity", "list", "--project", project, "--all")
    assert {d["name"] for d in docs} == {me, other}
    assert all(d["retired_at"] is not None for d in docs)
    assert f"identities ({me}, {other}) retired" in out
    thread = re.search(r"^  ikigai-store mail thread (\S+)$", out, re.M)[1]  # type: ignore[index]
    mails = ok_json(ikigai_db_url, "mail", "thread", thread)
    assert [(m["sender"], m["subject"]) for m in mails] == [
        (me, "Lexer API"),
        (other, "Re: Lexer API"),
        (other, "Parser done"),
    ]
    # a second run registers other names
    again = ok(ikigai_db_url, "demo")
    assert me not in again
