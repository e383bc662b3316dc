"""The replay fold: from an ordered event stream to the context an LLM sees.

Owns ``fold``, a pure function (no I/O) shared by session replay. Invariants, for events taken in
``id`` order:
- ``clear`` empties the context, the mark stack and ``skipped`` and is not kept (what came before
  the newest clear cannot affect the context, so replay never reads it);
- ``mark`` is appended and pushed as ``Mark(id, label, index in context)``;
- ``rewind`` whose ``data.target_message_id`` is a mark still on the stack cuts the context to end
  just after that mark, pops the marks above it (the target stays), and is appended; any other
  rewind (target rewound past, cleared away, unknown or malformed) is skipped and its id recorded
  in ``ReplayContext.skipped`` (since the newest clear) — replay never fails on old data;
- ``pop`` whose ``data.target_message_id`` is an event in the context removes that event from
  the context (a mark also leaves the stack; the marks above it move down one place) and is
  not kept; any other pop (target popped already, rewound past, cleared away, not yet written,
  unknown or malformed) is skipped and its id recorded in ``skipped`` like a rewind's. History
  keeps both events: a pop only changes what replay shows (``pop_session``/``pop`` always
  target the newest event of the context: "pop the newest item");
- every other kind is appended.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from .models import Mark, Message, ReplayContext

__all__ = ["fold", "mark_label", "rewind_target", "target_id"]


def mark_label(data: Any) -> str | None:
    """A mark's label: ``data["label"]`` when it is a string, else None."""
    if isinstance(data, dict):
        label = data.get("label")
        if isinstance(label, str):
            return label
    return None


def target_id(data: Any) -> int | None:
    """A rewind's or a pop's ``data["target_message_id"]`` when it is an integer (not a bool),
    else None."""
    if isinstance(data, dict):
        target = data.get("target_message_id")
        if isinstance(target, int) and not isinstance(target, bool):
            return target
    return None


#: The old name of ``target_id`` (rewinds were the only events with a target).
rewind_target = target_id


def fold(events: Iterable[Message], into: ReplayContext | None = None) -> ReplayContext:
    """Apply ``events`` (in id order) to ``into`` (default: an empty context) and return it."""
    ctx = into if into is not None else ReplayContext()
    context, marks = ctx.messages, ctx.marks
    for event in events:
        kind = event.kind
        if kind == "clear":
            context.clear()
            marks.clear()
            ctx.skipped.clear()
        elif kind == "mark":
            marks.append(Mark(event.id, mark_label(event.data), len(context)))
            context.append(event)
        elif kind == "rewind":
            target = target_id(event.data)
            depth = next(
                (i for i in range(len(marks) - 1, -1, -1) if marks[i].message_id == target),
                None,
            )
            if depth is None:
                ctx.skipped.append(event.id)
                continue
            del context[marks[depth].context_idx + 1 :]
            del marks[depth + 1 :]
            context.append(event)
        elif kind == "pop":
            target = target_id(event.data)
            at = _position(context, target)
            if at is None:
                ctx.skipped.append(event.id)
                continue
            del context[at]
            for i in range(len(marks) - 1, -1, -1):
                mark = marks[i]
                if mark.context_idx < at:
                    break
                if mark.context_idx == at:
                    del marks[i]
                else:
                    marks[i] = Mark(mark.message_id, mark.label, mark.context_idx - 1)
        else:
            context.append(event)
    return ctx


def _position(context: list[Message], target: int | None) -> int | None:
    """Where the event ``target`` is in ``context`` (kept in id order), or None."""
    if target is None:
        return None
    at = bisect_left(context, target, key=_id)
    return at if at < len(context) and context[at].id == target else None


def _id(message: Message) -> int:
    return message.id
