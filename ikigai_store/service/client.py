"""Find, start and talk to the warm local service (standard library only: a hook process pays
Python's start-up and a socket round trip, nothing else).

One service runs per (OS user, database). Its door is a Unix stream socket,
``<runtime dir>/<key>.sock``, where ``key`` hashes the database the client means (``--database``,
else ``IKIGAI_DATABASE_URL``, else ``DATABASE_URL``, else the embedded server of
``IKIGAI_DATA_DIR`` or the user's default data dir; plus the ``PG*`` variables libpq would
read). The runtime dir is ``$IKIGAI_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/ikigai-store``, else
``/tmp/ikigai-store-<uid>``; beside the socket live the service's log (``<key>.log``) and the
lock clients start it under (``<key>.lock``).

Protocol: one JSON object per line, UTF-8. A connection opens with the client's request
``{"protocol": 1, "version": V, "op": OP, ...}``; the service answers one line,
``{"ok": true, ...}`` or ``{"ok": false, "error": WHY}`` (``"mismatch": V`` when the versions
differ). ``op`` is ``hook`` (one hook run), ``status``, ``stop`` or ``mcp`` (after the answer the
connection carries MCP's JSON-RPC lines both ways; see ``proxy``).

Invariants:
- the runtime dir is used only if it is a real directory (not a link) owned by this user with
  no access for group or others (created so); anything else is refused with the reason, never
  used; the service also checks each peer's user id (``SO_PEERCRED``) and refuses others;
- at most one service starts for a key: a client that cannot connect takes ``<key>.lock``
  (``flock``), tries once more, and only then starts one, waiting, still holding the lock, until
  it answers; racing clients wait on the lock and then connect to it;
- a socket nobody answers on (the service was killed) is stale: the next client replaces it;
- a service of another version than the client's is replaced: it stops listening, answers
  ``mismatch``, serves the connections it has and exits; the client starts its own;
- the service is started detached (its own session, cwd ``/``, stdin from ``/dev/null``, output
  to its log), through ``python -m ikigai_store.service``, which reports ``ready`` or the
  reason it could not start on a pipe the client reads.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import socket
import stat
import sys
import time
import zlib

from .._version import __version__

#: ``typing.TYPE_CHECKING`` without importing typing (the thin clients count milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

__all__ = [
    "IDENTITY_ENV",
    "PROTOCOL",
    "ServiceError",
    "Target",
    "enabled",
    "private_dir",
    "request",
    "runtime_dir",
    "status",
    "stop",
    "target",
]

#: The protocol's number: a service and a client of different numbers (or versions) never talk.
PROTOCOL = 1
#: Environment variables naming who the agent is: the client sends them, the service never
#: reads its own (it drops them when it starts).
IDENTITY_ENV = ("CLAUDE_PROJECT_DIR", "IKIGAI_ROLE", "IKIGAI_AS", "CLAUDE_CODE_TASK_LIST_ID")
#: libpq's variables that change which server a URL without a host reaches (part of the key).
_PG_ENV = (
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGDATABASE",
    "PGUSER",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGSSLMODE",
    "PGOPTIONS",
)
#: How long a client waits for a service it started (or another client is starting) to answer.
START_SECONDS = 30.0
#: How long a client waits for an answer once its request is sent.
ANSWER_SECONDS = 30.0
#: The longest line either side accepts (a hook's event carries a Write's content).
MAX_LINE_BYTES = 16 * 1024 * 1024
_MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103


class ServiceError(Exception):
    """The service could not be used: the message says why (the hook's stderr line)."""


def enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether commands use the service (``IKIGAI_SERVICE=off`` runs them in-process)."""
    return env.get("IKIGAI_SERVICE", "").strip().lower() not in ("off", "0", "no", "false")


def runtime_dir(env: Mapping[str, str] = os.environ) -> str:
    """Where the sockets, logs and locks live (see the module docstring); not created here."""
    configured = env.get("IKIGAI_RUNTIME_DIR")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        with _suppressed(OSError):
            info = os.stat(xdg)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
                return os.path.join(xdg, "ikigai-store")
    return os.path.join(env.get("TMPDIR") or "/tmp", f"ikigai-store-{os.geteuid()}")


def private_dir(path: str | Path) -> str:
    """``path``, created 0700 if missing; ``ServiceError`` unless it is a real directory owned
    by this user that nobody else may enter."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ServiceError(f"cannot create the service directory {path}: {exc.strerror}") from None
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ServiceError(f"the service directory {path} is not a directory (a link?)")
    if info.st_uid != os.geteuid():
        raise ServiceError(
            f"the service directory {path} belongs to uid {info.st_uid}, not to this user: "
            "another user made it first; set IKIGAI_RUNTIME_DIR to a directory of your own"
        )
    if info.st_mode & 0o077:
        raise ServiceError(
            f"the service directory {path} is open to others (mode "
            f"{stat.S_IMODE(info.st_mode):o}); it must be 0700"
        )
    return os.fspath(path)


class Target:
    """The service of one database (``database``: its URL, None for the configured default):
    its ``key`` and where its files are (paths as strings: no pathlib on the hook's path)."""

    __slots__ = ("database", "directory", "key")

    def __init__(self, database: str | None, key: str, directory: str | Path) -> None:
        self.database, self.key, self.directory = database, key, os.fspath(directory)

    def __repr__(self) -> str:
        return f"Target(key={self.key!r}, directory={self.directory!r})"

    @property
    def socket_path(self) -> str:
        return os.path.join(self.directory, f"{self.key}.sock")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, f"{self.key}.log")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.directory, f"{self.key}.lock")


