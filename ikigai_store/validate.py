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
    "MAX_CONTENT_BYTES",
    "MAX_DATA_BYTES",
    "MAX_ID",
    "MAX_JSON_DEPTH",
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
#: Deepest nesting of lists and objects ``data`` may have (``{"a": [1]}`` is 2 deep).
MAX_JSON_DEPTH = 256
#: Largest ``content`` an event may have, in UTF-8 bytes (64 MiB); only its first 100,000
#: characters are searchable.
MAX_CONTENT_BYTES = 64 * 2**20
#: Largest ``data`` an event may have, as UTF-8 JSON text (64 MiB).
MAX_DATA_BYTES = 64 * 2**20


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


def check_int(value: object, name: str, *, minimum: int = -MAX_ID - 1) -> None:
    """An integer (not a bool) in [minimum, MAX_ID]: it must fit PostgreSQL's bigint."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_ID:
        raise InvalidArgument(f"{name} must be an integer in [{minimum}, {MAX_ID}], got {value!r}")


def check_content(value: object, name: str = "content") -> None:
    """``check_text`` and at most ``MAX_CONTENT_BYTES`` of UTF-8."""
    check_text(value, name)
    if isinstance(value, str) and len(value) > MAX_CONTENT_BYTES // 4:
        size = len(value.encode("utf-8"))
        if size > MAX_CONTENT_BYTES:
            raise InvalidArgument(
                f"{name} is {size} bytes; the most it may hold is {MAX_CONTENT_BYTES} "
                "(MAX_CONTENT_BYTES)"
            )


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


def check_json(data: Any, name: str = "data") -> None:
    """What JSON and jsonb can hold, checked without recursion (so any nesting is refused
    cleanly): object keys are strings, nesting is at most ``MAX_JSON_DEPTH``, no NUL in text."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidArgument(
                    f"{name} contains a NUL character, which PostgreSQL cannot store"
                )
            continue
        if isinstance(value, (dict, list, tuple)):
            if depth >= MAX_JSON_DEPTH:
                raise InvalidArgument(
                    f"{name} is nested deeper than {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH)"
                )
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InvalidArgument(
                            f"{name} has a {type(key).__name__} object key {key!r}: JSON object "
                            "keys are strings (convert it yourself, e.g. str(key))"
                        )
                    stack.append((key, depth + 1))
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)


def dump_json(data: Any, name: str = "data") -> str | None:
    """Serialise ``data`` once, rejecting what JSON or PostgreSQL's jsonb cannot hold."""
    if data is None:
        return None
    check_json(data, name)
    try:
        text = json.dumps(data, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")  # lone surrogates
    except RecursionError:
        raise InvalidArgument(f"{name} is nested too deeply for this call stack") from None
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidArgument(f"{name} is not JSON-serialisable: {exc}") from exc
    if len(text) > MAX_DATA_BYTES // 4 and len(text.encode("utf-8")) > MAX_DATA_BYTES:
        raise InvalidArgument(
            f"{name} is more than {MAX_DATA_BYTES} bytes of JSON (MAX_DATA_BYTES)"
        )
    return text
