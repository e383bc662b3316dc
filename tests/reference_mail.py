"""In-memory reference model of identities and agent mail: the oracle the store is tested against.

Written from issue 8 and the API contract (notes/mail-api.md), not from the SQL; it imports nothing
from ``ikigai_store``. Everything is kept in plain dicts and recomputed on every read. The model
holds its own clock, ``now``, which only moves forward (``advance``); every timestamp it writes is
``now``, exactly as the store writes ``ikigai_now()``.

Identities: a name matches ``NAME`` (whole string) and is unique (case-sensitively: ``Ann`` and
``ann`` are two identities). ``register`` sets ``created_at = last_active_at = now``;
``heartbeat`` sets ``last_active_at = now`` (``InvalidArgument`` once retired); ``retire`` keeps
the first ``retired_at``. Unknown names are ``NotFound``. A retired identity keeps its mail and
may still read and move its own copies; it can neither send (``InvalidArgument``) nor receive
(``InvalidArgument`` naming it, nothing written; reply skips it).

Mail: ``id`` orders everything. A mail is immutable once sent except ``deleted_by_sender``; in
particular ``to`` (distinct recipient names, sorted) is what was sent and never shrinks, even when a
recipient's copy is purged from trash. Each recipient has one copy with ``state``, ``read_at``,
``acked_at``, ``snoozed_until`` and (internal) ``trashed_at``, the time it last entered trash.

Effective state: a copy stored as ``snoozed`` whose ``snoozed_until <= now`` is ``unread`` with
``snoozed_until`` None everywhere (inbox, counts, transitions, read, ack, wait), exactly as if
``wake_snoozed()`` had run; ``wake_snoozed`` only materialises that and returns how many it did.

Transitions (``TRANSITIONS``, from the effective state) are the issue's table; anything else,
including staying in the same state (except re-snoozing a sleeping snooze), is
``InvalidArgument`` naming both states, and changes nothing. Entering ``read`` sets ``read_at``
if it was None; entering ``trash`` sets ``trashed_at``; entering ``snoozed`` needs a future
``snoozed_until`` (an aware datetime, or a positive timedelta from now); leaving ``snoozed``
clears it. ``read`` turns an effective unread into read, keeps any other state, and sets
``read_at`` if None. ``ack`` sets ``acked_at`` once and turns an effective unread into read (also
on a later ack, after the mail was marked unread again: decision, see below). ``wait`` (with a
zero timeout) takes the oldest (lowest id) effective unread copy and reads it.

Sending: ``to`` is a non-empty list of names or one name; duplicates collapse. Checks, in order:
arguments; the idempotency key (below); an unknown sender ``NotFound``; a retired sender
``InvalidArgument``; unknown recipients ``NotFound`` naming each of them; then retired recipients
``InvalidArgument`` naming each of them; a
``parent_id`` that does not exist or is in another thread than ``thread_id`` ``InvalidArgument``.
The thread is ``thread_id``, else the parent's thread, else a new one. A failed send writes
nothing.

Reply: checks, in order: arguments; the idempotency key; the mail exists, the replier exists and
sent or received that mail (each ``NotFound``); the replier is not retired; the recipients (every
distinct sender and recipient of every mail of the thread, minus the replier, minus retired
identities) are not empty (``InvalidArgument``). Subject ``"Re: " + subject`` unless that already
starts with ``"Re: "``; ``parent_id`` is the replied mail; no deadline, no attachments.

Idempotency: a key is unique per sender across send and reply. The key is looked up right after
argument validation, before the sender, recipients or mail are checked: the same request (same
kind, recipients as a set, and every other argument as given) returns the original mail as it is
now and writes nothing (even if a recipient or the sender has been retired since); any other
request ``Conflict``.

Views: ``inbox`` is newest first; ``state=None`` means effective unread, read or starred;
``state="snoozed"`` only sleeping snoozes; ``priority`` and ``before_id`` (ids below it) filter;
``limit`` cuts. ``counts``: effective unread, urgent effective unread, starred, sleeping snoozed,
archived, trash. ``thread`` lists the thread's mails in id order (with an identity: those it sent
or is in ``to`` of). ``sent`` is newest first without ``deleted_by_sender`` mails.
``delete_sent`` is ``NotFound`` unless the identity sent the mail; repeating it is harmless.
``set_thread_state`` applies the transition to each of the identity's copies in the thread where
it is legal and returns how many moved (``"snoozed"`` is refused). ``purge_trash(older_than)``
deletes the copies stored in trash with ``now - trashed_at > older_than``.

Decisions where the issue and contract are silent (the reading a demanding user expects): unknown
sender is reported before bad recipients; ``to`` never changes after sending; a repeated ack
still reads a mail marked unread again, keeping the first ``acked_at``; reading or acking a
trashed copy does not restart its trash age; names are case-sensitive; ``delete_sent`` twice is
not an error; ``thread`` with an unknown identity is ``NotFound``; a ``snoozed_until`` that is not
in the future is a bad argument, refused (``InvalidArgument``) before the identity, its copy or the
transition are looked at (as a negative timedelta is); ``purge_trash`` keeps a copy trashed exactly
``older_than`` ago ("longer than" is strict).

Invariants: every copy belongs to an existing mail and to a name in that mail's ``to``; a stored
``snoozed`` copy has ``snoozed_until``, no other copy has; ``read_at`` and ``acked_at`` never change
once set; mail ids strictly increase.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "COUNT_FIELDS",
    "DEFAULT_STATES",
    "EPOCH",
    "MAIL_FIELDS",
    "MAIL_STATES",
    "MEMORABLE",
    "NAME",
    "PRIORITIES",
    "TRANSITIONS",
    "RefConflict",
    "RefCopy",
    "RefError",
    "RefIdentity",
    "RefInvalid",
    "RefItem",
    "RefMail",
    "RefMailWorld",
    "RefNotFound",
    "status_of",
]

EPOCH = datetime(2030, 1, 1, tzinfo=UTC)

MAIL_STATES = ("unread", "read", "starred", "snoozed", "archived", "trash")
PRIORITIES = ("urgent", "normal", "low")
TRANSITIONS: dict[str, frozenset[str]] = {
    "unread": frozenset({"read", "starred", "snoozed", "archived", "trash"}),
    "read": frozenset({"unread", "starred", "snoozed", "archived", "trash"}),
    "starred": frozenset({"read", "archived", "trash"}),
    "snoozed": frozenset({"unread", "read", "snoozed", "trash"}),
    "archived": frozenset({"read", "trash"}),
    "trash": frozenset({"unread"}),
}
#: What ``inbox(state=None)`` shows.
DEFAULT_STATES = frozenset({"unread", "read", "starred"})

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A valid identity name (use ``fullmatch``)."""
MEMORABLE = re.compile(r"[A-Z][a-z]+[A-Z][a-z]+[0-9]*")
"""A generated name: AdjectiveNoun, with a numeric suffix on collision (use ``fullmatch``)."""

