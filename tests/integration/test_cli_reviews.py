"""The ``review`` and ``plan`` commands, run in-process with CliRunner on a committed, shared
database (each test uses fresh names and compares by id)."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_cli_mail import fails, ok, ok_json, register

pytestmark = pytest.mark.db

ISSUES = [
    {"issue_type": "style", "severity": "low", "title": "long line", "description": "wrap"},
    {
        "issue_type": "bug",
        "severity": "critical",
        "title": "crash on empty input",
        "description": "n = 0",
        "file_path": "src/parse.c",
        "line_start": 10,
        "line_end": 12,
    },
]


def test_review_lifecycle(ikigai_db_url: str) -> None:
    """create (--submit) prints the id; events print SHORT STATE; iterate records issues and
    applies the decision; issues are listed most severe first; resolve; show and list."""
    url = ikigai_db_url
    alice, bob, carol = register(url), register(url), register(url)
    out = ok(
        url, "review", "create", alice, "-r", bob, "-r", carol, "--branch", "feat/x", "--pr", "9"
    )
    review_id, summary = out.splitlines()
    short = review_id[:8]
    assert summary == f"{short}: new, thread review-{short}"
    assert ok(url, "review", "submit", short).strip() == f"{short} pending_review"
    assert ok(url, "review", "start", review_id, "--by", carol).strip() == f"{short} under_review"
    line = ok(
        url,
        "review",
        "iterate",
        short,
        "-",
        "--reviewer",
        carol,
        "--decision",
        "request_changes",
        "--issues",
        json.dumps(ISSUES),
        "--cost",
        "0.5",
        stdin="Two problems.",
    )
    assert (
        line.strip()
        == f"{short} iteration 1: request_changes, 2 issue(s); review changes_requested"
    )
    issues = ok_json(url, "review", "issues", short)
    assert [i["severity"] for i in issues] == ["critical", "low"]
    assert issues[0]["line_start"] == 10
    resolved = ok(url, "review", "resolve", str(issues[0]["id"]), "fixed")
    assert resolved.strip() == f"issue {issues[0]['id']} fixed in iteration 1"
    assert [i["status"] for i in ok_json(url, "review", "issues", short, "--all")] == [
        "open",
        "fixed",
    ]
    ok(url, "review", "resubmit", short)
    ok(url, "review", "start", short)
    approved = ok_json(url, "review", "approve", short)
    assert (approved["state"], approved["review_id"]) == ("approved", review_id)
    shown = ok(url, "review", "show", short)
    assert f"review {review_id} (approved)" in shown and "iteration 1 by" in shown
    doc = ok_json(url, "review", "show", short)
    assert ok_json(url, "review", "show", doc["thread_id"]) == doc  # review-<8 hex> names it too
    assert [it["decision"] for it in doc["iteration_list"]] == ["request_changes"]
    assert [i["title"] for i in doc["open_issues"]] == ["long line"]
    listed = ok_json(url, "review", "list", "--requester", alice)
    assert [r["review_id"] for r in listed] == [review_id]
    assert short in ok(url, "review", "list", "--state", "approved")
    assert review_id not in ok(url, "review", "list", "--active")
    thread = ok_json(url, "mail", "thread", f"review-{short}")
    assert [m["sender"] for m in thread] == [alice, carol, alice, bob]


def test_review_errors_are_one_line(ikigai_db_url: str) -> None:
    """Illegal events, bad prefixes, bad issues and unknown people: one Error line, exit 1."""
    url = ikigai_db_url
    alice, bob = register(url), register(url)
    review_id = ok(url, "review", "create", alice, "-r", bob).splitlines()[0]
    short = review_id[:8]
    assert "is new; cannot approve" in fails(url, "review", "approve", short)
    assert "4 to 32 hex digits" in fails(url, "review", "show", "ab%c")
    assert "does not exist" in fails(url, "review", "create", alice, "-r", "ghost-nobody")
    ok(url, "review", "submit", short)
    ok(url, "review", "start", short)
    bad = json.dumps([{**ISSUES[0], "issue_type": "typo"}])
    fails(
        url,
        "review",
        "iterate",
        short,
        "x",
        "--reviewer",
        bob,
        "--decision",
        "comment",
        "--issues",
        bad,
    )
    fails(
        url,
        "review",
        "iterate",
        short,
        "x",
        "--reviewer",
        bob,
        "--decision",
        "comment",
        "--issues",
        "{}",
    )
    fails(url, "review", "iterate", short, "x", "--reviewer", bob, "--decision", "lgtm")
    assert "no review id starts with" in fails(url, "review", "show", "ffffffff-ffff")
    fails(url, "review", "list", "--active", "--state", "new")
    assert "review" in ok(url, "review", "--help")


def test_plan_lifecycle(ikigai_db_url: str) -> None:
    """submit (to the human) prints the id; decide, resubmit, show, pending and list accept
    the id, the thread id or its 8 digits."""
    url = ikigai_db_url
    planner = register(url)
    session = f"sess-{planner}"
    out = ok(
        url,
        "plan",
        "submit",
        planner,
        "plans/p.md",
        "-t",
        "Port it",
        "-s",
        "-",
        "--session",
        session,
        stdin="Lexer first.",
    )
    plan_id, line = out.splitlines()
    short = plan_id[:8]
    assert line == f"{short}: pending, asked of User, thread plan-{short}"
    pending = ok_json(url, "plan", "pending", "--session", session)
    assert [p["plan_review_id"] for p in pending] == [plan_id]
    assert ok(
        url, "plan", "decide", f"plan-{short}", "changes_requested", "-c", "Tests?"
    ).strip() == (f"{short} changes_requested")
    assert "resubmit" in fails(url, "plan", "decide", short, "approved")
    assert ok(url, "plan", "resubmit", short, "-s", "With tests.").strip() == (
        f"{short} pending (revision 2)"
    )
    decided = ok_json(url, "plan", "decide", plan_id, "approved", "--by", planner)
    assert (decided["state"], decided["reviewed_by"], decided["revision"]) == (
        "approved",
        planner,
        2,
    )
    assert "is approved" in fails(url, "plan", "decide", short, "rejected")
    shown = ok(url, "plan", "show", short)
    assert "approved, revision 2" in shown and "With tests." in shown
    assert [p["plan_review_id"] for p in ok_json(url, "plan", "list", "--requester", planner)] == [
        plan_id
    ]
    assert ok_json(url, "plan", "pending", "--session", session) == []
    assert "not a plan review id" in fails(url, "plan", "show", "nope")
    assert "does not exist" in fails(
        url, "plan", "submit", planner, "p.md", "-t", "T", "--reviewer", "ghost-nobody"
    )
