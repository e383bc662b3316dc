"""Operations, the one definition of everything a store does, and how every face runs them.

Owns the sans-I/O core shared by ``Store``, ``AsyncStore`` and every later face, the way
psycopg shares its protocol code. An *operation* is a generator function with the public,
typed signature and docstring of the call: it validates its arguments, then yields *steps*
and receives their results, and finally returns the public result. It performs no I/O itself.
The steps:

- ``Call``: run a named query from ``queries/`` (built with ``one``, ``many``, ``message_rows``,
  ``model_row``, ``value``, ``statement``) and receive its shaped result;
- ``Listen`` / ``Sleep``: be woken by a notification (``notify``) / sleep until woken or until
  a time passes, for the waiting operations (``mail.wait``, a blocking ``topics.claim``);
  ``Liveness``: the listener's liveness key (``mail.wait``'s hand-off registrations);
  ``Expect`` / ``Collect``: have the listener give this run the mail handed to a registration
  / receive what it gave (``notify.Handoff``);
- ``Blocking``: call a blocking local function (the outbox's SQLite file), which the asyncio
  face runs in a worker thread;
- ``Run``: run another operation in scopes of its own and receive its result (or have its
  error thrown in).

Faces bind operations with ``operation``: a class attribute ``send = operation(send)`` in a
namespace class (``Area``) becomes ``store.mail.send`` (a plain method on ``Store``, a
coroutine function on ``AsyncStore``) with the operation's signature and docstring, seen as
such by ``mypy --strict`` (``ParamSpec``) and by ``inspect``. Read through a class
(``Store.append``, ``AsyncStore.mail.send``, ``MailCalls.send``) it is a plain function, a
coroutine function on the asyncio face, taking ``self`` and then the operation's arguments:
``help()``, pydoc, griffe and Sphinx see a method. ``run`` and ``arun`` are the two drivers; a
face only supplies its connection scopes and how it sleeps.

Invariants:
- validation runs before any connection is taken: the code before an operation's first step
  runs first, so bad input raises ``InvalidArgument`` even while the database is down;
- consecutive calls of an operation run on one connection in one *scope* (the face's choice:
  plain autocommit, a transaction for ``@atomic`` operations, or a savepoint inside
  ``store.transaction()``); any other step ends the scope first, so no connection is held
  while an operation sleeps or does local I/O; a failed call ends its scope (rolled back) and
  its translated error is thrown into the operation, which may handle it (e.g. explain why a
  write was refused) and go on in a fresh scope, or let it propagate;
- an interruption (``KeyboardInterrupt``, asyncio cancellation) raised while a step runs is
  thrown into the operation too, so it can undo what it left in the database (``mail.wait``
  withdraws its registration) before the interruption propagates;
- no psycopg exception leaves a driver: everything is translated by ``errors.translate``;
- a call's wake-ups go after its commit: on a pooled connection the server keeps them and says
  so (``WAKES_NOTICE``); in autocommit the driver sends them right after the call
  (``send_wakes``, a round trip of its own once the call's result, and so its commit, is
  known), in a transaction its face
  sends them at the end (migration 0032: PostgreSQL serialises the commits of transactions
  that NOTIFY);
- both drivers execute the same SQL text (aiosql's parse of ``queries/*.sql``) with the same
  row handling, so the faces return equal results for equal calls; each connection's cursors
  are reused from call to call (``_cursors``), except after a result of many rows.
"""

from __future__ import annotations

import functools
import inspect
import logging
import warnings
import weakref
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from types import CodeType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Concatenate,
    Generic,
    Literal,
    ParamSpec,
    TypeVar,
    overload,
)

import psycopg
from psycopg import pq
from psycopg.rows import tuple_row

from .errors import IkigaiStoreError, translate
from .models import Message
from .sql import queries

if TYPE_CHECKING:
    from .models import Queued
    from .outbox import Outbox

__all__ = [
    "Area",
    "AsyncFace",
    "Blocking",
    "Call",
    "Collect",
    "Expect",
    "Listen",
    "Liveness",
    "Op",
    "Run",
    "Sleep",
    "SyncFace",
    "arun",
    "atomic",
    "copy_in",
    "copy_out",
    "is_atomic",
    "many",
    "message_rows",
    "model_row",
    "one",
    "operation",
    "queued",
    "run",
    "statement",
    "validate",
    "value",
]

