"""Operations as generators, and the two drivers that run them (sync and asyncio).

Owns the sans-I/O core shared by ``Store`` and ``AsyncStore``, the way psycopg shares its
protocol code: an *operation* is a generator that validates its arguments, then yields ``Call``
objects (a named query from ``queries/`` and its parameters) and receives their results, and
finally returns the public result. It performs no I/O itself, so one operation serves both faces
and they cannot drift. ``run`` (threads) and ``arun`` (asyncio) execute the calls.

Invariants:
- validation runs before any connection is taken: the code before an operation's first ``yield``
  runs first, so bad input raises ``InvalidArgument`` even while the database is down;
- every call of an operation runs on one connection in one *scope* (the face's choice: plain
  autocommit, a transaction for multi-statement writes, or a savepoint inside
  ``store.transaction()``); a failed call ends its scope (rolled back) and its translated error
  is thrown into the operation, which may handle it (e.g. explain why a write was refused) and
  go on with further calls in a fresh scope, or let it propagate;
- no psycopg exception leaves a driver: everything is translated by ``errors.translate``;
- both drivers execute the same SQL text (aiosql's parse of ``queries/*.sql``) with the same
  row handling, so the two faces return equal results for equal calls.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import psycopg
from psycopg.rows import tuple_row

from .errors import IkigaiStoreError, translate
from .models import Message
from .sql import queries

__all__ = [
    "Call",
    "Op",
    "arun",
    "atomic",
    "events",
    "is_atomic",
    "many",
    "one",
    "run",
    "statement",
    "validate",
]

T = TypeVar("T")

Shape = Literal["one", "many", "events", "statement"]


@dataclass(frozen=True, slots=True)
class Call:
    """Run the query called ``name`` with ``params``. ``shape`` is what the operation gets
    back: ``one`` a dict row or None, ``many`` a list of dict rows, ``events`` a list of
    ``Message`` (None when the query returned no row at all), ``statement`` the row count."""

    name: str
    params: Mapping[str, Any]
    shape: Shape


#: An operation returning T: yields Calls, receives their results.
Op = Generator[Call, Any, T]


def one(name: str, /, **params: Any) -> Call:
    """A call whose result is one dict row, or None."""
    return Call(name, params, "one")


def many(name: str, /, **params: Any) -> Call:
    """A call whose result is a list of dict rows."""
    return Call(name, params, "many")


def events(name: str, /, **params: Any) -> Call:
    """A call selecting exactly ``Message``'s columns; its result is a list of ``Message``
    (all-NULL rows skipped), or None when the query returned no row at all."""
    return Call(name, params, "events")


def statement(name: str, /, **params: Any) -> Call:
    """A call run for its effect; its result is the number of rows affected."""
    return Call(name, params, "statement")


_ATOMIC: set[Any] = set()

F = TypeVar("F", bound=Callable[..., Any])


def validate(op: Op[Any]) -> None:
    """Run only ``op``'s validation (the code before its first call), then discard it: raises
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
    _ATOMIC.add(fn.__code__)
    return fn


def is_atomic(op: Op[Any]) -> bool:
    """True when ``op`` came from an ``@atomic`` operation."""
    return getattr(op, "gi_code", None) in _ATOMIC


_MESSAGE_COLUMNS = tuple(Message.__dataclass_fields__)


def _sql(call: Call) -> str:
    sql: str = getattr(queries, call.name).sql
    return sql


def _messages(query: str, description: Any, rows: list[Any]) -> list[Message] | None:
    if description is None or tuple(c.name for c in description) != _MESSAGE_COLUMNS:
        raise TypeError(f"{query} does not select the Message columns in order")
    if not rows:
        return None
    return [Message(*row) for row in rows if row[0] is not None]


def execute(conn: psycopg.Connection[Any], call: Call) -> Any:
    """Run one call on a (dict-row) connection and shape its result."""
    sql, params = _sql(call), dict(call.params)
    if call.shape == "events":
        # Event reads are replay's hot path: binary results skip timestamp parsing and tuple
        # rows skip a dict per row.
        with conn.cursor(row_factory=tuple_row, binary=True) as tcur:
            tcur.execute(sql, params)
            return _messages(call.name, tcur.description, tcur.fetchall())
    with conn.cursor() as cur:
        cur.execute(sql, params)
        if call.shape == "one":
            return cur.fetchone()
        if call.shape == "many":
            return cur.fetchall()
        return cur.rowcount


async def aexecute(conn: psycopg.AsyncConnection[Any], call: Call) -> Any:
    """``execute`` for an asyncio connection: the same SQL, the same shaping."""
    sql, params = _sql(call), dict(call.params)
    if call.shape == "events":
        async with conn.cursor(row_factory=tuple_row, binary=True) as tcur:
            await tcur.execute(sql, params)
            return _messages(call.name, tcur.description, await tcur.fetchall())
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        if call.shape == "one":
            return await cur.fetchone()
        if call.shape == "many":
            return await cur.fetchall()
        return cur.rowcount


class _Failed(Exception):
    """Internal: a call failed; carries its translated error out of the scope (rolling it back)."""

    def __init__(self, error: IkigaiStoreError) -> None:
        super().__init__(str(error))
        self.error = error


Translate = Callable[[psycopg.Error, Any], IkigaiStoreError]


def run(
    scope: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
    op: Op[T],
    on_error: Translate = translate,
) -> T:
    """Drive ``op`` to its result: each stretch of calls runs inside one ``scope()``."""
    try:
        call = next(op)  # validation happens here, before any connection is taken
    except StopIteration as stop:
        result: T = stop.value
        return result
    while True:
        try:
            try:
                with scope() as conn:
                    while True:
                        try:
                            value = execute(conn, call)
                        except psycopg.Error as exc:
                            raise _Failed(on_error(exc, conn)) from exc
                        try:
                            call = op.send(value)
                        except StopIteration as stop:
                            result = stop.value
                            break
            except psycopg.Error as exc:  # entering or leaving the scope (BEGIN, COMMIT, ...)
                raise on_error(exc, None) from exc
            return result
        except _Failed as failed:
            error = failed.error
            error.__cause__ = failed.__cause__
            try:
                call = op.throw(error)  # the operation may handle it and go on
            except StopIteration as stop:
                result = stop.value
                return result


async def arun(
    scope: Callable[[], AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]],
    op: Op[T],
    on_error: Translate = translate,
) -> T:
    """``run`` for asyncio: the same steps, awaiting the connection."""
    try:
        call = next(op)
    except StopIteration as stop:
        result: T = stop.value
        return result
    while True:
        try:
            try:
                async with scope() as conn:
                    while True:
                        try:
                            value = await aexecute(conn, call)
                        except psycopg.Error as exc:
                            raise _Failed(on_error(exc, conn)) from exc
                        try:
                            call = op.send(value)
                        except StopIteration as stop:
                            result = stop.value
                            break
            except psycopg.Error as exc:
                raise on_error(exc, None) from exc
            return result
        except _Failed as failed:
            error = failed.error
            error.__cause__ = failed.__cause__
            try:
                call = op.throw(error)
            except StopIteration as stop:
                result = stop.value
                return result
