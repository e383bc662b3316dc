"""The hooks and the MCP server inside the real agents: Claude Code and Codex (``tests.agents``:
pinned npm versions, installed by ``.ci/run``), each run offline against a scripted model
endpoint on loopback that records every request (``tests.fakemodel``).

A request is where a test sees what the model was really given: the tools (Claude Code lists
MCP tools as deferred tools, by name, until the model loads them with ToolSearch; Codex offers
them in a ``namespace`` tool), the hooks' context, the tool results. Every project is installed
with ``ikigai-store hooks install`` (``--codex`` for Codex) as a user would, in a private home;
the database is this file's.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import ikigai_store as ik
from ikigai_store.mcp.tools import CORE
from tests.agents import CLAUDE_PREFIX, CODEX_NAMESPACE, Project, binary, codex_events, say
from tests.fakemodel import (
    FakeModel,
    Recorded,
    Text,
    ToolCall,
    deferred_tools,
    iter_tool_results,
    offered_tool,
    tool_names,
)
from tests.hookserver import HookServer

pytestmark = [pytest.mark.db, pytest.mark.slow]

CORE_NAMES = sorted(tool.name for tool in CORE)


@pytest.fixture
def project(ikigai_db_url: str, tmp_path: Path) -> Project:
    """A fresh project and home on this file's database."""
    return Project(tmp_path / "agent", ikigai_db_url)


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> ik.Store:
    """The file's store (committing: the agents' hooks and servers are other processes)."""
    return ikigai_module_store


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    """A fresh scripted model endpoint."""
    with FakeModel() as model:
        yield model


def agent_of(store: ik.Store, project: Project) -> ik.Identity:
    """The identity the hooks and the server resolve for the project's main agent."""
    return store.identities.resolve(str(project.dir), role="main")


def peer(store: ik.Store) -> ik.Identity:
    """Another agent."""
    return store.identities.register(f"peer-{uuid.uuid4().hex[:8]}")


def first_turn(fake: FakeModel) -> Recorded:
    """The first main-loop request the agent sent."""
    turns = fake.turns(fake.requests[0].path if fake.requests else "/v1/messages")
    assert turns, f"no main-loop request among {[r.path for r in fake.requests]}"
    return turns[0]


def load(*names: str) -> ToolCall:
    """Claude Code's ToolSearch call that loads our deferred tools ``names``."""
    return ToolCall("ToolSearch", {"query": "select:" + ",".join(CLAUDE_PREFIX + n for n in names)})


def results(fake: FakeModel) -> list[str]:
    """Every tool result the agent sent back, in order (the last request carries them all)."""
    return list(iter_tool_results(fake.requests[-1])) if fake.requests else []


def system_text(request: Recorded) -> str:
    """Everything in a request but its tool definitions, as text."""
    body = dict(request.body)
    body.pop("tools", None)
    return json.dumps(body, ensure_ascii=False)


# ---------------------------------------------------------------- Claude Code


def test_claude_code_lists_our_tools_in_its_first_request(
    project: Project, fake: FakeModel
) -> None:
    """Installed as a user would, the server's core tools are in Claude Code's first model
    request (as deferred tools: names the model loads with ToolSearch), and once loaded
    their schemas are in ``tools``."""
    project.install()
    fake.add(load("whoami", "send_mail"), Text("done"))
    run = project.claude(fake, "hello")
    assert run.returncode == 0, run.stderr + run.debug[-3000:]
    first = first_turn(fake)
    ours = [name for name in deferred_tools(first) if name.startswith(CLAUDE_PREFIX)]
    assert sorted(name.removeprefix(CLAUDE_PREFIX) for name in ours) == CORE_NAMES
    loaded = fake.turns("/v1/messages")[1]
    for name in ("whoami", "send_mail"):
        tool = offered_tool(loaded, CLAUDE_PREFIX + name)
        assert tool is not None, tool_names(loaded)
        assert tool["input_schema"]["type"] == "object"
    sent = offered_tool(loaded, CLAUDE_PREFIX + "send_mail")
    assert sent is not None and "subject" in sent["input_schema"]["properties"]