T = TypeVar("T")
P = ParamSpec("P")

Shape = Literal["one", "many", "messages", "model", "value", "statement", "copy_out", "copy_in"]


@dataclass(frozen=True, slots=True)
class Call:
    """Run the query called ``name`` with ``params``. ``shape`` is what the operation gets
    back: ``one`` a dict row or None, ``many`` a list of dict rows, ``messages`` a list of
    ``Message`` (None when the query returned no row at all), ``model`` one row read into the
    dataclass ``stream`` (its fields, in order, are the query's first columns) or None,
    ``value`` the first column of the one row or None, ``statement`` the row count;
    ``copy_out`` (a ``COPY ... TO STDOUT``) hands each block of its output to ``stream`` (a
    callable) and ``copy_in`` (``COPY ... FROM STDIN``) writes every block ``stream`` (an
    iterable of bytes) yields, both the row count."""

    name: str
    params: Mapping[str, Any]
    shape: Shape
    stream: Any = None


@dataclass(frozen=True, slots=True)
class Listen:
    """Be woken by notifications naming ``key`` = (channel, id) (see ``notify``) until the
    operation ends. Yield it *before* looking for what you wait for: no wake-up is lost."""

    key: tuple[str, int]


@dataclass(frozen=True, slots=True)
class Sleep:
    """Sleep up to ``seconds``, or until a ``Listen`` key is notified (while the listener
    cannot connect, at most ``notify.RETRY`` seconds: look again rather than sleep blind)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Liveness:
    """Receive the key of the advisory lock the face's listener connection holds (see
    ``notify``), which a ``mail_waiters`` registration names; None inside
    ``store.transaction()`` (nothing is handed over there) or while the listener is not
    connected."""


@dataclass(frozen=True, slots=True)
class Expect:
    """Have the face's listener give this run the mail a send hands to ``mail_waiters``
    registration ``waiter_id`` (``Collect``); yield it before registering."""

    waiter_id: int


@dataclass(frozen=True, slots=True)
class Collect:
    """Receive the ``notify.Handoff`` the listener gave registration ``waiter_id`` (then the
    mail is this run's: the listener deletes the registration), or None; with ``stop``, the
    listener gives it nothing from now on either (yield that before withdrawing it)."""

    waiter_id: int
    stop: bool = False


@dataclass(frozen=True, slots=True)
class Blocking:
    """Call ``fn(*args)``, a blocking local function (no database), and receive its result;
    the asyncio face runs it in a worker thread."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Run:
    """Run the operation ``op`` as its face would (its own scopes and atomicity) and receive
    its result; its error is thrown in at the ``yield``."""

    op: Generator[Any, Any, Any]


Step = Call | Listen | Sleep | Liveness | Blocking | Run

#: An operation returning T: yields steps, receives their results.
Op = Generator[Any, Any, T]


def one(name: str, /, **params: Any) -> Call:
    """A call whose result is one dict row, or None."""
    return Call(name, params, "one")


def many(name: str, /, **params: Any) -> Call:
    """A call whose result is a list of dict rows."""
    return Call(name, params, "many")


def message_rows(name: str, /, **params: Any) -> Call:
    """A call selecting exactly ``Message``'s columns; its result is a list of ``Message``
    (all-NULL rows skipped), or None when the query returned no row at all."""
    return Call(name, params, "messages")


def model_row(name: str, model: type[Any], /, **params: Any) -> Call:
    """A call whose result is its one row read into ``model`` (a dataclass whose fields, in
    order, are the query's first columns: checked on the query's first run), or None. The row
    is a binary tuple, never a dict: the lease path's hot calls (issue 38)."""
    return Call(name, params, "model", model)


def value(name: str, /, **params: Any) -> Call:
    """A call whose result is the first column of its one row, or None when no row."""
    return Call(name, params, "value")


def statement(name: str, /, **params: Any) -> Call:
    """A call run for its effect; its result is the number of rows affected."""
    return Call(name, params, "statement")


def copy_out(name: str, sink: Callable[[memoryview], object], /, **params: Any) -> Call:
    """A ``COPY ... TO STDOUT`` call: ``sink`` gets each block of its output as it arrives
    (a memoryview valid during the call; constant memory); its result is the number of rows
    copied."""
    return Call(name, params, "copy_out", sink)


def copy_in(name: str, source: Iterable[bytes], /, **params: Any) -> Call:
    """A ``COPY ... FROM STDIN`` call fed the blocks ``source`` yields (read as they are
    sent); its result is the number of rows copied."""
    return Call(name, params, "copy_in", source)


_ATOMIC: dict[int, CodeType] = {}

F = TypeVar("F", bound=Callable[..., Any])


def validate(op: Op[Any]) -> None:
    """Run only ``op``'s validation (the code before its first step), then discard it: raises
    what the operation would raise for its arguments, and touches no database."""
    try:
        next(op)
    except StopIteration:
        pass
    finally:
        op.close()


def atomic(fn: F) -> F:
    """Mark an operation whose calls must run in one transaction (a savepoint inside
    ``store.transaction()``); others run in autocommit, one statement at a time."""
    _ATOMIC[id(fn.__code__)] = fn.__code__  # by id: a code object hashes its bytecode
    return fn


def is_atomic(op: Op[Any]) -> bool:
    """True when ``op`` came from an ``@atomic`` operation."""
    code = getattr(op, "gi_code", None)
    return _ATOMIC.get(id(code)) is code and code is not None


# ---------------------------------------------------------------- binding operations to faces


class SyncFace:
    """A face whose bound operations return their results (``Store``)."""

    def _run(self, op: Op[T]) -> T:
        raise NotImplementedError


class AsyncFace:
    """A face whose bound operations are coroutine functions (``AsyncStore``)."""

    async def _run(self, op: Op[T]) -> T:
        raise NotImplementedError


FaceT = TypeVar("FaceT", SyncFace, AsyncFace)


class Area(Generic[FaceT]):
    """A namespace of operations on one face (``store.mail``, ``store.topics``, …); the
    store's own top-level operations are areas too. Its class attributes are ``operation``s."""

    _face: FaceT
    #: Read through the class, its operations are coroutine functions (``AsyncStore.mail``
    #: is a subclass saying so: see ``api.Operations``); through an instance, its face decides.
    _async_face: ClassVar[bool] = False

    def __init__(self, face: FaceT) -> None:
        self._face = face


def _result_annotation(annotation: Any) -> Any:
    """``T`` for an operation annotated ``Op[T]`` (a string under postponed evaluation)."""
    if isinstance(annotation, str) and annotation.startswith("Op[") and annotation.endswith("]"):
        return annotation[3:-1]
    return annotation


class operation(Generic[P, T]):
    """Bind an operation (a generator function) to every face as a method of the same name,
    signature and docstring: ``Callable[P, T]`` on a ``SyncFace``, ``Callable[P, Awaitable[T]]``
    (a coroutine function) on an ``AsyncFace``. ``renamed`` maps deprecated keyword names to
    their new names: still accepted, with a ``DeprecationWarning``."""

    def __init__(self, fn: Callable[P, Op[T]], *, renamed: Mapping[str, str] | None = None) -> None:
        self.fn = fn
        self.renamed = dict(renamed or {})
        self.name = fn.__name__
        self.__doc__ = fn.__doc__
        #: A deprecated alias of another operation (see ``deprecated``).
        self.deprecated = False
        self._signature: inspect.Signature | None = None
        self._unbound: dict[type, Callable[..., Any]] = {}

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def signature(self) -> inspect.Signature:
        """The public signature: the operation's, returning ``T`` instead of ``Op[T]``."""
        if self._signature is None:
            sig = inspect.signature(self.fn)
            self._signature = sig.replace(
                return_annotation=_result_annotation(sig.return_annotation)
            )
        return self._signature

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[..., Any]: ...

    @overload
    def __get__(self, obj: Area[SyncFace], owner: type | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, obj: Area[AsyncFace], owner: type | None = None
    ) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self._function(owner)
        bound = self._bind(obj._face)
        obj.__dict__[self.name] = bound  # bound once per namespace: later lookups are plain
        return bound

    def _function(self, owner: type | None) -> Callable[..., Any]:
        """The operation read through the class ``owner``: a plain function of ``self`` and
        the operation's arguments (a coroutine function when ``owner`` is an asyncio face or
        its namespace) calling the instance's bound method; made once per class."""
        owner = owner or Area
        made = self._unbound.get(owner)
        if made is not None:
            return made
        name = self.name
        if issubclass(owner, AsyncFace) or getattr(owner, "_async_face", False):

            async def method_async(self: Any, /, *args: Any, **kwargs: Any) -> Any:
                return await getattr(self, name)(*args, **kwargs)

            function: Callable[..., Any] = method_async
        else:

            def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
                return getattr(self, name)(*args, **kwargs)

            function = method
        signature = self.signature()
        me = _self_parameter(signature)
        function.__name__ = name
        function.__qualname__ = f"{owner.__qualname__}.{name}"
        function.__doc__ = self.fn.__doc__
        function.__module__ = owner.__module__
        function.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[me, *signature.parameters.values()]
        )
        self._unbound[owner] = function
        return function

    def _bind(self, face: Any) -> Callable[..., Any]:
        fn, run, renamed = self.fn, face._run, self.renamed
        if renamed:
            fn = functools.partial(_renaming, fn, renamed, self.name)
        if isinstance(face, AsyncFace):

            async def bound_async(*args: Any, **kwargs: Any) -> Any:
                return await run(fn(*args, **kwargs))

            bound: Callable[..., Any] = bound_async
        else:

            def bound_sync(*args: Any, **kwargs: Any) -> Any:
                return run(fn(*args, **kwargs))

            bound = bound_sync
        bound.__name__ = self.name
        bound.__qualname__ = f"{type(face).__name__}.{self.name}"
        bound.__doc__ = self.fn.__doc__
        bound.__module__ = self.fn.__module__
        bound.__signature__ = self.signature()  # type: ignore[attr-defined]
        bound.__wrapped__ = self.fn  # type: ignore[attr-defined]
        return bound