ACTIVE = timedelta(minutes=5)
IDLE = timedelta(minutes=30)
MAX_THREAD_ID = 200

MAIL_FIELDS = (
    "id",
    "thread_id",
    "parent_id",
    "sender",
    "to",
    "subject",
    "body",
    "priority",
    "deadline_at",
    "attachments",
    "metadata",
    "idempotency_key",
    "deleted_by_sender",
    "created_at",
)
COUNT_FIELDS = ("unread", "urgent_unread", "starred", "snoozed", "archived", "trash")


class RefError(Exception):
    """A refusal the store must also make; ``named`` are strings its message must contain."""

    def __init__(self, message: str, *named: str) -> None:
        super().__init__(message)
        self.named = named


class RefInvalid(RefError):
    """The store raises ``InvalidArgument``."""


class RefNotFound(RefError):
    """The store raises ``NotFound``."""


class RefConflict(RefError):
    """The store raises ``Conflict``."""


def status_of(now: datetime, last_active_at: datetime) -> str:
    """``active`` if seen less than 5 minutes ago, ``idle`` less than 30, else ``offline``."""
    age = now - last_active_at
    if age < ACTIVE:
        return "active"
    if age < IDLE:
        return "idle"
    return "offline"


@dataclass
class RefIdentity:
    name: str
    created_at: datetime
    last_active_at: datetime
    retired_at: datetime | None = None


@dataclass
class RefMail:
    id: int
    thread_id: str
    parent_id: int | None
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str
    priority: str
    deadline_at: datetime | None
    attachments: Any
    metadata: Any
    idempotency_key: str | None
    deleted_by_sender: bool
    created_at: datetime
    request: tuple[Any, ...] = field(repr=False, default=())

    def view(self) -> dict[str, Any]:
        """The fields a store ``Mail`` must have, by name."""
        return {f: getattr(self, f) for f in MAIL_FIELDS}


