"""Claude Code's ``http`` hooks answered by a real ``ikigai-store mcp --http`` process.

Claude Code POSTs the hook's JSON event to the hook's URL and reads the response as a command
hook's stdout; a non-2xx status is a non-blocking error. The pre-tool decisions are checked
over both transports in test_hooks.py; here: every other hook over http, who the agent is
(query, forwarded environment, the server's options), the token, what a bad request gets, many
requests at once, and failing open while the database is away. The database is this file's;
the servers run with a private state directory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from click.testing import CliRunner

import ikigai_store as ik
from ikigai_store.cli import cli
from ikigai_store.hooks.claude import HookOptions
from ikigai_store.hooks.context import file_resource
from ikigai_store.hooks.http import MAX_BODY_BYTES, HookEndpoint
from tests.hookserver import IDENTITY_ENV, HookServer

pytestmark = [pytest.mark.db, pytest.mark.slow]


@pytest.fixture(autouse=True)
def hook_env(ikigai_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process hook commands use this file's database and a private state dir."""
    monkeypatch.setenv("IKIGAI_DATABASE_URL", ikigai_db_url)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in IDENTITY_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def server(ikigai_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookServer]:
    """A server with no options of its own, shared by this file's tests."""
    running = HookServer(ikigai_db_url, tmp_path_factory.mktemp("server"))
    yield running
    running.stop()


@pytest.fixture
def project(tmp_path: Path) -> str:
    """A fresh project directory (its real path, as the project key is)."""
    path = tmp_path / f"proj-{uuid.uuid4().hex[:8]}"
    (path / "src").mkdir(parents=True)
    return os.path.realpath(path)


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> ik.Store:
    """The file's store, committing (the servers run on their own connections)."""
    return ikigai_module_store