def _self_parameter(signature: inspect.Signature) -> inspect.Parameter:
    """``self`` for a method of ``signature``'s parameters: positional-only when they start
    positional-only (``send_or_queue(outbox, /, ...)``), else as any method's."""
    first = next(iter(signature.parameters.values()), None)
    positional = first is not None and first.kind is inspect.Parameter.POSITIONAL_ONLY
    kind = (
        inspect.Parameter.POSITIONAL_ONLY if positional else inspect.Parameter.POSITIONAL_OR_KEYWORD
    )
    return inspect.Parameter("self", kind)


def _renaming(
    fn: Callable[..., Op[Any]], renamed: Mapping[str, str], name: str, *args: Any, **kwargs: Any
) -> Op[Any]:
    for old, new in renamed.items():
        if old in kwargs:
            warnings.warn(
                f"{name}({old}=...) is deprecated; use {new}=...",
                DeprecationWarning,
                stacklevel=4,
            )
            if new in kwargs:
                raise TypeError(f"{name}() got both {old}= and {new}=")
            kwargs[new] = kwargs.pop(old)
    return fn(*args, **kwargs)


def deprecated(new: operation[P, T], old_name: str, *, internal: bool = False) -> operation[P, T]:
    """``new`` under its old name ``old_name``: the same operation, warning
    ``DeprecationWarning`` (naming the new one) whenever it is called. ``internal``: a name
    that should not have been public, removed without a replacement."""
    fn = new.fn

    def warn_then(*args: P.args, **kwargs: P.kwargs) -> Op[T]:
        if internal:
            message = f"{old_name} is internal and will be removed in the next minor release"
        else:  # new.name is known once its class is made (__set_name__)
            message = f"{old_name} is deprecated; use {new.name}"
        warnings.warn(message, DeprecationWarning, stacklevel=3)
        return fn(*args, **kwargs)

    functools.update_wrapper(warn_then, fn)
    warn_then.__doc__ = (
        f"Internal (removed in the next minor release). {fn.__doc__ or ''}"
        if internal
        else f"Deprecated alias (removed in the next minor release). {fn.__doc__ or ''}"
    )
    bound = operation(warn_then, renamed=new.renamed)
    bound._signature = new.signature()
    bound.deprecated = True
    return bound


