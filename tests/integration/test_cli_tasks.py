"""The ``task`` commands, run in-process with CliRunner on a committed, shared database (each
test uses fresh list ids and identities)."""

from __future__ import annotations

import pytest

from tests.integration.test_cli_mail import fails, fresh, ok, ok_json, register

pytestmark = pytest.mark.db


def test_list_upsert_available_claim_complete(ikigai_db_url: str) -> None:
    """create-list, upsert with dependencies, available, claim, completion, show, list and
    stats work end to end; upsert and claim print ID STATUS OWNER first."""
    url, board = ikigai_db_url, fresh("L")
    owner = register(url)
    assert ok(url, "task", "create-list", board, "--owner", owner).strip() == board
    again = ok_json(url, "task", "create-list", board, "--owner", owner)
    assert (again["list_id"], again["owner"]) == (board, owner)
    assert ok(url, "task", "upsert", board, "1", "-s", "Lexer").splitlines()[0] == "1 pending -"
    ok(url, "task", "upsert", board, "2", "-s", "Parser", "--blocked-by", "1")
    deps = ("--blocked-by", "1", "--blocked-by", "2", "--metadata", '{"prio": 1}')
    made = ok_json(url, "task", "upsert", board, "3", "-s", "Ship", *deps)
    assert (made["blocked_by"], made["metadata"], made["status"]) == (
        ["1", "2"],
        {"prio": 1},
        "pending",
    )
    assert [t["external_id"] for t in ok_json(url, "task", "available", board)] == ["1"]
    assert "Lexer" in ok(url, "task", "available", board)
    everywhere = ok(url, "task", "available").splitlines()  # every list: a list column
    assert everywhere[0].split()[:2] == ["list", "id"]
    assert any(line.split()[:2] == [board, "1"] for line in everywhere[1:])
    assert (
        ok(url, "task", "claim", board, "1", "agent-a").splitlines()[0] == "1 in_progress agent-a"
    )
    assert "held by 'agent-a'" in fails(url, "task", "claim", board, "1", "agent-b")
    assert "blocked by 1" in fails(url, "task", "claim", board, "2", "agent-b")
    done = ok_json(url, "task", "upsert", board, "1", "--status", "completed")
    assert done["completed_at"] is not None and done["owner"] == "agent-a"
    assert [t["external_id"] for t in ok_json(url, "task", "available", board)] == ["2"]
    shown = ok(url, "task", "show", board, "3")
    assert "Blocked by: 1, 2" in shown and "Subject: Ship" in shown
    assert ok_json(url, "task", "show", board, "1")["blocks"] == ["2", "3"]
    listed = ok_json(url, "task", "list", board, "--status", "pending")
    assert [t["external_id"] for t in listed] == ["2", "3"]
    assert "Parser" in ok(url, "task", "list", board)
    stats = ok_json(url, "task", "stats", board)
    assert stats == {
        "total": 3,
        "pending": 2,
        "in_progress": 0,
        "completed": 1,
        "deleted": 0,
        "available": 1,
        "blocked": 1,
    }
    assert "available: 1" in ok(url, "task", "stats", board)
    [row] = [x for x in ok_json(url, "task", "lists") if x["list_id"] == board]
    assert row["stats"]["total"] == 3 and board in ok(url, "task", "lists")
    assert ok_json(url, "task", "upsert", board, "3", "--no-blockers")["blocked_by"] == []


def test_lists_and_available_of_one_project(ikigai_db_url: str) -> None:
    """--project keeps that project's lists and those of no project (its owner's project)."""
    url, ours, theirs, shared = ikigai_db_url, fresh("L"), fresh("L"), fresh("L")
    project = fresh("/repo/")
    owner, other = register(url, "--project", project), register(url, "--project", fresh("/x/"))
    for board, who in ((ours, owner), (theirs, other), (shared, register(url))):
        ok(url, "task", "create-list", board, "--owner", who)
        ok(url, "task", "upsert", board, "1", "-s", "work")
    listed = {x["list_id"] for x in ok_json(url, "task", "lists", "--project", project)}
    assert {ours, shared} <= listed and theirs not in listed
    free = {t["list_id"] for t in ok_json(url, "task", "available", "--project", project)}
    assert {ours, shared} <= free and theirs not in free
    assert ok_json(url, "task", "available", theirs, "--project", project) == []
    assert theirs in ok(url, "task", "available")