@dataclass
class RefCopy:
    """One recipient's copy of a mail, as stored (not the effective state)."""

    state: str = "unread"
    read_at: datetime | None = None
    acked_at: datetime | None = None
    snoozed_until: datetime | None = None
    trashed_at: datetime | None = None


@dataclass(frozen=True)
class RefItem:
    """A copy as a recipient sees it now (effective state)."""

    mail: RefMail
    state: str
    read_at: datetime | None
    acked_at: datetime | None
    snoozed_until: datetime | None

    def view(self) -> tuple[Any, ...]:
        return (self.mail.view(), self.state, self.read_at, self.acked_at, self.snoozed_until)


def _aware(value: object) -> bool:
    return isinstance(value, datetime) and value.utcoffset() is not None


@dataclass
class RefMailWorld:
    """Identities, mails and recipient copies, with a clock."""

    now: datetime = EPOCH
    identities: dict[str, RefIdentity] = field(default_factory=dict)
    mails: dict[int, RefMail] = field(default_factory=dict)
    copies: dict[tuple[str, int], RefCopy] = field(default_factory=dict)
    last_id: int = 0

    # -- clock ---------------------------------------------------------------------------------

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` (never backwards)."""
        if delta < timedelta(0):
            raise ValueError(f"the clock only moves forward, not by {delta}")
        self.now += delta
        return self.now

    # -- identities ----------------------------------------------------------------------------

    def identity(self, name: str) -> RefIdentity:
        """The identity of that name, retired or not; ``RefNotFound`` otherwise."""
        if name not in self.identities:
            raise RefNotFound(f"identity {name!r} does not exist", name)
        return self.identities[name]

    def register(self, name: str) -> RefIdentity:
        """A new identity; a bad name is ``RefInvalid``, a taken one ``RefConflict``."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise RefInvalid(f"invalid identity name {name!r}")
        if name in self.identities:
            raise RefConflict(f"identity {name!r} exists", name)
        self.identities[name] = RefIdentity(name, self.now, self.now)
        return self.identities[name]

    def register_generated(self, name: str) -> RefIdentity:
        """Record a name the store chose (register(None)); it must be memorable and free."""
        if not (MEMORABLE.fullmatch(name) and NAME.fullmatch(name)):
            raise ValueError(f"generated name {name!r} is not AdjectiveNoun[digits]")
        if name in self.identities:
            raise ValueError(f"generated name {name!r} is taken")
        return self.register(name)

    def retire(self, name: str) -> RefIdentity:
        """Retire (idempotent: the first ``retired_at`` stays)."""
        ident = self.identity(name)
        if ident.retired_at is None:
            ident.retired_at = self.now
        return ident

    def heartbeat(self, name: str) -> RefIdentity:
        """``last_active_at = now``; a retired identity is ``RefInvalid``."""
        ident = self.identity(name)
        if ident.retired_at is not None:
            raise RefInvalid(f"identity {name!r} is retired", name)
        ident.last_active_at = self.now
        return ident

    def retired(self, name: str) -> bool:
        return self.identity(name).retired_at is not None

    def names(self, *, include_retired: bool = False) -> set[str]:
        """Names ``identities.list`` returns (order is checked separately)."""
        return {n for n, i in self.identities.items() if include_retired or i.retired_at is None}

    def discover(self) -> dict[str, int]:
        """Unread count of every identity that is not retired."""
        return {n: self.counts(n)["unread"] for n in self.names()}

    # -- sending -------------------------------------------------------------------------------

    def _next_id(self, id: int | None) -> int:
        if id is None:
            return self.last_id + 1
        if id <= self.last_id:
            raise ValueError(f"mail id {id} is not greater than {self.last_id}")
        return id

    def _replay(self, sender: str, key: str | None, request: tuple[Any, ...]) -> RefMail | None:
        """The original of a repeated request; ``RefConflict`` for a reused key."""
        if key is None:
            return None
        for mail in self.mails.values():
            if mail.sender == sender and mail.idempotency_key == key:
                if mail.request != request:
                    raise RefConflict(f"key {key!r} of {sender!r} was used for another request")
                return mail
        return None

    def _check_sender(self, sender: str) -> None:
        if self.identity(sender).retired_at is not None:
            # Not named: the contract asks only recipients and states to be named (a retired
            # replier whose partners are all retired may be told there is no one to reply to).
            raise RefInvalid(f"identity {sender!r} is retired: it cannot send")

    def _deliver(self, mail: RefMail) -> RefMail:
        self.last_id = mail.id
        self.mails[mail.id] = mail
        for name in mail.to:
            self.copies[(name, mail.id)] = RefCopy()
        return mail

    def send(
        self,
        sender: str,
        to: str | list[str] | tuple[str, ...],
        subject: str,
        body: str,
        *,
        thread_id: str | None = None,
        parent_id: int | None = None,
        priority: str = "normal",
        deadline_at: datetime | None = None,
        attachments: Any = None,
        metadata: Any = None,
        idempotency_key: str | None = None,
        id: int | None = None,
        new_thread_id: str | None = None,
    ) -> RefMail:
        """Send (see the module docstring). ``id``: the id the store gave (default: next);
        ``new_thread_id``: the thread the store created, used only if a new thread is made."""
        listed = [to] if isinstance(to, str) else list(to)
        if not listed:
            raise RefInvalid("to must name at least one recipient")
        if priority not in PRIORITIES:
            raise RefInvalid(f"bad priority {priority!r}", priority)
        if thread_id is not None and not 0 < len(thread_id) <= MAX_THREAD_ID:
            raise RefInvalid("thread_id must have 1 to 200 characters")
        if deadline_at is not None and not _aware(deadline_at):
            raise RefInvalid("deadline_at must be timezone-aware")
        if idempotency_key == "":
            raise RefInvalid("idempotency_key must not be empty")
        names = tuple(sorted(set(listed)))
        request = (
            "send",
            names,
            subject,
            body,
            thread_id,
            parent_id,
            priority,
            deadline_at,
            attachments,
            metadata,
        )
        original = self._replay(sender, idempotency_key, request)
        if original is not None:
            return original
        self._check_sender(sender)
        unknown = [n for n in names if n not in self.identities]
        if unknown:
            raise RefNotFound(f"unknown recipient(s): {', '.join(unknown)}", *unknown)
        retired = [n for n in names if self.retired(n)]
        if retired:
            raise RefInvalid(f"retired recipient(s): {', '.join(retired)}", *retired)
        if parent_id is not None:
            parent = self.mails.get(parent_id)
            if parent is None:
                raise RefInvalid(f"parent mail {parent_id} does not exist")
            if thread_id is not None and parent.thread_id != thread_id:
                raise RefInvalid(f"parent mail {parent_id} is in another thread")
            thread_id = parent.thread_id
        new_id = self._next_id(id)
        if thread_id is None:
            thread_id = new_thread_id if new_thread_id is not None else str(uuid.uuid4())
            if thread_id in self.threads():
                raise ValueError(f"new thread {thread_id!r} already exists")
        return self._deliver(
            RefMail(
                new_id,
                thread_id,
                parent_id,
                sender,
                names,
                subject,
                body,
                priority,
                deadline_at,
                attachments,
                metadata,
                idempotency_key,
                False,
                self.now,
                request,
            )
        )

    def participants(self, thread_id: str) -> set[str]:
        """Every sender and recipient of every mail of the thread."""
        found: set[str] = set()
        for mail in self.mails.values():
            if mail.thread_id == thread_id:
                found.add(mail.sender)
                found.update(mail.to)
        return found

    def reply(
        self,
        sender: str,
        mail_id: int,
        body: str,
        *,
        subject: str | None = None,
        priority: str = "normal",
        metadata: Any = None,
        idempotency_key: str | None = None,
        id: int | None = None,
    ) -> RefMail:
        """Reply to ``mail_id`` in its thread (see the module docstring)."""
        if priority not in PRIORITIES:
            raise RefInvalid(f"bad priority {priority!r}", priority)
        if idempotency_key == "":
            raise RefInvalid("idempotency_key must not be empty")
        request = ("reply", mail_id, body, subject, priority, metadata)
        original = self._replay(sender, idempotency_key, request)
        if original is not None:
            return original
        replied = self.mails.get(mail_id)
        if replied is None:
            raise RefNotFound(f"mail {mail_id} does not exist")
        self.identity(sender)
        if sender != replied.sender and sender not in replied.to:
            raise RefNotFound(f"{sender!r} neither sent nor received mail {mail_id}")
        self._check_sender(sender)
        names = tuple(
            sorted(
                n
                for n in self.participants(replied.thread_id)
                if n != sender and not self.retired(n)
            )
        )
        if not names:
            raise RefInvalid(f"mail {mail_id} has no one left to reply to")
        if subject is None:
            original_subject = replied.subject
            subject = (
                original_subject
                if original_subject.startswith("Re: ")
                else f"Re: {original_subject}"
            )
        return self._deliver(
            RefMail(
                self._next_id(id),
                replied.thread_id,
                mail_id,
                sender,
                names,
                subject,
                body,
                priority,
                None,
                None,
                metadata,
                idempotency_key,
                False,
                self.now,
                request,
            )
        )

    # -- copies and their states ---------------------------------------------------------------

    def _copy(self, name: str, mail_id: int) -> RefCopy:
        self.identity(name)
        copy = self.copies.get((name, mail_id))
        if copy is None:
            raise RefNotFound(f"{name!r} did not receive mail {mail_id}")
        return copy

    def effective(self, copy: RefCopy) -> tuple[str, datetime | None]:
        """``(state, snoozed_until)`` as seen now: a passed snooze is unread."""
        if copy.state == "snoozed":
            assert copy.snoozed_until is not None
            if copy.snoozed_until <= self.now:
                return "unread", None
        return copy.state, copy.snoozed_until

    def _item(self, name: str, mail_id: int) -> RefItem:
        copy = self.copies[(name, mail_id)]
        state, until = self.effective(copy)
        return RefItem(self.mails[mail_id], state, copy.read_at, copy.acked_at, until)

    def item(self, name: str, mail_id: int) -> RefItem:
        """The identity's copy of a mail as it sees it; ``RefNotFound`` if it has none."""
        self._copy(name, mail_id)
        return self._item(name, mail_id)

    def _move(self, copy: RefCopy, state: str, until: datetime | None = None) -> None:
        """Store a legal move (the caller checked it)."""
        copy.state = state
        copy.snoozed_until = until if state == "snoozed" else None
        copy.trashed_at = self.now if state == "trash" else None
        if state == "read" and copy.read_at is None:
            copy.read_at = self.now

    def _snooze_until(self, state: str, snoozed_until: object) -> datetime | None:
        if state != "snoozed":
            if snoozed_until is not None:
                raise RefInvalid(f"snoozed_until is only for snoozed, not {state}")
            return None
        if isinstance(snoozed_until, timedelta):
            until = self.now + snoozed_until
        elif _aware(snoozed_until):
            assert isinstance(snoozed_until, datetime)
            until = snoozed_until
        else:
            raise RefInvalid(f"snoozing needs an aware datetime or a timedelta: {snoozed_until!r}")
        if until <= self.now:
            raise RefInvalid(f"snoozed_until {until} is not in the future")
        return until

    def set_state(
        self, name: str, mail_id: int, state: str, *, snoozed_until: object = None
    ) -> RefItem:
        """A guarded transition from the effective state; ``RefInvalid`` names both states."""
        if state not in MAIL_STATES:
            raise RefInvalid(f"bad state {state!r}", state)
        until = self._snooze_until(state, snoozed_until)
        copy = self._copy(name, mail_id)
        current, _ = self.effective(copy)
        if state not in TRANSITIONS[current]:
            raise RefInvalid(f"cannot move mail from {current} to {state}", current, state)
        self._move(copy, state, until)
        return self._item(name, mail_id)

    def read(self, name: str, mail_id: int) -> RefItem:
        """Unread becomes read; any other state stays; ``read_at`` set if None."""
        copy = self._copy(name, mail_id)
        if self.effective(copy)[0] == "unread":
            self._move(copy, "read")
        elif copy.read_at is None:
            copy.read_at = self.now
        return self._item(name, mail_id)

    def ack(self, name: str, mail_id: int) -> RefItem:
        """``acked_at`` set once; an effective unread becomes read."""
        copy = self._copy(name, mail_id)
        if copy.acked_at is None:
            copy.acked_at = self.now
        if self.effective(copy)[0] == "unread":
            self._move(copy, "read")
        return self._item(name, mail_id)

    def set_thread_state(self, name: str, thread_id: str, state: str) -> int:
        """Move every copy of the identity in the thread where legal; how many moved."""
        if state not in MAIL_STATES or state == "snoozed":
            raise RefInvalid(f"bad thread state {state!r}", state)
        self.identity(name)
        moved = 0
        for (owner, mail_id), copy in self.copies.items():
            if (
                owner == name
                and self.mails[mail_id].thread_id == thread_id
                and state in TRANSITIONS[self.effective(copy)[0]]
            ):
                self._move(copy, state)
                moved += 1
        return moved

    def wait(self, name: str) -> RefItem | None:
        """The oldest effective unread copy, now read; None if there is none."""
        self.identity(name)
        unread = [
            mail_id
            for (owner, mail_id), copy in self.copies.items()
            if owner == name and self.effective(copy)[0] == "unread"
        ]
        if not unread:
            return None
        return self.read(name, min(unread))

    def wake_snoozed(self) -> int:
        """Materialise every passed snooze as unread; how many."""
        woken = 0
        for copy in self.copies.values():
            if copy.state == "snoozed" and self.effective(copy)[0] == "unread":
                self._move(copy, "unread")
                woken += 1
        return woken

    def purge_trash(self, older_than: timedelta = timedelta(days=30)) -> int:
        """Delete copies in trash for longer than ``older_than``; how many."""
        if older_than < timedelta(0):
            raise RefInvalid("older_than must not be negative")
        doomed = [
            key
            for key, copy in self.copies.items()
            if copy.state == "trash"
            and copy.trashed_at is not None
            and self.now - copy.trashed_at > older_than
        ]
        for key in doomed:
            del self.copies[key]
        return len(doomed)

    # -- views ---------------------------------------------------------------------------------

    def inbox(
        self,
        name: str,
        *,
        state: str | None = None,
        priority: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[RefItem]:
        """The identity's copies, newest first, filtered as the module docstring says."""
        if state is not None and state not in MAIL_STATES:
            raise RefInvalid(f"bad state {state!r}", state)
        if priority is not None and priority not in PRIORITIES:
            raise RefInvalid(f"bad priority {priority!r}", priority)
        self.identity(name)
        items = [self._item(owner, mail_id) for owner, mail_id in self.copies if owner == name]
        wanted = DEFAULT_STATES if state is None else {state}
        items = [
            i
            for i in items
            if i.state in wanted
            and (priority is None or i.mail.priority == priority)
            and (before_id is None or i.mail.id < before_id)
        ]
        items.sort(key=lambda i: i.mail.id, reverse=True)
        return items[:limit]

    def counts(self, name: str) -> dict[str, int]:
        """``MailCounts`` fields by name."""
        self.identity(name)
        result = dict.fromkeys(COUNT_FIELDS, 0)
        for (owner, mail_id), copy in self.copies.items():
            if owner != name:
                continue
            state = self.effective(copy)[0]
            if state in result:
                result[state] += 1
            if state == "unread" and self.mails[mail_id].priority == "urgent":
                result["urgent_unread"] += 1
        return result

    def threads(self) -> set[str]:
        return {m.thread_id for m in self.mails.values()}

    def thread(self, thread_id: str, *, identity: str | None = None) -> list[RefMail]:
        """The thread's mails in id order (only those ``identity`` sent or received)."""
        if identity is not None:
            self.identity(identity)
        return [
            m
            for m in sorted(self.mails.values(), key=lambda m: m.id)
            if m.thread_id == thread_id
            and (identity is None or identity == m.sender or identity in m.to)
        ]

    def sent(self, name: str, *, limit: int = 50) -> list[RefMail]:
        """What the identity sent, newest first, without deleted_by_sender ones."""
        self.identity(name)
        mails = [m for m in self.mails.values() if m.sender == name and not m.deleted_by_sender]
        return sorted(mails, key=lambda m: m.id, reverse=True)[:limit]

    def delete_sent(self, name: str, mail_id: int) -> None:
        """Hide a sent mail from its sender's view; ``RefNotFound`` unless ``name`` sent it."""
        self.identity(name)
        mail = self.mails.get(mail_id)
        if mail is None or mail.sender != name:
            raise RefNotFound(f"{name!r} did not send mail {mail_id}")
        mail.deleted_by_sender = True

    def check(self) -> None:
        """Assert the model's own invariants (see the module docstring)."""
        ids = list(self.mails)
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        for (name, mail_id), copy in self.copies.items():
            assert name in self.mails[mail_id].to
            assert copy.state in MAIL_STATES
            assert (copy.state == "snoozed") == (copy.snoozed_until is not None)
            assert (copy.state == "trash") == (copy.trashed_at is not None)
