"""``ikigai-store hook NAME`` as a thin client of the warm local service (standard library only).

Reads Claude Code's JSON event on stdin, sends it with the agent's identity options (``--as``,
``--role``, ``--auto-reserve`` and the agent's ``IKIGAI_AS``, ``IKIGAI_ROLE``,
``CLAUDE_PROJECT_DIR``, ``CLAUDE_CODE_TASK_LIST_ID``, which the service never reads from its own
environment) to the service of the database (``service.client``), starting it when none runs,
and prints its answer. Invariants, those of ``claude``: always exit 0; a failure (the input is not
JSON, the service cannot be started or reached, the hook failed inside it) is one
``ikigai-store hook NAME: <why>`` line on stderr, plus ``failopen.answer`` on stdout; never a
traceback, never a denial or a block on error.
"""

from __future__ import annotations

import json
import os
import sys

from ..service import client
from . import failopen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

__all__ = ["main"]


def _options(
    event: dict[str, Any], name: str | None, role: str | None, auto_reserve: float | None
) -> dict[str, Any]:
    env = os.environ
    return {
        "name": name or env.get("IKIGAI_AS") or None,
        "role": role or env.get("IKIGAI_ROLE") or None,
        # the project root when Claude Code says it; else the event's cwd; else ours
        "project": env.get("CLAUDE_PROJECT_DIR") or (None if event.get("cwd") else os.getcwd()),
        "task_list": env.get("CLAUDE_CODE_TASK_LIST_ID") or None,
        "auto_reserve": auto_reserve,
    }


def main(
    hook: str,
    *,
    database: str | None = None,
    name: str | None = None,
    role: str | None = None,
    auto_reserve: float | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run hook ``hook`` through the service; always 0 (see the module's invariants)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    event: object = None
    try:
        text = stdin.read()
        try:
            event = json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise client.ServiceError(f"standard input is not JSON ({exc})") from None
        if not isinstance(event, dict):
            raise client.ServiceError(
                "standard input is not a JSON object (Claude Code's hook input)"
            )
        options = _options(event, name, role, auto_reserve)
        answer = client.request(
            client.target(database),
            client.hello("hook", hook=hook, event=event, options=options),
        )
    except (client.ServiceError, OSError, KeyboardInterrupt) as exc:
        why = str(exc) or type(exc).__name__
        failopen.report(hook, why, stderr)
        _print(failopen.answer(hook, event, why), stdout)
        return 0
    if answer.get("ok") is not True:
        why = str(answer.get("error") or "the service refused the request")
        failopen.report(hook, why, stderr)
        _print(failopen.answer(hook, event, why), stdout)
        return 0
    if answer.get("failed"):
        failopen.report(hook, str(answer["failed"]), stderr)
    _print(answer.get("answer"), stdout)
    return 0


def _print(answer: object, stdout: IO[str]) -> None:
    if isinstance(answer, dict):
        try:
            stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
            stdout.flush()
        except OSError:  # Claude Code stopped reading: nothing to tell
            pass
