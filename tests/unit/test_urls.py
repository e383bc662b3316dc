"""URL resolution, redaction and yoyo URL conversion (no database)."""

from __future__ import annotations

import pytest

import ikigai_store as ik
from ikigai_store.db import admin_url, redact, resolve_url, to_yoyo_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgres://u:p%40ss@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql:///db?host=/tmp&password=secret", "postgresql:///db?host=/tmp&password=***"),
        ("host=h user=u password=secret dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='se cret' dbname=d", "host=h password=*** dbname=d"),
    ],
)
def test_redact_hides_passwords(url: str, expected: str) -> None:
    """Passwords in userinfo, query strings and key=value strings are replaced by ***."""
    assert redact(url) == expected
    assert "secret" not in redact(url) and "p%40ss" not in redact(url)


def test_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The argument wins, then IKIGAI_DATABASE_URL, then DATABASE_URL, else None (embedded)."""
    monkeypatch.delenv("IKIGAI_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert resolve_url() is None
    monkeypatch.setenv("DATABASE_URL", "postgresql://d/x")
    assert resolve_url() == "postgresql://d/x"
    monkeypatch.setenv("IKIGAI_DATABASE_URL", "postgres://i/x")
    assert resolve_url() == "postgres://i/x"
    assert resolve_url("postgresql://arg/x") == "postgresql://arg/x"


@pytest.mark.parametrize("bad", ["", "   ", "mysql://h/db", "sqlite:///x.db"])
def test_bad_urls_rejected(bad: str) -> None:
    """Empty URLs and non-PostgreSQL schemes raise InvalidArgument."""
    with pytest.raises(ik.InvalidArgument):
        resolve_url(bad)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
        ("postgres://h/db", "postgresql+psycopg://h/db"),
        ("postgresql:///db", "postgresql+psycopg:///db"),
    ],
)
def test_yoyo_url_selects_psycopg3(url: str, expected: str) -> None:
    """yoyo 9 needs postgresql+psycopg:// to use psycopg 3."""
    assert to_yoyo_url(url) == expected


def test_yoyo_url_from_key_value() -> None:
    """A libpq key=value string becomes a yoyo URL carrying every parameter."""
    from yoyo.connections import parse_uri

    parsed = parse_uri(to_yoyo_url("host=/tmp/sock dbname=d user=u"))
    assert parsed.scheme == "postgresql+psycopg"
    assert parsed.args == {"host": "/tmp/sock", "dbname": "d", "user": "u"}


def test_admin_url_keeps_server_changes_database() -> None:
    """admin_url points at another database on the same server with the same credentials."""
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(admin_url("postgresql://u:p@h:5/a", "b"))
    assert params == {"user": "u", "password": "p", "host": "h", "port": "5", "dbname": "b"}
