"""Which database, and how its URL may be shown.

Owns URL resolution (argument, ``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else None meaning "the
embedded server"), validation, password redaction and the yoyo form of a URL. Invariants:
- every accepted URL has been parsed by libpq's own conninfo parser (``conninfo_to_dict``): what
  we connect to is what libpq understands, and a string libpq cannot parse is refused before it
  reaches a connection (libpq's parse errors quote fragments of the string, passwords included);
- ``postgresql://``, ``postgres://`` and ``postgresql+psycopg://`` (yoyo's spelling) URLs and
  libpq ``key=value`` strings are accepted; the yoyo spelling is normalised to ``postgresql://``;
- ``redact`` never returns a password: it finds the password by parsing (not by pattern), replaces
  it with ``***`` and checks its own output by parsing it again; anything it cannot prove safe is
  shown as ``<unprintable database URL>``;
- a URL with a second unencoded ``@`` is refused: libpq reads the password only up to the first
  ``@`` and the rest as host and port, so the remainder of the password would be sent as a host
  name and printed in every message.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlencode

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .errors import InvalidArgument

__all__ = ["admin_url", "redact", "resolve_url", "to_yoyo_url"]

_URL_ENV = ("IKIGAI_DATABASE_URL", "DATABASE_URL")
_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_UNPRINTABLE = "<unprintable database URL>"
_MASK = "***"
_YOYO = "postgresql+psycopg://"


def resolve_url(url: str | None = None) -> str | None:
    """Return the explicit or configured database URL, or None to mean "use the embedded server".

    Order: ``url``; ``IKIGAI_DATABASE_URL``; ``DATABASE_URL``. ``postgresql://``,
    ``postgres://`` and ``postgresql+psycopg://`` URLs and libpq ``key=value`` strings are
    accepted (the last URL form is yoyo's, so one ``DATABASE_URL`` serves both tools); a URL
    without a host lets libpq apply ``PGHOST``. Raises ``InvalidArgument`` for anything else.
    """
    if url is not None:
        return _normalise(url)
    for name in _URL_ENV:
        value = os.environ.get(name)
        if value:
            return _normalise(value, source=name)
    return None


def _normalise(url: object, source: str = "database URL") -> str:
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument(f"{source} must be a non-empty string")
    if "\x00" in url:
        raise InvalidArgument(f"{source} contains a NUL character")
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{source} is not valid Unicode text") from None
    url = _libpq_form(url)
    if _is_uri(url):
        if not url.startswith(_SCHEMES):
            scheme = url.split("://", 1)[0]
            raise InvalidArgument(
                f"unsupported {source} scheme {scheme!r}: use postgresql://, postgres:// or "
                "postgresql+psycopg://"
            )
        if _ambiguous_at(url):
            raise InvalidArgument(
                f"{source} {redact(url)} has more than one unencoded '@': percent-encode '@' "
                "in the user name or password as %40 (libpq would read the rest of the password "
                "as the host name)"
            )
    if _parse(url) is None:
        # libpq's message quotes the text around the error, which may be the password.
        raise InvalidArgument(
            f"{source} is not a valid libpq connection URI or key=value string (quote values "
            "that contain spaces: password='two words'; %-escapes must be UTF-8)"
        )
    return url


def _parse(url: str) -> dict[str, str] | None:
    """libpq's reading of ``url`` (None when it cannot read it)."""
    try:
        return {k: str(v) for k, v in conninfo_to_dict(url).items()}
    except (psycopg.Error, UnicodeError):  # %-escapes or text that is not UTF-8
        return None


def _is_uri(url: str) -> bool:
    head = url.split("://", 1)[0]
    return "://" in url and head.replace("+", "").isalnum()


def _userinfo_end(rest: str) -> int:
    """Index of the '@' ending the userinfo as libpq finds it (first '@' before any '/'), or -1."""
    for i, ch in enumerate(rest):
        if ch == "@":
            return i
        if ch == "/":
            return -1
    return -1


def _ambiguous_at(url: str) -> bool:
    """True when an unencoded '@' before the query string is not the one ending the userinfo
    (a second '@', or one after a '/': libpq then sees no password and reads it as the host,
    port or database name)."""
    rest = url.split("://", 1)[1]
    end = _userinfo_end(rest)
    return "@" in rest[end + 1 :].split("?", 1)[0]


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``; safe to print and log. Idempotent.

    The password is found by libpq's parser wherever it is (URI userinfo, ``?password=``,
    ``password=`` in key=value form). A string that libpq cannot parse, or whose password this
    function cannot prove it removed, is shown as ``<unprintable database URL>``.
    """
    if not isinstance(url, str):
        return _UNPRINTABLE
    yoyo = url.startswith(_YOYO)
    shown = _redact_libpq(_libpq_form(url))
    if yoyo and shown != _UNPRINTABLE:
        shown = _YOYO + shown[len("postgresql://") :]
    return shown


def _libpq_form(url: str) -> str:
    return "postgresql://" + url[len(_YOYO) :] if url.startswith(_YOYO) else url


def _redact_libpq(url: str) -> str:
    params = _parse(url)
    if params is None:
        return _UNPRINTABLE
    password = params.get("password")
    ambiguous = _is_uri(url) and _ambiguous_at(url)
    if not password and not ambiguous:
        return url
    if not _is_uri(url):
        params["password"] = _MASK
        shown = make_conninfo("", **params)
    elif ambiguous:
        # Hide everything up to the last '@' (too much rather than too little).
        scheme, rest = url.split("://", 1)
        main, sep, query = rest.rsplit("@", 1)[1].partition("?")
        shown = f"{scheme}://{_MASK}@{main}{sep}{_redact_query(query)}"
    else:
        shown = _redact_uri(url)
    # Prove it by parsing the result: libpq must read no password there but the mask.
    check = _parse(shown)
    return shown if check is not None and check.get("password") in (None, _MASK) else _UNPRINTABLE


def _redact_uri(url: str) -> str:
    """Mask the userinfo password and any ``password`` query parameter, keeping the rest as is."""
    scheme, rest = url.split("://", 1)
    end = _userinfo_end(rest)
    if end >= 0:
        userinfo, rest = rest[:end], rest[end + 1 :]
        user, colon, _secret = userinfo.partition(":")
        prefix = f"{user}:{_MASK}@" if colon else f"{user}@"
    else:
        prefix = ""
    main, sep, query = rest.partition("?")
    return f"{scheme}://{prefix}{main}{sep}{_redact_query(query)}"


def _redact_query(query: str) -> str:
    parts = []
    for item in query.split("&") if query else []:
        key, eq, _value = item.partition("=")
        parts.append(f"{key}={_MASK}" if eq and unquote(key) == "password" else item)
    return "&".join(parts)


def password_of(url: str) -> str | None:
    """The password libpq reads from ``url`` (None if none or unparsable): for scrubbing text."""
    params = _parse(_libpq_form(url))
    return (params or {}).get("password") or None


def scrub(text: str, url: str) -> str:
    """``text`` (e.g. a driver error message) with ``url``'s password masked wherever it occurs."""
    password = password_of(url)
    if password and len(password) >= 3:
        text = text.replace(password, _MASK)
    return text


def to_yoyo_url(url: str) -> str:
    """The URL yoyo 9 needs to select psycopg 3: ``postgresql+psycopg://...``."""
    if url.startswith(_YOYO):
        return url
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("postgres://"):
        return "postgresql+psycopg://" + url[len("postgres://") :]
    params = conninfo_to_dict(url)
    return "postgresql+psycopg://?" + urlencode({k: str(v) for k, v in params.items()})


def admin_url(url: str, dbname: str) -> str:
    """Same server and credentials as ``url``, another database."""
    params = conninfo_to_dict(_libpq_form(url))
    params["dbname"] = dbname
    return make_conninfo("", **params)
