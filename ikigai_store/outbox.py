"""The offline outbox: store-and-forward of mail while the database cannot be reached.

Owns ``Outbox``, a local SQLite file (standard library ``sqlite3``; statements in
``queries/outbox.sql``, loaded apart as ``sql.outbox_queries``) of ``pending_operations``: store
calls (``send``, ``reply``, ``publish``, ``heartbeat``) waiting to be delivered, each under an
idempotency key. Invariants:

- ``enqueue`` checks an operation as the store call would (same operation code, run up to its
  first query: unknown or missing payload keys and bad values raise ``InvalidArgument``) and
  writes nothing when it refuses; what it accepts is durable in the file before it returns;
- at most ``max_pending`` operations are undelivered (``OutboxFull``), checked and inserted in
  one statement, so concurrent processes cannot overshoot;
- ``drain`` delivers in FIFO order, each operation with its original idempotency key: a drainer
  killed between the server's commit and marking the row leaves it ``delivering``; after
  ``stale_after`` it is pending again and redelivered, and the server (key unique per sender)
  returns the original mail instead of writing a second one. So every key yields at most one
  mail; an operation is lost only by expiring (``ttl``) or by ``clear(everything=True)``;
- a refusal by the store (``InvalidArgument``, ``NotFound``, ``Conflict``) marks the operation
  ``failed`` (never retried); an unreachable or failing database puts it back to ``pending``
  (``attempts`` + 1, ``last_error``) and ends the drain, so later operations never overtake it;
- the file is created ``0600`` (its directory ``0700`` when created here), when the first
  operation is queued: it holds mail bodies; until then every read finds an empty outbox.
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import identities, mail, ops, sql, topics
from .errors import (
    Conflict,
    ConnectError,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    NotFound,
    OutboxError,
    OutboxFull,
    StoreClosed,
)
from .models import (
    OUTBOX_OPERATIONS,
    OUTBOX_STATUSES,
    DrainReport,
    Identity,
    Mail,
    PendingOperation,
    Queued,
    Topic,
)
from .validate import check_duration

if TYPE_CHECKING:
    from .aio import AsyncStore
    from .store import Store

__all__ = ["LAYOUT_VERSION", "Outbox", "database_path", "default_path", "uuid7"]

#: ``PRAGMA user_version`` of the file layout this code reads and writes.
LAYOUT_VERSION = 1

#: Refusals by the store: delivering again cannot succeed, so the operation is ``failed``.
_REFUSALS = (InvalidArgument, NotFound, Conflict)

#: Failures after which the operation is retried later, and the drain stops (FIFO).
_TRANSIENT = (DatabaseUnavailable, DatabaseError, StoreClosed)

#: Payload keys holding datetimes (stored as ISO 8601 text).
_DATETIME_KEYS = frozenset({"deadline_at"})


def default_path() -> Path:
    """Where ``Outbox()`` keeps its file: ``$IKIGAI_OUTBOX``, else
    ``$XDG_STATE_HOME/ikigai_store/outbox.sqlite3`` (``~/.local/state`` when unset)."""
    explicit = os.environ.get("IKIGAI_OUTBOX")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "ikigai_store" / "outbox.sqlite3"


def database_path(url: str | None) -> Path:
    """The CLI's outbox for one database: next to ``default_path()``, named by a hash of the
    database ``url`` resolves to (host, port, database, user: the password left out) or, for
    the embedded server, of its data directory. So mail queued for one database is never
    delivered into another. ``$IKIGAI_OUTBOX`` still names one file for every database."""
    explicit = os.environ.get("IKIGAI_OUTBOX")
    if explicit:
        return Path(explicit)
    from .config import resolve_url

    resolved = resolve_url(url)
    if resolved is None:
        from ._where import default_data_dir

        identity = "embedded " + default_data_dir()
    else:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(resolved)
        identity = " ".join(
            f"{k}={parts[k]}" for k in sorted(parts) if k not in ("password", "sslpassword")
        )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return default_path().with_name(f"outbox-{digest}.sqlite3")


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds then 74 random bits, as text, so keys
    sort roughly by creation time."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & (2**48 - 1)) << 80
    value |= 0x7 << 76 | ((rand >> 62) & 0xFFF) << 64  # version, rand_a
    value |= 0b10 << 62 | (rand & (2**62 - 1))  # variant, rand_b
    return str(uuid.UUID(int=value))


#: The operation each outbox entry is delivered with (checked with, and run on any face).
_OPERATIONS: dict[str, Callable[..., ops.Op[Any]]] = {
    "send": mail.send,
    "reply": mail.reply,
    "publish": topics.publish,
    "heartbeat": identities.heartbeat,
}


@dataclass(frozen=True, slots=True)
class _Operation:
    """A checked operation, ready to store or deliver."""

    key: str
    operation: str
    payload: str  # JSON text
    sender: str

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of its store call (with the key, where the call takes one)."""
        kwargs: dict[str, Any] = json.loads(self.payload)
        for name in _DATETIME_KEYS & kwargs.keys():
            if kwargs[name] is not None:
                kwargs[name] = datetime.fromisoformat(kwargs[name])
        if self.operation != "heartbeat":
            kwargs["idempotency_key"] = self.key
        return kwargs


