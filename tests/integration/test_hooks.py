"""Claude Code hooks (``ikigai-store hook ...``) fed Claude Code's JSON events on stdin.

Most tests run the command in-process with click's CliRunner (the same code path as the
console script: stdin, stdout, exit status); the outage, bad-input and end-to-end tests run
real ``ikigai-store`` processes. The pre-tool decisions run over both transports: the command,
and an ``http`` hook posted to a real ``ikigai-store mcp --http`` (``tests.hookserver``; its
own tests are in test_hooks_http.py). The database is this file's, shared by its tests, and the
hooks commit for real: every test works in its own project directory (so its own identities)
and its own task list ids.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ikigai_store as ik
from ikigai_store.cli import cli
from ikigai_store.hooks.claude import todo_id
from ikigai_store.hooks.context import file_resource
from tests.hookserver import HookServer

pytestmark = pytest.mark.db

#: Environment variables that would change who a hook thinks the agent is.
_IDENTITY_ENV = ("CLAUDE_PROJECT_DIR", "IKIGAI_ROLE", "IKIGAI_AS", "CLAUDE_CODE_TASK_LIST_ID")


@pytest.fixture(autouse=True)
def hook_env(ikigai_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The hooks (in-process and spawned) use this file's database and a private state dir."""
    monkeypatch.setenv("IKIGAI_DATABASE_URL", ikigai_db_url)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "3")
    for name in _IDENTITY_ENV:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture
def project(tmp_path: Path) -> str:
    """A fresh project directory (its real path, as the project key is)."""
    path = tmp_path / f"proj-{uuid.uuid4().hex[:8]}"
    (path / "src").mkdir(parents=True)
    return os.path.realpath(path)


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> ik.Store:
    """The file's store, committing (the hooks run on their own connections)."""
    return ikigai_module_store


def event(project: str, name: str, **fields: Any) -> dict[str, Any]:
    """A Claude Code hook input for ``project``."""
    return {
        "session_id": fields.pop("session_id", "sess-" + uuid.uuid4().hex[:8]),
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": project,
        "hook_event_name": name,
        **fields,
    }


