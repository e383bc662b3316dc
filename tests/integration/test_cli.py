"""The ikigai-store command line, run in-process with CliRunner against this file's database.

The database is shared by every test here and the CLI commits for real: tests create their own
sessions and compare by id, never assuming an empty database.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner, Result

import ikigai_store as ik
from ikigai_store.cli import cli
from ikigai_store.config import to_yoyo_url

pytestmark = pytest.mark.db


def run(url: str, *args: str) -> Result:
    """Run the CLI on ``url``; unexpected exceptions propagate instead of becoming exit code 1."""
    return CliRunner().invoke(cli, ["--database", url, *args], catch_exceptions=False)


def ok(url: str, *args: str) -> str:
    """Run the CLI, assert it succeeded, return its stdout."""
    result = run(url, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def fails(url: str, *args: str) -> str:
    """Run the CLI, assert it failed as a user error (exit 1, one Error: line), return stderr."""
    result = run(url, *args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: "), result.output
    assert "Traceback" not in result.output
    return result.stderr


def new_session(url: str, *args: str) -> int:
    return int(ok(url, "session", "new", *args).strip())


def add(url: str, sid: int, *args: str) -> int:
    return int(ok(url, "append", "--session", str(sid), *args).strip())


def context_rows(text: str) -> list[tuple[int, str]]:
    """(id, kind) of each context line of a rendered replay."""
    return [(int(m[1]), m[2]) for m in re.finditer(r"^\s*\d+\s+(\d+)\s+(\w+)", text, re.MULTILINE)]


# ------------------------------------------------------------------------------ sessions


def test_session_new_list_show(ikigai_db_url: str) -> None:
    """`session new` prints an id that `list` shows as active and `show` describes."""
    sid = new_session(ikigai_db_url, "--title", "cli list test")
    listing = ok(ikigai_db_url, "session", "list", "--limit", "5")
    line = next(x for x in listing.splitlines() if re.match(rf"^\*?\s+{sid}\s", x))
    assert line.startswith("*")
    assert "cli list test" in line
    add(ikigai_db_url, sid, "user", "one")
    shown = ok(ikigai_db_url, "session", "show", str(sid))
    assert f"{sid} (active)" in shown
    assert re.search(r"^messages:\s+1$", shown, re.MULTILINE)
    assert "cli list test" in shown


def test_session_end_defaults_to_active(ikigai_db_url: str) -> None:
    """`session end` without an id ends the active session, and `show` reports it ended."""
    sid = new_session(ikigai_db_url)
    assert ok(ikigai_db_url, "session", "end").strip() == f"ended session {sid}"
    assert f"{sid} (ended)" in ok(ikigai_db_url, "session", "show", str(sid))


def test_session_title_set_and_clear(ikigai_db_url: str) -> None:
    """`session title` sets a title and `--clear` removes it."""
    sid = new_session(ikigai_db_url)
    ok(ikigai_db_url, "session", "title", str(sid), "Refactor parser")
    assert "Refactor parser" in ok(ikigai_db_url, "session", "show", str(sid))
    ok(ikigai_db_url, "session", "title", str(sid), "--clear")
    assert re.search(r"^title:\s+-$", ok(ikigai_db_url, "session", "show", str(sid)), re.M)


# ------------------------------------------------------------------------------ append, replay


def test_append_and_replay_rendering(ikigai_db_url: str) -> None:
    """Replay lists the context in order, drops rewound turns and shows the mark stack."""
    sid = new_session(ikigai_db_url)
    u1 = add(ikigai_db_url, sid, "user", "Feature X")
    a1 = add(ikigai_db_url, sid, "assistant", "Approach A")
    mark = add(ikigai_db_url, sid, "mark", "approach-a", "--data", '{"label": "approach-a"}')
    add(ikigai_db_url, sid, "user", "Try B")
    rw = add(ikigai_db_url, sid, "rewind", "--data", json.dumps({"target_message_id": mark}))
    u2 = add(ikigai_db_url, sid, "user", "Improve A")
    out = ok(ikigai_db_url, "replay", "--session", str(sid))
    assert context_rows(out) == [
        (u1, "user"),
        (a1, "assistant"),
        (mark, "mark"),
        (rw, "rewind"),
        (u2, "user"),
    ]
    assert "Try B" not in out
    assert f"Marks: approach-a (message #{mark}, position 3)" in out
    assert "Skipped" not in out


def test_replay_defaults_to_active_session(ikigai_db_url: str) -> None:
    """`append` and `replay` without --session use the active session."""
    sid = new_session(ikigai_db_url)
    mid = int(ok(ikigai_db_url, "append", "user", "to the active one").strip())
    out = ok(ikigai_db_url, "replay")
    assert out.startswith(f"session {sid}:")
    assert context_rows(out) == [(mid, "user")]


def test_replay_shows_skipped_rewind(ikigai_db_url: str) -> None:
    """A rewind whose mark was cleared away is listed as skipped, not shown in context."""
    sid = new_session(ikigai_db_url)
    mark = add(ikigai_db_url, sid, "mark", "--data", '{"label": "m"}')
    add(ikigai_db_url, sid, "clear")
    u = add(ikigai_db_url, sid, "user", "after clear")
    rw = add(ikigai_db_url, sid, "rewind", "--data", json.dumps({"target_message_id": mark}))
    out = ok(ikigai_db_url, "replay", "--session", str(sid))
    assert context_rows(out) == [(u, "user")]
    assert "Marks: none" in out
    assert f"Skipped rewinds and pops (target no longer there): #{rw}" in out


def test_replay_truncates_long_content(ikigai_db_url: str) -> None:
    """Long, multi-line content is rendered on one line of bounded width."""
    sid = new_session(ikigai_db_url)
    add(ikigai_db_url, sid, "assistant", "first line\n" + "x" * 500)
    out = ok(ikigai_db_url, "replay", "--session", str(sid))
    line = next(x for x in out.splitlines() if "assistant" in x)
    assert "first line xxx" in line
    assert line.endswith("...")
    assert len(line) < 140


def test_replay_json(ikigai_db_url: str) -> None:
    """`replay --json` emits the context, marks and skipped rewinds as JSON."""
    sid = new_session(ikigai_db_url)
    mark = add(ikigai_db_url, sid, "mark", "cp", "--data", '{"label": "cp"}')
    tool = add(ikigai_db_url, sid, "tool_call", "--data", '{"name": "grep", "args": [1, 2]}')
    doc = json.loads(ok(ikigai_db_url, "replay", "--session", str(sid), "--json"))
    assert doc["session_id"] == sid
    assert [m["id"] for m in doc["messages"]] == [mark, tool]
    assert doc["messages"][1]["kind"] == "tool_call"
    assert doc["messages"][1]["content"] is None
    assert doc["messages"][1]["data"] == {"name": "grep", "args": [1, 2]}
    assert doc["marks"] == [{"message_id": mark, "label": "cp", "context_idx": 0}]
    assert doc["skipped"] == []


# ------------------------------------------------------------------------------ search


def test_search(ikigai_db_url: str) -> None:
    """`search` prints the matching message id, session, kind and a highlighted snippet."""
    sid = new_session(ikigai_db_url)
    mid = add(ikigai_db_url, sid, "user", "the flibbertigibbet parser is slow")
    out = ok(ikigai_db_url, "search", "flibbertigibbet", "--session", str(sid), "--limit", "5")
    row = next(x for x in out.splitlines() if x.split()[1:2] == [str(mid)])
    assert row.split()[2:4] == [str(sid), "user"]
    assert "[flibbertigibbet]" in row
    assert ok(ikigai_db_url, "search", "zzzunfindablezzz").strip() == "no matches"


# ------------------------------------------------------------------------------ status, migrate


def test_status_shows_version_and_no_pending(ikigai_db_url: str, ikigai_store: ik.Store) -> None:
    """`status` reports the migrated schema version, no pending migrations, the active session."""
    sid = new_session(ikigai_db_url)
    out = ok(ikigai_db_url, "status")
    assert re.search(rf"^schema version:\s+{ikigai_store.schema_version()}$", out, re.M)
    assert re.search(r"^pending:\s+none$", out, re.M)
    assert re.search(rf"^active session:\s+{sid}$", out, re.M)
    assert ("citus:" in out) is (os.environ.get("IKIGAI_TEST_CITUS") == "1")


def test_status_redacts_password(ikigai_db_url: str) -> None:
    """An unreachable URL is a one-line error (exit 1) that never shows the password."""
    result = run("postgresql://u:s3cret@127.0.0.1:1/x", "status")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "s3cret" not in result.output
    assert "u:***@127.0.0.1" in result.stderr


def test_database_option_accepts_yoyo_spelling(ikigai_db_url: str) -> None:
    """`--database postgresql+psycopg://...` (yoyo's spelling) reaches the same database."""
    sid = new_session(ikigai_db_url)
    yoyo_url = to_yoyo_url(ikigai_db_url)
    assert yoyo_url.startswith("postgresql+psycopg://")
    assert re.search(rf"^active session:\s+{sid}$", ok(yoyo_url, "status"), re.M)


def test_migrate_up_to_date(ikigai_db_url: str) -> None:
    """`migrate` on a migrated database says it is up to date."""
    assert ok(ikigai_db_url, "migrate").strip() == "up to date"


# ------------------------------------------------------------------------------ agents


def new_agent(url: str, sid: int, *args: str) -> str:
    return ok(url, "agent", "new", "--session", str(sid), *args).strip()


def fork(url: str, parent: str, *args: str) -> tuple[str, str]:
    """Fork ``parent``; return (child uuid, the fork-point line)."""
    lines = ok(url, "agent", "fork", parent, *args).splitlines()
    assert len(lines) == 2
    return lines[0], lines[1]


def say(url: str, agent: str, *args: str) -> int:
    return int(ok(url, "append", "--agent", agent, *args).strip())


def agent_context_rows(text: str) -> list[tuple[int, str, str]]:
    """(id, agent prefix, kind) of each context line of a rendered agent replay."""
    pattern = r"^\s*\d+\s+(\d+)\s+(\S+)\s+(\w+)"
    return [(int(m[1]), m[2], m[3]) for m in re.finditer(pattern, text, re.MULTILINE)]


def tree_rows(text: str) -> list[tuple[str, str]]:
    """(tree drawing, uuid) of each agent row of `agent list`."""
    return [(m[1], m[2]) for m in re.finditer(r"^  ([│├└─ ]*)(\S{22})\s", text, re.MULTILINE)]


def test_agent_new_prints_uuid_and_fields(ikigai_db_url: str, ikigai_store: ik.Store) -> None:
    """`agent new` prints only the new uuid; the agent is a running root with the given fields."""
    sid = new_session(ikigai_db_url)
    uuid = new_agent(ikigai_db_url, sid, "--name", "main", "--provider", "p", "--model", "m")
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", uuid)
    agent = ikigai_store.get_agent(uuid)
    assert (agent.session_id, agent.parent_uuid, agent.status) == (sid, None, "running")
    assert (agent.name, agent.provider, agent.model) == ("main", "p", "m")


def test_agent_new_defaults_to_active_session(ikigai_db_url: str, ikigai_store: ik.Store) -> None:
    """`agent new` without --session registers the agent in the active session."""
    sid = new_session(ikigai_db_url)
    uuid = ok(ikigai_db_url, "agent", "new").strip()
    assert ikigai_store.get_agent(uuid).session_id == sid


def test_agent_zero_is_idempotent_and_adopts(ikigai_db_url: str, ikigai_store: ik.Store) -> None:
    """`agent zero` prints the same root agent every time and adopts agent-less events."""
    sid = new_session(ikigai_db_url)
    orphan = add(ikigai_db_url, sid, "user", "before any agent")
    zero = ok(ikigai_db_url, "agent", "zero", "--session", str(sid)).strip()
    assert ok(ikigai_db_url, "agent", "zero", "--session", str(sid)).strip() == zero
    assert [m.id for m in ikigai_store.replay_agent(zero).messages] == [orphan]


def test_append_agent_defaults_to_agent_session(ikigai_db_url: str, ikigai_store: ik.Store) -> None:
    """`append --agent` records the event as the agent's, in the agent's (non-active) session."""
    sid = new_session(ikigai_db_url)
    uuid = new_agent(ikigai_db_url, sid)
    new_session(ikigai_db_url)  # another session becomes the active one
    mid = say(ikigai_db_url, uuid, "user", "hello")
    stored = ikigai_store.replay_agent(uuid).messages
    assert [(m.id, m.session_id, m.agent_uuid) for m in stored] == [(mid, sid, uuid)]


def test_append_agent_of_other_session_is_a_user_error(ikigai_db_url: str) -> None:
    """`append --agent` with a --session the agent does not belong to exits 1."""
    sid = new_session(ikigai_db_url)
    uuid = new_agent(ikigai_db_url, sid)
    other = new_session(ikigai_db_url)
    err = fails(ikigai_db_url, "append", "--agent", uuid, "--session", str(other), "user", "x")
    assert f"is not an agent of session {other}" in err
    assert "does not exist" in fails(ikigai_db_url, "append", "--agent", "nope", "user", "x")


def test_agent_fork_prints_uuid_and_fork_point(ikigai_db_url: str, ikigai_store: ik.Store) -> None:
    """`agent fork` prints the child uuid, then its fork point: the parent's newest event."""
    sid = new_session(ikigai_db_url)
    parent = new_agent(ikigai_db_url, sid, "--model", "m1")
    first, line = fork(ikigai_db_url, parent)
    assert line == "fork point: 0 (the parent had no events of its own)"
    say(ikigai_db_url, parent, "user", "one")
    newest = say(ikigai_db_url, parent, "assistant", "two")
    child, line = fork(ikigai_db_url, parent, "--name", "kid")
    assert line.startswith(f"fork point: #{newest} ")
    agent = ikigai_store.get_agent(child)
    assert (agent.parent_uuid, agent.fork_message_id, agent.name) == (parent, newest, "kid")
    assert agent.model == "m1"
    assert first != child


def test_agent_list_tree(ikigai_db_url: str) -> None:
    """`agent list` draws children under their parent with fork point, model and idle columns."""
    sid = new_session(ikigai_db_url)
    root = new_agent(ikigai_db_url, sid, "--name", "root", "--provider", "acme", "--model", "m")
    mid = say(ikigai_db_url, root, "user", "x")
    kid1, _ = fork(ikigai_db_url, root, "--name", "kid1")
    grandkid, _ = fork(ikigai_db_url, kid1, "--name", "grandkid")
    kid2, _ = fork(ikigai_db_url, root, "--name", "kid2")
    other = new_agent(ikigai_db_url, sid, "--name", "other")
    out = ok(ikigai_db_url, "agent", "list", "--session", str(sid))
    assert out.splitlines()[0] == f"session {sid}"
    assert tree_rows(out) == [
        ("", root),
        ("├─ ", kid1),
        ("│  └─ ", grandkid),
        ("└─ ", kid2),
        ("", other),
    ]
    row = next(x for x in out.splitlines() if kid1 in x).split()
    assert row[2:] == ["kid1", "running", str(mid), "acme/m", "no"]
    assert next(x for x in out.splitlines() if other in x).split()[1:] == [
        "other",
        "running",
        "-",
        "-",
        "no",
    ]


def test_agent_list_all_and_default(ikigai_db_url: str) -> None:
    """`agent list` shows the active session; `--all` groups every session's running agents."""
    s1 = new_session(ikigai_db_url)
    a1 = new_agent(ikigai_db_url, s1)
    s2 = new_session(ikigai_db_url)
    a2 = new_agent(ikigai_db_url, s2)
    default = ok(ikigai_db_url, "agent", "list")
    assert a2 in default
    assert a1 not in default
    every = ok(ikigai_db_url, "agent", "list", "--all")
    assert every.index(f"session {s1}\n") < every.index(a1) < every.index(f"session {s2}\n")
    assert every.index(f"session {s2}\n") < every.index(a2)
    s3 = new_session(ikigai_db_url)
    assert ok(ikigai_db_url, "agent", "list", "--session", str(s3)).strip() == "no running agents"
    assert "not both" in fails(ikigai_db_url, "agent", "list", "--all", "--session", str(s1))
    err = fails(ikigai_db_url, "agent", "list", "--session", "987654321")
    assert err == "Error: session 987654321 does not exist\n"  # not "--session 987654321 ..."


def test_agent_kill_prints_killed_subtree(ikigai_db_url: str) -> None:
    """`agent kill` prints the agent and its running descendants, parents first, then hides them."""
    sid = new_session(ikigai_db_url)
    root = new_agent(ikigai_db_url, sid)
    kid, _ = fork(ikigai_db_url, root)
    grandkid, _ = fork(ikigai_db_url, kid)
    sibling, _ = fork(ikigai_db_url, root)
    assert ok(ikigai_db_url, "agent", "kill", kid).split() == [kid, grandkid]
    assert tree_rows(ok(ikigai_db_url, "agent", "list", "--session", str(sid))) == [
        ("", root),
        ("└─ ", sibling),
    ]
    again = run(ikigai_db_url, "agent", "kill", kid)
    assert (again.exit_code, again.stdout) == (0, "")
    assert "not running" in again.stderr
    assert "is dead, not running" in fails(ikigai_db_url, "agent", "fork", kid)
    assert "does not exist" in fails(ikigai_db_url, "agent", "kill", "nope")


def test_agent_replay_shows_inherited_events(ikigai_db_url: str) -> None:
    """`agent replay` lists inherited then own events with each one's agent prefix, not later
    parent events, and honours a rewind to an inherited mark."""
    sid = new_session(ikigai_db_url)
    parent = new_agent(ikigai_db_url, sid)
    p1 = say(ikigai_db_url, parent, "user", "Feature X")
    mark = say(ikigai_db_url, parent, "mark", "cp", "--data", '{"label": "cp"}')
    say(ikigai_db_url, parent, "user", "dropped by the child's rewind")
    child, _ = fork(ikigai_db_url, parent)
    say(ikigai_db_url, parent, "assistant", "parent only")
    rw = say(ikigai_db_url, child, "rewind", "--data", json.dumps({"target_message_id": mark}))
    c1 = say(ikigai_db_url, child, "user", "child only")
    out = ok(ikigai_db_url, "agent", "replay", child)
    assert out.splitlines()[0].endswith("4 message(s) in context, 2 inherited")
    assert agent_context_rows(out) == [
        (p1, parent[:8], "user"),
        (mark, parent[:8], "mark"),
        (rw, child[:8], "rewind"),
        (c1, child[:8], "user"),
    ]
    assert "parent only" not in out
    assert "dropped" not in out
    assert f"Marks: cp (message #{mark}, position 2)" in out
    assert "parent only" in ok(ikigai_db_url, "agent", "replay", parent)


def test_agent_replay_json(ikigai_db_url: str) -> None:
    """`agent replay --json` gives the agent, its session and each message's agent uuid."""
    sid = new_session(ikigai_db_url)
    parent = new_agent(ikigai_db_url, sid)
    p1 = say(ikigai_db_url, parent, "user", "x")
    child, _ = fork(ikigai_db_url, parent)
    c1 = say(ikigai_db_url, child, "assistant", "y")
    doc = json.loads(ok(ikigai_db_url, "agent", "replay", child, "--json"))
    assert (doc["agent_uuid"], doc["session_id"]) == (child, sid)
    assert [(m["id"], m["agent_uuid"]) for m in doc["messages"]] == [(p1, parent), (c1, child)]
    assert (doc["marks"], doc["skipped"]) == ([], [])


def test_agent_ranges(ikigai_db_url: str) -> None:
    """`agent ranges` lists one range per ancestor, root first, with bounds and event counts."""
    sid = new_session(ikigai_db_url)
    root = new_agent(ikigai_db_url, sid, "--name", "root")
    say(ikigai_db_url, root, "user", "a")
    r2 = say(ikigai_db_url, root, "user", "b")
    kid, _ = fork(ikigai_db_url, root, "--name", "kid")
    after = say(ikigai_db_url, root, "user", "after the fork")
    clear = say(ikigai_db_url, kid, "clear")
    k1 = say(ikigai_db_url, kid, "user", "c")
    leaf, _ = fork(ikigai_db_url, kid, "--name", "leaf")
    out = ok(ikigai_db_url, "agent", "ranges", leaf)
    rows = [x.split() for x in out.splitlines()[1:-1]]
    assert rows == [[kid, "kid", str(clear), str(k1), "1"], [leaf, "leaf", "0", "∞", "0"]]
    assert out.splitlines()[-1].startswith("1 event(s) in 2 range(s)")
    rows = [x.split() for x in ok(ikigai_db_url, "agent", "ranges", kid).splitlines()[1:-1]]
    assert rows == [[kid, "kid", str(clear), "∞", "1"]]  # its own clear ends the walk
    kid2, _ = fork(ikigai_db_url, root, "--name", "kid2")
    rows = [x.split() for x in ok(ikigai_db_url, "agent", "ranges", kid2).splitlines()[1:-1]]
    assert rows == [[root, "root", "0", str(after), "3"], [kid2, "kid2", "0", "∞", "0"]]
    assert r2 < after
    assert "does not exist" in fails(ikigai_db_url, "agent", "ranges", "nope")


# ------------------------------------------------------------------------------ demo


def test_demo_runs_twice_and_leaves_active_session(ikigai_db_url: str) -> None:
    """`demo` reruns cleanly, shows the 6-entry context and keeps the user's session active."""
    mine = new_session(ikigai_db_url, "--title", "mine")
    for _ in range(2):
        out = ok(ikigai_db_url, "demo")
        demo_sid = int(re.search(r"Created session (\d+)", out)[1])  # type: ignore[index]
        part2 = out.split("2. Replay")[1].split("3. /clear")[0]
        kinds = [kind for _, kind in context_rows(part2)]
        assert kinds == ["user", "assistant", "mark", "rewind", "user", "assistant"]
        assert "Try B" not in part2
        assert "Marks: approach-a (message #" in part2
        part3 = out.split("3. /clear")[1].split("4. Search")[0]
        assert "Marks: none" in part3
        assert "Feature X" not in part3.split("pos")[1]
        assert "[Approach]" in out.split("4. Search")[1]
        shown = ok(ikigai_db_url, "session", "show", str(demo_sid))
        assert f"{demo_sid} (ended)" in shown
        assert re.search(r"^messages:\s+21$", shown, re.M)
        assert re.search(rf"^active session:\s+{mine}\s", ok(ikigai_db_url, "status"), re.M)
        assert f"session {demo_sid}" not in ok(ikigai_db_url, "agent", "list", "--all")


def test_demo_coordinates_tasks_review_and_lease(ikigai_db_url: str) -> None:
    """The demo's agents share a task list, take a review through changes to approval (each
    step mailed), are refused a held lease, and leave no lease behind."""
    out = ok(ikigai_db_url, "demo")
    me = re.search(r"-> identity (demo-[0-9a-f]{6}-main)", out)[1]  # type: ignore[index]
    tasks = out.split("11. Tasks")[1].split("12. A code review")[0]
    assert "available: lexer\n" in tasks
    assert "claims lexer; available: none" in tasks
    assert "lexer completed; available: parser" in tasks
    assert "3 tasks, 1 completed, 1 available, 1 blocked" in tasks
    review = out.split("12. A code review")[1].split("13. A lease")[0]
    severities = re.findall(r"#\d+\s+(critical|high|medium|low) ", review)
    assert severities == ["high", "low"]
    assert "iteration 2: approve; review is approved, 0 issue(s) open" in review
    assert "approving again is refused" in review
    lease = out.split("13. A lease")[1]
    assert f"held exclusively by '{me}'" in lease
    assert "review_approved" in lease
    assert "task_complete" in lease  # the lexer's completion, in the feed
    with ik.open(ikigai_db_url) as store:
        assert store.leases.held(f"repo:{me.rsplit('-', 1)[0]}/") == []
        reviews = store.reviews.list(requester=me)
        assert [r.state for r in reviews] == ["approved"]
        assert store.mail.counts(me).unread == 2  # the request's two answers


def test_demo_shows_fork_rewind_and_ranges(ikigai_db_url: str) -> None:
    """`demo` forks a child that inherits main's history, rewinds it alone, and lists 2 ranges."""
    out = ok(ikigai_db_url, "demo")
    fork = out.split("6. Fork")[1].split("7. Replay")[0]
    assert "0 messages copied" in fork
    replayed = out.split("7. Replay")[1].split("8. Explorer")[0]
    main_part, child_part = replayed.split("   The rewind cut")[0].split("   explorer (")
    assert "Start with the lexer" in main_part
    assert "Lexer done" in main_part
    assert "Start with the lexer" not in child_part
    assert "Lexer done" not in child_part
    assert "3 inherited from main" in child_part
    kinds = [kind for _, _, kind in agent_context_rows(child_part)]
    assert kinds == ["user", "assistant", "mark", "rewind", "user", "assistant"]
    ranges = out.split("8. Explorer")[1]
    table = ranges.split(" events\n")[1].split(" event(s) in ")[0].splitlines()[:-1]
    main_row, child_row = (x.split() for x in table)
    assert main_row[1:2] == ["main"]
    assert child_row[1:] == ["explorer", "0", "∞", "5"]
    assert re.search(r"└─ \S+\s+explorer\s+running", ranges)
    child = re.search(r"agent replay (\S+)", out)[1]  # type: ignore[index]
    assert "is dead, not running" in fails(ikigai_db_url, "agent", "fork", child)


# ------------------------------------------------------------------------------ errors


def test_unknown_kind_is_a_user_error(ikigai_db_url: str) -> None:
    """An unknown event kind exits 1 with an Error: line listing the valid kinds."""
    sid = new_session(ikigai_db_url)
    err = fails(ikigai_db_url, "append", "--session", str(sid), "banana", "x")
    assert "invalid event kind 'banana'" in err
    assert "assistant" in err


def test_bad_data_json_is_a_user_error(ikigai_db_url: str) -> None:
    """Malformed --data JSON exits 1 before anything is written."""
    sid = new_session(ikigai_db_url)
    assert "--data is not valid JSON" in fails(
        ikigai_db_url, "append", "--session", str(sid), "user", "x", "--data", "{nope"
    )
    assert "(empty context)" in ok(ikigai_db_url, "replay", "--session", str(sid))


def test_bad_rewind_target_is_a_user_error(ikigai_db_url: str) -> None:
    """A rewind naming a message that is not a mark is rejected with the store's message."""
    sid = new_session(ikigai_db_url)
    u = add(ikigai_db_url, sid, "user", "x")
    data = json.dumps({"target_message_id": u})
    err = fails(ikigai_db_url, "append", "--session", str(sid), "rewind", "--data", data)
    assert "is not a mark event" in err


def test_missing_session_is_a_user_error(ikigai_db_url: str) -> None:
    """Naming a session that does not exist exits 1 with a NotFound message."""
    assert "does not exist" in fails(ikigai_db_url, "replay", "--session", "987654321")
    assert "does not exist" in fails(ikigai_db_url, "session", "show", "987654321")
    assert "does not exist" in fails(ikigai_db_url, "append", "-s", "987654321", "user", "x")


def test_no_active_session_is_a_user_error(ikigai_db_url: str) -> None:
    """With every session ended, `append` without --session suggests `session new`."""
    for _ in range(1000):
        if run(ikigai_db_url, "session", "end").exit_code != 0:
            break
    assert "session new" in fails(ikigai_db_url, "append", "user", "hello")
    assert "no active session" in fails(ikigai_db_url, "replay")


def test_title_needs_title_or_clear(ikigai_db_url: str) -> None:
    """`session title ID` with neither TITLE nor --clear is a user error."""
    sid = new_session(ikigai_db_url)
    assert "either a TITLE or --clear" in fails(ikigai_db_url, "session", "title", str(sid))


# ------------------------------------------------------------------------------ usage errors


def usage_error(url: str, *args: str) -> str:
    """Run the CLI, assert a usage error: exit 1, exactly one `Error:` line, nothing on stdout."""
    result = run(url, *args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("Error: ")
    return result.stderr


@pytest.mark.parametrize(
    ("args", "message", "help_of"),
    [
        (["append", "--bogus", "user", "x"], "No such option", "ikigai-store append"),
        (["append"], "Missing argument 'KIND'", "ikigai-store append"),
        (
            ["session", "list", "--limit", "x"],
            "'x' is not a valid integer",
            "ikigai-store session list",
        ),
        (["session", "show"], "Missing argument 'ID'", "ikigai-store session show"),
        (["search", "one", "two"], "unexpected extra argument (two)", "ikigai-store search"),
        (["session", "nope"], "No such command 'nope'", "ikigai-store session"),
        (["nope"], "No such command 'nope'", "ikigai-store"),
        (["--bogus", "status"], "No such option", "ikigai-store"),
        (["append", "--sesion", "1", "user"], "Did you mean", "ikigai-store append"),
        (
            ["migrate", "--database", "postgresql://x@127.0.0.1:1/y"],
            "--database is a global option, written before the command: "
            "ikigai-store --database ... migrate",
            "ikigai-store migrate",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_1(
    ikigai_db_url: str, args: list[str], message: str, help_of: str
) -> None:
    """Unknown options, missing arguments, bad values and unknown commands exit 1 with one line
    naming the problem and where to find help (not click's exit 2 and usage block)."""
    err = usage_error(ikigai_db_url, *args)
    assert message in err
    assert "--bogus" in err or "--bogus" not in args
    assert err.rstrip().endswith(f"(see: {help_of} --help)")


@pytest.mark.slow
def test_usage_error_exit_status_of_the_program() -> None:
    """The installed program (`python -m ikigai_store`) exits 1 with one line on a bad option."""
    proc = subprocess.run(
        [sys.executable, "-m", "ikigai_store", "--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    [line] = proc.stderr.splitlines()
    assert line.startswith("Error: No such option")
    assert "--bogus" in line
    assert line.endswith(" (see: ikigai-store --help)")


@pytest.mark.parametrize("args", [[], ["agent"], ["session"]])
def test_group_without_command_prints_its_help(ikigai_db_url: str, args: list[str]) -> None:
    """A command group given no command prints its help on stdout and exits 0."""
    out = ok(ikigai_db_url, *args)
    assert out.startswith("Usage: ")
    assert "Commands:" in out


# ------------------------------------------------------------------------------ text arguments


def test_append_reads_content_from_stdin(ikigai_db_url: str) -> None:
    """`append KIND -` stores standard input verbatim (trailing newline included)."""
    sid = new_session(ikigai_db_url)
    result = CliRunner().invoke(
        cli,
        ["--database", ikigai_db_url, "append", "-s", str(sid), "user", "-"],
        input="hi\nthere\n",
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(ok(ikigai_db_url, "replay", "--session", str(sid), "--json"))
    assert [(m["id"], m["content"]) for m in doc["messages"]] == [
        (int(result.stdout), "hi\nthere\n")
    ]


def test_append_stdin_must_be_utf8(ikigai_db_url: str) -> None:
    """Standard input that is not UTF-8 is a user error and nothing is written."""
    sid = new_session(ikigai_db_url)
    result = CliRunner().invoke(
        cli,
        ["--database", ikigai_db_url, "append", "-s", str(sid), "user", "-"],
        input=b"caf\xe9",
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    assert result.stderr == "Error: standard input is not valid UTF-8 text\n"
    assert "(empty context)" in ok(ikigai_db_url, "replay", "--session", str(sid))


@pytest.mark.slow
def test_append_reads_a_large_tool_log_from_a_pipe(ikigai_db_url: str) -> None:
    """A 4 MB tool log piped into `append tool_result -` by a real process is stored whole.

    (Its vocabulary is small: content whose full-text vector exceeds PostgreSQL's 1 MB tsvector
    limit is refused by the search index whatever the CLI does.)
    """
    sid = new_session(ikigai_db_url)
    log = "".join(
        f"PASS tests/test_{i % 300}.py::test_{i % 97} ok \u2713\n" for i in range(120_000)
    )
    assert len(log.encode()) > 4_000_000
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "ikigai_store", "--database", ikigai_db_url),
            *("append", "--session", str(sid), "tool_result", "-"),
        ],
        input=log.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    with ik.open(ikigai_db_url, migrate=False) as store:
        [stored] = store.messages(sid)
    assert (stored.id, stored.kind, stored.content) == (int(proc.stdout), "tool_result", log)


@pytest.mark.parametrize(
    "text", ["-x", "- a list item", "--- a/parser.c", "-1", "--two words", "-s not a session"]
)
def test_append_content_may_start_with_dash(ikigai_db_url: str, text: str) -> None:
    """CONTENT starting with '-' is content, not an option, wherever the options are."""
    sid = new_session(ikigai_db_url)
    first = add(ikigai_db_url, sid, "user", text)
    second = int(ok(ikigai_db_url, "append", "user", text, "--session", str(sid)).strip())
    doc = json.loads(ok(ikigai_db_url, "replay", "--session", str(sid), "--json"))
    assert [(m["id"], m["content"]) for m in doc["messages"]] == [(first, text), (second, text)]


def test_search_query_may_start_with_dash(ikigai_db_url: str) -> None:
    """A QUERY starting with '-' (an excluded term) is the query, with options before or after
    it; `--` still works, and real options keep working."""
    sid = new_session(ikigai_db_url)
    add(ikigai_db_url, sid, "user", "alpha beta quux")
    gamma = add(ikigai_db_url, sid, "user", "alpha gamma quux")
    s = str(sid)
    for args in (
        ["-beta alpha", "--session", s],
        ["--session", s, "-n", "5", "-beta alpha"],
        ["-beta alpha", "-s", s, "--limit=5"],
        [f"-s{s}", "-beta alpha", "-n5"],
        ["--session", s, "--", "-beta alpha"],
    ):
        out = ok(ikigai_db_url, "search", *args)
        assert [int(x.split()[1]) for x in out.splitlines()[1:]] == [gamma], args
    assert "No such option" in usage_error(ikigai_db_url, "search", "alpha", "--bogus")


def test_stopword_only_search_says_so(ikigai_db_url: str) -> None:
    """A query of stop words only exits 1 saying there is nothing to search (not "no matches");
    a query with a real word and no hit still prints "no matches" and exits 0."""
    result = run(ikigai_db_url, "search", "the and of")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: the query 'the and of' has no searchable word (only stop words such as "
        "'the', or punctuation): nothing to search\n"
    )
    assert "nothing to search" in fails(ikigai_db_url, "search", "")
    assert ok(ikigai_db_url, "search", "the zzzunfindablezzz").strip() == "no matches"


# ------------------------------------------------------------------------------ entry point


def test_help_documents_every_command(ikigai_db_url: str) -> None:
    """`--help` lists every command and each command has its own help text."""
    top = ok(ikigai_db_url, "--help")
    commands = ("migrate", "migrations-path", "status", "session", "append", "replay", "search")
    for name in (*commands, "demo"):
        assert name in top
        assert "Usage: " in ok(ikigai_db_url, name, "--help")
    for name in ("new", "list", "show", "end", "title"):
        assert "Usage: " in ok(ikigai_db_url, "session", name, "--help")
    assert "agent" in top
    for name in ("list", "new", "zero", "fork", "kill", "replay", "ranges"):
        assert "Usage: " in ok(ikigai_db_url, "agent", name, "--help")


@pytest.mark.slow
def test_python_m_entry_point() -> None:
    """`python -m ikigai_store --help` runs the CLI in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-m", "ikigai_store", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage: ikigai-store" in proc.stdout
    assert "demo" in proc.stdout


def test_append_with_an_idempotency_key_stores_once(ikigai_db_url: str) -> None:
    """`append --idempotency-key` run twice prints the same id and stores one event; the key
    with other content is a one-line error that stores nothing."""
    sid = str(new_session(ikigai_db_url))
    args = ("append", "-s", sid, "--idempotency-key", "turn-1", "user", "hello")
    first = ok(ikigai_db_url, *args)
    assert ok(ikigai_db_url, *args) == first
    err = fails(ikigai_db_url, "append", "-s", sid, "--idempotency-key", "turn-1", "user", "bye")
    assert "'turn-1'" in err and "different event" in err
    doc = json.loads(ok(ikigai_db_url, "replay", "--session", sid, "--json"))
    assert [(m["id"], m["content"]) for m in doc["messages"]] == [(int(first), "hello")]
