"""The production pure fold agrees with the reference model on random event lists; no database."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ikigai_store.models import Message
from ikigai_store.replay import fold
from tests.reference import RefEvent, replay_events

ORDINARY_KINDS = [
    "system",
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "fork",
    "command",
    "usage",
    "interrupted",
    "agent_killed",
]

SESSION_ID = 7
CREATED_AT = datetime(2025, 1, 1, tzinfo=UTC)

# The fold is pure and cheap: run ten times the active profile's examples.
cheap = settings(max_examples=10 * settings().max_examples)

texts = st.text(max_size=12)
json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)

labels = st.one_of(
    st.none(),
    texts,
    st.sampled_from(["approach-a", "", "héllo \"q\" 'x' ✓"]),
    st.integers(),
    st.booleans(),
    st.lists(texts, max_size=2),
)
mark_data = st.one_of(
    labels.map(lambda label: {"label": label}),
    st.just({}),
    st.none(),
    json_values,
)
malformed_rewind_data = st.one_of(
    st.none(),
    st.just({}),
    st.just({"target_message_id": None}),
    st.just({"target_message_id": True}),
    st.just({"target_message_id": False}),
    st.integers(0, 50).map(lambda i: {"target_message_id": str(i)}),
    st.integers(0, 50).map(lambda i: {"target_message_id": float(i)}),
    st.integers(0, 50).map(lambda i: {"target_message_id": [i]}),
    st.integers(0, 50).map(lambda i: {"target": i}),
    st.integers(0, 50),
    texts,
)

# How a rewind picks its target (the live stack is favoured): the current stack, any earlier mark
# (often stale), any earlier id (often not a mark), an id not yet used, or malformed data.
TARGET_CHOICES = ["current", "current", "current", "any_mark", "any_id", "unknown", "malformed"]


@st.composite
def event_lists(draw: st.DrawFn) -> list[RefEvent]:
    """Events with strictly increasing, gappy ids; rewinds aimed at interesting targets."""
    events: list[RefEvent] = []
    next_id = draw(st.integers(1, 1000))
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(
            st.sampled_from(["mark", "rewind", "rewind", "clear", *ORDINARY_KINDS[:4]])
            | st.sampled_from(ORDINARY_KINDS)
        )
        content: str | None = draw(st.none() | texts)
        data: Any
        if kind == "mark":
            data = draw(mark_data)
        elif kind == "rewind":
            data = _rewind_data(draw, events, next_id)
        else:
            data = draw(json_values)
        events.append(RefEvent(next_id, kind, content, data))
        next_id += draw(st.integers(1, 3))
    return events


def _rewind_data(draw: st.DrawFn, events: list[RefEvent], this_id: int) -> Any:
    choice = draw(st.sampled_from(TARGET_CHOICES))
    _, stack, _ = replay_events(events)
    pools = {
        "current": [mark_id for mark_id, _, _ in stack],
        "any_mark": [e.id for e in events if e.kind == "mark"],
        "any_id": [e.id for e in events],
        "unknown": [this_id, this_id + 1, 0, -1],
    }
    pool = pools.get(choice)
    if not pool:
        return draw(malformed_rewind_data)
    return {"target_message_id": draw(st.sampled_from(pool))}


def to_message(event: RefEvent) -> Message:
    """Wrap a model event in the production Message type."""
    return Message(
        id=event.id,
        session_id=SESSION_ID,
        agent_uuid=None,
        kind=event.kind,
        content=event.content,
        data=event.data,
        created_at=CREATED_AT,
    )


@cheap
@given(event_lists())
def test_fold_agrees_with_reference_model(events: list[RefEvent]) -> None:
    """fold() yields the model's context ids, mark stack and skipped rewinds for any event list."""
    messages = [to_message(e) for e in events]
    ctx = fold(messages)
    context_ids, marks, skipped = replay_events(events)
    assert [m.id for m in ctx.messages] == context_ids
    assert [(mk.message_id, mk.label, mk.context_idx) for mk in ctx.marks] == marks
    assert ctx.skipped == skipped


@cheap
@given(event_lists())
def test_fold_keeps_messages_unchanged_and_input_untouched(events: list[RefEvent]) -> None:
    """fold() returns the input Message values themselves and leaves its input list as it was."""
    messages = [to_message(e) for e in events]
    before = list(messages)
    ctx = fold(messages)
    assert messages == before
    by_id = {m.id: m for m in messages}
    assert all(m == by_id[m.id] for m in ctx.messages)
    assert all(ctx.messages[mk.context_idx].id == mk.message_id for mk in ctx.marks)


def test_fold_seed_example() -> None:
    """fold() reproduces the seed example: context [1, 2, 3, 6, 7, 8], one mark at index 2."""
    kinds = ["user", "assistant", "mark", "user", "assistant", "rewind", "user", "assistant"]
    data: dict[int, Any] = {3: {"label": "approach-a"}, 6: {"target_message_id": 3}}
    events = [RefEvent(i, k, None, data.get(i)) for i, k in enumerate(kinds, start=1)]
    ctx = fold([to_message(e) for e in events])
    assert [m.id for m in ctx.messages] == [1, 2, 3, 6, 7, 8]
    assert [(mk.message_id, mk.label, mk.context_idx) for mk in ctx.marks] == [(3, "approach-a", 2)]
    assert ctx.skipped == []


def test_fold_of_nothing_is_empty() -> None:
    """fold([]) is an empty context with no marks and nothing skipped."""
    ctx = fold([])
    assert (ctx.messages, ctx.marks, ctx.skipped) == ([], [], [])