def test_sync_and_prune(ikigai_db_url: str) -> None:
    """sync prints how many tasks it deleted; prune how many it removed."""
    url, board = ikigai_db_url, fresh("L")
    ok(url, "task", "create-list", board, "--owner", register(url), "--watch-path", "/tmp/x")
    for ext in ("a", "b", "c"):
        ok(url, "task", "upsert", board, ext, "-s", ext)
    assert ok(url, "task", "sync", board, "a").strip() == "2"
    assert ok_json(url, "task", "sync", board, "a") == {"list_id": board, "deleted": 0}
    assert ok(url, "task", "prune", "--older-than", "1d").strip().isdigit()
    assert ok_json(url, "task", "prune", "--older-than", "0s")["deleted"] >= 2
    assert [t["external_id"] for t in ok_json(url, "task", "list", board)] == ["a"]


def test_task_errors_are_one_line(ikigai_db_url: str) -> None:
    """Bad input: one Error line, exit 1, nothing on stdout."""
    url, board = ikigai_db_url, fresh("L")
    who = register(url)
    assert "does not exist" in fails(url, "task", "create-list", board, "--owner", fresh("ghost"))
    ok(url, "task", "create-list", board, "--owner", who)
    assert "already exists" in fails(
        url, "task", "create-list", board, "--owner", who, "--watch-path", "/p"
    )
    assert "needs a subject" in fails(url, "task", "upsert", board, "1")
    ok(url, "task", "upsert", board, "1", "-s", "one")
    assert "cycle" in fails(url, "task", "upsert", board, "1", "--blocked-by", "1")
    assert "no task" in fails(url, "task", "upsert", board, "1", "--blocked-by", "9")
    assert "not valid JSON" in fails(url, "task", "upsert", board, "1", "--metadata", "{")
    assert "JSON object" in fails(url, "task", "upsert", board, "1", "--metadata", "[1]")
    assert "exclude" in fails(
        url, "task", "upsert", board, "1", "--blocked-by", "1", "--no-blockers"
    )
    fails(url, "task", "upsert", board, "1", "--status", "done")
    fails(url, "task", "show", board, "9")
    fails(url, "task", "list", fresh("missing"))
    fails(url, "task", "prune", "--older-than", "soon")
    assert "claim" in ok(url, "task", "--help")


def test_release_and_completion_activity(ikigai_db_url: str) -> None:
    """release gives a claimed task back (ID STATUS OWNER; only its holder); completing a task
    owned by an identity shows up in the activity feed as task_complete."""
    url, board = ikigai_db_url, fresh("L")
    lead, coder = register(url), register(url)
    ok(url, "task", "create-list", board, "--owner", lead)
    ok(url, "task", "upsert", board, "1", "-s", "Lexer")
    ok(url, "task", "claim", board, "1", coder)
    assert "held by" in fails(url, "task", "release", board, "1", lead)
    assert ok(url, "task", "release", board, "1", coder).splitlines()[0] == "1 pending -"
    assert "only an in_progress task" in fails(url, "task", "release", board, "1", coder)
    ok(url, "task", "claim", board, "1", coder)
    released = ok_json(url, "task", "release", board, "1", coder)
    assert (released["status"], released["owner"]) == ("pending", None)
    assert released["started_at"] is not None
    ok(url, "task", "claim", board, "1", coder)
    ok(url, "task", "upsert", board, "1", "--status", "completed")
    [done] = ok_json(url, "activity", "feed", "--identity", coder, "--type", "task_complete")
    assert done["description"] == f'completed task 1 "Lexer" in list {board}'
    assert "release" in ok(url, "task", "--help")
