"""Which database, in words, without importing the driver (standard library only): what the MCP
server's instructions say, told the same by the server and by the stdio proxy that answers
``initialize`` for it.

Invariant: a password never appears in what ``describe`` returns: a URI's userinfo password and
any ``password`` parameter (URI query or libpq ``key=value``) become ``***``, and a string this
module cannot take apart safely (quotes in a ``key=value`` string) is not shown at all.
"""

from __future__ import annotations

import os
import re

__all__ = ["default_data_dir", "describe", "instructions", "redact"]

_MASK = "***"
_QUERY_PASSWORD = re.compile(r"(?i)(^|&)(password)=[^&]*")
_KEY_PASSWORD = re.compile(r"(?i)(^|\s)(password\s*=\s*)\S*")


def default_data_dir() -> str:
    """The embedded server's data dir: ``IKIGAI_DATA_DIR`` (resolved), else
    ``/var/lib/ikigai-store/pgdata`` for root, else the user's data dir (platformdirs)."""
    configured = os.environ.get("IKIGAI_DATA_DIR")
    if configured:
        return os.path.realpath(os.path.expanduser(configured))
    if (os.geteuid() if hasattr(os, "geteuid") else 0) == 0:
        return "/var/lib/ikigai-store/pgdata"
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("ikigai-store"), "pgdata")


def redact(url: str) -> str:
    """``url`` with its password masked (see the module's invariant)."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        main, sep, query = rest.partition("?")
        userinfo, at, hostpart = main.rpartition("@")
        if at:
            user, colon, _ = userinfo.partition(":")
            main = f"{user}:{_MASK}@{hostpart}" if colon else main
        query = _QUERY_PASSWORD.sub(lambda m: f"{m[1]}{m[2]}={_MASK}", query)
        return f"{scheme}://{main}{sep}{query}"
    if "'" in url:
        return "<a database URL>"
    return _KEY_PASSWORD.sub(lambda m: f"{m[1]}{m[2]}{_MASK}", url)


def describe(url: str | None, data_dir: str | None = None) -> str:
    """The database ``url`` (None: the embedded server of ``data_dir``, else of the default
    data dir), in words, its password masked."""
    if url is None:
        return (
            f"the embedded PostgreSQL in {data_dir or default_data_dir()} (neither "
            "IKIGAI_DATABASE_URL nor DATABASE_URL was set, and no --database was given)"
        )
    return redact(url)


def instructions(base: str, database: str) -> str:
    """The MCP server's instructions: ``base``, then which database it uses."""
    return f"{base} Database: {database}."