def queued(kind: str, fn: Callable[P, Op[T]]) -> Callable[Concatenate[Outbox, P], Op[T | Queued]]:
    """The operation ``fn`` (``send``), or, when the database cannot be reached
    (``ConnectError``, ``ConnectionLost``), queued in an ``Outbox`` under ``kind``: the
    operation ``fn_or_queue(outbox, *fn's arguments)``, with ``fn``'s signature after
    ``outbox`` (see ``Outbox.submit``)."""
    signature = inspect.signature(fn)

    def or_queue(outbox: Outbox, /, *args: P.args, **kwargs: P.kwargs) -> Op[T | Queued]:
        payload = signature.bind(*args, **kwargs).arguments
        key = payload.pop("idempotency_key", None)
        result: T | Queued = yield from outbox.submitting(kind, payload, key)
        return result

    name = f"{fn.__name__}_or_queue"
    or_queue.__name__ = or_queue.__qualname__ = name
    or_queue.__module__ = fn.__module__
    outbox = inspect.Parameter("outbox", inspect.Parameter.POSITIONAL_ONLY, annotation="Outbox")
    or_queue.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[outbox, *signature.parameters.values()],
        return_annotation=f"Op[{_result_annotation(signature.return_annotation)} | Queued]",
    )
    or_queue.__doc__ = (
        f"``{fn.__name__}``, or, when the database cannot be reached (``ConnectError``, "
        "``ConnectionLost``), queue it in ``outbox`` and return ``Queued``; a later "
        "``outbox.drain`` delivers it. See ``Outbox.submit``: operations already waiting in "
        f"the outbox go first, and the {fn.__name__} always carries an idempotency key (a new "
        "UUIDv7 unless given), so it is never delivered twice. Arguments are checked as by "
        f"``{fn.__name__}`` (``InvalidArgument``, nothing queued); ``OutboxFull`` when the "
        "outbox is full."
    )
    return or_queue