def event(project: str, name: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook input for ``project``."""
    return {
        "session_id": fields.pop("session_id", "sess-" + uuid.uuid4().hex[:8]),
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": fields.pop("cwd", project),
        "hook_event_name": name,
        **fields,
    }


def edit(project: str, path: str) -> dict[str, Any]:
    """A PreToolUse input editing ``path``."""
    return event(project, "PreToolUse", tool_name="Edit", tool_input={"file_path": path})


def command(hook: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """The command form's answer (in-process), for comparison."""
    result = CliRunner().invoke(cli, ["hook", hook], input=json.dumps(data))
    assert (result.exit_code, result.stderr) == (0, ""), result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def context_of(output: dict[str, Any] | None, event_name: str) -> str:
    """The additionalContext of an answer, checking its shape."""
    assert output is not None
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == event_name
    text: str = specific["additionalContext"]
    return text


def who(output: dict[str, Any] | None) -> tuple[str, str, str]:
    """(name, role, project) from a session-start answer."""
    text = context_of(output, "SessionStart")
    name = text.split("you are ", 1)[1].split(" ", 1)[0]
    role, project = text.split("(role ", 1)[1].split(")", 1)[0].split(", project ")
    return name, role, project


def denied(answer: dict[str, Any] | None) -> bool:
    specific = (answer or {}).get("hookSpecificOutput", {})
    return specific.get("permissionDecision") == "deny"


def peer(store: ik.Store) -> ik.Identity:
    """Another identity (mail sender, lease holder)."""
    return store.identities.register(f"peer-{uuid.uuid4().hex[:8]}")


# ------------------------------------------------------------------------- every hook


def test_session_start_prompt_and_stop_answer_over_http(
    server: HookServer, store: ik.Store, project: str
) -> None:
    """session-start answers what the command answers; prompt shows new mail once (then
    {}); stop blocks for urgent mail, and lets the next stop through."""
    start = event(project, "SessionStart", source="startup")
    assert server.hook("session-start", start) == command("session-start", start)
    me = store.identities.resolve(project)
    mail = store.mail.send(peer(store), me, "Prod is down", "now", priority="urgent")

    shown = context_of(
        server.hook("prompt", event(project, "UserPromptSubmit")), "UserPromptSubmit"
    )
    assert f"#{mail.id} from " in shown and "'Prod is down'" in shown
    assert server.hook("prompt", event(project, "UserPromptSubmit")) is None

    blocked = server.hook("stop", event(project, "Stop", stop_hook_active=False))
    assert blocked is not None and blocked["decision"] == "block"
    assert f"#{mail.id}" in blocked["reason"]
    assert server.hook("stop", event(project, "Stop", stop_hook_active=True)) is None


def test_post_tool_mirrors_tasks_into_the_forwarded_task_list(
    server: HookServer, store: ik.Store, project: str
) -> None:
    """TaskCreate over http lands in the list named by X-Ikigai-Task-List (the agent's
    CLAUDE_CODE_TASK_LIST_ID); an empty header (the variable unset) means the session's."""
    shared, session = "shared-" + uuid.uuid4().hex[:8], "sess-" + uuid.uuid4().hex[:8]

    def create(task_id: str, headers: dict[str, str]) -> None:
        data = event(
            project,
            "PostToolUse",
            session_id=session,
            tool_name="TaskCreate",
            tool_input={"subject": f"Task {task_id}"},
            tool_response={"task": {"id": task_id}},
        )
        assert server.hook("post-tool", data, headers=headers) is None

    create("1", {"X-Ikigai-Task-List": shared})
    create("2", {"X-Ikigai-Task-List": ""})
    assert store.tasks.get(shared, "1").subject == "Task 1"
    assert store.tasks.get(session, "2").subject == "Task 2"


# ------------------------------------------------------------------------- who the agent is


def test_who_the_agent_is_query_then_headers_then_the_server(
    ikigai_db_url: str, store: ik.Store, project: str, tmp_path: Path
) -> None:
    """The identity is resolved from the query (role, as, project), else the forwarded
    environment (X-Ikigai-Role, X-Ikigai-As), else the server's --role, else the command's
    rules; project= wins over the event's cwd."""
    lead = HookServer(ikigai_db_url, tmp_path, "--role", "lead")
    try:
        start = event(project, "SessionStart", source="startup")
        assert who(lead.hook("session-start", start))[1:] == ("lead", project)
        header = who(lead.hook("session-start", start, headers={"X-Ikigai-Role": "reviewer"}))
        assert header == (
            store.identities.resolve(project, role="reviewer").name,
            "reviewer",
            project,
        )
        query = lead.hook(
            "session-start", start, "--role", "tester", headers={"X-Ikigai-Role": "x"}
        )
        assert who(query)[1] == "tester"
        named = f"named-{uuid.uuid4().hex[:6]}"
        assert who(lead.hook("session-start", start, headers={"X-Ikigai-As": named}))[0] == named
        assert who(lead.hook("session-start", start, "--as", named + "q"))[0] == named + "q"
        inside = event(project, "SessionStart", cwd=f"{project}/src")
        status, body = lead.post(f"/hooks/session-start?project={project}", inside)
        assert status == 200 and who(json.loads(body))[2] == project
    finally:
        lead.stop()


# ------------------------------------------------------------------------- the token


def test_a_server_with_a_token_refuses_hooks_without_it(
    ikigai_db_url: str, store: ik.Store, project: str, tmp_path: Path
) -> None:
    """With IKIGAI_MCP_TOKEN set, a hook without the bearer token, or with a wrong one, is
    401 (a non-blocking error: the edit goes on); with it, the decision is made."""
    other = peer(store)
    store.leases.acquire(other, file_resource(project, "src/t.py"), ttl=60)
    data = edit(project, f"{project}/src/t.py")
    guarded = HookServer(ikigai_db_url, tmp_path, env={"IKIGAI_MCP_TOKEN": "s3cret"})
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            status, body = guarded.post("/hooks/pre-tool", data, headers)
            assert status == 401 and b"deny" not in body
        answer = guarded.hook("pre-tool", data, headers={"Authorization": "Bearer s3cret"})
        assert denied(answer) and other.name in json.dumps(answer)
    finally:
        guarded.stop()


# ------------------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    ("path", "body", "headers", "status"),
    [
        ("/hooks/pre-tool", "not json", {}, 400),
        ("/hooks/pre-tool", "[1, 2]", {}, 400),
        ("/hooks/pre-tool", b"\xff\xfe", {}, 400),
        ("/hooks/pre-tool?auto-reserve=1", "{}", {}, 400),
        ("/hooks/pre-tool?auto_reserve=-5", "{}", {}, 400),
        ("/hooks/pre-tool?auto_reserve=forever", "{}", {}, 400),
        ("/hooks/post-tool-use", "{}", {}, 404),
        ("/hooks/pre-tool", "x" * (MAX_BODY_BYTES + 1), {}, 413),
        ("/hooks/pre-tool", "{}", {"Origin": "https://evil.example"}, 403),
        ("/hooks/pre-tool", "{}", {"Host": "evil.example:80"}, 403),
    ],
)
def test_a_bad_request_is_a_client_error_and_decides_nothing(
    server: HookServer, path: str, body: str | bytes, headers: dict[str, str], status: int
) -> None:
    """Not one JSON object, an unknown option or hook, an oversized body, a web page's
    Origin or a foreign Host: a 4xx with a JSON error (never a decision), one log line."""
    before = server.log().count("\n")
    got, text = server.post(path, body, headers)
    assert got == status, text
    assert set(json.loads(text)) == {"error"}
    assert server.log().count("\n") == before + 1


