"""The CLI's value types (``params``): durations, times and JSON (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
import pytest

from ikigai_store.cli import params

T = datetime(2025, 6, 1, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        (params.DURATION, "1h30m", timedelta(hours=1, minutes=30)),
        (params.SECONDS, "90", 90.0),
        (params.SECONDS, "2m", timedelta(minutes=2)),
        (params.TIME, "2025-06-01T09:30:00Z", T),
        (params.JSON, '{"a": [1]}', {"a": [1]}),
    ],
)
def test_param_types_convert(kind: click.ParamType, text: str, expected: object) -> None:
    """Each value type turns its option text into the value commands get."""
    assert kind.convert(text, None, None) == expected


def test_a_time_without_offset_is_local_and_relative_times_move_from_now() -> None:
    """TIME reads a time without an offset as local time; FROM_NOW and AGO take durations."""
    local = params.TIME.convert("2025-06-01T09:30", None, None)
    assert local == datetime(2025, 6, 1, 9, 30).astimezone()
    now = datetime.now(UTC)
    assert abs(params.FROM_NOW.convert("2h", None, None) - (now + timedelta(hours=2))).seconds < 60
    assert abs(now - timedelta(days=1) - params.AGO.convert("1d", None, None)).seconds < 60


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        (params.DURATION, "soon", "'soon' is not a duration such as 30s"),
        (params.SECONDS, "x", "or a number of seconds"),
        (params.TIME, "tomorrow", "'tomorrow' is not an ISO-8601 time"),
        (params.FROM_NOW, "99999999999d", "too long a duration"),
        (params.AGO, "yesterday", "or a duration ago such as 30m"),
    ],
)
def test_param_types_refuse_with_a_reason(kind: click.ParamType, text: str, message: str) -> None:
    """A bad duration or time is click's BadParameter, saying what was expected."""
    with pytest.raises(click.BadParameter, match=message):
        kind.convert(text, None, None)


def test_bad_json_names_the_option() -> None:
    """Bad JSON is one user error naming the option, as every JSON option always said it."""
    option = click.Option(["--metadata"], type=params.JSON)
    with pytest.raises(click.ClickException, match=r"^--metadata is not valid JSON: "):
        params.JSON.convert("{", option, None)
