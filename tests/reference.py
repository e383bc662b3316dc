"""In-memory reference model of session replay: the oracle the production fold is tested against.

Owns nothing persistent. It records appended events and recomputes the replay from scratch, in the
most direct way, every time ``replay()`` is called. It is written from the spec, not from
``ikigai_store.replay``, and imports nothing from the package.

Spec (events processed in ``id`` order):

- ``clear``: empty the context, the mark stack and ``skipped`` (it reports the live part only);
  the clear itself is not kept.
- ``mark``: append it; push ``(message_id, label, index of the mark in the context)``. The label is
  ``data["label"]`` when ``data`` is a dict and that value is a str, else None.
- ``rewind``: if ``data["target_message_id"]`` is an int (not a bool) naming a mark still on the
  stack, cut the context to end just after that mark, drop the marks above it (it stays and can be
  reused) and append the rewind. Otherwise the rewind is not appended; its id goes to ``skipped``.
- any other kind: append.

Invariants: every mark on the stack is in the context at its ``context_idx``; stack entries have
strictly increasing ``context_idx``; ``skipped`` ids are in increasing order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RefEvent", "RefMark", "RefSession", "replay_events"]

RefMark = tuple[int, str | None, int]
"""``(message_id, label, context_idx)``."""


@dataclass(frozen=True)
class RefEvent:
    """One event as the model sees it."""

    id: int
    kind: str
    content: str | None = None
    data: Any = None


def _label(data: Any) -> str | None:
    if isinstance(data, dict):
        label = data.get("label")
        if isinstance(label, str):
            return label
    return None


def _target(data: Any) -> int | None:
    if isinstance(data, dict):
        target = data.get("target_message_id")
        if isinstance(target, int) and not isinstance(target, bool):
            return target
    return None


def replay_events(events: list[RefEvent]) -> tuple[list[int], list[RefMark], list[int]]:
    """Replay ``events`` (sorted by id first) into ``(context_ids, marks, skipped)``."""
    context: list[int] = []
    marks: list[RefMark] = []
    skipped: list[int] = []
    for event in sorted(events, key=lambda e: e.id):
        if event.kind == "clear":
            context = []
            marks = []
            skipped = []
        elif event.kind == "mark":
            context.append(event.id)
            marks.append((event.id, _label(event.data), len(context) - 1))
        elif event.kind == "rewind":
            target = _target(event.data)
            stack_ids = [mark_id for mark_id, _, _ in marks]
            if target is None or target not in stack_ids:
                skipped.append(event.id)
                continue
            position = stack_ids.index(target)
            _, _, context_idx = marks[position]
            context = context[: context_idx + 1]
            marks = marks[: position + 1]
            context.append(event.id)
        else:
            context.append(event.id)
    return context, marks, skipped


@dataclass
class RefSession:
    """A session's appended events; ``replay()`` recomputes the context from all of them."""

    events: list[RefEvent] = field(default_factory=list)

    def append(self, id: int, kind: str, content: str | None = None, data: Any = None) -> RefEvent:
        """Record one event; ids must be strictly increasing, as the store assigns them."""
        if self.events and id <= self.events[-1].id:
            raise ValueError(f"id {id} is not greater than {self.events[-1].id}")
        event = RefEvent(id, kind, content, data)
        self.events.append(event)
        return event

    @property
    def ids(self) -> list[int]:
        """Ids of every appended event, in order."""
        return [e.id for e in self.events]

    def mark_ids(self) -> list[int]:
        """Ids of every mark ever appended, whether or not still on the stack."""
        return [e.id for e in self.events if e.kind == "mark"]

    def replay(self) -> tuple[list[int], list[RefMark], list[int]]:
        """Return ``(context_ids, marks, skipped)`` for the events appended so far."""
        return replay_events(self.events)
