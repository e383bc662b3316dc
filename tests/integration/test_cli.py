"""The ikigai-store command line, run in-process with CliRunner against this file's database.

The database is shared by every test here and the CLI commits for real: tests create their own
sessions and compare by id, never assuming an empty database.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner, Result

import ikigai_store as ik
from ikigai_store.cli import cli

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
    assert f"Skipped rewinds (target mark no longer on the stack): #{rw}" in out


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


def test_status_redacts_password(ikigai_db_url: str) -> None:
    """An unreachable URL is a one-line error (exit 1) that never shows the password."""
    result = run("postgresql://u:s3cret@127.0.0.1:1/x", "status")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "s3cret" not in result.output
    assert "u:***@127.0.0.1" in result.stderr


def test_migrate_up_to_date(ikigai_db_url: str) -> None:
    """`migrate` on a migrated database says it is up to date."""
    assert ok(ikigai_db_url, "migrate").strip() == "up to date"


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
        assert re.search(r"^messages:\s+11$", shown, re.M)
        assert re.search(rf"^active session:\s+{mine}\s", ok(ikigai_db_url, "status"), re.M)


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


# ------------------------------------------------------------------------------ entry point


def test_help_documents_every_command(ikigai_db_url: str) -> None:
    """`--help` lists every command and each command has its own help text."""
    top = ok(ikigai_db_url, "--help")
    for name in ("migrate", "status", "session", "append", "replay", "search", "demo"):
        assert name in top
        assert "Usage: " in ok(ikigai_db_url, name, "--help")
    for name in ("new", "list", "show", "end", "title"):
        assert "Usage: " in ok(ikigai_db_url, "session", name, "--help")


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
