"""Identities: the named, long-lived participants of mail (seed 004's ``agents`` table).

Owns registering, resolving (by session key, by runtime agent), heartbeats, retiring and
discovery, for both faces (see ``ops``). Invariants:
- a name is unique and matches ``NAME_PATTERN``; ``retire`` (or ``retire_idle``) keeps every
  mail they sent or received, and a retired identity neither sends nor receives; only
  ``prune`` deletes, and only retired identities no row refers to;
- ``resolve`` keys an agent by project and role; a subagent's identity is a child
  (``parent``) of the agent that started it;
- ``for_session`` resolves in Subtrate's order (the session key's mapping, then the project's
  most recently active identity, then a new identity with a memorable name) and ``for_agent``
  creates the agent's identity on first use; both hold a transaction-scoped advisory lock on
  their key, so concurrent first calls create one identity, not two;
- every time comes from the database (``ikigai_now()``), never from this process.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import timedelta

from .errors import Conflict, InvalidArgument, NotFound
from .models import Identity, IdentityStatus
from .ops import Area, FaceT, Op, atomic, many, one, operation
from .validate import (
    NAME_PATTERN,
    check_duration,
    check_name,
    check_text,
    check_texts,
    check_uuid,
    identity_name,
    require,
)

__all__ = [
    "NAME_PATTERN",
    "discover",
    "for_agent",
    "for_session",
    "get",
    "heartbeat",
    "identity_name",
    "list_identities",
    "memorable_name",
    "prune",
    "register",
    "resolve",
    "retire",
    "retire_idle",
]


_ADJECTIVES = [
    "Amber",
    "Azure",
    "Bold",
    "Brave",
    "Bright",
    "Brisk",
    "Calm",
    "Clever",
    "Coral",
    "Crimson",
    "Curious",
    "Daring",
    "Eager",
    "Early",
    "Fair",
    "Fleet",
    "Gentle",
    "Golden",
    "Grand",
    "Green",
    "Happy",
    "Honest",
    "Indigo",
    "Jolly",
    "Keen",
    "Kind",
    "Lively",
    "Lucky",
    "Merry",
    "Mighty",
    "Misty",
    "Noble",
    "Olive",
    "Patient",
    "Proud",
    "Quick",
    "Quiet",
    "Rapid",
    "Ready",
    "Rosy",
    "Ruby",
    "Scarlet",
    "Silent",
    "Silver",
    "Steady",
    "Sunny",
    "Swift",
    "Tidy",
    "Vivid",
    "Warm",
    "Wise",
]
_NOUNS = [
    "Badger",
    "Beacon",
    "Birch",
    "Brook",
    "Canyon",
    "Castle",
    "Cedar",
    "Comet",
    "Condor",
    "Coyote",
    "Crane",
    "Delta",
    "Falcon",
    "Fern",
    "Fjord",
    "Forest",
    "Fox",
    "Glacier",
    "Harbor",
    "Hawk",
    "Heron",
    "Island",
    "Lagoon",
    "Lantern",
    "Lark",
    "Maple",
    "Meadow",
    "Mesa",
    "Otter",
    "Owl",
    "Panda",
    "Pine",
    "Prairie",
    "Quartz",
    "Raven",
    "Reef",
    "River",
    "Robin",
    "Sparrow",
    "Spruce",
    "Summit",
    "Thistle",
    "Tiger",
    "Tundra",
    "Valley",
    "Walrus",
    "Willow",
    "Wolf",
    "Wren",
]


def memorable_name() -> str:
    """A random adjective+noun name, e.g. ``BraveOtter`` (about 2,500 of them)."""
    return secrets.choice(_ADJECTIVES) + secrets.choice(_NOUNS)


def _candidates(base: str) -> list[str]:
    """``base``, then ``base2``, ``base3``, ... (the numeric suffix on a collision)."""
    return [base] + [f"{base}{n}" for n in range(2, 10_000)]


def register(
    name: str | None = None,
    *,
    project_key: str | None = None,
    git_branch: str | None = None,
    purpose: str | None = None,
    working_dir: str | None = None,
    hostname: str | None = None,
    agent_uuid: str | None = None,
) -> Op[Identity]:
    """Create an identity (a memorable name such as ``BraveOtter`` when ``name`` is None).

    ``InvalidArgument`` for a name not matching ``NAME_PATTERN``; ``Conflict`` for a name already
    taken or an ``agent_uuid`` already bound to another identity; ``NotFound`` for an
    unknown ``agent_uuid``.
    """
    if name is not None:
        check_name(name)
    check_texts(
        project_key=project_key,
        git_branch=git_branch,
        purpose=purpose,
        working_dir=working_dir,
        hostname=hostname,
    )
    if agent_uuid is not None:
        check_uuid(agent_uuid)
    fields = {
        "project_key": project_key,
        "git_branch": git_branch,
        "purpose": purpose,
        "working_dir": working_dir,
        "hostname": hostname,
        "agent_uuid": agent_uuid,
        "parent_id": None,
    }
    if name is None:
        return (yield from _create_memorable(memorable_name(), fields))
    row = yield one("register_identity", name=name, **fields)
    if row is None:
        why = yield one("register_refusal", name=name, agent_uuid=agent_uuid)
        if why["name_taken"]:
            raise Conflict(
                f"identity {name!r} already exists",
                constraint="identities_name_key",
                sqlstate=None,
            )
        if agent_uuid is not None and not why["agent_exists"]:
            raise NotFound(f"agent {agent_uuid} does not exist")
        raise Conflict(
            f"agent {agent_uuid} is already bound to identity {why['bound_to']!r}",
            constraint="identities_agent_uuid_key",
            sqlstate=None,
        )
    return Identity.from_row(row)


def _create_memorable(base: str, fields: Mapping[str, str | int | None]) -> Op[Identity]:
    """A new identity named ``base`` or, when taken, ``base2``, ``base3``, ..."""
    for candidate in _candidates(base):
        row = yield one("register_identity", name=candidate, **fields)
        if row is not None:
            return Identity.from_row(row)
        if fields.get("agent_uuid") is not None:
            why = yield one("register_refusal", name=candidate, agent_uuid=fields["agent_uuid"])
            if not why["name_taken"]:
                raise InvalidArgument(f"agent {fields['agent_uuid']} cannot be bound")
    raise InvalidArgument(f"no free name left for {base!r}")  # pragma: no cover


def get(name: str | Identity) -> Op[Identity]:
    """One identity (retired ones too); ``NotFound`` if there is none of that name."""
    return (yield from require(identity_name(name)))


def list_identities(
    *, project_key: str | None = None, include_retired: bool = False
) -> Op[list[Identity]]:
    """Identities (of one project), most recently active first."""
    check_text(project_key, "project_key")
    if not isinstance(include_retired, bool):
        raise InvalidArgument("include_retired must be a bool")
    rows = yield many("list_identities", project_key=project_key, include_retired=include_retired)
    return [Identity.from_row(r) for r in rows]


def heartbeat(name: str | Identity) -> Op[Identity]:
    """Set ``last_active_at`` to now. ``InvalidArgument`` if the identity is retired."""
    name = identity_name(name)
    row = yield one("heartbeat_identity", name=name)
    if row is None:
        found = yield from require(name)
        raise InvalidArgument(f"identity {found.name!r} is retired")
    return Identity.from_row(row)


def retire(name: str | Identity) -> Op[Identity]:
    """Retire an identity: it keeps its mail but can no longer send or receive.
    Retiring again changes nothing."""
    name = identity_name(name)
    row = yield one("retire_identity", name=name)
    if row is None:
        raise NotFound(f"identity {name!r} does not exist")
    return Identity.from_row(row)


def discover(*, project_key: str | None = None) -> Op[list[IdentityStatus]]:
    """Identities that are not retired, with unread counts and status (``active``: seen in
    the last 5 minutes, ``idle``: in the last 30, ``offline``), in one query."""
    check_text(project_key, "project_key")
    rows = yield many("discover_identities", project_key=project_key)
    return [IdentityStatus.from_row(r) for r in rows]


def _check_key(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string, got {value!r}")
    check_text(value, what)
    return value


@atomic
def for_session(
    session_key: str, *, project_key: str | None = None, git_branch: str | None = None
) -> Op[Identity]:
    """The identity of an external session (e.g. a Claude Code session id).

    Resolution: the key's mapping (unless that identity was retired), else the project's
    most recently active identity (when ``project_key`` is given), else a new identity with
    a memorable name; the mapping is stored. Refreshes ``last_active_at``. Concurrent first
    calls with one key resolve to one identity.
    """
    key = _check_key(session_key, "session_key")
    check_texts(project_key=project_key, git_branch=git_branch)
    yield one("lock_identity_key", key="session:" + key)
    row = yield one("touch_session_identity", session_key=key)
    if row is not None:
        return Identity.from_row(row)
    identity = None
    if project_key is not None:
        found = yield one("project_identity", project_key=project_key)
        identity = None if found is None else Identity.from_row(found)
    if identity is None:
        identity = yield from _create_memorable(
            memorable_name(),
            {
                "project_key": project_key,
                "git_branch": git_branch,
                "purpose": None,
                "working_dir": None,
                "hostname": None,
                "agent_uuid": None,
                "parent_id": None,
            },
        )
    row = yield one(
        "map_session_identity",
        session_key=key,
        identity_id=identity.id,
        project_key=project_key,
        git_branch=git_branch,
    )
    return Identity.from_row(row)


@atomic
def resolve(
    project_key: str,
    *,
    role: str = "main",
    name: str | None = None,
    parent: str | Identity | None = None,
    git_branch: str | None = None,
    working_dir: str | None = None,
) -> Op[Identity]:
    """The identity of an agent in a project, stable across its sessions and restarts.

    Keyed by ``project_key`` and ``role`` (not by a transient session id), so a coding agent
    keeps one identity across startup, compaction, ``/clear`` and resume, and the MCP server
    and the hooks of one agent resolve the same identity. With ``name``, that identity
    (registered on first use; ``InvalidArgument`` if retired) becomes the key's; without, the
    key's identity, or on first use a new one with a memorable name (``purpose`` = role).
    ``parent`` (an existing identity, not the one resolved) makes it a child identity: a
    subagent's, linked to the agent that started it (set on an older identity that has none).
    Refreshes ``last_active_at``. Concurrent first calls with one key resolve to one identity.
    A key whose identity was retired (``retire_idle``) gets a new one.
    """
    project_key = _check_key(project_key, "project_key")
    role = _check_key(role, "role")
    if name is not None:
        check_name(name)
    check_texts(git_branch=git_branch, working_dir=working_dir)
    parent_identity = None if parent is None else (yield from require(identity_name(parent)))
    key = f"role:{project_key}\x1f{role}"
    yield one("lock_identity_key", key=key)
    identity = None
    if name is None:
        row = yield one("touch_session_identity", session_key=key)
        identity = None if row is None else Identity.from_row(row)
    if identity is None:
        identity = yield from _resolve_new(
            key, project_key, role, name, parent_identity, git_branch, working_dir
        )
    if parent_identity is not None and identity.parent != parent_identity.name:
        if parent_identity.id == identity.id:
            raise InvalidArgument(f"identity {identity.name!r} cannot be its own parent")
        row = yield one(
            "set_identity_parent", identity_id=identity.id, parent_id=parent_identity.id
        )
        identity = Identity.from_row(row)
    return identity


def _resolve_new(
    key: str,
    project_key: str,
    role: str,
    name: str | None,
    parent: Identity | None,
    git_branch: str | None,
    working_dir: str | None,
) -> Op[Identity]:
    """``resolve`` on first use of ``key`` (or with ``name``): the identity, mapped to it."""
    fields: dict[str, str | int | None] = {
        "project_key": project_key,
        "git_branch": git_branch,
        "purpose": role,
        "working_dir": working_dir,
        "hostname": None,
        "agent_uuid": None,
        "parent_id": None if parent is None else parent.id,
    }
    if name is None:
        identity = yield from _create_memorable(memorable_name(), fields)
    else:
        yield one("lock_identity_key", key="name:" + name)
        row = yield one("register_identity", name=name, **fields)
        identity = Identity.from_row(row) if row is not None else (yield from require(name))
        if identity.retired_at is not None:
            raise InvalidArgument(f"identity {name!r} is retired")
    row = yield one(
        "map_session_identity",
        session_key=key,
        identity_id=identity.id,
        project_key=project_key,
        git_branch=git_branch,
    )
    return Identity.from_row(row)


def retire_idle(
    *, idle_for: timedelta | float, project_key: str | None = None
) -> Op[list[Identity]]:
    """Retire the identities (of one project) not active for ``idle_for`` (a timedelta or
    seconds, > 0) that hold no live lease, and forget their role and session keys (an agent
    that comes back later gets a new identity). Returns those retired, least recently active
    first. Their mail stays; ``prune`` deletes them once nothing refers to them."""
    idle = check_duration(idle_for, "idle_for", zero=False)
    check_text(project_key, "project_key")
    rows = yield many("retire_idle_identities", idle_for=idle, project_key=project_key)
    return sorted((Identity.from_row(r) for r in rows), key=lambda i: (i.last_active_at, i.id))


def prune(*, retired_for: timedelta | float) -> Op[list[str]]:
    """Delete the identities retired for longer than ``retired_for`` (a timedelta or seconds,
    >= 0) that nothing refers to (no mail, lease, task list, review, activity...; a parent
    goes after its children); returns their names. The others stay retired. Their names become
    free again."""
    retired = check_duration(retired_for, "retired_for")
    rows = yield many("prune_identities", retired_for=retired)
    return [r["name"] for r in rows]


@atomic
def for_agent(agent_uuid: str) -> Op[Identity]:
    """The identity bound to a runtime agent, created on first use (named like the agent
    when that name is valid and free, else memorably). ``NotFound`` for an unknown agent."""
    check_uuid(agent_uuid)
    yield one("lock_identity_key", key="agent:" + agent_uuid)
    row = yield one("touch_agent_identity", agent_uuid=agent_uuid)
    if row is not None:
        return Identity.from_row(row)
    agent = yield one("get_agent", uuid=agent_uuid)
    if agent is None:
        raise NotFound(f"agent {agent_uuid} does not exist")
    fields: dict[str, str | int | None] = {
        "project_key": None,
        "git_branch": None,
        "purpose": None,
        "working_dir": None,
        "hostname": None,
        "agent_uuid": agent_uuid,
        "parent_id": None,
    }
    name = agent["name"]
    if isinstance(name, str) and NAME_PATTERN.fullmatch(name):
        row = yield one("register_identity", name=name, **fields)
        if row is not None:
            return Identity.from_row(row)
    return (yield from _create_memorable(memorable_name(), fields))


class IdentityCalls(Area[FaceT]):
    """``store.identities``: named participants of mail (see ``ikigai_store.identities``).

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    register = operation(register)
    get = operation(get)
    list = operation(list_identities)
    for_session = operation(for_session)
    resolve = operation(resolve)
    for_agent = operation(for_agent)
    heartbeat = operation(heartbeat)
    retire = operation(retire)
    retire_idle = operation(retire_idle)
    prune = operation(prune)
    discover = operation(discover)
