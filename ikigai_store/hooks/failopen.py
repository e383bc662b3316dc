"""What a hook that fails open prints (standard library only: the thin hook client, which never
imports the store, prints it too when the service cannot be reached).

Invariant: a hook that fails open never denies or blocks. Besides its one stderr line
(``ikigai-store hook <name>: <why>``), ``pre-tool`` on an edit it could not check allows the edit
and says so in what the user (``systemMessage``) and the model (``additionalContext``) see; the
other hooks print nothing (their silence already lets the agent go on).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

__all__ = ["EDIT_TOOLS", "answer", "one_line", "report"]

#: Tools whose ``file_path`` (``notebook_path``) ``pre-tool`` checks against reservations.
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})


def answer(name: str, event: object, why: str) -> dict[str, Any] | None:
    """The answer of hook ``name`` that failed open on ``event`` for the reason ``why``."""
    if name != "pre-tool" or not isinstance(event, dict):
        return None
    fields = event.get("tool_input")
    if event.get("tool_name") not in EDIT_TOOLS or not isinstance(fields, dict):
        return None
    path = fields.get("file_path") or fields.get("notebook_path")
    text = (
        f"ikigai-store could not check file reservations ({' '.join(why.split())}); the edit "
        f"of {path if isinstance(path, str) and path else 'the file'} was allowed without "
        "checking whether another agent reserved it."
    )
    return {
        "systemMessage": text,
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": text},
    }


def report(name: str, why: str, stderr: IO[str]) -> None:
    """The one stderr line of hook ``name`` that failed open."""
    try:
        stderr.write(f"ikigai-store hook {name}: {' '.join(why.split())}\n")
        stderr.flush()
    except Exception:
        pass


def one_line(exc: BaseException) -> str:
    """``exc`` as the one line a hook that failed open reports: its class and message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