def _plain(key: str, value: Any) -> Any:
    """A payload value as it is stored: identities and topics by name, datetimes as text."""
    if isinstance(value, (Identity, Topic)):
        return value.name
    if key == "to" and isinstance(value, (builtins.list, tuple)):
        return [v.name if isinstance(v, Identity) else v for v in value]
    if key in _DATETIME_KEYS and isinstance(value, datetime):
        return value.isoformat()
    return value


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


class Outbox:
    """A local store-and-forward file for mail operations (see the module docstring).

    ``path`` defaults to ``default_path()``; the file is made when the first operation is
    queued, and an existing file of another layout is ``OutboxError``. ``max_pending`` bounds
    the undelivered operations; ``ttl`` is how long an operation may wait (then it expires,
    undelivered) and how long finished operations stay listed; an operation a drainer took but
    never settled (it was killed) is retried after ``stale_after``. Safe to use from several
    threads and processes at once: every call opens its own short-lived SQLite connection.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_pending: int = 100,
        ttl: timedelta = timedelta(days=7),
        stale_after: timedelta = timedelta(minutes=5),
    ) -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise InvalidArgument(f"max_pending must be a positive int, not {max_pending!r}")
        self.max_pending = max_pending
        self.ttl = ttl
        self.stale_after = stale_after
        self._ttl = check_duration(ttl, "ttl", zero=False).total_seconds()
        self._stale = check_duration(stale_after, "stale_after", zero=False).total_seconds()
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise InvalidArgument(f"path must be a str or path, not {type(path).__name__}")
        #: The SQLite file (created when the first operation is queued).
        self.path = Path(path) if path is not None else default_path()
        if self.path.exists():
            with self._db():
                pass  # a file we cannot read fails here, not at the first drain

    def __repr__(self) -> str:
        return f"<Outbox {self.path}>"

    # ------------------------------------------------------------------ the file

    def _exists(self) -> bool:
        """Whether the file exists yet: reading a missing outbox finds it empty."""
        return self.path.exists()

    @contextmanager
    def _db(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection in autocommit mode (every statement here is its own transaction) to a
        file of our layout; ``create`` makes the file (0600) and its schema when missing."""
        if create and not self.path.exists():
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise OutboxError(f"cannot create the outbox {self.path}: {exc}") from exc
        try:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise OutboxError(f"cannot open the outbox {self.path}: {exc}") from exc
        try:
            conn.row_factory = sqlite3.Row
            version = sql.outbox_queries.outbox_version(conn)[0]
            if version == 0:
                sql.outbox_queries.outbox_setup(conn)
            elif version != LAYOUT_VERSION:
                raise OutboxError(
                    f"the outbox {self.path} has layout {version}; this ikigai_store reads "
                    f"{LAYOUT_VERSION} (written by another version?)"
                )
            yield conn
        except sqlite3.Error as exc:
            raise OutboxError(f"outbox {self.path}: {exc}") from exc
        finally:
            conn.close()

    # ------------------------------------------------------------------ queueing

    def _check(self, operation: object, payload: object, idempotency_key: object) -> _Operation:
        if operation not in OUTBOX_OPERATIONS:
            raise InvalidArgument(
                f"operation must be one of {', '.join(OUTBOX_OPERATIONS)}, not {operation!r}"
            )
        if not isinstance(payload, Mapping) or not all(isinstance(k, str) for k in payload):
            raise InvalidArgument("payload must be a mapping of keyword arguments")
        kwargs = dict(payload)
        key = kwargs.pop("idempotency_key", None) if operation != "heartbeat" else None
        if idempotency_key is not None and key is not None and key != idempotency_key:
            raise InvalidArgument("payload idempotency_key differs from idempotency_key")
        key = idempotency_key if idempotency_key is not None else key
        if key is None:
            key = uuid7()
        elif not isinstance(key, str) or not key or len(key) > 200 or "\x00" in key:
            raise InvalidArgument("idempotency_key must be text of 1 to 200 characters")
        call = _OPERATIONS[str(operation)]
        try:
            inspect.signature(call).bind(**kwargs)
        except TypeError as exc:
            raise InvalidArgument(f"{operation} payload: {exc}") from None
        ops.validate(
            call(**kwargs, **({} if operation == "heartbeat" else {"idempotency_key": key}))
        )
        plain = {k: _plain(k, v) for k, v in kwargs.items()}
        try:
            text = json.dumps(plain, allow_nan=False, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"{operation} payload is not JSON: {exc}") from None
        sender = plain["name" if operation == "heartbeat" else "sender"]
        return _Operation(key, str(operation), text, sender)

    def enqueue(
        self,
        operation: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> str:
        """Queue a store call for a later ``drain``; return its idempotency key.

        ``operation`` is ``send``, ``reply``, ``publish`` or ``heartbeat``; ``payload`` the
        keyword arguments of ``store.mail.send`` / ``.reply`` / ``.publish`` /
        ``store.identities.heartbeat`` (identities and topics may be objects). The key is a new
        UUIDv7 unless given (here or as the payload's ``idempotency_key``); queueing the same
        key again returns it and writes nothing, unless the operation differs (``Conflict``).
        ``InvalidArgument`` for an unknown operation, unknown or missing payload keys, or values
        the store call would refuse; ``OutboxFull`` at ``max_pending`` undelivered operations;
        ``OutboxError`` when the file cannot be written.
        """
        return self._put(self._check(operation, payload, idempotency_key)).idempotency_key

    def _put(self, op: _Operation) -> Queued:
        now = time.time()
        expires = now + self._ttl
        with self._db(create=True) as conn:
            added = sql.outbox_queries.outbox_enqueue(
                conn,
                key=op.key,
                operation=op.operation,
                payload=op.payload,
                sender=op.sender,
                now=now,
                expires_at=expires,
                max_pending=self.max_pending,
            )
            if not added:
                row = sql.outbox_queries.outbox_get(conn, key=op.key)
                if row is None:
                    raise OutboxFull(
                        f"the outbox {self.path} holds {self.max_pending} undelivered "
                        "operations (max_pending); drain it first"
                    )
                if (row["operation"], row["payload"]) != (op.operation, op.payload):
                    raise Conflict(
                        f"idempotency key {op.key!r} is already queued for another operation",
                        constraint="pending_operations.idempotency_key",
                        sqlstate=None,
                    )
                expires = row["expires_at"]
        return Queued(op.key, op.operation, datetime.fromtimestamp(expires, UTC))

    # ------------------------------------------------------------------ delivering

    def submitting(
        self, operation: str, payload: Mapping[str, Any], idempotency_key: str | None = None
    ) -> ops.Op[Any]:
        """``submit`` as an operation (``ops``), which any face runs: what
        ``store.mail.send_or_queue`` yields from."""
        op = self._check(operation, payload, idempotency_key)
        if (yield ops.Blocking(self._waiting)) and (yield from self.draining()).pending:
            return (yield ops.Blocking(self._put, (op,)))
        try:
            return (yield ops.Run(_OPERATIONS[op.operation](**op.kwargs())))
        except DatabaseUnavailable as exc:
            if isinstance(exc, ConnectError) and exc.refused:
                raise  # a wrong password or database: queueing would only hide it
            return (yield ops.Blocking(self._put, (op,)))

    def submit(
        self,
        store: Store,
        operation: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """Deliver an operation now, or queue it when the database cannot be reached.

        Returns the store call's result (a ``Mail``; an ``Identity`` for ``heartbeat``), or
        ``Queued`` when it raised ``DatabaseUnavailable`` (``ConnectError``,
        ``ConnectionLost``), except a ``ConnectError`` the server refused for good (a wrong
        password, no such database: ``ConnectError.refused``), which is raised. Operations
        already waiting are drained first, and while any remain this one queues behind them,
        so operations reach the store in the order they were made. The operation always
        carries an idempotency key (a new UUIDv7 unless given), so a delivery whose reply was
        lost and is retried from the outbox writes nothing twice. Arguments are checked as by
        ``enqueue``.
        """
        return store._run(self.submitting(operation, payload, idempotency_key))

    async def asubmit(
        self,
        store: AsyncStore,
        operation: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """``submit`` for an ``AsyncStore`` (the file is used from a worker thread)."""
        return await store._run(self.submitting(operation, payload, idempotency_key))

    def _waiting(self) -> bool:
        stats = self.stats()
        return stats["pending"] + stats["delivering"] > 0

    def draining(self) -> ops.Op[DrainReport]:
        """``drain`` as an operation (``ops``), which any face runs."""
        delivered = failed = 0
        expired = yield ops.Blocking(self._start_drain)
        claim = uuid7()
        while (held := (yield ops.Blocking(self._claim, (claim,)))) is not None:
            try:
                result = yield ops.Run(_OPERATIONS[held.operation](**held.kwargs()))
            except _REFUSALS as exc:
                yield ops.Blocking(self._settle, (claim, "failed", exc))
                failed += 1
                continue
            except GeneratorExit:
                raise
            except BaseException as exc:
                yield ops.Blocking(self._settle, (claim, "pending", exc))
                if isinstance(exc, _TRANSIENT):
                    break
                raise
            yield ops.Blocking(self._settle, (claim, "delivered", None, result))
            delivered += 1
        pending = yield ops.Blocking(self._undelivered)
        return DrainReport(delivered, failed, expired, pending)

    def drain(self, store: Store) -> DrainReport:
        """Deliver the waiting operations to ``store``, oldest first; return the counts.

        First, operations whose ``ttl`` passed become ``expired``, operations left
        ``delivering`` for ``stale_after`` by a drainer that died become pending again, and
        finished operations older than ``ttl`` are forgotten. Then each pending operation is
        delivered with its idempotency key: ``delivered``; ``failed`` when the store refuses it
        (``InvalidArgument``, ``NotFound``, ``Conflict``; ``last_error`` says why); or back to
        pending with ``attempts`` + 1 when the database is unreachable or fails, which ends the
        drain. Several drainers may run at once: each operation is delivered by one of them.
        """
        return store._run(self.draining())

    async def adrain(self, store: AsyncStore) -> DrainReport:
        """``drain`` for an ``AsyncStore`` (the file is used from a worker thread)."""
        return await store._run(self.draining())

    def _start_drain(self) -> int:
        """Expire, recover stale claims, forget old finished rows; return how many expired."""
        if not self._exists():
            return 0
        now = time.time()
        with self._db() as conn:
            sql.outbox_queries.outbox_recover(
                conn,
                now=now,
                stale_before=now - self._stale,
                error="the drainer delivering it stopped before recording the outcome",
            )
            expired: int = sql.outbox_queries.outbox_expire(conn, now=now)
            sql.outbox_queries.outbox_purge(conn, before=now - self._ttl)
        return expired

    def _claim(self, claim: str) -> _Operation | None:
        if not self._exists():
            return None
        with self._db() as conn:
            if not sql.outbox_queries.outbox_claim(conn, claim=claim, now=time.time()):
                return None
            row = sql.outbox_queries.outbox_claimed(conn, claim=claim)
        return _Operation(row["idempotency_key"], row["operation"], row["payload"], row["sender"])

    def _settle(
        self,
        claim: str,
        status: str,
        error: BaseException | None,
        result: object = None,
    ) -> None:
        with self._db() as conn:
            sql.outbox_queries.outbox_settle(
                conn,
                claim=claim,
                status=status,
                error=None if error is None else _error_text(error),
                mail_id=result.id if isinstance(result, Mail) else None,
                now=time.time(),
            )

    def _undelivered(self) -> int:
        stats = self.stats()
        return stats["pending"] + stats["delivering"]

    # ------------------------------------------------------------------ inspecting

    def list(self, *, include_finished: bool = False) -> builtins.list[PendingOperation]:
        """Operations waiting (pending or being delivered), oldest first; with
        ``include_finished`` also the delivered, failed and expired ones still listed."""
        if not self._exists():
            return []
        with self._db() as conn:
            rows = sql.outbox_queries.outbox_list(conn, finished=bool(include_finished))
            return [PendingOperation.from_row(row) for row in rows]

    def get(self, idempotency_key: str) -> PendingOperation:
        """The operation queued under ``idempotency_key`` (``NotFound`` if none)."""
        row = None
        if self._exists():
            with self._db() as conn:
                row = sql.outbox_queries.outbox_get(conn, key=idempotency_key)
        if row is None:
            raise NotFound(f"no operation with idempotency key {idempotency_key!r} in the outbox")
        return PendingOperation.from_row(row)

    def stats(self) -> dict[str, int]:
        """How many operations are in each status (every status, zeros included)."""
        if not self._exists():
            return dict.fromkeys(OUTBOX_STATUSES, 0)
        with self._db() as conn:
            row = sql.outbox_queries.outbox_stats(conn)
        return {status: int(row[status]) for status in OUTBOX_STATUSES}

    def clear(self, *, everything: bool = False) -> int:
        """Delete the finished operations (delivered, failed, expired) and return how many;
        ``everything=True`` also deletes the undelivered ones, which are then lost."""
        if not self._exists():
            return 0
        with self._db() as conn:
            cleared: int = sql.outbox_queries.outbox_clear(conn, everything=bool(everything))
        return cleared
