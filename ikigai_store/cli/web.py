"""CLI ``web``: serve the web view (``ikigai_store.web``) of the chosen database.

Bound to 127.0.0.1 unless ``--host`` says otherwise; every request needs a token: ``--token``
/ ``IKIGAI_WEB_TOKEN``, else a random one made at start (loopback is reachable by every local
user of the machine), unless ``--no-token`` on a loopback address. Read-only unless
``--allow-writes``. Prints one line on stderr once listening, ``ikigai-store web: serving
http://HOST:PORT/`` (with ``?token=`` when the token was made here), and stops cleanly on
SIGINT or SIGTERM. Needs the ``web`` extra; without it the command is one ``Error:`` line
saying how to install it.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import signal
import sys

import anyio
import click

from .._net import is_loopback
from .app import cli
from .common import database_option


@cli.command("web")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="IKIGAI_WEB_TOKEN",
    default=None,
    help="Token every request must carry: open the view once with ?token=TOKEN, or send "
    "Authorization: Bearer TOKEN. Default: $IKIGAI_WEB_TOKEN, else (on loopback) one made at "
    "start and printed in the address to open.",
)
@click.option(
    "--no-token",
    is_flag=True,
    help="On a loopback address, serve without a token: anyone on this machine (every local "
    "user) can then read the view. For a machine of your own.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer the few write actions (ack mail, requeue a dead letter, force-release a "
    "lease, decide a plan), each behind a CSRF token.",
)
def web_command(
    host: str, port: int, token: str | None, no_token: bool, allow_writes: bool
) -> None:
    """Serve a live web view: sessions and timelines, the fork tree, mail, queues, reviews,
    plans, tasks, leases, activity and search.

    Every request needs a token: --token (or IKIGAI_WEB_TOKEN), else one made now and printed
    in the address to open (other users of this machine can reach loopback too); --no-token
    serves a loopback address without one."""
    try:
        from ..web import serve
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise click.ClickException(
            f"the web view needs the web extra: pip install '.[web]' in a checkout ({exc})"
        ) from exc
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    # SIGTERM stops it like Ctrl-C does (uvicorn handles both once serving).
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    if no_token and token:
        raise click.UsageError("--no-token and --token (or IKIGAI_WEB_TOKEN) exclude each other")
    # Off loopback a token must be given (serve refuses without one); on loopback one is made.
    made = None if token or no_token or not is_loopback(host) else secrets.token_urlsafe(24)
    token = token or made

    def ready(bound: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        login = f"?token={made}" if made else ""
        print(
            f"ikigai-store web: serving http://{shown}:{bound}/{login}", file=sys.stderr, flush=True
        )

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(
            lambda: serve(
                database_option(),
                host=host,
                port=port,
                token=token,
                allow_writes=allow_writes,
                ready=ready,
            )
        )