# ---------------------------------------------------------------- executing calls


_MESSAGE_COLUMNS = tuple(Message.__dataclass_fields__)


def _sql(call: Call) -> str:
    sql: str = getattr(queries, call.name).sql
    return sql


#: Queries whose result columns were checked to be Message's (once per query: building a
#: cursor's description costs more than the rest of a one-row append).
_CHECKED: set[str] = set()


def _messages(query: str, cursor: Any, rows: list[Any]) -> list[Message] | None:
    if query not in _CHECKED:
        description = cursor.description
        if description is None or tuple(c.name for c in description) != _MESSAGE_COLUMNS:
            raise TypeError(f"{query} does not select the Message columns in order")
        _CHECKED.add(query)
    if not rows:
        return None
    return [Message(*row) for row in rows if row[0] is not None]


#: Fields of each model read by ``model_row`` calls, once its query's columns were checked.
_FIELDS: dict[tuple[str, type[Any]], int] = {}


def _model(call: Call, cursor: Any, row: Any) -> Any:
    model: type[Any] = call.stream
    n = _FIELDS.get((call.name, model))
    if n is None:
        names = tuple(model.__dataclass_fields__)
        description = cursor.description
        if description is None or tuple(c.name for c in description[: len(names)]) != names:
            raise TypeError(f"{call.name} does not select {model.__name__}'s columns in order")
        n = _FIELDS[(call.name, model)] = len(names)
    if row is None:
        return None
    return model(*row[:n])


#: A result of more rows than this is not kept by a reused cursor (its memory is freed).
_KEEP_ROWS = 64


def _cursors(conn: Any) -> tuple[Any, Any]:
    """``conn``'s (tuple-row binary cursor, default cursor), made on first use and reused:
    creating a cursor copies the connection's adapters map, which cost more of an append's
    client time than the rest of the library (issue 22). Kept as an attribute of the
    connection (psycopg's connections have a ``__dict__``): they go with it."""
    pair: tuple[Any, Any] | None = getattr(conn, "_ikigai_cursors", None)
    if pair is None or pair[0].closed or pair[1].closed:
        pair = (conn.cursor(row_factory=tuple_row, binary=True), conn.cursor())
        conn._ikigai_cursors = pair
    return pair


