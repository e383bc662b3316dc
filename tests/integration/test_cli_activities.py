"""The ``activity`` and ``lease`` commands, run in-process with CliRunner on a committed, shared
database (each test uses fresh names)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.test_cli_mail import fails, fresh, ok, ok_json, register

pytestmark = pytest.mark.db


def test_record_feed_and_prune(ikigai_db_url: str) -> None:
    """record prints the id; feed lists newest first with filters, --json and --before;
    prune --older-than deletes nothing recent."""
    url = ikigai_db_url
    ann, bob = register(url), register(url)
    first = int(ok(url, "activity", "record", ann, "commit", "fix parser").strip())
    second = ok_json(
        url, "activity", "record", bob, "error", "build broke", "--metadata", '{"job": 7}'
    )
    assert second["id"] > first and second["metadata"] == {"job": 7}
    third = int(ok(url, "activity", "record", ann, "heartbeat", "alive").strip())
    mine = ok_json(url, "activity", "feed", "--identity", ann)
    assert [a["id"] for a in mine] == [third, first]
    assert [a["id"] for a in ok_json(url, "activity", "feed", "--identity", ann, "-n", "1")] == [
        third
    ]
    paged = ok_json(url, "activity", "feed", "--identity", ann, "--before", str(third))
    assert [a["id"] for a in paged] == [first]
    errors = ok_json(url, "activity", "feed", "--type", "error", "--since", "1h")
    assert second["id"] in [a["id"] for a in errors]
    assert all(a["type"] == "error" for a in errors)
    since = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert ok_json(url, "activity", "feed", "--identity", ann, "--since", since) == []
    text = ok(url, "activity", "feed", "--identity", ann)
    assert (
        "fix parser" in text
        and "heartbeat" in text
        and text.index("alive") < text.index("fix parser")
    )
    assert "no activity" in ok(url, "activity", "feed", "--identity", register(url))
    assert ok_json(url, "activity", "prune", "--older-than", "3650d") == {"deleted": 0}
    assert ok(url, "activity", "prune", "--older-than", "3650d").strip() == "deleted 0"


def test_activity_errors_are_one_line(ikigai_db_url: str) -> None:
    """Bad input: one Error line, exit 1."""
    url = ikigai_db_url
    who = register(url)
    fails(url, "activity", "record", fresh("ghost"), "commit", "x")
    fails(url, "activity", "record", who, "commit", "x", "--metadata", "[1]")
    fails(url, "activity", "record", who, "commit", "x", "--metadata", "{nope")
    fails(url, "activity", "record", who, "commit", "")
    fails(url, "activity", "feed", "--identity", fresh("ghost"))
    fails(url, "activity", "feed", "--since", "yesterday")
    fails(url, "activity", "feed", "--limit", "0")
    fails(url, "activity", "prune", "--older-than", "soon")
    assert "review_requested" in ok(url, "activity", "record", "--help")


def test_lease_acquire_renew_release(ikigai_db_url: str) -> None:
    """acquire prints the token; a second holder is refused naming the first; renew, held,
    release and force-release work end to end."""
    url = ikigai_db_url
    ann, bob = register(url), register(url)
    resource = fresh("src") + "/main.c"
    out = ok(url, "lease", "acquire", ann, resource, "--ttl", "5m")
    token = out.splitlines()[0]
    assert len(token) == 36 and f"exclusive lease of {ann}" in out
    refused = fails(url, "lease", "acquire", bob, resource)
    assert f"'{ann}'" in refused and "held exclusively" in refused
    renewed = ok_json(url, "lease", "renew", resource, token, "--ttl", "90")
    assert renewed["token"] == token and renewed["holder"] == ann
    held = ok_json(url, "lease", "held", resource.split("/")[0])
    assert [(h["resource"], h["holder"], h["exclusive"]) for h in held] == [(resource, ann, True)]
    assert ann in ok(url, "lease", "held", resource, "--holder", ann)
    assert ok(url, "lease", "release", resource, token).strip() == f"released {resource}"
    assert "already ended" in ok(url, "lease", "release", resource, token)
    assert ok_json(url, "lease", "release", resource, token) == {
        "resource": resource,
        "released": False,
    }
    fails(url, "lease", "renew", resource, token)
    shared = fresh("port")
    for who in (ann, bob):
        got = ok_json(url, "lease", "acquire", who, shared, "--shared", "--ttl", "30s")
        assert got["exclusive"] is False
    assert "no live leases" in ok(url, "lease", "held", fresh("nothing"))
    assert ok_json(url, "lease", "force-release", shared) == {"resource": shared, "ended": 2}
    assert ok(url, "lease", "force-release", shared).strip() == f"ended 0 live lease(s) on {shared}"


def test_lease_errors_are_one_line(ikigai_db_url: str) -> None:
    """Bad input: one Error line, exit 1."""
    url = ikigai_db_url
    who = register(url)
    fails(url, "lease", "acquire", fresh("ghost"), "r")
    fails(url, "lease", "acquire", who, "r", "--ttl", "0")
    fails(url, "lease", "acquire", who, "r", "--ttl", "2d")
    fails(url, "lease", "acquire", who, "r", "--ttl", "soon")
    fails(url, "lease", "renew", "r", "not-a-token")
    fails(url, "lease", "held", "--holder", fresh("ghost"))
    assert "--shared" in ok(url, "lease", "acquire", "--help")