def test_only_post(server: HookServer) -> None:
    """A GET of a hook is 405."""
    import http.client

    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", "/hooks/pre-tool")
        assert conn.getresponse().status == 405
    finally:
        conn.close()


# ------------------------------------------------------------------------- many at once


def test_many_hooks_at_once_share_the_pool(
    server: HookServer, store: ik.Store, project: str
) -> None:
    """32 pre-tool requests at once (more than the hooks' connections): every one answers
    the same decision."""
    other = peer(store)
    store.leases.acquire(other, file_resource(project, "src/*.py"), ttl=60)
    data = edit(project, f"{project}/src/busy.py")
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda _: server.hook("pre-tool", data), range(32)))
    assert all(denied(a) and other.name in json.dumps(a) for a in answers)


# ------------------------------------------------------------------------- fail open


def test_hooks_fail_open_while_the_database_is_away(
    ikigai_db_url: str,
    ikigai_server_url: str,
    store: ik.Store,
    project: str,
    tmp_path: Path,
) -> None:
    """With the server up but its database refusing connections, every hook answers 200 {}
        (an edit of a file another identity reserved is not denied) and logs one line each (the
    pool's own warnings aside), on
        a server whose hooks' store was open and on one that had not opened it yet; once the
        database is back the decision is made again."""
    other = peer(store)
    store.leases.acquire(other, file_resource(project, "src/down.py"), ttl=300)
    data = edit(project, f"{project}/src/down.py")
    warm = HookServer(ikigai_db_url, tmp_path / "warm", env={"PGCONNECT_TIMEOUT": "3"})
    cold = HookServer(ikigai_db_url, tmp_path / "cold", env={"PGCONNECT_TIMEOUT": "3"})
    inputs = {
        "session-start": event(project, "SessionStart", source="startup"),
        "prompt": event(project, "UserPromptSubmit", prompt="hi"),
        "stop": event(project, "Stop"),
        "post-tool": event(
            project,
            "PostToolUse",
            tool_name="TaskCreate",
            tool_input={"subject": "x"},
            tool_response={"task": {"id": "1"}},
        ),
        "pre-tool": data,
    }
    name = psycopg.conninfo.conninfo_to_dict(ikigai_db_url)["dbname"]
    try:
        assert denied(warm.hook("pre-tool", data))
        with psycopg.connect(ikigai_server_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            try:
                for running in (warm, cold):
                    before = running.log().count("\n")
                    for hook, data_ in inputs.items():
                        started = time.monotonic()
                        answer = running.hook(hook, data_)
                        if hook == "pre-tool":  # allowed, saying it was not checked
                            assert not denied(answer), answer
                            assert "could not check" in answer["systemMessage"], answer
                        else:
                            assert answer is None, hook
                        assert time.monotonic() - started < 10
                    lines = running.log().splitlines()[before:]
                    ours = [line for line in lines if line.startswith("ikigai_store.hooks: ")]
                    assert [line.split(" (http): ")[0] for line in ours] == [
                        f"ikigai_store.hooks: hook {hook}" for hook in inputs
                    ], lines
                    assert "Traceback" not in running.log()
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        deadline = time.monotonic() + 30
        for running in (warm, cold):
            while not denied(answer := running.hook("pre-tool", data)):
                assert time.monotonic() < deadline, answer
                time.sleep(0.2)
    finally:
        warm.stop()
        cold.stop()
        for _ in range(3):  # this process's pooled connections were terminated too
            with contextlib.suppress(ik.ConnectionLost):
                store.identities.get(other.name)


def test_a_hook_past_its_deadline_answers_at_once(
    ikigai_db_url: str, ikigai_server_url: str, project: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook still blocked at its deadline (on the identity's advisory lock, held by another
    transaction) is answered when the deadline passes (pre-tool: allowed, saying so), with
    one log line and no noise from the cancelled query (in-process: the deadline is not a
    server option)."""
    data = edit(project, f"{project}/src/slow.py")
    key = f"role:{project}\x1fmain"

    async def ask() -> tuple[dict[str, Any] | None, float]:
        endpoint = HookEndpoint(ikigai_db_url, deadline=0.5)
        try:
            with psycopg.connect(ikigai_db_url) as holder:
                holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (key,))
                started = time.monotonic()
                answer = await endpoint._answer("pre-tool", data, HookOptions())
                waited = time.monotonic() - started
                holder.rollback()
            return answer, waited
        finally:
            await endpoint.close()

    answer, waited = anyio.run(ask)
    assert answer is not None and not denied(answer), answer
    assert "gave up after 0.5 s" in answer["systemMessage"]
    assert 0.5 <= waited < 5, waited
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "hook pre-tool (http): gave up after 0.5 s"
    ]
