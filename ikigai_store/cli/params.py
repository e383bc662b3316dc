"""The CLI's value types: durations, times and JSON, one rule each for every command.

Owns how option text becomes a value. Invariants:
- a duration is ``30s``, ``10m``, ``2h``, ``1d`` or a sum such as ``1h30m`` (``DURATION``);
  ``SECONDS`` also takes a plain number of seconds (``90``, ``0.5``);
- a time is an ISO-8601 date or time; without a UTC offset it is local time (``TIME``);
  ``FROM_NOW`` also takes a duration from now (``2h``), ``AGO`` a duration ago. Every option
  that names a point in time takes both: ``AGO`` for a point in the past (``--since``,
  ``--until`` of a search, ``--ended-before``), ``FROM_NOW`` for one ahead (``--deadline``,
  ``--until`` of a snooze); an option that names a length (``--older-than``, ``--ttl``) takes a
  duration;
- JSON text is parsed once, where the option is read (``JSON``);
- a bad value is one ``Error:`` line naming the option (exit status 1, see ``app``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import click

__all__ = [
    "AGO",
    "DURATION",
    "FROM_NOW",
    "JSON",
    "SECONDS",
    "TIME",
    "Duration",
    "JSONText",
    "Time",
    "parse_duration",
    "parse_time",
]

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_DURATION_HELP = "a duration such as 30s, 10m, 2h, 1d or 1h30m"
_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def _is_duration(text: str) -> bool:
    return bool(text.strip()) and _DURATION.fullmatch(text.strip().lower()) is not None


def parse_duration(text: str) -> timedelta:
    """``30s``, ``10m``, ``2h``, ``1d``, ``1h30m`` -> a timedelta; ``ValueError`` otherwise."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not {_DURATION_HELP}")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    try:
        return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None


def parse_time(text: str) -> datetime:
    """An ISO-8601 date or time (``2025-06-01``, ``2025-06-01T09:00:00+02:00``, ``...Z``);
    without a UTC offset it is local time (the rule of every command's time options)."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO-8601 time such as 2025-06-01T09:00:00+02:00"
        ) from None
    return when if when.utcoffset() is not None else when.astimezone()


# click.ParamType is generic from click 8.4 on; its type arguments are left out (hence the
# ignores) because click 8.1, which pyproject allows, cannot take them at run time.


class Duration(click.ParamType):  # type: ignore[type-arg]
    """A duration (``parse_duration``); with ``seconds``, a plain number is seconds (a float)."""

    name = "duration"

    def __init__(self, *, seconds: bool = False) -> None:
        self.seconds = seconds

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta | float:
        if isinstance(value, timedelta | float):
            return value
        if self.seconds and _SECONDS.fullmatch(value.strip()):
            return float(value)
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(f"{exc}, or a number of seconds" if self.seconds else str(exc), param, ctx)


class Time(click.ParamType):  # type: ignore[type-arg]
    """A time (``parse_time``); ``relative`` also takes a duration from now (``ahead``) or
    before now (``ago``)."""

    name = "time"

    def __init__(self, relative: Literal["ahead", "ago"] | None = None) -> None:
        self.relative = relative

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        if self.relative is not None and _is_duration(value):
            try:
                delta = parse_duration(value)
            except ValueError as exc:
                why = str(exc) if self.relative == "ahead" else f"{value!r} is too long ago"
                self.fail(why, param, ctx)
            try:
                return datetime.now(UTC) + (delta if self.relative == "ahead" else -delta)
            except OverflowError:
                far = "too far in the future" if self.relative == "ahead" else "too long ago"
                self.fail(f"{value!r} is {far}", param, ctx)
        try:
            return parse_time(value)
        except ValueError as exc:
            also = ", or a duration ago such as 30m, 2h, 7d" if self.relative == "ago" else ""
            self.fail(f"{exc}{also}", param, ctx)


class JSONText(click.ParamType):  # type: ignore[type-arg]
    """JSON text, parsed (any JSON value)."""

    name = "json"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            option = param.opts[0] if param is not None and param.opts else "the value"
            # The message every JSON option has always given (not click's "Invalid value").
            raise click.ClickException(f"{option} is not valid JSON: {exc}") from exc


DURATION = Duration()
SECONDS = Duration(seconds=True)
TIME = Time()
FROM_NOW = Time("ahead")
AGO = Time("ago")
JSON = JSONText()
