"""The warm local service, with real processes: started on demand by hook commands (one however
many race), stopped when idle, on SIGTERM and on ``service stop``, replaced after ``kill -9``, a
stale socket or a version change, surviving the database going away, closed to other OS users;
and the thin clients (the hook command, the MCP stdio proxy) importing only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

import ikigai_store as ik
from ikigai_store._version import __version__
from ikigai_store.hooks.context import file_resource
from ikigai_store.service import client
from tests.osusers import SYSTEM_PYTHON, os_user

pytestmark = pytest.mark.db

_SCRIPT = Path(sys.executable).with_name("ikigai-store")
_COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ikigai_store"]
_IDENTITY_ENV = ("CLAUDE_PROJECT_DIR", "IKIGAI_ROLE", "IKIGAI_AS", "CLAUDE_CODE_TASK_LIST_ID")


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A private runtime dir of its own (short: it holds Unix sockets); its services are
    stopped (or killed) afterwards."""
    path = Path(tempfile.mkdtemp(prefix="iks-", dir="/tmp"))
    yield path
    for pid in service_pids(path):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def project(tmp_path: Path) -> str:
    """A fresh project directory (a fresh identity)."""
    path = tmp_path / f"proj-{uuid.uuid4().hex[:8]}"
    (path / "src").mkdir(parents=True)
    return os.path.realpath(path)


def environment(runtime: Path, url: str, **extra: str) -> dict[str, str]:
    """The environment of a hook process using the service in ``runtime`` on ``url``."""
    env = {k: v for k, v in os.environ.items() if k not in _IDENTITY_ENV}
    env.update(IKIGAI_RUNTIME_DIR=str(runtime), IKIGAI_DATABASE_URL=url, IKIGAI_SERVICE="on")
    env.update(extra)
    env.pop("DATABASE_URL", None)
    return env


def hook(env: dict[str, str], name: str, data: Any) -> tuple[int, str, str]:
    """Run ``ikigai-store hook NAME`` for real with ``data`` on stdin."""
    done = subprocess.run(
        [*_COMMAND, "hook", name],
        input=data if isinstance(data, str) else json.dumps(data),
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


def start_event(project: str) -> dict[str, Any]:
    return {"session_id": "s", "cwd": project, "hook_event_name": "SessionStart"}


def edit_event(project: str, path: str) -> dict[str, Any]:
    return {
        "session_id": "s",
        "cwd": project,
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"},
    }


def context_of(out: str) -> str:
    text: str = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    return text


def service_pids(runtime: Path) -> list[int]:
    """The live service processes whose runtime dir is ``runtime``."""
    pids = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or ())
            if "ikigai_store.service" not in cmdline or proc.info["status"] == "zombie":
                continue
            if proc.environ().get("IKIGAI_RUNTIME_DIR") == str(runtime):
                pids.append(proc.pid)
        except psutil.Error:
            continue
    return pids


