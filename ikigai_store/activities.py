"""The activity feed: what identities did (seed 004's activities), newest first.

Owns recording, reading and pruning activities, for both faces (see ``ops``). Invariants:
- an activity's type is one of ``ACTIVITY_TYPES``, which equals the CHECK of
  ``activities.type`` (migration 0011) and contains every type any query inserts (a test reads
  ``queries/*.sql``): Subtrate never widened its CHECK and its review activities failed
  silently; here an unknown type is ``InvalidArgument`` before anything is written;
- an activity belongs to an identity that existed, was not retired when it was recorded, and is
  never deleted; rows are never updated, only pruned by age;
- the feed is ordered by id (newest first), never by timestamp, and paginated by keyset
  (``before``): a page never repeats or skips a row that was already committed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .errors import InvalidArgument, NotFound
from .models import ACTIVITY_TYPES, Activity, Identity
from .ops import Area, FaceT, Op, many, one, operation
from .validate import (
    check_choice,
    check_cursor,
    check_duration,
    check_limit,
    check_str,
    check_when,
    dump_json,
    identity_name,
)

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_PRUNE_AGE",
    "feed",
    "prune",
    "record",
]

#: Longest description, in characters.
MAX_DESCRIPTION_CHARS = 10_000
#: Longest age ``prune_activities`` accepts (100 years).
MAX_PRUNE_AGE = timedelta(days=36500)


def check_type(value: object, what: str = "type") -> str:
    """One of ``ACTIVITY_TYPES``; ``InvalidArgument`` listing them otherwise."""
    return check_choice(value, what, ACTIVITY_TYPES)


def record(
    identity: str | Identity,
    activity_type: str,
    description: str,
    *,
    metadata: dict[str, Any] | None = None,
) -> Op[Activity]:
    """Record what ``identity`` did: ``activity_type`` is one of ``ACTIVITY_TYPES`` (else
    ``InvalidArgument`` listing them), ``description`` 1-10,000 characters, ``metadata`` a
    JSON object or None. ``NotFound`` for an unknown identity, ``InvalidArgument`` for a
    retired one."""
    name = identity_name(identity)
    check_type(activity_type, "activity_type")
    text = check_str(description, "description", max_chars=MAX_DESCRIPTION_CHARS)
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidArgument(
            f"metadata must be a JSON object (a dict) or None, got {type(metadata).__name__}"
        )
    metadata_json = dump_json(metadata, "metadata")
    row = yield one(
        "activities_record",
        identity=name,
        type=activity_type,
        description=text,
        metadata=metadata_json,
    )
    # A missing or retired identity raises in the statement (IK404, IK400: NotFound,
    # InvalidArgument).
    return Activity.from_row(row)


def feed(
    *,
    since: datetime | None = None,
    identity: str | Identity | None = None,
    activity_type: str | None = None,
    limit: int = 50,
    before: Activity | int | None = None,
) -> Op[list[Activity]]:
    """Activities newest first (by id), at most ``limit``: of one identity and/or one
    ``activity_type``, created at or after ``since`` (a timezone-aware datetime). For the
    next page pass the last activity of this one as ``before`` (keyset pagination: nothing
    is repeated or skipped). ``NotFound`` when ``identity`` does not exist."""
    when = check_when(since, "since")
    name = None if identity is None else identity_name(identity)
    if activity_type is not None:
        check_type(activity_type, "activity_type")
    check_limit(limit)
    below = check_cursor(before, Activity, lambda a: a.id)
    window = {"since": when, "before": below, "limit": limit}
    if name is None and activity_type is None:
        rows = yield many("activities_feed", **window)
    elif activity_type is None:
        rows = yield many("activities_feed_identity", identity=name, **window)
    elif name is None:
        rows = yield many("activities_feed_type", type=activity_type, **window)
    else:
        rows = yield many(
            "activities_feed_identity_type", identity=name, type=activity_type, **window
        )
    if not rows and name is not None:
        state = yield one("activities_identity_state", identity=name)
        if state is None:
            raise NotFound(f"identity {name!r} does not exist")
    return [Activity.from_row(r) for r in rows]


def prune(*, older_than: timedelta | float) -> Op[int]:
    """Delete activities created more than ``older_than`` (a timedelta or seconds) ago;
    return how many."""
    age = check_duration(older_than, "older_than", maximum=MAX_PRUNE_AGE)
    row = yield one("activities_prune", older_than=age)
    return int(row["deleted"])


class ActivityCalls(Area[FaceT]):
    """``store.activities``: the activity feed (see ``ikigai_store.activities``).

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    record = operation(record)
    feed = operation(feed)
    prune = operation(prune)
