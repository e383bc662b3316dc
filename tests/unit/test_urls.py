"""URL resolution, redaction and yoyo URL conversion (no database)."""

from __future__ import annotations

import string

import psycopg
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import ikigai_store as ik
from ikigai_store.config import admin_url, redact, resolve_url, scrub, to_yoyo_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgres://u:p%40ss@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql:///db?host=/tmp&password=secret", "postgresql:///db?host=/tmp&password=***"),
        ("postgresql+psycopg://u:secret@h/db", "postgresql+psycopg://u:***@h/db"),
        # an unencoded '@' in the password: libpq reads "p" as the password and "ss:w" as the
        # host and port, so everything up to the last '@' is hidden
        ("postgresql://u:p@ss:w/rd@host/db", "postgresql://***@host/db"),
        ("postgresql://u:p@ss@host/db?sslmode=require", "postgresql://***@host/db?sslmode=require"),
        # a '/' in the password: libpq sees no userinfo at all (host "u", port "pa")
        ("postgresql://u:pa/ss@host/db", "postgresql://***@host/db"),
    ],
)
def test_redact_hides_passwords(url: str, expected: str) -> None:
    """Passwords in userinfo, query strings and yoyo URLs are replaced by ***."""
    assert redact(url) == expected
    assert "secret" not in redact(url) and "p%40ss" not in redact(url)
    assert "ss:w" not in redact(url)
    assert redact(redact(url)) == redact(url)


@pytest.mark.parametrize(
    "url",
    [
        "host=h user=u password=secret dbname=d",
        "host=h password='se cret' dbname=d",
        "host=h password = 'it\\'s \\\\ secret' dbname=d",
    ],
)
def test_redact_key_value_strings(url: str) -> None:
    """key=value strings keep every parameter but the password, which libpq reads as ***."""
    shown = redact(url)
    assert "secret" not in shown and "se cret" not in shown
    params = psycopg.conninfo.conninfo_to_dict(url)
    params["password"] = "***"
    assert psycopg.conninfo.conninfo_to_dict(shown) == params


@pytest.mark.parametrize(
    "url", ["password=Secret PW", "host='unterminated password=Secret", "postgresql://[::1"]
)
def test_unparsable_strings_are_never_printed(url: str) -> None:
    """What libpq cannot parse is shown as a placeholder and refused without quoting it."""
    assert redact(url) == "<unprintable database URL>"
    with pytest.raises(ik.InvalidArgument) as info:
        resolve_url(url)
    assert "Secret" not in str(info.value) and "PW" not in str(info.value)


def test_ambiguous_at_is_refused() -> None:
    """A second unencoded '@' is refused (libpq would connect to part of the password)."""
    with pytest.raises(ik.InvalidArgument, match="%40") as info:
        resolve_url("postgresql://u:p@ss:w/rd@host/db")
    assert "ss:w" not in str(info.value)
    assert resolve_url("postgresql://u:p%40ss%3Aw%2Frd@host/db")  # encoded: fine


_SECRET_CHARS = string.ascii_letters + string.digits + "@:/?#&=%+ !$'\\"


@given(
    password=st.text(_SECRET_CHARS, min_size=6, max_size=20).filter(
        lambda p: p.strip() == p and any(c.isalnum() for c in p)
    ),
    shape=st.sampled_from(
        [
            "postgresql://alice:{pw}@db.example.com:5432/app",
            "postgres://alice:{pw}@db.example.com/app?sslmode=require",
            "postgresql+psycopg://alice:{pw}@db.example.com/app",
            "host=db.example.com user=alice password={pw} dbname=app",
            "host=db.example.com password='{qpw}' dbname=app",
        ]
    ),
)
def test_redact_never_shows_a_password(password: str, shape: str) -> None:
    """Whatever a password contains and however it is written, redact never prints it."""
    qpw = password.replace("\\", "\\\\").replace("'", "\\'")
    url = shape.format(pw=password, qpw=qpw)
    # e.g. the password "dbname", or one found in the placeholder for unparsable strings
    assume(password not in shape.format(pw="", qpw="") + "<unprintable database URL>")
    assert password not in redact(url)


def test_scrub_masks_password_in_messages() -> None:
    """Driver messages that quote the password are scrubbed before they reach a caller."""
    url = "postgresql://u:hunter2@h/db"
    assert scrub('password "hunter2" rejected', url) == 'password "***" rejected'


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


def test_yoyo_spelling_is_accepted() -> None:
    """One DATABASE_URL serves yoyo and us: postgresql+psycopg:// is read as postgresql://."""
    assert resolve_url("postgresql+psycopg://u@h/db") == "postgresql://u@h/db"
    assert to_yoyo_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert "dbname=x" in admin_url("postgresql+psycopg://u@h/db", "x")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "mysql://h/db",
        "sqlite:///x.db",
        "postgresql+psycopg2://h/db",
        "h\x00",
        "postgresql://\ud800@h/db",
    ],
)
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