def wait_until(predicate: Any, timeout: float = 20.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def target(runtime: Path, url: str) -> client.Target:
    return client.target(None, {"IKIGAI_RUNTIME_DIR": str(runtime), "IKIGAI_DATABASE_URL": url})


# ------------------------------------------------------------------------------ lifetime


def test_sixteen_hooks_at_once_on_a_cold_machine_start_one_service(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """Sixteen hook processes started together with no service running all get the same
    answer, and exactly one service process is left running."""
    env = environment(runtime, ikigai_db_url)
    with ThreadPoolExecutor(16) as pool:
        results = list(
            pool.map(lambda _: hook(env, "session-start", start_event(project)), range(16))
        )
    for code, out, err in results:
        assert (code, err) == (0, ""), err
        assert context_of(out) == context_of(results[0][1])
    assert len(service_pids(runtime)) == 1
    sockets = list(runtime.glob("*.sock"))
    assert len(sockets) == 1 and oct(sockets[0].stat().st_mode & 0o777) == "0o600"
    assert oct(runtime.stat().st_mode & 0o777) == "0o700"


def test_the_service_exits_when_idle(runtime: Path, ikigai_db_url: str, project: str) -> None:
    """With IKIGAI_SERVICE_IDLE=1 the service exits about a second after its last client,
    removing its socket."""
    env = environment(runtime, ikigai_db_url, IKIGAI_SERVICE_IDLE="1")
    assert hook(env, "session-start", start_event(project))[0] == 0
    (pid,) = service_pids(runtime)
    wait_until(lambda: not psutil.pid_exists(pid), what="the idle service to exit")
    assert list(runtime.glob("*.sock")) == []


def test_sigterm_stops_the_service_and_the_next_hook_starts_another(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """SIGTERM ends the service cleanly (socket removed); the next hook starts a new one."""
    env = environment(runtime, ikigai_db_url)
    assert hook(env, "session-start", start_event(project))[0] == 0
    (first,) = service_pids(runtime)
    os.kill(first, signal.SIGTERM)
    wait_until(lambda: not psutil.pid_exists(first), what="SIGTERM to stop the service")
    assert list(runtime.glob("*.sock")) == []
    code, out, err = hook(env, "session-start", start_event(project))
    assert (code, err) == (0, "") and "you are" in context_of(out)
    assert service_pids(runtime) not in ([], [first])


def test_after_kill_9_the_next_hook_replaces_the_stale_socket(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A service killed with SIGKILL leaves its socket behind; the next hook finds nobody
    answering there, starts a new service and is answered."""
    env = environment(runtime, ikigai_db_url)
    assert hook(env, "session-start", start_event(project))[0] == 0
    (first,) = service_pids(runtime)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(first), what="the service to die")
    assert len(list(runtime.glob("*.sock"))) == 1  # stale
    code, out, err = hook(env, "session-start", start_event(project))
    assert (code, err) == (0, "") and "you are" in context_of(out)
    (second,) = service_pids(runtime)
    assert second != first


def test_a_stale_socket_file_nobody_listens_on_is_replaced(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A socket file bound by a process that is gone is replaced by the service a hook
    starts."""
    where = target(runtime, ikigai_db_url)
    os.chmod(runtime, 0o700)
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(where.socket_path)
    code, out, err = hook(
        environment(runtime, ikigai_db_url), "session-start", start_event(project)
    )
    assert (code, err) == (0, "") and "you are" in context_of(out)
    assert len(service_pids(runtime)) == 1


_OLD_SERVICE = textwrap.dedent(
    """
    import sys
    import ikigai_store._version as version
    version.__version__ = "0.0.0-old"
    from ikigai_store.service.server import main
    sys.exit(main(sys.argv[1:]))
    """
)


def test_a_service_of_another_version_is_replaced(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A hook meeting a service of another version is answered by a service of its own
    version; the old one stops listening and exits."""
    env = environment(runtime, ikigai_db_url)
    old = subprocess.Popen(
        [sys.executable, "-c", _OLD_SERVICE],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        where = target(runtime, ikigai_db_url)
        wait_until(lambda: os.path.exists(where.socket_path), what="the old service to listen")
        code, out, err = hook(env, "session-start", start_event(project))
        assert (code, err) == (0, "") and "you are" in context_of(out)
        assert old.wait(timeout=20) == 0
        state = client.status(where)
        assert state is not None and state["version"] == __version__ and state["pid"] != old.pid
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()


def test_service_status_start_and_stop(runtime: Path, ikigai_db_url: str) -> None:
    """`service status` says not running, `service start` starts it, `status` shows its pid,
    version, socket and log, `stop` waits for it to exit; `status` and `stop` never start
    one."""
    env = environment(runtime, ikigai_db_url)

    def cli(*args: str) -> str:
        done = subprocess.run(
            [*_COMMAND, "service", *args], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert cli("status").startswith("not running")
    assert cli("stop") == "not running\n"
    assert service_pids(runtime) == []
    assert cli("start").startswith("running: pid ")
    state = json.loads(cli("status", "--json"))
    assert state["running"] and state["version"] == __version__
    assert state["socket"].startswith(str(runtime)) and state["log"].endswith(".log")
    assert "***" in state["database"] or "@" not in state["database"]
    assert cli("stop") == f"stopped (pid {state['pid']})\n"
    assert not psutil.pid_exists(state["pid"])


# ------------------------------------------------------------------------------ the database


def test_the_database_going_away_and_coming_back(
    runtime: Path, ikigai_db_url: str, ikigai_server_url: str, project: str
) -> None:
    """While the database refuses connections, pre-tool allows the edit saying reservations
    could not be checked (one stderr line); once it is back the same service denies the
    reserved file again."""
    with ik.open(ikigai_db_url, migrate=False, pool_size=1) as store:
        other = store.identities.register(f"peer-{uuid.uuid4().hex[:8]}")
        store.leases.acquire(other, file_resource(project, "src/x.py"), ttl=300)
    env = environment(runtime, ikigai_db_url, PGCONNECT_TIMEOUT="2")
    data = edit_event(project, f"{project}/src/x.py")

    def decision() -> tuple[str | None, str]:
        code, out, err = hook(env, "pre-tool", data)
        assert code == 0
        told = json.loads(out)
        return told["hookSpecificOutput"].get("permissionDecision"), err

    assert decision() == ("deny", "")
    (pid,) = service_pids(runtime)
    name = psycopg.conninfo.conninfo_to_dict(ikigai_db_url)["dbname"]
    with psycopg.connect(ikigai_server_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            decided, err = decision()
            assert decided is None
            assert err.startswith("ikigai-store hook pre-tool: ") and len(err.splitlines()) == 1
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    wait_until(lambda: decision() == ("deny", ""), what="the reservation to be seen again")
    assert service_pids(runtime) == [pid]


# ------------------------------------------------------------------------------ other users

_OTHER_USER_PROBE = textwrap.dedent(
    """
    import json, os, socket, sys
    directory, path, version = sys.argv[1:4]
    try:
        os.listdir(directory)
        print("listed")
    except PermissionError:
        print("cannot list")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
    except PermissionError:
        print("cannot connect")
        sys.exit(0)
    event = {"session_id": "s", "cwd": sys.argv[4], "hook_event_name": "SessionStart"}
    hello = {"protocol": 1, "version": version, "op": "hook", "hook": "session-start",
             "event": event, "options": {}}
    try:
        s.sendall(json.dumps(hello).encode() + b"\\n")
    except BrokenPipeError:
        pass  # refused before it was read: the refusal is waiting to be read
    print("answer", s.makefile().readline().strip())
    """
)


def test_another_os_user_cannot_reach_or_use_the_service(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A second OS user can neither list the runtime dir nor connect to the socket; with the
    directory and socket opened up by hand, the service still refuses it by its peer
    credentials, and nothing is written for it (no identity registered)."""
    other = os_user("ikigai-probe")
    env = environment(runtime, ikigai_db_url)
    assert hook(env, "session-start", start_event(project))[0] == 0
    where = target(runtime, ikigai_db_url)
    stranger = os.path.join(tempfile.mkdtemp(prefix="stranger-"), "p")
    os.makedirs(stranger)

    def probe() -> list[str]:
        done = subprocess.run(
            [
                "runuser",
                "-u",
                other,
                "--",
                str(SYSTEM_PYTHON),
                "-I",
                "-c",
                _OTHER_USER_PROBE,
                str(runtime),
                str(where.socket_path),
                __version__,
                stranger,
            ],
            capture_output=True,
            text=True,
            cwd="/",
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert probe() == ["cannot list", "cannot connect"]
    os.chmod(runtime, 0o755)
    os.chmod(where.socket_path, 0o777)
    listed, answer = probe()
    assert listed == "listed"
    assert json.loads(answer.removeprefix("answer ")) == {
        "ok": False,
        "error": "refused: not this user's service",
    }
    with ik.open(ikigai_db_url, migrate=False, pool_size=1) as store:
        assert all(i.project_key != os.path.realpath(stranger) for i in store.identities.list())


def test_a_runtime_dir_open_to_others_is_refused(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A runtime dir others may enter is never used: the hook fails open saying why, and no
    service starts there."""
    os.chmod(runtime, 0o755)
    code, out, err = hook(
        environment(runtime, ikigai_db_url), "session-start", start_event(project)
    )
    assert (code, out) == (0, "")
    assert "is open to others (mode 755); it must be 0700" in err and len(err.splitlines()) == 1
    assert service_pids(runtime) == []


def test_a_runtime_dir_another_user_made_first_is_named(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """Another user made the runtime dir first (a shared /tmp): the hook fails open saying
    whose it is and what to do, not a bare "permission denied"."""
    import pwd

    other = pwd.getpwnam(os_user("ikigai-probe"))
    os.chown(runtime, other.pw_uid, other.pw_gid)
    try:
        code, out, err = hook(
            environment(runtime, ikigai_db_url), "session-start", start_event(project)
        )
    finally:
        os.chown(runtime, os.geteuid(), os.getegid())
    assert (code, out) == (0, "")
    assert f"belongs to uid {other.pw_uid}, not to this user" in err
    assert "IKIGAI_RUNTIME_DIR" in err and len(err.splitlines()) == 1
    assert service_pids(runtime) == []


# ------------------------------------------------------------------------------ thin clients

_HEAVY = ("psycopg", "pydantic", "mcp", "click", "anyio", "aiosql", "starlette", "yoyo")


def imported(args: list[str], stdin: str, env: dict[str, str]) -> set[str]:
    """The top-level modules ``ikigai-store ARGS`` imports (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ikigai_store", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_the_hook_and_mcp_paths_import_only_the_standard_library(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A hook (service warm) and the MCP stdio server answering initialize and tools/list
    import none of psycopg, pydantic, mcp, click, anyio, aiosql, starlette or yoyo."""
    env = environment(runtime, ikigai_db_url)
    assert hook(env, "prompt", start_event(project))[0] == 0
    modules = imported(["hook", "pre-tool"], json.dumps(edit_event(project, "a.py")), env)
    assert "ikigai_store" in modules and not modules & set(_HEAVY), modules
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    modules = imported(["mcp"], "".join(json.dumps(m) + "\n" for m in lines), env)
    assert "ikigai_store" in modules and not modules & set(_HEAVY), modules


INIT_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}


class Mcp:
    """``ikigai-store mcp ARGS`` over stdio, spoken to line by line."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            [*_COMMAND, "mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.serial = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.serial += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.serial, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        assert self.proc.stdout is not None
        while True:
            answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.serial:
                return answer

    def start(self) -> dict[str, Any]:
        answer = self.ask("initialize", INIT_PARAMS)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.proc.stdout.close()


@pytest.mark.parametrize(
    "args", [[], ["--tools", "full"], ["--operator", "--tools", "identities,mail,tasks"]]
)
def test_the_proxy_answers_initialize_and_tools_list_as_the_sdk_server_does(
    runtime: Path, ikigai_db_url: str, project: str, args: list[str]
) -> None:
    """The stdio proxy's initialize and tools/list answers are the ones the SDK's server gives
    in-process (IKIGAI_SERVICE=off), and a tool call through the service works."""
    answers = []
    for mode in ("off", "on"):
        env = environment(runtime, ikigai_db_url, IKIGAI_SERVICE=mode)
        mcp = Mcp(args, env, project)
        try:
            init = mcp.start()
            listed = mcp.ask("tools/list")
            me = mcp.ask("tools/call", {"name": "whoami", "arguments": {}})
        finally:
            assert mcp.close() == 0
        assert me["result"].get("isError") is not True, me
        answers.append((init["result"], listed["result"], me["result"]["structuredContent"]))
    (init_off, list_off, me_off), (init_on, list_on, me_on) = answers
    assert init_on == init_off and list_on == list_off
    assert me_on["name"] == me_off["name"] and me_on["project_key"] == project


def test_the_proxy_survives_the_service_being_killed(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A call in flight when the service dies is answered with a tool error saying why; the
    next call starts a new service and works, as the same identity."""
    mcp = Mcp([], environment(runtime, ikigai_db_url), project)
    try:
        mcp.start()
        first = mcp.ask("tools/call", {"name": "whoami", "arguments": {}})["result"]
        (pid,) = service_pids(runtime)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not psutil.pid_exists(pid), what="the service to die")
        answers = [mcp.ask("tools/call", {"name": "whoami", "arguments": {}})["result"]]
        if answers[0].get("isError"):  # the proxy saw the death with this call in flight
            assert "service" in answers[0]["content"][0]["text"]
            answers.append(mcp.ask("tools/call", {"name": "whoami", "arguments": {}})["result"])
        assert answers[-1]["structuredContent"]["name"] == first["structuredContent"]["name"]
        assert len(service_pids(runtime)) == 1
    finally:
        assert mcp.close() == 0


def test_the_proxy_answers_a_lone_surrogate_with_an_error(
    runtime: Path, ikigai_db_url: str, project: str
) -> None:
    """A request carrying a lone surrogate (``"\\ud800"``) is answered with a JSON-RPC error
    (not left unanswered), and the session goes on."""
    mcp = Mcp([], environment(runtime, ikigai_db_url), project)
    try:
        mcp.start()
        assert mcp.proc.stdin is not None and mcp.proc.stdout is not None
        raw = (
            '{"jsonrpc":"2.0","id":"bad","method":"tools/call",'
            '"params":{"name":"send_mail","arguments":{"subject":"\\ud800"}}}\n'
        )
        mcp.proc.stdin.write(raw.encode())
        mcp.proc.stdin.flush()
        answer = json.loads(mcp.proc.stdout.readline())
        assert answer["id"] == "bad" and answer["error"]["code"] == -32700
        me = mcp.ask("tools/call", {"name": "whoami", "arguments": {}})["result"]
        assert me["structuredContent"]["project_key"] == project
    finally:
        assert mcp.close() == 0
