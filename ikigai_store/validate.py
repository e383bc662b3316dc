"""Argument checks shared by every operation: what bad input is, said once.

Owns the checks that run before anything touches the database. Invariants: every check raises
``InvalidArgument`` (never another exception) naming the argument; ids and other integers fit
PostgreSQL's 64-bit ``bigint``; text is UTF-8-encodable and free of NUL (PostgreSQL stores
neither lone surrogates nor NUL); JSON ``data`` is serialised exactly once, here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from .errors import Conflict, InvalidArgument, NotFound
from .models import Identity, Mail
from .ops import Op, many, one

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


def check_int(
    value: object, name: str, *, minimum: int = -MAX_ID - 1, maximum: int = MAX_ID
) -> None:
    """An integer (not a bool) in [minimum, maximum] (by default: it must fit PostgreSQL's
    bigint)."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidArgument(f"{name} must be an integer in [{minimum}, {maximum}], got {value!r}")


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
    if value.isascii():  # O(1) in CPython: no lone surrogate, no need to encode a copy
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{name} is not valid Unicode text: {exc.reason}") from exc


def check_texts(**values: object) -> None:
    """``check_text`` for each keyword argument."""
    for name, value in values.items():
        check_text(value, name)


def _plainly_valid(data: Any) -> bool:
    """True when ``check_json`` certainly accepts ``data``: it is made of exactly dict (with
    str keys), list, str without NUL, int, float, bool and None, at most ``MAX_JSON_DEPTH``
    deep. One pass that pushes only containers (``check_json`` pushes every key and value);
    False on anything else (subclasses too), and ``check_json`` walks again to say what."""
    if type(data) is not dict and type(data) is not list:  # a scalar document
        kind = type(data)
        if kind is str:
            return "\x00" not in data
        return data is None or kind in _SCALARS
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth >= MAX_JSON_DEPTH:
            return False
        if type(value) is dict:
            for key in value:
                if type(key) is not str or "\x00" in key:
                    return False
            items: Any = value.values()
        else:  # a list: only dicts and lists are pushed
            items = value
        for item in items:
            kind = type(item)
            if kind is str:
                if "\x00" in item:
                    return False
            elif kind is dict or kind is list:
                stack.append((item, depth + 1))
            elif item is not None and kind not in _SCALARS:
                return False
    return True


_SCALARS = (int, float, bool)


def check_json(data: Any, name: str = "data") -> None:
    """What JSON and jsonb can hold, checked without recursion (so any nesting is refused
    cleanly): object keys are strings, nesting is at most ``MAX_JSON_DEPTH``, no NUL in text."""
    if _plainly_valid(data):  # the usual case, about twice as fast; same verdict
        return
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


#: What ``json.dumps(data, allow_nan=False, ensure_ascii=False)`` builds on every call (with
#: non-default options it constructs a new encoder each time), built once.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False)


def dump_json(data: Any, name: str = "data") -> str | None:
    """Serialise ``data`` once, rejecting what JSON or PostgreSQL's jsonb cannot hold."""
    if data is None:
        return None
    check_json(data, name)
    try:
        text = _ENCODER.encode(data)
        if not text.isascii():  # (O(1)) else no lone surrogate can be there
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


# ---------------------------------------------------------------- durations, times, keys, cursors


_NO_TIME = timedelta(0)


def check_duration(
    value: object,
    what: str,
    *,
    maximum: timedelta = timedelta(days=36500),
    zero: bool = True,
) -> timedelta:
    """A duration: a ``timedelta`` or a finite number of seconds (not a bool), from zero (or,
    with ``zero=False``, more than zero and at least a microsecond) to ``maximum``. Every
    duration of the API is read here, so each takes both forms and says the same."""
    if isinstance(value, timedelta):
        length = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        try:
            length = timedelta(seconds=value)
        except OverflowError:
            length = timedelta.max
    else:
        raise InvalidArgument(f"{what} must be a timedelta or a number of seconds, got {value!r}")
    if _NO_TIME <= length <= maximum and (zero or length != _NO_TIME):
        return length  # the common case: no message formatted
    limit, got = _seconds(maximum), _seconds(value) if isinstance(value, timedelta) else value
    if zero:
        raise InvalidArgument(f"{what} must be from 0 to {limit}, got {got}")
    raise InvalidArgument(f"{what} must be at least 1 microsecond and at most {limit}, got {got}")


def _seconds(length: timedelta) -> str:
    """``length`` in seconds, written out (no exponent), with whole days named."""
    seconds = length.total_seconds()
    text = f"{seconds:.6f}".rstrip("0").rstrip(".") + " seconds"
    days, rest = divmod(seconds, 86400)
    if days and not rest:
        text += f" ({days:.0f} day{'s' if days != 1 else ''})"
    return text


def check_seconds(value: object, name: str) -> None:
    """A finite number of seconds in (0, 86400] (a connection or lock timeout)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= 86400
    ):
        raise InvalidArgument(f"{name} must be a number of seconds in (0, 86400], got {value!r}")


def check_when(value: object, what: str) -> datetime | None:
    """None, or a timezone-aware datetime before the year 9999 (a naive one is ambiguous)."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidArgument(f"{what} must be a timezone-aware datetime, got {value!r}")
    try:
        if value.astimezone(UTC).year >= 9999:
            raise OverflowError
    except OverflowError:  # also a time in the year 1 whose UTC is before datetime.min
        raise InvalidArgument(
            f"{what} must be a time from the year 1 to before the year 9999 in UTC, got {value!r}"
        ) from None
    return value


