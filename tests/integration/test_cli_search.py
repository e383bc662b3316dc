"""`ikigai-store search` options: --agent, --kind, --since/--until, --order, --json.

The CLI commits for real into this file's database: tests make their own sessions and words.
"""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner, Result

import ikigai_store as ik
from ikigai_store.cli import cli

pytestmark = pytest.mark.db


def run(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", url, *args], catch_exceptions=False)


def ok(url: str, *args: str) -> str:
    result = run(url, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def fails(url: str, *args: str) -> str:
    result = run(url, *args)
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.fixture
def word() -> str:
    """A word no other test writes."""
    return "zq" + uuid.uuid4().hex[:10]


def test_filters_order_and_json(ikigai_db_url: str, word: str) -> None:
    """--agent, --kind, --since/--until and --order narrow and order the hits; --json prints
    message, rank and snippet."""
    with ik.Store(ikigai_db_url, pool_size=1) as store:
        sid = store.create_session()
        agent = store.create_agent(sid).uuid
        first = store.append(sid, "user", f"{word} asked by the user")
        second = store.append(sid, "assistant", f"{word} {word} answered", agent_uuid=agent)
        third = store.append(sid, "tool_result", f"{word} in a tool log")
    doc = json.loads(ok(ikigai_db_url, "search", word, "--json", "--order", "recent"))
    assert [h["message"]["id"] for h in doc] == [third.id, second.id, first.id]
    assert {"message", "rank", "snippet"} == set(doc[0])
    assert f"[{word}]" in doc[0]["snippet"]
    doc = json.loads(ok(ikigai_db_url, "search", word, "--json", "--agent", agent))
    assert [h["message"]["id"] for h in doc] == [second.id]
    doc = json.loads(
        ok(ikigai_db_url, "search", word, "--json", "--kind", "user", "--kind", "tool_result")
    )
    assert {h["message"]["id"] for h in doc} == {first.id, third.id}
    assert first.created_at < second.created_at < third.created_at  # one transaction each
    at = second.created_at.isoformat()
    doc = json.loads(ok(ikigai_db_url, "search", word, "--json", "--until", at))
    assert [h["message"]["id"] for h in doc] == [first.id]
    doc = json.loads(ok(ikigai_db_url, "search", word, "--json", "--since", at))
    assert {h["message"]["id"] for h in doc} == {second.id, third.id}
    local = second.created_at.astimezone().replace(tzinfo=None).isoformat()  # no offset: local
    doc = json.loads(ok(ikigai_db_url, "search", word, "--json", "--since", local))
    assert {h["message"]["id"] for h in doc} == {second.id, third.id}
    doc = json.loads(ok(ikigai_db_url, "search", word, "--json", "--since", "1d"))  # an age
    assert len(doc) == 3
    assert json.loads(ok(ikigai_db_url, "search", word, "--json", "--until", "1d")) == []
    for date, found in (("2000-01-02", 3), ("2999-01-02", 0)):  # a date: local midnight
        assert (
            len(json.loads(ok(ikigai_db_url, "search", word, "--json", "--since", date))) == found
        )


def test_bad_options_are_user_errors(ikigai_db_url: str, word: str) -> None:
    """A bad time, order or kind is a one-line error, never a traceback."""
    refused = fails(ikigai_db_url, "search", word, "--since", "yesterday")
    assert "is not an ISO-8601 time" in refused and "or a duration ago" in refused
    assert "order" in fails(ikigai_db_url, "search", word, "--order", "best")
    assert "kind" in fails(ikigai_db_url, "search", word, "--kind", "User")