def target(database: str | None = None, env: Mapping[str, str] = os.environ) -> Target:
    """The service for ``database`` (the global ``--database``), else the configured one."""
    url = database or env.get("IKIGAI_DATABASE_URL") or env.get("DATABASE_URL") or None
    material: dict[str, Any] = {"pg": {name: env.get(name) for name in _PG_ENV if name in env}}
    if url is not None:
        material["url"] = url
    else:  # the inputs of embedded.default_data_dir
        data_dir = env.get("IKIGAI_DATA_DIR")
        if data_dir:
            material["embedded"] = os.path.abspath(os.path.expanduser(data_dir))
        elif os.geteuid() == 0:
            material["embedded"] = "root"
        else:
            material["embedded"] = [env.get("XDG_DATA_HOME"), env.get("HOME") or _home()]
    data = json.dumps(material, sort_keys=True).encode()
    # 64 bits from zlib (no hashlib: OpenSSL takes milliseconds to load); the key only tells
    # databases apart inside a private directory
    key = f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"
    return Target(url, key, runtime_dir(env))


def _home() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_dir


class _suppressed:
    """``contextlib.suppress`` without importing contextlib."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, self.kinds)


# ------------------------------------------------------------------------------ the wire


def send_line(sock: socket.socket, message: Mapping[str, Any]) -> None:
    """Send one JSON line."""
    sock.sendall(json.dumps(message, ensure_ascii=False).encode() + b"\n")


def read_line(sock: socket.socket, buffer: bytearray) -> bytes:
    """The next line (without its newline) from ``sock``; ``buffer`` keeps what follows it.
    ``ConnectionError`` when the service closes first."""
    while True:
        end = buffer.find(b"\n")
        if end >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            return line
        if len(buffer) > MAX_LINE_BYTES:
            raise ConnectionError("the service's answer is too long")
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the service closed the connection without answering")
        buffer += chunk


def hello(op: str, **fields: Any) -> dict[str, Any]:
    """A request line of this client."""
    return {"protocol": PROTOCOL, "version": __version__, "op": op, **fields}


# ------------------------------------------------------------------------------ connecting


def _connect_once(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _check_path(where: Target) -> None:
    if len(os.fsencode(where.socket_path)) > _MAX_SOCKET_PATH:
        raise ServiceError(
            f"the service socket path {where.socket_path} is too long for a Unix socket; "
            "set IKIGAI_RUNTIME_DIR to a shorter directory"
        )


def connect(where: Target, *, start: bool = True, timeout: float = START_SECONDS) -> socket.socket:
    """A connection to the service of ``where``, starting it first when none answers (and
    ``start``); ``ServiceError`` saying why when that fails within ``timeout`` seconds."""
    _check_path(where)
    try:
        return _connect_once(where.socket_path, ANSWER_SECONDS)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        if not start:
            raise ServiceError("the service is not running") from exc
    except PermissionError:
        private_dir(where.directory)  # says whose the directory is, when not ours
        raise ServiceError(
            f"cannot reach the service at {where.socket_path}: permission denied"
        ) from None
    except OSError as exc:
        raise ServiceError(f"cannot reach the service at {where.socket_path}: {exc}") from None
    private_dir(where.directory)
    deadline = time.monotonic() + timeout
    with _locked(where.lock_path, deadline):
        try:  # started by the client that held the lock before us
            return _connect_once(where.socket_path, ANSWER_SECONDS)
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        _start(where, deadline)
        return _connect_once(where.socket_path, ANSWER_SECONDS)


class _locked:
    """An exclusive ``flock`` on ``path`` (created 0600), waited for until ``deadline``."""

    def __init__(self, path: str, deadline: float) -> None:
        self.path, self.deadline = path, deadline
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= self.deadline:
                    os.close(self.fd)
                    raise ServiceError(
                        "timed out waiting for another client starting the service"
                    ) from None
                time.sleep(0.01)

    def __exit__(self, *_: object) -> None:
        os.close(self.fd)  # releases the lock


def _start(where: Target, deadline: float) -> None:
    """Start the service of ``where`` and wait until it says it is ready."""
    import subprocess  # only on the cold path

    with _suppressed(FileNotFoundError):  # stale: nobody answered on it
        os.unlink(where.socket_path)
    env = {k: v for k, v in os.environ.items() if k not in IDENTITY_ENV}
    if where.database is not None:
        env["IKIGAI_SERVICE_DATABASE"] = where.database
    else:
        env.pop("IKIGAI_SERVICE_DATABASE", None)
    env["IKIGAI_RUNTIME_DIR"] = where.directory
    read_end, write_end = os.pipe()
    try:
        log = os.open(where.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            launcher = subprocess.Popen(
                [sys.executable, "-m", "ikigai_store.service", "--ready-fd", str(write_end)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(write_end,),
                cwd="/",
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(log)
        os.close(write_end)
        write_end = -1
        launcher.wait()  # it forks the service and exits at once
        report = _read_report(read_end, deadline)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if report != "ready":
        raise ServiceError(f"the service did not start: {report} (its log: {where.log_path})")


def _read_report(fd: int, deadline: float) -> str:
    """The service's one report line on the pipe: ``ready`` or why it could not start."""
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return "it did not say it was ready in time"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return data.decode(errors="replace").strip() or "it exited before it was ready"
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()


