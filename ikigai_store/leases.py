"""Leases: a resource (a file, a build slot, a port) reserved by an identity for a while.

Owns acquiring, renewing, releasing and listing leases, for both faces (see ``ops``).
Invariants:
- the database refuses a second holder, whatever this code does: the exclusion constraint
  ``leases_exclusion`` (migration 0014) lets an exclusive lease's period overlap no other
  lease of its resource and a shared lease's only shared ones, so of any number of racing
  acquirers of one free resource exactly one exclusive grant commits (the others wait for it,
  then get ``Conflict``);
- a lease is live while ``expires_at`` is after ``ikigai_now()``; a grant's period starts at
  ``ikigai_clock()`` (migration 0031: read once by the granting statement, after its
  snapshot), so an expired lease frees its resource by itself, with no cleanup job, and is
  never live again: ``renew`` needs a live lease and its token, and keeps its start;
- exclusive holders' periods never overlap: a lease's period is ``[acquired_at, end)``, its
  end being its expiry or the commit that deleted it (released, force-released, replaced,
  swept once expired), and a grant starts no earlier than the end of every conflicting lease
  before it, also one deleted while the grant was on its way (the grant is refused while its
  snapshot shows a conflicting lease; one deleted before the snapshot ended before the clock
  was read);
- an identity holds at most one lease per resource: acquiring again replaces its lease (a new
  token; the old one is dead), in the same statement, or not at all when refused;
- every time comes from the database, never from this process.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .errors import Conflict, InvalidArgument, NotFound
from .models import Identity, Lease
from .ops import Area, FaceT, Op, many, model_row, one, operation, value
from .validate import check_duration, check_text, identity_name

__all__ = [
    "MAX_RESOURCE_CHARS",
    "MAX_TTL",
    "acquire",
    "check_ttl",
    "force_release",
    "held",
    "release",
    "renew",
    "wait_for",
]

#: Longest time a lease may be taken or renewed for.
MAX_TTL = timedelta(days=1)
#: Longest resource name, in characters.
MAX_RESOURCE_CHARS = 512
#: The constraint that refuses overlapping leases (``Conflict.constraint`` of a refusal).
EXCLUSION = "leases_exclusion"
#: How often acquire asks again when the lease that refused it ended before it could be named.
_RETRIES = 3
#: One acquire in this many (counted per process) skips the fast path, so that its statement
#: sweeps expired leases (up to 32: more than the at most one lease each acquire adds).
SWEEP_EVERY = 8
_turns = itertools.count()


def check_resource(resource: object, what: str = "resource") -> str:
    """A resource name: a string of 1-``MAX_RESOURCE_CHARS`` characters PostgreSQL can store."""
    if not isinstance(resource, str):
        raise InvalidArgument(f"{what} must be a string, got {type(resource).__name__}")
    if not 0 < len(resource) <= MAX_RESOURCE_CHARS:
        raise InvalidArgument(
            f"{what} must be 1-{MAX_RESOURCE_CHARS} characters, got {len(resource)}"
        )
    check_text(resource, what)
    return resource


def check_ttl(ttl: object) -> timedelta:
    """A lease length: a ``timedelta`` or a number of seconds, in (0, ``MAX_TTL``] (and at
    least a microsecond, the database's resolution)."""
    return check_duration(ttl, "ttl", maximum=MAX_TTL, zero=False)


def check_lease(value: object) -> tuple[str, str]:
    """(resource, token) of a ``Lease`` or of a ``(resource, token)`` pair."""
    if isinstance(value, Lease):
        resource, token = value.resource, value.token
    elif isinstance(value, tuple) and len(value) == 2:
        resource, token = value
    else:
        raise InvalidArgument(
            f"expected a Lease (from store.leases.acquire) or (resource, token), got {value!r}"
        )
    check_resource(resource, "lease resource")
    try:
        uuid.UUID(token)
    except (ValueError, TypeError, AttributeError):
        raise InvalidArgument(f"not a lease token: {token!r}") from None
    return resource, token


def _describe(blockers: list[Lease]) -> str:
    first = blockers[0]
    if first.exclusive:
        return f"held exclusively by {first.holder!r} until {first.expires_at.isoformat()}"
    names = ", ".join(repr(b.holder) for b in blockers[:5])
    more = f" and {len(blockers) - 5} more" if len(blockers) > 5 else ""
    return f"held shared by {names}{more} until {first.expires_at.isoformat()}"


def acquire(
    holder: str | Identity, resource: str, *, ttl: timedelta | float, exclusive: bool = True
) -> Op[Lease]:
    """Lease ``resource`` (1-512 characters) to ``holder`` for ``ttl`` (a timedelta or
    seconds, at most one day) from now, by the database's clock.

    An exclusive lease is refused while another holder has a live lease on the resource;
    a shared one (``exclusive=False``) only while another holder has a live exclusive one.
    Refused: ``Conflict`` naming the holder(s) and when the lease ends. A holder acquiring a
    resource it holds replaces its lease (new token, mode and expiry). An expired lease
    frees the resource by itself. ``NotFound`` for an unknown holder, ``InvalidArgument``
    for a retired one.
    """
    name = identity_name(holder, "holder")
    res = check_resource(resource)
    length = check_ttl(ttl)
    if not isinstance(exclusive, bool):
        raise InvalidArgument(f"exclusive must be a bool, got {exclusive!r}")
    # The common case, a resource the holder holds no lease on, is one INSERT (leases_grant);
    # one call in SWEEP_EVERY runs the statement that also sweeps. When the INSERT grants
    # nothing and nobody is in the way, the holder has a lease there to replace: the full
    # statement does that (an extra try, beyond the _RETRIES of the loop).
    query = "leases_grant" if next(_turns) % SWEEP_EVERY else "leases_acquire"
    tries = _RETRIES + 1 if query == "leases_grant" else _RETRIES
    for _ in range(tries):
        # One statement, atomic by itself: a refusal that replaced the holder's own lease is an
        # exclusion violation that undoes it whole, so no transaction is opened around it.
        undone = False
        lease: Lease | None
        try:
            lease = yield model_row(
                query, Lease, holder=name, resource=res, exclusive=exclusive, ttl=length
            )
        except Conflict as exc:
            if exc.constraint != EXCLUSION:
                raise
            lease, undone = None, True
        if lease is not None:
            return lease
        rows = yield many("leases_refusal", holder=name, resource=res, exclusive=exclusive)
        state = rows[0]["holder_state"]
        if state is None:
            raise NotFound(f"identity {name!r} does not exist")
        if state == "retired":
            raise InvalidArgument(f"identity {name!r} is retired: it cannot hold leases")
        blockers = [Lease.from_row(r) for r in rows if r["id"] is not None]
        if blockers:
            mode = "an exclusive" if exclusive else "a shared"
            raise Conflict(
                f"{mode} lease on {res!r} for {name!r} is refused: it is {_describe(blockers)}",
                constraint=EXCLUSION,
                sqlstate="23P01",
            )
        if undone:
            # The error also ended the transaction of an operation that called this one
            # (watch.start): asking again would go on outside it.
            break
        # The holder's own lease is to be replaced, or the lease that refused this one ended
        # (or was replaced) before it could be named: ask again, with the full statement.
        query = "leases_acquire"
    raise Conflict(
        f"the lease on {res!r} for {name!r} was refused by a lease that ended at once: try again",
        constraint=EXCLUSION,
        sqlstate="23P01",
    )


def _lost(resource: str, token: str, found: Mapping[str, Any] | None) -> Conflict:
    if found is not None and not found["live"]:
        return Conflict(
            f"the lease on {resource!r} (token {token}) expired at "
            f"{found['expires_at'].isoformat()}: acquire it again",
            constraint=None,
            sqlstate=None,
        )
    return Conflict(
        f"the lease on {resource!r} (token {token}) is not held: it was released, "
        "force-released, replaced by a new acquire, or it expired",
        constraint=None,
        sqlstate=None,
    )


def renew(lease: Lease | tuple[str, str], ttl: timedelta | float) -> Op[Lease]:
    """Make a live lease end ``ttl`` from now; return it. ``Conflict`` when it is no
    longer live (expired, released, force-released or replaced): acquire it again."""
    resource, token = check_lease(lease)
    length = check_ttl(ttl)
    try:
        renewed: Lease | None = yield model_row(
            "leases_renew", Lease, resource=resource, token=token, ttl=length
        )
    except Conflict as exc:  # only when the clock went back: someone holds the new period
        if exc.constraint != EXCLUSION:
            raise
        raise Conflict(
            f"the lease on {resource!r} (token {token}) cannot be renewed: another holder's "
            "lease overlaps the renewed period",
            constraint=EXCLUSION,
            sqlstate="23P01",
        ) from exc
    if renewed is not None:
        return renewed
    found = yield one("leases_by_token", resource=resource, token=token)
    raise _lost(resource, token, found)


def release(lease: Lease | tuple[str, str]) -> Op[bool]:
    """End a lease: True when it was live, False when it had already ended (idempotent:
    its token no longer holds anything either way)."""
    resource, token = check_lease(lease)
    live = yield value("leases_release", resource=resource, token=token)
    return bool(live)


def force_release(resource: str) -> Op[int]:
    """End every lease on ``resource``, whoever holds it (for administrators); return how
    many were live."""
    res = check_resource(resource)
    row = yield one("leases_force_release", resource=res)
    return int(row["ended"])


def held(prefix: str = "", *, holder: str | Identity | None = None) -> Op[list[Lease]]:
    """Live leases whose resource starts with ``prefix`` (literally: no wildcards), of one
    holder when given, by resource. ``NotFound`` for an unknown holder."""
    if not isinstance(prefix, str):
        raise InvalidArgument(f"prefix must be a string, got {type(prefix).__name__}")
    if len(prefix) > MAX_RESOURCE_CHARS:
        raise InvalidArgument(
            f"prefix is {len(prefix)} characters; a resource has at most {MAX_RESOURCE_CHARS}"
        )
    check_text(prefix, "prefix")
    name = None if holder is None else identity_name(holder, "holder")
    rows = yield many("leases_held", prefix=prefix, holder=name)
    if not rows and name is not None:
        found = yield one("leases_identity_exists", holder=name)
        if found is None:
            raise NotFound(f"identity {name!r} does not exist")
    return [Lease.from_row(r) for r in rows]


def wait_for(waiter: str | Identity, resource: str) -> Op[None]:
    """Record that ``waiter`` waits for ``resource`` to be free: its ``ikigai-store watch``
    reports the resource once no other identity holds a live lease on it (released,
    force-released or expired), then forgets the wait. Idempotent. ``NotFound`` for an unknown
    waiter, ``InvalidArgument`` for a retired one or a bad resource."""
    name = identity_name(waiter, "waiter")
    res = check_resource(resource)
    row = yield one("lease_wait", waiter=name, resource=res)
    if row is None:
        found = yield one("leases_identity_exists", holder=name)
        if found is None:
            raise NotFound(f"identity {name!r} does not exist")
        raise InvalidArgument(f"identity {name!r} is retired: it cannot wait for leases")


class LeaseCalls(Area[FaceT]):
    """``store.leases``: resources reserved by identities, enforced by the database (see
    ``ikigai_store.leases``). A holder is an identity's name or an ``Identity``; a lease is a
    ``Lease`` or a ``(resource, token)`` pair."""

    acquire = operation(acquire)
    renew = operation(renew)
    release = operation(release)
    force_release = operation(force_release)
    held = operation(held)
    wait_for = operation(wait_for)
