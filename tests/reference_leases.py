"""In-memory reference model of leases: the store's oracle for ``store.leases``.

Written from issue 10 ("Exclusive leases") and the decisions recorded in the README draft, not
from the SQL; it imports nothing from ``ikigai_store``. Everything is plain dicts and lists,
recomputed on every read; time is ``now``, moved by hand.

Identities: a name matches ``NAME``; registered ones may be retired.

A lease: resource, holder, exclusive, token, acquired_at, expires_at. It is *live* while
``expires_at > now``. Two leases of different holders on one resource *conflict* when either
is exclusive. At most one lease per (holder, resource) exists.

A lease's *period* is ``[acquired_at, end)``: it ends at ``expires_at``, or earlier when it is
released, force-released or replaced (then ``end`` is that moment). The guarantee (issue 38):
the periods of two conflicting leases, of every lease ever granted, never overlap — a grant
starts no earlier than the end of every conflicting lease before it, also when that lease
ended while the grant was on its way (``periods_overlap`` checks a list of periods; the
concurrency tests apply it to what the store returned under real races).

``acquire(holder, resource, ttl, exclusive)``: checks in order: holder a name (``RefInvalid``),
resource a string of 1-512 characters without NUL, ttl a timedelta or a number of seconds (not
a bool, finite) in (0, 1 day] and at least a microsecond, exclusive a bool (all
``RefInvalid``); a missing holder ``RefNotFound``, a retired one ``RefInvalid``; then, if a live
lease of another holder on the resource conflicts with the request, ``RefConflict`` naming the
resource and those holders. Otherwise the holder's own lease on the resource (live or not, any
mode) is replaced by a new one: ``acquired_at = now``, ``expires_at = now + ttl``, a new token
(the store's, given to the model).

``renew(resource, token, ttl)``: the lease with that token on that resource, if it is live,
ends ``now + ttl`` (its start is kept); otherwise ``RefConflict`` naming the resource (the
lease was lost).
``release(resource, token)``: removes that lease if it exists; returns whether it was live
(False when there was none: idempotent). ``force_release(resource)``: removes every lease on
the resource; returns how many were live. ``held(prefix, holder)``: live leases whose resource
starts with ``prefix`` literally (of ``holder`` when given: a missing one is ``RefNotFound``),
by resource (code point order) then acquisition order. A lease (pair) argument is checked
first: resource as above, token a UUID string (``RefInvalid``).
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.reference_mail import RefConflict, RefInvalid, RefNotFound

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_TTL = timedelta(days=1)
MAX_RESOURCE = 512
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class RefLease:
    resource: str
    holder: str
    exclusive: bool
    token: str
    acquired_at: datetime
    expires_at: datetime
    order: int
    ended_at: datetime | None = None  # when released, force-released or replaced

    @property
    def end(self) -> datetime:
        """Where its period ends: its expiry, or when it was ended, whichever is first."""
        return self.expires_at if self.ended_at is None else min(self.expires_at, self.ended_at)

    def view(self) -> tuple[Any, ...]:
        return (
            self.resource,
            self.holder,
            self.exclusive,
            self.token,
            self.acquired_at,
            self.expires_at,
        )


@dataclass
class RefLeaseWorld:
    now: datetime = EPOCH
    identities: dict[str, bool] = field(default_factory=dict)  # name -> retired
    leases: list[RefLease] = field(default_factory=list)
    made: int = 0
    history: list[RefLease] = field(default_factory=list)  # every lease ever granted

    # -- identities and time -------------------------------------------------------------------

    def register(self, name: str) -> None:
        assert name not in self.identities
        self.identities[name] = False

    def retire(self, name: str) -> None:
        self.identities[name] = True

    def advance(self, delta: timedelta) -> datetime:
        assert delta >= timedelta(0)
        self.now += delta
        return self.now

    # -- checks ----------------------------------------------------------------------------------

    @staticmethod
    def check_name(name: object, what: str = "holder") -> str:
        if not isinstance(name, str) or NAME.fullmatch(name) is None:
            raise RefInvalid(f"bad {what}", what)
        return name

    @staticmethod
    def check_resource(resource: object, what: str = "resource") -> str:
        if not isinstance(resource, str) or not 0 < len(resource) <= MAX_RESOURCE:
            raise RefInvalid(f"bad {what}", what)
        if "\x00" in resource:
            raise RefInvalid(f"{what} has a NUL", what)
        return resource

    @staticmethod
    def check_ttl(ttl: object) -> timedelta:
        if isinstance(ttl, timedelta):
            value = ttl
        elif isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and math.isfinite(ttl):
            if not 0 < ttl <= MAX_TTL.total_seconds():
                raise RefInvalid("ttl out of range", "ttl")
            value = timedelta(seconds=ttl)
        else:
            raise RefInvalid("ttl is not a duration", "ttl")
        if not timedelta(0) < value <= MAX_TTL:
            raise RefInvalid("ttl out of range", "ttl")
        return value

    def check_pair(self, resource: object, token: object) -> tuple[str, str]:
        self.check_resource(resource, "lease resource")
        assert isinstance(resource, str)
        try:
            uuid.UUID(token)  # type: ignore[arg-type]
        except (ValueError, TypeError, AttributeError):
            raise RefInvalid("not a token", "token") from None
        assert isinstance(token, str)
        return resource, token

    # -- reading ---------------------------------------------------------------------------------

    def live(self, lease: RefLease) -> bool:
        return lease.expires_at > self.now

    def by_token(self, token: str) -> RefLease | None:
        return next((x for x in self.leases if x.token == token), None)

    def held(self, prefix: object = "", holder: object = None) -> list[RefLease]:
        if not isinstance(prefix, str) or len(prefix) > MAX_RESOURCE or "\x00" in prefix:
            raise RefInvalid("bad prefix", "prefix")
        if holder is not None:
            self.check_name(holder)
            if holder not in self.identities:
                raise RefNotFound("no such holder", str(holder))
        found = [
            x
            for x in self.leases
            if self.live(x)
            and x.resource.startswith(prefix)
            and (holder is None or x.holder == holder)
        ]
        return sorted(found, key=lambda x: (x.resource, x.order))

    # -- writing ---------------------------------------------------------------------------------

    def acquire(
        self, holder: object, resource: object, ttl: object, exclusive: object, token: str | None
    ) -> RefLease:
        name = self.check_name(holder)
        res = self.check_resource(resource)
        length = self.check_ttl(ttl)
        if not isinstance(exclusive, bool):
            raise RefInvalid("exclusive is not a bool", "exclusive")
        if name not in self.identities:
            raise RefNotFound("no such holder", name)
        if self.identities[name]:
            raise RefInvalid("retired holder", name, "retired")
        blockers = [
            x
            for x in self.leases
            if x.resource == res
            and x.holder != name
            and self.live(x)
            and (exclusive or x.exclusive)
        ]
        if blockers:
            raise RefConflict("held", res, *sorted({x.holder for x in blockers}))
        assert token is not None, "the store granted the lease: pass its token"
        self._end([x for x in self.leases if x.resource == res and x.holder == name])
        self.made += 1
        lease = RefLease(res, name, exclusive, token, self.now, self.now + length, self.made)
        self.leases.append(lease)
        self.history.append(lease)
        return lease

    def _end(self, gone: list[RefLease]) -> None:
        for lease in gone:
            lease.ended_at = self.now
        self.leases = [x for x in self.leases if all(x is not g for g in gone)]

    def renew(self, resource: object, token: object, ttl: object) -> RefLease:
        res, tok = self.check_pair(resource, token)
        length = self.check_ttl(ttl)
        lease = self.by_token(tok)
        if lease is None or lease.resource != res or not self.live(lease):
            raise RefConflict("not held", res)
        lease.expires_at = self.now + length
        return lease

    def release(self, resource: object, token: object) -> bool:
        res, tok = self.check_pair(resource, token)
        lease = self.by_token(tok)
        if lease is None or lease.resource != res:
            return False
        live = self.live(lease)
        self._end([lease])
        return live

    def force_release(self, resource: object) -> int:
        res = self.check_resource(resource)
        gone = [x for x in self.leases if x.resource == res]
        live = sum(1 for x in gone if self.live(x))
        self._end(gone)
        return live

    def check(self) -> None:
        """The model's own invariants: one lease per (holder, resource); no two conflicting
        live leases; tokens unique; no two conflicting leases ever granted whose periods
        overlap."""
        overlap = periods_overlap(
            [(x.resource, x.holder, x.exclusive, x.acquired_at, x.end) for x in self.history]
        )
        assert overlap is None, overlap
        assert len({x.token for x in self.leases}) == len(self.leases)
        assert len({(x.holder, x.resource) for x in self.leases}) == len(self.leases)
        live = [x for x in self.leases if self.live(x)]
        for a in live:
            for b in live:
                if a is not b and a.resource == b.resource:
                    assert not (a.exclusive or b.exclusive), (a, b)


Period = tuple[str, str, bool, datetime, datetime]  # resource, holder, exclusive, start, end


def periods_overlap(periods: list[Period]) -> tuple[Period, Period] | None:
    """Two periods of conflicting leases (one resource, different holders, one of them
    exclusive) that overlap, or None: ``[start, end)`` each (an empty one overlaps nothing)."""
    for k, a in enumerate(periods):
        for b in periods[k + 1 :]:
            conflict = a[0] == b[0] and a[1] != b[1] and (a[2] or b[2])
            if conflict and max(a[3], b[3]) < min(a[4], b[4]):
                return a, b
    return None
