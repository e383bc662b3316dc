"""CLI ``web``: serve the web view (``ikigai_store.web``) of the chosen database.

Bound to 127.0.0.1 unless ``--host`` says otherwise (any other address needs ``--token`` /
``IKIGAI_WEB_TOKEN``); read-only unless ``--allow-writes``. Prints one line on stderr once
listening, ``ikigai-store web: serving http://HOST:PORT/``, and stops cleanly on SIGINT or
SIGTERM. Needs the ``web`` extra; without it the command is one ``Error:`` line saying how to
install it.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys

import anyio
import click

from .app import cli
from .common import database_option


@cli.command("web")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="IKIGAI_WEB_TOKEN",
    default=None,
    help="Token every request must carry (required off loopback): open the view once with "
    "?token=TOKEN, or send Authorization: Bearer TOKEN. Default: $IKIGAI_WEB_TOKEN.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer the few write actions (ack mail, requeue a dead letter, force-release a "
    "lease, decide a plan), each behind a CSRF token.",
)
def web_command(host: str, port: int, token: str | None, allow_writes: bool) -> None:
    """Serve a live web view: sessions and timelines, the fork tree, mail, queues, reviews,
    plans, tasks, leases, activity and search."""
    try:
        from ..web import serve
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise click.ClickException(
            f"the web view needs the web extra: pip install '.[web]' in a checkout ({exc})"
        ) from exc
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    # SIGTERM stops it like Ctrl-C does (uvicorn handles both once serving).
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    def ready(bound: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"ikigai-store web: serving http://{shown}:{bound}/", file=sys.stderr, flush=True)

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
