"""A real Claude Agent SDK run mirrored into the store: the SDK's ``query()`` drives the Claude
Code binary it bundles against a scripted Messages API on loopback (tests/fake_anthropic.py),
its transcript lands in our store as events, and a second process, with an empty Claude
configuration directory (no transcript on disk), resumes the session from the store: the
model request it sends carries the earlier turns."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, project_key_for_directory, query

import ikigai_store as ik
from ikigai_store.integrations.claude_agent import IkigaiSessionStore
from tests.fake_anthropic import FakeAnthropic

pytestmark = [pytest.mark.db, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

#: The second process: resume the session from the store and ask again.
RESUME = """
import asyncio, json, sys
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from ikigai_store.integrations.claude_agent import IkigaiSessionStore

db_url, namespace, session_id, cwd, env = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], \\
    json.loads(sys.argv[5])

async def main() -> None:
    async with IkigaiSessionStore.open(db_url, namespace=namespace) as sessions:
        options = ClaudeAgentOptions(env=env, session_store=sessions, resume=session_id,
                                     max_turns=1, cwd=cwd, tools=[], setting_sources=[])
        async for message in query(prompt="What was the code word?", options=options):
            if isinstance(message, ResultMessage):
                print(json.dumps({"session_id": message.session_id, "result": message.result}))

asyncio.run(main())
"""


def client_env(fake: FakeAnthropic, config_dir: Path) -> dict[str, str]:
    """Claude Code's environment: the fake endpoint, a private configuration directory, no
    traffic other than model calls."""
    return {
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def texts(request_body: Any) -> list[str]:
    """Every text a model request carries in its messages, in order."""
    found: list[str] = []
    for message in request_body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            found.append(content)
            continue
        for block in content or []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                found.append(block["text"])
    return found


def test_query_mirrors_into_the_store_and_a_new_process_resumes_from_it(
    ikigai_db_url: str, tmp_path: Path
) -> None:
    """query() with IkigaiSessionStore: the turn is stored as events (search finds it); a
    second process with no transcript on disk resumes from the store, and its model request
    holds the first turn's prompt and answer."""
    namespace = f"run-{uuid.uuid4()}"
    cwd = tmp_path / "project"
    cwd.mkdir()
    with FakeAnthropic(["Noted: the code word is PAPAYA.", "It was PAPAYA."]) as fake:

        async def first_run() -> str:
            store = await ik.AsyncStore.connect(ikigai_db_url, pool_size=2)
            try:
                sessions = IkigaiSessionStore(store, namespace=namespace)
                options = ClaudeAgentOptions(
                    env=client_env(fake, tmp_path / "config-1"),
                    session_store=sessions,
                    max_turns=1,
                    cwd=str(cwd),
                    tools=[],
                    setting_sources=[],
                )
                session_id = ""
                async for message in query(
                    prompt="Remember the code word PAPAYA.", options=options
                ):
                    if isinstance(message, ResultMessage):
                        session_id = message.session_id
                key: Any = {
                    "project_key": project_key_for_directory(str(cwd)),
                    "session_id": session_id,
                }
                entries = await sessions.load(key)
                assert entries is not None
                kinds = [e["type"] for e in entries]
                assert "user" in kinds and "assistant" in kinds
                hits = await store.search("PAPAYA")
                assert {h.message.kind for h in hits} >= {"user", "assistant"}
                listed = await sessions.list_sessions(key["project_key"])
                assert [s["session_id"] for s in listed] == [session_id]
                return session_id
            finally:
                await store.close()

        session_id = asyncio.run(first_run())
        assert len(fake.model_calls()) >= 1
        calls_before = len(fake.model_calls())

        done = subprocess.run(
            [
                sys.executable,
                "-c",
                RESUME,
                ikigai_db_url,
                namespace,
                session_id,
                str(cwd),
                json.dumps(client_env(fake, tmp_path / "config-2")),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["result"] == "It was PAPAYA."
        resumed = fake.model_calls()[calls_before:]
        assert resumed, "the resumed session sent no model request"
        carried = texts(resumed[-1].body)
        assert "Remember the code word PAPAYA." in carried
        assert "Noted: the code word is PAPAYA." in carried
        assert carried[-1] == "What was the code word?"

        async def stored_after() -> list[Any]:
            async with ik.open_async(ikigai_db_url, pool_size=1) as store:
                sessions = IkigaiSessionStore(store, namespace=namespace)
                key: Any = {
                    "project_key": project_key_for_directory(str(cwd)),
                    "session_id": result["session_id"],
                }
                return await sessions.load(key) or []

        prompts = [
            e["message"]["content"]
            for e in asyncio.run(stored_after())
            if e.get("type") == "user" and isinstance(e.get("message", {}).get("content"), str)
        ]
        assert prompts[-1] == "What was the code word?"  # the second turn was mirrored too