def test_claude_code_calls_a_tool_and_gets_its_result(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """A tool call round trip: ``whoami`` answers with the identity SessionStart named, and
    ``send_mail`` writes a mail from it that the recipient sees."""
    project.install()
    other = peer(store)
    fake.add(
        load("whoami", "send_mail"),
        ToolCall("whoami"),
        ToolCall("send_mail", {"to": [other.name], "subject": "hi from CC", "body": "b"}),
        Text("done"),
    )
    run = project.claude(
        fake, "hello", allowed=[CLAUDE_PREFIX + "whoami", CLAUDE_PREFIX + "send_mail"]
    )
    assert run.returncode == 0, run.stderr + run.debug[-3000:]
    agent = agent_of(store, project)
    outputs = results(fake)
    assert json.loads(outputs[1])["name"] == agent.name, outputs
    assert json.loads(outputs[2])["subject"] == "hi from CC", outputs
    inbox = store.mail.inbox(other)
    assert [(i.mail.subject, i.mail.sender) for i in inbox] == [("hi from CC", agent.name)]


def test_claude_code_gets_session_start_and_prompt_context_once(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """SessionStart's context (who the agent is, its unread mail) is in the first request,
    and the first prompt's context does not list that mail again."""
    project.install()
    agent, other = agent_of(store, project), peer(store)
    store.mail.send(other, agent, "Deploy window", "tonight")
    fake.add(Text("done"))
    run = project.claude(fake, "hello")
    assert run.returncode == 0, run.stderr + run.debug[-3000:]
    text = system_text(first_turn(fake))
    assert "SessionStart hook additional context" in text
    assert f"you are {agent.name}" in text
    assert text.count("'Deploy window'") == 1, text


def test_claude_code_pre_tool_denies_a_reserved_file(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """An Edit-family tool on a file another agent reserved is denied inside Claude Code: the
    model is told who holds it and the file is unchanged."""
    project.install()
    target = project.dir / "src" / "app.py"
    target.parent.mkdir()
    holder = peer(store)
    store.leases.acquire(holder, f"file:{target}", ttl=600)
    fake.add(ToolCall("Write", {"file_path": str(target), "content": "print(1)\n"}), Text("ok"))
    run = project.claude(fake, "write it", allowed=["Write"])
    assert run.returncode == 0, run.stderr + run.debug[-3000:]
    assert not target.exists()
    denial = results(fake)[0]
    assert holder.name in denial, denial


def test_claude_code_stop_blocks_once_for_urgent_mail(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """Urgent unread mail makes Claude Code's stop hook send the agent back to work once (the
    next request carries the reason); the second stop is let through and the run ends."""
    project.install()
    agent, other = agent_of(store, project), peer(store)
    store.mail.send(other, agent, "Prod is down", "now", priority="urgent")
    fake.add(Text("first stop"), Text("second stop"))
    run = project.claude(fake, "hello")
    assert run.returncode == 0, run.stderr + run.debug[-3000:]
    turns = fake.turns("/v1/messages")
    assert len(turns) == 2, [system_text(t)[-500:] for t in turns]
    assert "Prod is down" in json.dumps(turns[1].body["messages"][-1])


def test_claude_code_http_hooks(
    project: Project, fake: FakeModel, store: ik.Store, ikigai_db_url: str
) -> None:
    """With ``hooks install --http`` the hooks post to the running server: the pre-tool
    denial arrives over http, and SessionStart (a command: Claude Code refuses http hooks
    there) still gives the agent its identity."""
    server = HookServer(ikigai_db_url, project.root / "hook-server")
    try:
        project.install("--http", f"http://{server.host}:{server.port}")
        target = project.dir / "notes.md"
        holder = peer(store)
        store.leases.acquire(holder, f"file:{target}", ttl=600)
        fake.add(ToolCall("Write", {"file_path": str(target), "content": "x"}), Text("ok"))
        run = project.claude(fake, "write", allowed=["Write"])
        assert run.returncode == 0, run.stderr + run.debug[-3000:]
        assert "not supported for SessionStart" not in run.debug
        assert f"you are {agent_of(store, project).name}" in system_text(first_turn(fake))
        assert not target.exists()
        assert holder.name in results(fake)[0]
        assert "/hooks/pre-tool" in run.debug or holder.name in results(fake)[0]
    finally:
        server.stop()


def test_claude_code_does_not_hold_the_installed_server_for_approval(
    project: Project, fake: FakeModel
) -> None:
    """After ``hooks install`` in a folder the user trusts, Claude Code lists the server as
    connected, not "Pending approval": the install approved it in
    ``.claude/settings.local.json`` (Claude Code reads that key once the folder is trusted)."""
    project.install()
    project.trust_in_claude_code()
    listed = project.claude_command(fake, "mcp", "list")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("ikigai-store:"))
    assert "Pending approval" not in line and "Connected" in line, listed.stdout


def test_claude_code_stops_the_server_with_sigint(project: Project, fake: FakeModel) -> None:
    """When the session ends, the MCP server exits on Claude Code's SIGINT (no SIGTERM
    needed)."""
    project.install()
    fake.add(Text("done"))
    run = project.claude(fake, "hello")
    assert run.returncode == 0, run.stderr
    assert 'MCP server "ikigai-store": Sending SIGINT' in run.debug
    assert "SIGINT failed" not in run.debug, re.findall(r".*ikigai-store.*SIG.*", run.debug)


def eventually(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wait until ``check()`` holds (a bound on how long a real process may take, not a
    timing claim)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def watched(store: ik.Store, name: str) -> bool:
    """Whether a watcher holds ``watch:<name>``."""
    return any(lease.resource == f"watch:{name}" for lease in store.leases.held(prefix="watch:"))


def test_claude_code_print_mode_finishes_with_rewake_installed(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """With ``--wake rewake`` installed, ``claude -p`` answers and exits (the rewake watcher
    does not hold it), and no watcher outlives the session (its lease is released)."""
    project.install("--wake", "rewake")
    fake.add(Text("hi"))
    run = project.claude(fake, "say hi")
    assert run.returncode == 0, run.stderr
    name = agent_of(store, project).name
    eventually(lambda: not watched(store, name), "the watcher stops with the session")


def test_claude_code_rewake_wakes_an_idle_session(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """An idle Claude Code session (stream-json, between turns) is woken by mail: the rewake
    watcher starts a new turn through Claude Code's messaging socket, the model is told of the
    mail; when the session ends, its watcher ends too."""
    project.install("--wake", "rewake")
    agent, other = agent_of(store, project), peer(store)
    fake.add(Text("idle now"), Text("woken"))
    session = project.claude_session(fake)
    try:
        say(session, "hello")
        eventually(lambda: watched(store, agent.name), "the Stop hook starts a watcher")
        store.mail.send(other, agent, "Wake up", "the build broke")
        eventually(lambda: len(fake.turns("/v1/messages")) >= 2, "a second turn")
        woken = fake.turns("/v1/messages")[1]
        assert "'Wake up'" in json.dumps(woken.body["messages"][-2:])
    finally:
        assert session.stdin is not None
        session.stdin.close()
        try:
            session.wait(timeout=60)
        except subprocess.TimeoutExpired:  # pragma: no cover - reported below
            session.kill()
            session.wait()
    assert session.returncode == 0
    eventually(lambda: not watched(store, agent.name), "the watcher stops with the session")


# ---------------------------------------------------------------- Codex


def test_codex_install_offers_our_tools_and_a_call_completes(
    project: Project, fake: FakeModel, store: ik.Store
) -> None:
    """``hooks install --codex`` merges the server into Codex's config.toml (keeping the
    provider there); ``codex exec`` offers the core tools in its first request, and a
    ``whoami`` call completes without asking for approval."""
    binary("codex")
    project.codex_provider(fake)
    project.install("--codex")
    config = (project.codex_home / "config.toml").read_text()
    assert "[model_providers.fake]" in config and "[mcp_servers.ikigai-store]" in config
    assert project.install("--codex").strip().endswith("unchanged")
    fake.add(ToolCall(f"{CODEX_NAMESPACE}.whoami"), Text("done"))
    run = project.codex(fake, "hello")
    assert run.returncode == 0, run.stderr
    first = first_turn(fake)
    ours = [n for n in tool_names(first) if n.startswith(CODEX_NAMESPACE + ".")]
    assert sorted(n.split(".", 1)[1] for n in ours) == CORE_NAMES, tool_names(first)
    calls = [
        e["item"]
        for e in codex_events(run)
        if e.get("type") == "item.completed" and e["item"].get("type") == "mcp_tool_call"  # type: ignore[union-attr,index]
    ]
    assert len(calls) == 1 and calls[0]["status"] == "completed", calls  # type: ignore[index]
    named = agent_of(store, project).name
    assert calls[0]["result"]["structured_content"]["name"] == named  # type: ignore[index]
