"""``ikigai-store mcp`` through the TypeScript MCP SDK's client (npm ``@modelcontextprotocol/sdk``)
with ajv, driven by ``tests/clients/mcp_ts.mjs``: what a Node client (Claude Code, the MCP
Inspector, ...) sees.

Every input and output schema compiles with ajv in strict mode, as JSON Schema 2020-12 and as
draft-07; every tool is called with valid input (its structuredContent validates against its
output schema, in the SDK and in both drafts) and with invalid input (each parameter of a
wrong type, an unknown argument, a missing one: a tool error, never a thrown protocol error,
and nothing written).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store.mcp.tools import TOOLS
from tests.agents import agents_dir, node_modules
from tests.integration.test_mcp import _wrong, footprint, server_args, valid_calls

pytestmark = [pytest.mark.db, pytest.mark.slow]

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "clients", "mcp_ts.mjs")


class TsClient:
    """The node driver: ``first`` is its tool list and schema verdicts; ``call`` one tool."""

    def __init__(self, server: list[str]) -> None:
        node_modules()
        self.proc = subprocess.Popen(
            ["node", SCRIPT, json.dumps(server)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "IKIGAI_AGENTS_DIR": str(agents_dir())},
        )
        self.first: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the node client exited ({self.proc.poll()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """What the SDK returned for ``name(arguments)``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"name": name, "arguments": arguments}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """Close the client (it closes the server)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            self.proc.stdout.close()


@pytest.fixture
def ts(ikigai_db_url: str, ikigai_module_store: ik.Store) -> Iterator[TsClient]:
    """A TypeScript SDK client of ``ikigai-store mcp --as Ann --tools full``."""
    from ikigai_store.testing import truncate_all

    truncate_all(ikigai_module_store)
    client = TsClient(
        [sys.executable, *server_args(ikigai_db_url, "--as", "Ann", "--tools", "full")]
    )
    yield client
    client.close()


def ok(answer: dict[str, Any], what: str) -> Any:
    """The structured result of a successful call, checked against its output schema."""
    assert "thrown" not in answer, f"{what}: the SDK threw {answer['thrown']}"
    assert not answer["isError"], f"{what}: {answer['text']}"
    assert answer["outputErrors"] == [], f"{what}: {answer['outputErrors']}"
    structured = answer["structured"]
    return structured.get("result", structured)


def refused(answer: dict[str, Any], what: str) -> str:
    """The one-line text of a tool error (not a thrown protocol error)."""
    assert "thrown" not in answer, f"{what}: the SDK threw {answer['thrown']}"
    assert answer["isError"], f"{what} succeeded: {answer['text'][:200]}"
    text: str = answer["text"]
    assert "\n" not in text and len(text) <= 1000, text
    return text


def test_every_schema_compiles_strictly_in_both_drafts(ts: TsClient) -> None:
    """ajv (strict) compiles every tool's input and output schema as 2020-12 and draft-07."""
    assert {t["name"] for t in ts.first["tools"]} == {t.name for t in TOOLS}
    assert ts.first["schemaErrors"] == []


def test_every_tool_through_the_typescript_sdk(ts: TsClient, ikigai_module_store: ik.Store) -> None:
    """Every tool called with valid input succeeds and its result validates; each invalid
    input is a tool error and writes nothing."""
    db = ikigai_module_store
    db.identities.register("Bob")
    db.topics.create("news")
    db.topics.create("jobs", "queue")
    db.tasks.create_list("L", "Bob")
    session = db.create_session("history")
    agent = db.create_agent(session, name="coder")
    db.append(session, "user", "hello world", agent_uuid=agent.uuid)
    ctx: dict[str, Any] = {"session": session, "agent": agent.uuid}
    ok(ts.call("whoami", {}), "whoami")
    ctx["from_bob"] = db.mail.send("Bob", "Ann", "hi Ann", "from bob").id
    bobs = db.reviews.create("Bob", reviewers="Ann")
    ctx["bobs_review"] = bobs.review_id
    db.reviews.submit(bobs, by="Bob")
    db.reviews.start(bobs, by="Ann")
    ctx["bobs_plan"] = db.plans.submit("Bob", "/p.md", "P", "s", reviewer="Ann").plan_review_id
    called = set()
    for name, make in valid_calls(ctx):
        result = ok(ts.call(name, make()), name)
        called.add(name)
        if name == "send_mail":
            ctx["thread"] = result["thread_id"]
        elif name == "claim_message":
            ctx["claim"] = [result["mail"]["id"], result["token"]]
        elif name == "reserve":
            ctx["lease"] = [result["resource"], result["token"]]
        elif name == "request_review":
            ctx["review"] = result["review_id"]
        elif name == "record_review":
            ctx["issue"] = db.reviews.open_issues(ctx["bobs_review"])[0].id
        elif name == "submit_plan":
            ctx["plan"] = result["plan_review_id"]
    assert called == {t.name for t in TOOLS}

    before = footprint(db)
    listed = {t["name"]: t for t in ts.first["tools"]}
    for name, make in valid_calls(ctx):
        good = make()
        schema = listed[name]["inputSchema"]
        for param, prop in schema["properties"].items():
            if (wrong := _wrong(prop)) is not None:
                refused(ts.call(name, {**good, param: wrong}), f"{name}({param}={wrong!r})")
        refused(ts.call(name, {**good, "no_such_argument": 1}), f"{name}(no_such_argument)")
        for param in schema.get("required", ()):
            missing = {k: v for k, v in good.items() if k != param}
            refused(ts.call(name, missing), f"{name} without {param}")
    assert footprint(db) == before, "a refused call wrote something"