# ------------------------------------------------------------------------------ requests


def request(
    where: Target,
    message: Mapping[str, Any],
    *,
    start: bool = True,
    timeout: float = START_SECONDS,
) -> dict[str, Any]:
    """Send ``message`` (a ``hello``) to the service of ``where`` and return its answer (a
    JSON object). A service of another version is replaced once (``start``); ``ServiceError``
    for anything that keeps the request from being answered."""
    for attempt in (1, 2):
        sock = connect(where, start=start, timeout=timeout)
        try:
            answer = exchange(sock, message)
        finally:
            sock.close()
        if "mismatch" in answer and attempt == 1 and start:
            continue  # the old service has stopped listening: start ours
        return answer
    raise AssertionError("unreachable")  # pragma: no cover


def exchange(sock: socket.socket, message: Mapping[str, Any]) -> dict[str, Any]:
    """Send ``message`` on ``sock`` and read the one-line answer."""
    try:
        send_line(sock, message)
        answer = json.loads(read_line(sock, bytearray()))
    except (OSError, ValueError) as exc:
        raise ServiceError(f"the service did not answer: {exc}") from None
    if not isinstance(answer, dict):
        raise ServiceError("the service's answer is not a JSON object")
    return answer


def status(where: Target) -> dict[str, Any] | None:
    """The running service's status (pid, version, uptime, connections, ...), None when none
    runs."""
    try:
        return request(where, hello("status"), start=False)
    except ServiceError:
        return None


def stop(where: Target, *, timeout: float = 10.0) -> dict[str, Any] | None:
    """Ask the running service to stop and wait until it has; its last status, None when none
    ran. ``ServiceError`` when it is still running after ``timeout`` seconds."""
    try:
        answer = request(where, hello("stop"), start=False)
    except ServiceError:
        return None
    pid = answer.get("pid")
    deadline = time.monotonic() + timeout
    while isinstance(pid, int) and _alive(pid):
        if time.monotonic() >= deadline:
            raise ServiceError(f"the service (pid {pid}) is still running after {timeout:g} s")
        time.sleep(0.02)
    return answer


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True
