"""Helpers for the identity and mail tests: the database clock, row counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

#: Where the tests' clock starts (``ikigai.now``; see migration 0007's ikigai_now()).
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


class Clock:
    """The database's clock inside a test's transaction: ``ikigai.now``, moved by hand."""

    def __init__(self, store: Any, start: datetime = EPOCH) -> None:
        self.store = store
        self.now = start
        self.set(start)

    def set(self, when: datetime) -> None:
        self.now = when
        with self.store._connection() as conn:
            conn.execute("SELECT set_config('ikigai.now', %s, true)", [when.isoformat()])

    def advance(self, **delta: float) -> datetime:
        self.set(self.now + timedelta(**delta))
        return self.now


def rows(store: Any, table: str) -> int:
    """How many rows ``table`` has, as the store's connection sees them."""
    with store._connection() as conn:
        return int(conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"])


def mail_rows(store: Any) -> tuple[int, int]:
    """(mail rows, recipient rows)."""
    return rows(store, "mail"), rows(store, "mail_recipients")
