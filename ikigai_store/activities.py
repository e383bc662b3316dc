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

from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import InvalidArgument, NotFound
from .identities import identity_name
from .mail import check_choice, check_str
from .models import ACTIVITY_TYPES, Activity
from .ops import Op, many, one
from .validate import MAX_ID, check_limit, dump_json

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


def check_since(value: object) -> datetime | None:
    """None, or a timezone-aware datetime (a naive one is ambiguous: refused)."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidArgument(f"since must be a timezone-aware datetime, got {value!r}")
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument(f"since is out of range: {value!r}") from None
    return value


def check_before(value: object) -> int | None:
    """None, an ``Activity`` (its id) or an activity id."""
    if value is None:
        return None
    if isinstance(value, Activity):
        return value.id
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
        raise InvalidArgument(f"before must be an Activity or a positive id, got {value!r}")
    return value


def record(
    identity: object, activity_type: object, description: object, metadata: Any
) -> Op[Activity]:
    name = identity_name(identity)
    check_type(activity_type)
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
    if row is not None:
        return Activity.from_row(row)
    state = yield one("activities_identity_state", identity=name)
    if state is None:
        raise NotFound(f"identity {name!r} does not exist")
    raise InvalidArgument(f"identity {name!r} is retired: it records no activity")


def feed(
    since: object, identity: object, activity_type: object, limit: object, before: object
) -> Op[list[Activity]]:
    when = check_since(since)
    name = None if identity is None else identity_name(identity)
    if activity_type is not None:
        check_type(activity_type)
    check_limit(limit)
    below = check_before(before)
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


def prune(older_than: object) -> Op[int]:
    if not isinstance(older_than, timedelta) or not timedelta(0) <= older_than <= MAX_PRUNE_AGE:
        raise InvalidArgument(
            f"older_than must be a timedelta from zero to {MAX_PRUNE_AGE.days} days, "
            f"got {older_than!r}"
        )
    row = yield one("activities_prune", older_than=older_than)
    return int(row["deleted"])