#: Longest key (idempotency key, thread id, session key, list or task id), in characters.
MAX_KEY_CHARS = 200


def check_key(value: object, what: str) -> str:
    """A key: a string of 1-``MAX_KEY_CHARS`` characters PostgreSQL can store."""
    return check_str(value, what, max_chars=MAX_KEY_CHARS)


M = TypeVar("M")


def check_cursor(value: object, model: type[M], id_of: Any, what: str = "before") -> int | None:
    """Where the next page starts: None, a ``model`` (the last item of the previous page;
    ``id_of(item)`` is its id) or that id, a positive integer."""
    if value is None:
        return None
    if isinstance(value, model):
        ident: int = id_of(value)
        return ident
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
        raise InvalidArgument(f"{what} must be a {model.__name__} or a positive id, got {value!r}")
    return value


# ---------------------------------------------------------------- text, names, idempotency


#: Longest duration accepted (a snooze, a purge age): 100 years.
MAX_DURATION = timedelta(days=36500)


#: Longest subject, in characters.
MAX_SUBJECT_CHARS = 1000


def check_str(value: object, what: str, *, max_chars: int, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise InvalidArgument(f"{what} must not be empty")
    if len(value) > max_chars:
        raise InvalidArgument(f"{what} is {len(value)} characters; at most {max_chars}")
    check_text(value, what)
    return value


def check_body(body: object, what: str = "body") -> None:
    """A long text (a mail body, a summary, a description): a string PostgreSQL can store;
    ``what`` names the argument in the error."""
    if not isinstance(body, str):
        raise InvalidArgument(f"{what} must be a string, got {type(body).__name__}")
    check_content(body, what)


def check_choice(value: object, what: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgument(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def request_hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def by_key(sender: str, key: str, hashed: str) -> Op[Mail | None]:
    """The mail ``sender`` sent with ``key`` when the request is the same; ``Conflict`` when
    the key was used for another request; None when the key is unused."""
    row = yield one("mail_by_key", sender=sender, idempotency_key=key)
    if row is None:
        return None
    if row["request_hash"] != hashed:
        raise Conflict(
            f"idempotency key {key!r} of {sender!r} was used for a different request "
            f"(mail {row['id']})",
            constraint="mail_idempotency_key",
            sqlstate=None,
        )
    return Mail.from_row(row)


#: What an identity name looks like: 1-64 characters, letters, digits, ``.``, ``_``, ``-``, not
#: starting with punctuation.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def identity_name(identity: object, what: str = "identity") -> str:
    """The name of ``identity`` (a name or an ``Identity``); ``InvalidArgument`` otherwise."""
    if isinstance(identity, Identity):
        return identity.name
    check_name(identity, what)
    assert isinstance(identity, str)
    return identity


def check_name(name: object, what: str = "name") -> None:
    """``InvalidArgument`` unless ``name`` matches ``NAME_PATTERN``."""
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        shown = name if not isinstance(name, str) or len(name) <= 80 else name[:80] + "..."
        raise InvalidArgument(
            f"{what} must be a name of 1-64 letters, digits, '.', '_' or '-' not starting "
            f"with punctuation, got {shown!r}"
        )


def require(name: str) -> Op[Identity]:
    """The identity called ``name``, or ``NotFound``."""
    row = yield one("get_identity", name=name)
    if row is None:
        raise NotFound(f"identity {name!r} does not exist")
    return Identity.from_row(row)


def listing(
    query: str,
    model: Any,
    states: tuple[str, ...],
    *,
    state: object,
    requester: object,
    limit: object,
    before: object,
) -> Op[list[Any]]:
    """A page of ``model`` rows from ``query``, newest first, optionally in one ``state`` and/or
    of one ``requester`` (``NotFound`` if that identity does not exist), after ``before`` (the
    last item of the previous page, or its id): reviews and plan reviews list alike."""
    if state is not None:
        check_choice(state, "state", states)
    name = None if requester is None else identity_name(requester, "requester")
    check_limit(limit)
    before_id = check_cursor(before, model, lambda item: item.id)
    rows = yield many(query, state=state, requester=name, before_id=before_id, limit=limit)
    if not rows and name is not None:
        yield from require(name)  # an unknown requester is NotFound, not an empty list
    return [model.from_row(r) for r in rows]


def check_uuid_id(value: object, what: str, model: type[Any], attr: str, hint: str = "") -> str:
    """The canonical text of a UUID id: a ``model`` (its ``attr``), a ``uuid.UUID`` or its text
    (reviews and plan reviews are named alike)."""
    if isinstance(value, model):
        text: str = getattr(value, attr)
        return text
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str) and len(value) <= 64:
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    shown = value if not isinstance(value, str) or len(value) <= 80 else value[:80] + "..."
    raise InvalidArgument(
        f"{what} must be a UUID (a {model.__name__}, a uuid.UUID or its text), got {shown!r}{hint}"
    )
