"""Summaries: what an identity has been doing (seed 004's agent_summaries), and the context
summaries a runtime agent keeps of ranges of its history.

Owns adding, reading and pruning both kinds, for both faces (see ``ops``). Invariants:
- an agent summary belongs to an identity that existed and was not retired when it was added;
  ``cost_usd`` is never negative; "newest" is the highest id, never a timestamp;
- ``prune_summaries`` keeps the newest ``keep`` of each identity in one statement (a window
  function), so a racing ``add_summary`` is either kept or was never seen;
- a context summary covers ``start_msg_id``..``end_msg_id`` (both included, start <= end) where
  both ends are messages of the agent's *replayable history*: the ranges ``replay_ranges``
  gives (its own events and its ancestors' up to each fork point, after the newest clear,
  through the one lineage walk ``agent_replay_ranges()``), checked by the inserting statement;
- a range is summarised once per agent: adding the same range again with the same summary and
  token count returns the stored row (a retry is harmless), with anything else ``Conflict``;
- an agent keeps its newest ``KEEP_CONTEXT_SUMMARIES`` context summaries: the insert and the
  prune run in one transaction under a per-agent advisory lock, so concurrent adds never leave
  more.
"""

from __future__ import annotations

import math
from datetime import timedelta

from .errors import Conflict, InvalidArgument, NotFound
from .models import AgentSummary, ContextSummary, Identity
from .ops import Area, FaceT, Op, atomic, many, one, operation
from .validate import (
    MAX_ID,
    check_content,
    check_duration,
    check_id,
    check_limit,
    check_str,
    check_uuid,
    identity_name,
)

__all__ = [
    "KEEP_CONTEXT_SUMMARIES",
    "MAX_HASH_CHARS",
    "add",
    "add_context",
    "context_summaries",
    "history",
    "latest",
    "prune",
]

#: How many context summaries an agent keeps (the newest).
KEEP_CONTEXT_SUMMARIES = 5
#: Longest transcript hash, in characters.
MAX_HASH_CHARS = 200
#: Largest token count (PostgreSQL integer).
MAX_TOKENS = 2**31 - 1
_RETRIES = 3


def _check_summary(summary: object) -> str:
    if not isinstance(summary, str):
        raise InvalidArgument(f"summary must be a string, got {type(summary).__name__}")
    if not summary.strip():
        raise InvalidArgument("summary must not be empty")
    check_content(summary, "summary")
    return summary