def _forget(conn: Any, rows: list[Any]) -> tuple[Any, Any] | None:
    """``conn``'s reused cursors, taken from it, when the result they hold is big (the caller
    closes them, which frees it); None otherwise."""
    if len(rows) > _KEEP_ROWS:
        pair: tuple[Any, Any] | None = conn.__dict__.pop("_ikigai_cursors", None)
        return pair
    return None


def _let_go(conn: Any, rows: list[Any]) -> None:
    """Close ``conn``'s reused cursors when the result they hold is big."""
    if (pair := _forget(conn, rows)) is not None:
        pair[0].close()
        pair[1].close()


# ---------------------------------------------------------------- wake-ups after the commit

#: The NOTICE migration 0032's ikigai_notify raises when it keeps a wake-up for after the
#: commit (on a connection that ran ``wake_after_commit``: every pooled one).
WAKES_NOTICE = "ikigai: wake-ups kept until after the commit"
_SEND_WAKES: str = queries.send_wakes.sql
#: The attribute a connection carries while it may hold wake-ups not sent yet.
_WAKE_MARK = "_ikigai_wakes"
_IDLE = pq.TransactionStatus.IDLE

log = logging.getLogger("ikigai_store.ops")


def watch_wakes(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Have ``conn`` marked whenever the server says it kept wake-ups (``WAKES_NOTICE``); run
    once per pooled connection (``pool``), with ``wake_after_commit``."""
    ref = weakref.ref(conn)

    def noted(diagnostic: psycopg.errors.Diagnostic) -> None:
        if diagnostic.message_primary == WAKES_NOTICE and (c := ref()) is not None:
            c.__dict__[_WAKE_MARK] = True

    conn.add_notice_handler(noted)


def has_wakes(conn: Any) -> bool:
    """Whether ``conn`` may hold wake-ups not sent yet; forgets it (the caller sends them, or
    their transaction rolled back, which forgot them)."""
    return conn.__dict__.pop(_WAKE_MARK, None) is not None


def send_wakes(conn: psycopg.Connection[Any]) -> None:
    """Send the wake-ups ``conn`` kept (``queries/mail.sql: send_wakes``): inside
    ``store.transaction()`` before its COMMIT."""
    _cursors(conn)[1].execute(_SEND_WAKES)


async def asend_wakes(conn: psycopg.AsyncConnection[Any]) -> None:
    """``send_wakes`` for an asyncio connection."""
    await _cursors(conn)[1].execute(_SEND_WAKES)


def send_committed_wakes(conn: psycopg.Connection[Any]) -> None:
    """``send_wakes`` after a commit: a failure is logged, not raised (the writes are
    committed; waiters find them when they look again)."""
    try:
        send_wakes(conn)
    except psycopg.Error as exc:
        log.warning("writes committed but their wake-ups were not sent: %s", exc)


async def asend_committed_wakes(conn: psycopg.AsyncConnection[Any]) -> None:
    """``send_committed_wakes`` for an asyncio connection."""
    try:
        await asend_wakes(conn)
    except psycopg.Error as exc:
        log.warning("writes committed but their wake-ups were not sent: %s", exc)


def _target(conn: Any, shape: Shape) -> Any:
    """The reused cursor a call of ``shape`` runs on (see ``execute``)."""
    pair = _cursors(conn)
    return pair[0] if shape in ("messages", "model", "value") else pair[1]


def _shape(call: Call, conn: Any, cur: Any) -> Any:
    """The result of ``call`` from the cursor it ran on (``_target``): its rows as the call's
    shape says."""
    shape = call.shape
    if shape == "messages":
        messages = _messages(call.name, cur, rows := cur.fetchall())
        _let_go(conn, rows)
        return messages
    if shape == "model" or shape == "value":
        row = cur.fetchone()
        if shape == "model":
            return _model(call, cur, row)
        return None if row is None else row[0]
    if shape == "one":
        return cur.fetchone()
    if shape == "many":
        rows = cur.fetchall()
        _let_go(conn, rows)
        return rows
    return cur.rowcount


async def _ashape(call: Call, conn: Any, cur: Any) -> Any:
    """``_shape`` for an asyncio cursor."""
    shape = call.shape
    if shape == "messages":
        messages = _messages(call.name, cur, rows := await cur.fetchall())
        await _alet_go(conn, rows)
        return messages
    if shape == "model" or shape == "value":
        row = await cur.fetchone()
        if shape == "model":
            return _model(call, cur, row)
        return None if row is None else row[0]
    if shape == "one":
        return await cur.fetchone()
    if shape == "many":
        rows = await cur.fetchall()
        await _alet_go(conn, rows)
        return rows
    return cur.rowcount


def execute(conn: psycopg.Connection[Any], call: Call) -> Any:
    """Run one call on a (dict-row) connection and shape its result. Event reads (``messages``)
    and ``model``/``value`` calls run on the binary tuple-row cursor: binary results skip
    timestamp parsing and tuple rows skip a dict per row (replay's and the lease path's hot
    calls, issue 38). In autocommit, the wake-ups a call kept (``WAKES_NOTICE``) are sent
    right after its commit, in a round trip of their own: only the call's own reply, which
    comes after its commit, proves that it committed (a pipeline's write returns its rows
    before the Sync that commits it); in a transaction the connection stays marked and its
    face sends them at the end (``has_wakes``)."""
    idle = conn.pgconn.transaction_status == _IDLE  # autocommit: the call is a transaction
    sql, params = _sql(call), call.params
    shape = call.shape
    if shape == "copy_out" or shape == "copy_in":
        with conn.cursor() as ccur, ccur.copy(sql, params) as copy:
            if shape == "copy_out":
                for block in copy:
                    call.stream(block)
            else:
                for block in call.stream:
                    copy.write(block)
        result: Any = ccur.rowcount
    else:
        cur = _target(conn, shape)
        cur.execute(sql, params)
        result = _shape(call, conn, cur)
    if idle and _WAKE_MARK in conn.__dict__ and has_wakes(conn):
        send_committed_wakes(conn)  # it committed and kept wake-ups (WAKES_NOTICE)
    return result


async def aexecute(conn: psycopg.AsyncConnection[Any], call: Call) -> Any:
    """``execute`` for an asyncio connection: the same SQL, the same shaping."""
    idle = conn.pgconn.transaction_status == _IDLE
    sql, params = _sql(call), call.params
    shape = call.shape
    if shape == "copy_out" or shape == "copy_in":
        async with conn.cursor() as ccur, ccur.copy(sql, params) as copy:
            if shape == "copy_out":
                async for block in copy:
                    call.stream(block)
            else:
                for block in call.stream:
                    await copy.write(block)
        result: Any = ccur.rowcount
    else:
        cur = _target(conn, shape)
        await cur.execute(sql, params)
        result = await _ashape(call, conn, cur)
    if idle and _WAKE_MARK in conn.__dict__ and has_wakes(conn):
        await asend_committed_wakes(conn)
    return result


async def _alet_go(conn: Any, rows: list[Any]) -> None:
    """``_let_go`` for an asyncio connection."""
    if (pair := _forget(conn, rows)) is not None:
        await pair[0].close()
        await pair[1].close()


# ---------------------------------------------------------------- the two drivers


class _Failed(Exception):
    """Internal: a call failed; carries its translated error out of the scope (rolling it back)."""

    def __init__(self, error: IkigaiStoreError) -> None:
        super().__init__(str(error))
        self.error = error


class _Done(Exception):
    """Internal: the operation returned inside a scope (the scope is left normally)."""

    def __init__(self, value: Any) -> None:
        self.value = value


Translate = Callable[[psycopg.Error, Any], IkigaiStoreError]


class Steps:
    """What a face does for the steps other than ``Call``, for one run of one operation
    (created on the operation's first such step; ``close`` runs when the operation ends)."""

    def step(self, step: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Undo what the steps left behind (unregister listeners)."""


class AsyncSteps:
    """``Steps`` for the asyncio face."""

    async def step(self, step: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Undo what the steps left behind (unregister listeners)."""


def _advance(op: Op[Any], value: Any, error: BaseException | None) -> Any:
    """Send ``value`` (or throw ``error``) into ``op``: its next step, or ``_Done``."""
    try:
        return op.send(value) if error is None else op.throw(error)
    except StopIteration as stop:
        raise _Done(stop.value) from None


def run(
    scope: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
    op: Op[T],
    on_error: Translate = translate,
    steps: Callable[[], Steps] | None = None,
) -> T:
    """Drive ``op`` to its result: each stretch of calls runs inside one ``scope()``; other
    steps go to ``steps()`` (made on first use)."""
    try:
        step = next(op)  # validation happens here, before any connection is taken
    except StopIteration as stop:
        result: T = stop.value
        return result
    host: Steps | None = None
    try:
        while True:
            if type(step) is not Call:
                if host is None:
                    if steps is None:
                        raise TypeError(f"this face cannot run {type(step).__name__} steps")
                    host = steps()
                try:
                    value = host.step(step)
                except BaseException as exc:  # thrown in: e.g. the outbox settles what failed
                    step = _advance(op, None, exc)
                    continue
                step = _advance(op, value, None)
                continue
            error: IkigaiStoreError | None = None
            interrupted: BaseException | None = None
            finished = False
            try:
                with scope() as conn:
                    while True:
                        try:
                            value = execute(conn, step)
                        except psycopg.Error as exc:
                            raise _Failed(on_error(exc, conn)) from exc
                        try:
                            step = op.send(value)
                        except StopIteration as stop:
                            result, finished = stop.value, True
                            break
                        if type(step) is not Call:
                            break
            except _Failed as failed:
                error = failed.error
                error.__cause__ = failed.__cause__
            except psycopg.Error as exc:  # entering or leaving the scope (BEGIN, COMMIT, ...)
                raise on_error(exc, None) from exc
            except BaseException as exc:
                if inspect.getgeneratorstate(op) != inspect.GEN_SUSPENDED:
                    raise  # the operation itself raised
                interrupted = exc  # e.g. KeyboardInterrupt during a call: the operation may undo
            if interrupted is not None:
                step = _advance(op, None, interrupted)
                continue
            if error is not None:
                step = _advance(op, None, error)  # the operation may handle it and go on
                continue
            if finished:
                return result
    except _Done as done:
        value = done.value
        return value  # type: ignore[no-any-return]
    finally:
        if host is not None:
            host.close()


async def arun(
    scope: Callable[[], AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]],
    op: Op[T],
    on_error: Translate = translate,
    steps: Callable[[], AsyncSteps] | None = None,
) -> T:
    """``run`` for asyncio: the same steps, awaiting the connection and the face's steps."""
    try:
        step = next(op)
    except StopIteration as stop:
        result: T = stop.value
        return result
    host: AsyncSteps | None = None
    try:
        while True:
            if type(step) is not Call:
                if host is None:
                    if steps is None:
                        raise TypeError(f"this face cannot run {type(step).__name__} steps")
                    host = steps()
                try:
                    value = await host.step(step)
                except BaseException as exc:  # thrown in: e.g. the outbox settles what failed
                    step = _advance(op, None, exc)
                    continue
                step = _advance(op, value, None)
                continue
            error: IkigaiStoreError | None = None
            interrupted: BaseException | None = None
            finished = False
            try:
                async with scope() as conn:
                    while True:
                        try:
                            value = await aexecute(conn, step)
                        except psycopg.Error as exc:
                            raise _Failed(on_error(exc, conn)) from exc
                        try:
                            step = op.send(value)
                        except StopIteration as stop:
                            result, finished = stop.value, True
                            break
                        if type(step) is not Call:
                            break
            except _Failed as failed:
                error = failed.error
                error.__cause__ = failed.__cause__
            except psycopg.Error as exc:
                raise on_error(exc, None) from exc
            except BaseException as exc:
                if inspect.getgeneratorstate(op) != inspect.GEN_SUSPENDED:
                    raise
                interrupted = exc  # e.g. cancelled during a call: the operation may undo
            if interrupted is not None:
                step = _advance(op, None, interrupted)
                continue
            if error is not None:
                step = _advance(op, None, error)
                continue
            if finished:
                return result
    except _Done as done:
        value = done.value
        return value  # type: ignore[no-any-return]
    finally:
        if host is not None:
            host.close()
