"""The ``ikigai-store`` command line: inspect and drive a store from a terminal or a script.

Owns argument parsing, the rendering of sessions, replayed contexts and search hits, and the
``demo`` walkthrough. Invariants:
- no SQL here: every operation is a call on ``Store`` (or ``config`` helpers for URL
  resolution and redaction);
- a database URL is only ever printed through ``config.redact`` (``store.url`` is redacted);
- user errors (every ``IkigaiStoreError``, bad JSON, no active session) print one ``Error: ...``
  line on stderr and exit with status 1, never a traceback;
- commands that print an id for scripts (``session new``, ``append``, ``agent new``, ``agent
  zero``) print that id alone; ``identity register`` prints the name alone; ``agent fork``,
  ``mail send`` and ``mail reply`` print the new uuid or mail id alone on their first line (or,
  queued while the database cannot be reached, ``queued (offline): <key>``);
- ``demo`` writes only to the session it creates, kills the agents it created and ends that
  session before it returns, so the user's active session and running agents are the same before
  and after; the identities it registers (``demo-<hex>-main``, ``demo-<hex>-explorer``) are
  retired before it returns.

Layout: ``app`` (the root group, error handling, free-text arguments), ``common`` (opening the
store, the outbox, standard input, the common options), ``params`` (durations, times, JSON),
``render`` (tables, times, text, JSON, the views several modules show), one module of commands
per area (``admin``, ``sessions``, ``events``, ``agents``, ``identities``, ``mail``,
``topics``, ``outbox``, ``activities`` (also ``lease``), ``tasks``, ``reviews`` (also
``plan``), ``hooks`` (``hook ...``, ``hooks install``)) and ``demo``. A command module is
imported the first time one of its commands is looked up (``app.COMMAND_MODULES``), so a
command does not import the others. A helper used by more than one module lives in ``common``,
``params`` or ``render`` under a public name; no module imports another's ``_private`` names
(tests/unit/test_cli_imports.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from .app import cli

__all__ = ["cli", "main"]


def main(args: Sequence[str] | None = None) -> None:
    """Console-script entry point (``ikigai-store``, ``python -m ikigai_store``)."""
    cli.main(args=args, prog_name="ikigai-store")