def _check_cost(cost: object) -> float | None:
    if cost is None:
        return None
    if (
        isinstance(cost, bool)
        or not isinstance(cost, (int, float))
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise InvalidArgument(f"cost_usd must be a finite number >= 0 or None, got {cost!r}")
    return float(cost)


def _check_count(value: object, what: str, minimum: int, maximum: int = MAX_ID) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidArgument(f"{what} must be an integer in [{minimum}, {maximum}], got {value!r}")
    return value


def add(
    identity: str | Identity,
    summary: str,
    *,
    delta: str | None = None,
    transcript_hash: str | None = None,
    cost_usd: float | None = None,
) -> Op[AgentSummary]:
    """Store a summary of ``identity``'s work, with what changed since the last one
    (``delta``), the hash of the transcript it summarises and what it cost (>= 0).
    ``NotFound`` for an unknown identity, ``InvalidArgument`` for a retired one."""
    name = identity_name(identity)
    text = _check_summary(summary)
    if delta is not None:
        if not isinstance(delta, str):
            raise InvalidArgument(f"delta must be a string or None, got {type(delta).__name__}")
        check_content(delta, "delta")
    if transcript_hash is not None:
        check_str(transcript_hash, "transcript_hash", max_chars=MAX_HASH_CHARS)
    cost = _check_cost(cost_usd)
    row = yield one(
        "summaries_add",
        identity=name,
        summary=text,
        delta=delta,
        transcript_hash=transcript_hash,
        cost_usd=cost,
    )
    # A missing or retired identity raises in the statement (IK404, IK400: NotFound,
    # InvalidArgument).
    return AgentSummary.from_row(row)


def history(identity: str | Identity, *, limit: int = 10) -> Op[list[AgentSummary]]:
    """The identity's summaries, newest first, at most ``limit``."""
    name = identity_name(identity)
    check_limit(limit)
    rows = yield many("summaries_history", identity=name, limit=limit)
    if not rows:
        state = yield one("summaries_identity_state", identity=name)
        if state is None:
            raise NotFound(f"identity {name!r} does not exist")
    return [AgentSummary.from_row(r) for r in rows]


def latest(identity: str | Identity) -> Op[AgentSummary | None]:
    """The identity's newest summary, or None when it has none."""
    found = yield from history(identity, limit=1)
    return found[0] if found else None


def prune(
    *,
    older_than: timedelta | float | None = None,
    keep: int = 5,
    identity: str | Identity | None = None,
) -> Op[int]:
    """Delete summaries older than ``older_than`` (a timedelta or seconds; None: any age)
    except the newest ``keep`` of each identity (of ``identity`` only, when given), in one
    statement; return how many were deleted."""
    age = None if older_than is None else check_duration(older_than, "older_than")
    name = None if identity is None else identity_name(identity)
    _check_count(keep, "keep", 0)
    row = yield one("summaries_prune", identity=name, keep=keep, older_than=age)
    deleted = int(row["deleted"])
    if deleted == 0 and name is not None:
        state = yield one("summaries_identity_state", identity=name)
        if state is None:
            raise NotFound(f"identity {name!r} does not exist")
    return deleted


# ---------------------------------------------------------------- context summaries


@atomic
def add_context(
    agent_uuid: str, summary: str, start_msg_id: int, end_msg_id: int, token_count: int
) -> Op[ContextSummary]:
    """Store a runtime agent's summary of its messages ``start_msg_id``..``end_msg_id``
    (both included); only the agent's newest 5 are kept (in the same transaction).

    Both ends must be messages of the agent's replayable history (``replay_ranges``: its
    own events and its ancestors' up to each fork point, after the newest clear), and
    start <= end: else ``InvalidArgument``. ``NotFound`` for an unknown agent. The same
    range again returns the stored summary when summary and token count are equal, and
    raises ``Conflict`` when they differ.
    """
    check_uuid(agent_uuid)
    text = _check_summary(summary)
    check_id(start_msg_id, "start_msg_id")
    check_id(end_msg_id, "end_msg_id")
    assert isinstance(start_msg_id, int) and isinstance(end_msg_id, int)
    if start_msg_id > end_msg_id:
        raise InvalidArgument(
            f"start_msg_id ({start_msg_id}) must not be after end_msg_id ({end_msg_id})"
        )
    tokens = _check_count(token_count, "token_count", 0, MAX_TOKENS)
    yield one("summaries_lock_agent", agent_uuid=agent_uuid)
    for _ in range(_RETRIES):
        row = yield one(
            "summaries_add_context",
            agent_uuid=agent_uuid,
            summary=text,
            start_msg_id=start_msg_id,
            end_msg_id=end_msg_id,
            token_count=tokens,
        )
        if row is not None:
            yield one("summaries_prune_context", agent_uuid=agent_uuid, keep=KEEP_CONTEXT_SUMMARIES)
            return ContextSummary.from_row(row)
        why = yield one(
            "summaries_context_refusal",
            agent_uuid=agent_uuid,
            start_msg_id=start_msg_id,
            end_msg_id=end_msg_id,
        )
        if not why["agent_exists"]:
            raise NotFound(f"agent {agent_uuid} does not exist")
        for end, msg_id in (("start", start_msg_id), ("end", end_msg_id)):
            if not why[f"{end}_visible"]:
                raise InvalidArgument(
                    f"{end}_msg_id {msg_id} is not a message of agent {agent_uuid}'s "
                    "replayable history (its own events and its ancestors' up to each fork "
                    "point, after the newest clear)"
                )
        if why["id"] is None:
            continue  # the history changed between the two statements: ask again
        existing = ContextSummary.from_row(why)
        if existing.summary == text and existing.token_count == tokens:
            return existing
        raise Conflict(
            f"agent {agent_uuid} already has a different summary of messages "
            f"{start_msg_id}..{end_msg_id} (context summary {existing.id})",
            constraint="context_summaries_range_key",
            sqlstate="23505",
        )
    raise Conflict(
        f"the context summary of messages {start_msg_id}..{end_msg_id} of agent {agent_uuid} "
        f"was refused {_RETRIES} times while its history changed: try again",
        constraint=None,
        sqlstate=None,
    )


def context_summaries(agent_uuid: str) -> Op[list[ContextSummary]]:
    """A runtime agent's context summaries, newest first (at most 5)."""
    check_uuid(agent_uuid)
    rows = yield many("summaries_context", agent_uuid=agent_uuid)
    if not rows:
        found = yield one("summaries_agent_exists", agent_uuid=agent_uuid)
        if found is None:
            raise NotFound(f"agent {agent_uuid} does not exist")
    return [ContextSummary.from_row(r) for r in rows]


class SummaryCalls(Area[FaceT]):
    """``store.summaries``: summaries of identities' work and runtime agents' context
    summaries (see ``ikigai_store.summaries``)."""

    add = operation(add)
    latest = operation(latest)
    history = operation(history)
    prune = operation(prune)
    add_context_summary = operation(add_context)
    context_summaries = operation(context_summaries)
