"""Argument checks shared by every operation: what bad input is, said once.

Owns the checks that run before anything touches the database. Invariants: every check raises
``InvalidArgument`` (never another exception) naming the argument; ids and other integers fit
PostgreSQL's 64-bit ``bigint``; text is UTF-8-encodable and free of NUL (PostgreSQL stores
neither lone surrogates nor NUL); JSON ``data`` is serialised exactly once, here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import InvalidArgument

__all__ = [
    "MAX_ID",
    "check_id",
    "check_limit",
    "check_seconds",
    "check_text",
    "check_texts",
    "check_uuid",
    "dump_json",
]

#: Largest value of PostgreSQL's bigint (ids, limits).
MAX_ID = 2**63 - 1


def check_id(value: object, name: str) -> None:
    """A positive 64-bit integer (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
        raise InvalidArgument(f"{name} must be a positive integer, got {value!r}")


def check_uuid(value: object) -> None:
    """An agent uuid: 1-64 characters of text."""
    if not isinstance(value, str) or not 0 < len(value) <= 64 or "\x00" in value:
        raise InvalidArgument(f"agent uuid must be a non-empty string, got {value!r}")
    check_text(value, "agent uuid")


def check_limit(limit: object) -> None:
    """A positive 64-bit integer."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_ID:
        raise InvalidArgument(f"limit must be a positive integer, got {limit!r}")


def check_seconds(value: object, name: str) -> None:
    """A finite number of seconds in (0, 86400]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= 86400
    ):
        raise InvalidArgument(f"{name} must be a number of seconds in (0, 86400], got {value!r}")


def check_text(value: object, name: str) -> None:
    """None, or a string PostgreSQL can store (UTF-8, no NUL)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string or None, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgument(f"{name} contains a NUL character, which PostgreSQL cannot store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{name} is not valid Unicode text: {exc.reason}") from exc


def check_texts(**values: object) -> None:
    """``check_text`` for each keyword argument."""
    for name, value in values.items():
        check_text(value, name)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def dump_json(data: Any) -> str | None:
    """Serialise ``data`` once, rejecting what JSON or PostgreSQL's jsonb cannot hold."""
    if data is None:
        return None
    try:
        text = json.dumps(data, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")  # lone surrogates
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidArgument(f"data is not JSON-serialisable: {exc}") from exc
    # json escapes NUL as \u0000; only then is the (slower) exact walk needed.
    if "\\u0000" in text and _has_nul(data):
        raise InvalidArgument("data contains a NUL character, which PostgreSQL cannot store")
    return text