def run(hook: str, data: dict[str, Any] | str, *args: str) -> tuple[int, str, str]:
    """Run ``ikigai-store hook <hook> ARGS`` in-process with ``data`` on stdin."""
    text = data if isinstance(data, str) else json.dumps(data)
    result = CliRunner().invoke(cli, ["hook", hook, *args], input=text, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def answer(hook: str, data: dict[str, Any], *args: str) -> dict[str, Any] | None:
    """The hook's JSON answer (None when it printed nothing); it succeeded silently on stderr."""
    code, out, err = run(hook, data, *args)
    assert (code, err) == (0, ""), err
    return json.loads(out) if out.strip() else None


Ask = Callable[..., dict[str, Any] | None]


@pytest.fixture(scope="module")
def hook_server(
    ikigai_db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HookServer]:
    """One ``ikigai-store mcp --http`` on this file's database, for the http transport."""
    server = HookServer(ikigai_db_url, tmp_path_factory.mktemp("hook-server"))
    yield server
    server.stop()


@pytest.fixture(params=["command", "http"])
def ask(request: pytest.FixtureRequest) -> Ask:
    """``answer`` through the command, or through an http hook to the running server (the
    command's options become query parameters)."""
    if request.param == "command":
        return answer
    server: HookServer = request.getfixturevalue("hook_server")
    return server.hook


def context_of(output: dict[str, Any] | None, event_name: str) -> str:
    """The additionalContext of an answer, checking its shape."""
    assert output is not None
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == event_name
    text: str = specific["additionalContext"]
    return text


def me(store: ik.Store, project: str, role: str = "main") -> ik.Identity:
    """The identity the hooks resolve for ``project`` and ``role``."""
    return store.identities.resolve(project, role=role)


def peer(store: ik.Store) -> ik.Identity:
    """Another identity (mail sender, lease holder)."""
    return store.identities.register(f"peer-{uuid.uuid4().hex[:8]}")


def closed_port_url() -> str:
    """A URL of a TCP port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://nobody@127.0.0.1:{port}/nothing"


def spawn(args: list[str], stdin: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run the installed ``ikigai-store`` script (the console entry point) for real."""
    script = Path(sys.executable).with_name("ikigai-store")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ikigai_store"]
    done = subprocess.run(
        [*command, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stdout, done.stderr


# ------------------------------------------------------------------------- session-start


def test_session_start_tells_the_agent_its_name_mail_reviews_and_tasks(
    store: ik.Store, project: str
) -> None:
    """session-start's context names the identity, counts and lists unread mail (id, sender,
    subject, priority), the reviews waiting for it as reviewer and the tasks it may claim: in
    its project's lists and in shared ones (of no project), not in another project's."""
    agent, other = me(store, project), peer(store)
    urgent = store.mail.send(other, agent, "Build is red", "fix it", priority="urgent")
    normal = store.mail.send(other, agent, "Lunch?", "at noon")
    review = store.reviews.create(other, reviewers=[agent], branch="feature-x")
    store.reviews.submit(review)
    list_id = "start-" + uuid.uuid4().hex[:8]
    store.tasks.create_list(list_id, other)
    store.tasks.upsert(list_id, "t1", subject="Write the session-start hook")
    own_list = f"{list_id}-own"
    store.tasks.create_list(own_list, me(store, project, role="planner"))
    store.tasks.upsert(own_list, "t2", subject="Plan the release")
    elsewhere = me(store, f"{project}-elsewhere")
    foreign_list = f"{list_id}-elsewhere"
    store.tasks.create_list(foreign_list, elsewhere)
    store.tasks.upsert(foreign_list, "t3", subject="Another project's task")

    text = context_of(answer("session-start", event(project, "SessionStart")), "SessionStart")

    assert f"you are {agent.name}" in text and "role main" in text
    assert "Unread mail: 3, 1 urgent" in text  # the two mails and the review request
    assert f"#{urgent.id} from {other.name} [urgent] 'Build is red'" in text
    assert f"#{normal.id} from {other.name} [normal] 'Lunch?'" in text
    assert "Reviews waiting for you as reviewer: 1." in text
    assert f"{review.review_id[:8]} pending_review from {other.name} on feature-x" in text
    assert f"{list_id}/t1: Write the session-start hook" in text
    assert f"{own_list}/t2: Plan the release" in text
    assert foreign_list not in text and "Tasks anyone may claim in this project:" in text


def test_session_start_with_nothing_waiting(store: ik.Store, project: str) -> None:
    """A new agent is told its (new, memorable) name and that no mail waits."""
    text = context_of(answer("session-start", event(project, "SessionStart")), "SessionStart")
    assert f"you are {me(store, project).name}" in text
    assert "Unread mail: none." in text and "Reviews waiting" not in text


def test_identity_is_the_same_after_startup_resume_clear_and_compact(
    store: ik.Store, project: str
) -> None:
    """Every SessionStart source (and a new session id each time) resolves one identity;
    another role, a subagent (a child linked to the main agent's identity) and --as give
    others."""

    def name(*args: str, **fields: Any) -> str:
        text = context_of(
            answer("session-start", event(project, "SessionStart", **fields), *args), "SessionStart"
        )
        return text.split("you are ", 1)[1].split(" ", 1)[0]

    names = {name(source=s) for s in ("startup", "resume", "clear", "compact")}
    assert names == {me(store, project).name}
    reviewer = name("--role", "reviewer", source="startup")
    assert reviewer == me(store, project, "reviewer").name != me(store, project).name
    sub = name(source="startup", agent_id="a-1", agent_type="Explore")
    assert sub == me(store, project, "main/Explore").name not in names
    assert store.identities.get(sub).parent == me(store, project).name
    assert name(source="resume", agent_id="a-2", agent_type="Explore") == sub
    explicit = f"named-{uuid.uuid4().hex[:6]}"
    assert name("--as", explicit, source="startup") == explicit
    assert name("--as", explicit, source="compact") == explicit


# ------------------------------------------------------------------------------- prompt


def test_prompt_shows_each_new_mail_once(store: ik.Store, project: str) -> None:
    """The first prompt shows the unread mail; the next one nothing (no output at all); then
    only mail that arrived since, not mail read meanwhile."""
    agent, other = me(store, project), peer(store)
    first = store.mail.send(other, agent, "First", "1")
    text = context_of(answer("prompt", event(project, "UserPromptSubmit")), "UserPromptSubmit")
    assert f"#{first.id} from {other.name}" in text and text.startswith("ikigai-store: 1 new mail")

    assert run("prompt", event(project, "UserPromptSubmit")) == (0, "", "")

    read_meanwhile = store.mail.send(other, agent, "Already read", "2")
    store.mail.read(agent, read_meanwhile.id)
    second = store.mail.send(other, agent, "Second", "3", priority="urgent")
    text = context_of(answer("prompt", event(project, "UserPromptSubmit")), "UserPromptSubmit")
    assert f"#{second.id} from {other.name} [urgent] 'Second'" in text
    assert f"#{first.id}" not in text and "Already read" not in text


def test_prompt_does_not_repeat_the_mail_session_start_listed(
    store: ik.Store, project: str
) -> None:
    """The mail SessionStart listed counts as shown: the first prompt says nothing of it,
    and a later prompt shows only mail that arrived since."""
    agent, other = me(store, project), peer(store)
    listed = store.mail.send(other, agent, "Listed at start", "1")
    started = context_of(answer("session-start", event(project, "SessionStart")), "SessionStart")
    assert "'Listed at start'" in started
    assert run("prompt", event(project, "UserPromptSubmit")) == (0, "", "")
    later = store.mail.send(other, agent, "Later", "2")
    text = context_of(answer("prompt", event(project, "UserPromptSubmit")), "UserPromptSubmit")
    assert f"#{later.id}" in text and f"#{listed.id}" not in text


def test_prompt_without_mail_prints_nothing(project: str) -> None:
    """No unread mail: exit 0, nothing on stdout or stderr."""
    assert run("prompt", event(project, "UserPromptSubmit")) == (0, "", "")


# --------------------------------------------------------------------------------- stop


def test_stop_blocks_for_urgent_mail_once(store: ik.Store, project: str) -> None:
    """Urgent unread mail blocks a stop (the reason names it); the stop that follows
    (stop_hook_active) is let through."""
    agent, other = me(store, project), peer(store)
    mail = store.mail.send(other, agent, "Prod is down", "now", priority="urgent")
    blocked = answer("stop", event(project, "Stop", stop_hook_active=False))
    assert blocked is not None and blocked["decision"] == "block"
    assert f"#{mail.id} from {other.name} [urgent] 'Prod is down'" in blocked["reason"]
    assert run("stop", event(project, "Stop", stop_hook_active=True)) == (0, "", "")
    store.mail.read(agent, mail.id)
    assert run("stop", event(project, "Stop", stop_hook_active=False)) == (0, "", "")


def test_stop_does_not_block_for_mail_while_a_watcher_runs(store: ik.Store, project: str) -> None:
    """With a watcher (its lease) the agent may stop despite urgent mail: the watcher wakes
    it; a claimed task in progress still blocks."""
    agent, other = me(store, project), peer(store)
    store.mail.send(other, agent, "Prod is down", "now", priority="urgent")
    watching = store.watch.start(agent)
    try:
        assert run("stop", event(project, "Stop", stop_hook_active=False)) == (0, "", "")
    finally:
        store.leases.release(watching.lease)
    assert answer("stop", event(project, "Stop", stop_hook_active=False)) is not None


def test_stop_blocks_for_a_claimed_task_in_progress(store: ik.Store, project: str) -> None:
    """A task the identity claimed and has not finished blocks a stop; completed, it does
    not; other owners' tasks and normal mail never do."""
    agent, other = me(store, project), peer(store)
    list_id = "stop-" + uuid.uuid4().hex[:8]
    store.tasks.create_list(list_id, other)
    store.tasks.upsert(list_id, "1", subject="Mine")
    store.tasks.upsert(list_id, "2", subject="Theirs", owner=other.name, status="in_progress")
    store.tasks.claim(list_id, "1", agent)
    store.mail.send(other, agent, "fyi", "not urgent")
    blocked = answer("stop", event(project, "Stop"))
    assert blocked is not None and f"{list_id}/1: Mine" in blocked["reason"]
    assert "Theirs" not in blocked["reason"] and "urgent" not in blocked["reason"]
    store.tasks.upsert(list_id, "1", status="completed")
    assert run("stop", event(project, "Stop")) == (0, "", "")


# ---------------------------------------------------------------------------- post-tool


def task_event(project: str, session: str, tool: str, tool_input: Any, response: Any) -> Any:
    """A PostToolUse input for one of Claude Code's task tools."""
    return event(
        project,
        "PostToolUse",
        session_id=session,
        tool_name=tool,
        tool_input=tool_input,
        tool_response=response,
        tool_use_id="toolu_" + uuid.uuid4().hex[:8],
    )


def test_post_tool_mirrors_task_create_and_update(store: ik.Store, project: str) -> None:
    """TaskCreate makes the task in the session's list (owned by the identity); TaskUpdate
    maps subject, description, activeForm, status, owner and addBlockedBy/addBlocks."""
    session = "sess-" + uuid.uuid4().hex[:8]
    for n, subject in (("1", "Write the parser"), ("2", "Ship it")):
        create = {"subject": subject, "description": f"d{n}", "activeForm": f"Doing {n}"}
        out = run(
            "post-tool",
            task_event(
                project, session, "TaskCreate", create, {"task": {"id": n, "subject": subject}}
            ),
        )
        assert out == (0, "", "")
    assert store.tasks.get_list(session).owner == me(store, project).name
    first = store.tasks.get(session, "1")
    assert (first.subject, first.description, first.active_form, first.status) == (
        "Write the parser",
        "d1",
        "Doing 1",
        "pending",
    )
    update = {"taskId": "2", "status": "in_progress", "owner": "team-lead", "addBlockedBy": ["1"]}
    response = {"success": True, "taskId": "2", "updatedFields": ["status", "owner", "blockedBy"]}
    assert run("post-tool", task_event(project, session, "TaskUpdate", update, response)) == (
        0,
        "",
        "",
    )
    second = store.tasks.get(session, "2")
    assert (second.status, second.owner, second.blocked_by) == ("in_progress", "team-lead", ("1",))
    update = {
        "taskId": "1",
        "subject": "Write the lexer",
        "status": "completed",
        "addBlocks": ["2"],
    }
    assert run(
        "post-tool", task_event(project, session, "TaskUpdate", update, {"success": True})
    ) == (0, "", "")
    first = store.tasks.get(session, "1")
    assert (first.subject, first.status, first.blocks) == ("Write the lexer", "completed", ("2",))
    refused = {"taskId": "1", "status": "pending"}
    assert run(
        "post-tool", task_event(project, session, "TaskUpdate", refused, {"success": False})
    ) == (0, "", "")
    assert store.tasks.get(session, "1").status == "completed"


def test_post_tool_uses_the_shared_task_list_id(
    store: ik.Store, project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLAUDE_CODE_TASK_LIST_ID names the list instead of the session; a list another
    identity made is used as it is."""
    list_id = "shared-" + uuid.uuid4().hex[:8]
    owner = peer(store)
    store.tasks.create_list(list_id, owner)
    monkeypatch.setenv("CLAUDE_CODE_TASK_LIST_ID", list_id)
    data = task_event(
        project,
        "sess-x",
        "TaskCreate",
        {"subject": "Shared"},
        {"task": {"id": "7", "subject": "Shared"}},
    )
    assert run("post-tool", data) == (0, "", "")
    assert store.tasks.get(list_id, "7").subject == "Shared"
    assert store.tasks.get_list(list_id).owner == owner.name


def test_post_tool_mirrors_todo_write(store: ik.Store, project: str) -> None:
    """TodoWrite upserts every todo (its text names it) and deletes the ones gone from the
    list; tasks made by TaskCreate in the same list are left alone."""
    session = "sess-" + uuid.uuid4().hex[:8]
    run(
        "post-tool",
        task_event(project, session, "TaskCreate", {"subject": "Keep me"}, {"task": {"id": "1"}}),
    )
    todos = [
        {"content": "Read the spec", "status": "completed", "activeForm": "Reading the spec"},
        {"content": "Write the hook", "status": "in_progress", "activeForm": "Writing the hook"},
        {"content": "Test it", "status": "pending", "activeForm": "Testing it"},
    ]
    assert run("post-tool", task_event(project, session, "TodoWrite", {"todos": todos}, {})) == (
        0,
        "",
        "",
    )
    tasks = {t.external_id: t for t in store.tasks.list(session)}
    assert tasks[todo_id("Write the hook")].status == "in_progress"
    assert tasks[todo_id("Write the hook")].active_form == "Writing the hook"
    assert {t.subject for t in tasks.values()} == {
        "Keep me",
        "Read the spec",
        "Write the hook",
        "Test it",
    }

    todos = [{**todos[1], "status": "completed"}, todos[2]]
    assert run("post-tool", task_event(project, session, "TodoWrite", {"todos": todos}, {})) == (
        0,
        "",
        "",
    )
    tasks = {t.external_id: t for t in store.tasks.list(session)}
    assert tasks[todo_id("Read the spec")].status == "deleted"
    assert tasks[todo_id("Write the hook")].status == "completed"
    assert tasks[todo_id("Test it")].status == "pending"
    assert tasks["1"].status == "pending"


def test_post_tool_ignores_other_tools_without_the_database(project: str) -> None:
    """A Bash call is none of post-tool's business: nothing printed, the database not even
    opened (it is unreachable here)."""
    data = event(project, "PostToolUse", tool_name="Bash", tool_input={"command": "ls"})
    assert run_offline("post-tool", data) == (0, "", "")


def run_offline(hook: str, data: dict[str, Any], *args: str) -> tuple[int, str, str]:
    """``run`` with the database unreachable."""
    result = CliRunner().invoke(
        cli, ["--database", closed_port_url(), "hook", hook, *args], input=json.dumps(data)
    )
    return result.exit_code, result.stdout, result.stderr


# ----------------------------------------------------------------------------- pre-tool


def edit(project: str, tool: str, path: str) -> dict[str, Any]:
    """A PreToolUse input editing ``path``."""
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    return event(project, "PreToolUse", tool_name=tool, tool_input={key: path, "content": "x"})


def test_pre_tool_denies_a_file_another_identity_reserved(
    store: ik.Store, project: str, ask: Ask
) -> None:
    """An exclusive lease of another identity on the file, or a glob or directory covering
    it, denies Edit/Write/MultiEdit/NotebookEdit naming the holder and the expiry; other
    files are allowed (no output)."""
    me(store, project)
    other = peer(store)
    lease = store.leases.acquire(other, file_resource(project, "src/a.py"), ttl=60)
    for tool in ("Edit", "Write", "MultiEdit"):
        denied = ask("pre-tool", edit(project, tool, f"{project}/src/a.py"))
        assert denied is not None
        specific = denied["hookSpecificOutput"]
        assert (specific["hookEventName"], specific["permissionDecision"]) == ("PreToolUse", "deny")
        reason = specific["permissionDecisionReason"]
        assert reason.startswith(f"{project}/src/a.py is reserved by {other.name} until ")
        assert lease.expires_at.isoformat(timespec="seconds") in reason
    assert ask("pre-tool", edit(project, "Write", f"{project}/src/b.py")) is None

    store.leases.acquire(other, file_resource(project, "src/*.py"), ttl=60)
    denied = ask("pre-tool", edit(project, "Write", f"{project}/src/b.py"))
    assert denied is not None and f"({file_resource(project, 'src/*.py')})" in json.dumps(denied)
    store.leases.acquire(other, file_resource(project, "notes"), ttl=60)
    assert ask("pre-tool", edit(project, "NotebookEdit", f"{project}/notes/n.ipynb")) is not None
    assert ask("pre-tool", edit(project, "Edit", "src/c.txt")) is None  # relative, free


def test_a_denied_edit_waits_and_the_watch_reports_the_freed_lease(
    store: ik.Store, project: str
) -> None:
    """The denied agent waits for the lease that denied it: once released, its watch reports
    it once; a glob lease is waited for as the glob. (Only the watch's lease notices are
    looked at: other tests of this file leave tasks in shared lists, which it reports too.)"""
    agent, other = me(store, project), peer(store)

    def freed(batch: ik.WatchBatch) -> list[str]:
        return [n.text for n in batch.notices if n.kind == "lease"]

    lease = store.leases.acquire(other, file_resource(project, "src/w*.py"), ttl=60)
    denied = answer("pre-tool", edit(project, "Edit", f"{project}/src/w1.py"))
    assert denied is not None and "ikigai-store watch" in json.dumps(denied)
    assert freed(store.watch.next(agent)) == []
    store.leases.release(lease)
    batch = store.watch.next(agent)
    assert freed(batch) == [f"lease freed: {lease.resource}"]
    store.watch.save(agent, batch.seen)
    assert freed(store.watch.next(agent)) == []


def test_pre_tool_allows_own_reservations_shared_leases_and_other_tools(
    store: ik.Store, project: str, ask: Ask
) -> None:
    """The agent's own lease, another's shared lease and an expired or released lease never
    deny; a Read is not checked at all."""
    agent, other = me(store, project), peer(store)
    store.leases.acquire(agent, file_resource(project, "src/mine.py"), ttl=60)
    assert ask("pre-tool", edit(project, "Edit", f"{project}/src/mine.py")) is None
    store.leases.acquire(other, file_resource(project, "src/shared.py"), ttl=60, exclusive=False)
    assert ask("pre-tool", edit(project, "Edit", f"{project}/src/shared.py")) is None
    gone = store.leases.acquire(other, file_resource(project, "src/gone.py"), ttl=60)
    store.leases.release(gone)
    assert ask("pre-tool", edit(project, "Edit", f"{project}/src/gone.py")) is None
    read = event(project, "PreToolUse", tool_name="Read", tool_input={"file_path": "/etc/passwd"})
    assert run_offline("pre-tool", read) == (0, "", "")


def test_pre_tool_auto_reserve(store: ik.Store, project: str, ask: Ask) -> None:
    """--auto-reserve takes an exclusive lease on a free file for the agent (default 300 s,
    or the seconds given), which then denies another identity; a file another identity holds
    (even shared) is denied naming it."""
    agent = me(store, project)
    path = f"{project}/src/auto.py"
    assert ask("pre-tool", edit(project, "Write", path), "--auto-reserve") is None
    [lease] = store.leases.held(file_resource(project, "src/auto.py"))
    assert (lease.holder, lease.exclusive) == (agent.name, True)
    assert 290 < (lease.expires_at - lease.acquired_at).total_seconds() <= 300
    assert ask("pre-tool", edit(project, "Edit", path), "--auto-reserve", "30") is None
    [renewed] = store.leases.held(file_resource(project, "src/auto.py"))
    assert renewed.token != lease.token and renewed.expires_at < lease.expires_at

    denied = ask("pre-tool", edit(project, "Edit", path), "--role", "other", "--auto-reserve")
    assert denied is not None and f"reserved by {agent.name}" in json.dumps(denied)

    other = peer(store)
    store.leases.acquire(other, file_resource(project, "src/read.py"), ttl=60, exclusive=False)
    denied = ask("pre-tool", edit(project, "Edit", f"{project}/src/read.py"), "--auto-reserve")
    assert denied is not None and other.name in json.dumps(denied)


def test_a_subagent_may_edit_what_its_parent_reserved(
    store: ik.Store, project: str, ask: Ask
) -> None:
    """A subagent (its own identity) is not denied by the reservations of the agent that
    started it, and --auto-reserve leaves the parent's lease as it is; another role is
    denied."""
    parent = me(store, project)
    lease = store.leases.acquire(parent, file_resource(project, "src/p.py"), ttl=60)
    data = edit(project, "Edit", f"{project}/src/p.py")
    sub = {**data, "agent_id": "agent-7", "agent_type": "general-purpose"}
    assert ask("pre-tool", sub) is None
    assert ask("pre-tool", sub, "--auto-reserve") is None
    assert store.leases.held(file_resource(project, "src/p.py")) == [lease]
    denied = ask("pre-tool", data, "--role", "tester")
    assert denied is not None and f"reserved by {parent.name}" in json.dumps(denied)


# ----------------------------------------------------------------------------- fail open


def test_every_hook_fails_open_when_the_database_is_down(project: str) -> None:
    """With the database unreachable each hook exits 0 with exactly one line on stderr,
    ``ikigai-store hook <name>: ...``; pre-tool allows the edit and tells the user and the
    model that reservations were not checked, the others print nothing on stdout (real
    processes; --database and IKIGAI_DATABASE_URL alike)."""
    url = closed_port_url()
    inputs = {
        "session-start": event(project, "SessionStart", source="startup"),
        "prompt": event(project, "UserPromptSubmit", prompt="hi"),
        "stop": event(project, "Stop"),
        "post-tool": task_event(
            project, "s", "TaskCreate", {"subject": "x"}, {"task": {"id": "1"}}
        ),
        "pre-tool": edit(project, "Edit", f"{project}/src/a.py"),
    }
    for hook, data in inputs.items():
        code, out, err = spawn(["--database", url, "hook", hook], json.dumps(data))
        if hook == "pre-tool":
            told = json.loads(out)
            assert "permissionDecision" not in told["hookSpecificOutput"]
            for text in (told["systemMessage"], told["hookSpecificOutput"]["additionalContext"]):
                assert "could not check file reservations" in text and "src/a.py" in text
                assert "was allowed" in text
        else:
            assert (code, out) == (0, ""), err
        assert len(err.splitlines()) == 1 and err.startswith(f"ikigai-store hook {hook}: "), err
        assert "Traceback" not in err
    code, out, err = spawn(
        ["hook", "prompt"], json.dumps(inputs["prompt"]), {"IKIGAI_DATABASE_URL": url}
    )
    assert (code, out) == (0, "") and err.startswith("ikigai-store hook prompt: ")
    assert "connect" in err.lower()


@pytest.mark.parametrize("stdin", ["not json", "[1, 2]", "", '{"cwd": '])
def test_bad_input_fails_open(stdin: str) -> None:
    """Input that is not one JSON object: exit 0, no stdout, one stderr line."""
    code, out, err = spawn(["hook", "session-start"], stdin)
    assert (code, out) == (0, "")
    assert len(err.splitlines()) == 1 and err.startswith("ikigai-store hook session-start: "), err


def test_a_real_process_answers_session_start(store: ik.Store, project: str) -> None:
    """End to end through the console script: session-start prints one JSON object."""
    code, out, err = spawn(["hook", "session-start"], json.dumps(event(project, "SessionStart")))
    assert (code, err) == (0, "")
    assert me(store, project).name in context_of(json.loads(out), "SessionStart")
