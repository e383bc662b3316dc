"""MCP tools derived from the store's operations: one table row per tool, nothing else.

Owns ``TOOLS`` (which operation each tool runs, which of its parameters the caller's identity
fills, what the tool fixes or hides) and ``Tool``: a tool's input model, JSON schemas and
description, all derived from the operation's own signature, type hints and docstring. A tool
adds no SQL and no validation of its own: a value the operation refuses comes back as its
error. Invariants:
- a tool's parameters are the operation's, minus the identity parameter (``me``), the
  project parameter (``project``: the server's project key), the parameters the tool fixes
  and those it hides; names, defaults and types are the
  operation's, with model types dropped from unions (``str | Identity`` is a name on the
  wire), ``timedelta`` as seconds and ``UUID`` as a string;
- each parameter accepts exactly what its schema declares: unknown arguments are refused
  (``extra="forbid"``) and values are validated strictly (pydantic's strict JSON mode: no
  number read as a date, no string as a number); seconds travel as numbers and reach an
  operation that takes a ``timedelta`` as one, a pair (``(resource, token)``) as an array
  of two items (no ``prefixItems``: draft-07 validators and Codex do not know it);
- every schema node says its type (a JSON value of any type is an ``anyOf`` of the six);
  a parameter's bounds, default and format are repeated in its ``description`` (Codex
  drops ``minimum``, ``maximum``, ``default`` and ``format`` before the model sees them);
- a result is always a JSON object (``structuredContent``): a model's fields, or
  ``{"result": value}`` for anything else;
- every description is at most ``MAX_DESCRIPTION`` characters (Claude Code truncates at 2 KB).
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Annotated, Any, Literal, Union
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from .. import models, ops
from ..api import NAMESPACES, Operations
from ..errors import InvalidArgument
from ..plans import DECISIONS as PLAN_DECISIONS
from .catalog import select_names

__all__ = ["AREAS", "CORE", "MAX_DESCRIPTION", "TOOLS", "Tool", "select"]

#: Claude Code truncates a tool description at 2 KB.
MAX_DESCRIPTION = 2048

#: Where an operator server takes the identity to act as.
AS_IDENTITY = "as_identity"


#: The docstrings' Python words, and what a tool's caller writes instead (JSON).
_WIRE_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"a timedelta\s+or\s+seconds"), "seconds"),
    (re.compile(r"a timedelta\s+from"), "seconds from"),
    (re.compile(r"an?\s+(?:timezone-)?aware\s+datetime\b"), "an ISO 8601 time with a UTC offset"),
    (re.compile(r"(?:timezone-)?aware\s+datetimes"), "ISO 8601 times with UTC offsets"),
    (re.compile(r"\s*Inside `store\.transaction\(\)`[^.]*\."), ""),
    (re.compile(r"\s*See `ikigai_store\.[\w.]+`[^.]*\."), ""),
    (re.compile(r" \(`[A-Z][A-Z0-9_]+`\)"), ""),  # a number's name, after the number
    (re.compile(r"\(an? dict\)"), "(a JSON object)"),
    (re.compile(r"\bNone\b"), "null"),
    (re.compile(r"\bTrue\b"), "true"),
    (re.compile(r"\bFalse\b"), "false"),
    (re.compile(r"`(\w+)=([^`]+)`"), r"`\1: \2`"),
)


@dataclass(frozen=True)
class Tool:
    """One MCP tool: the operation ``operation`` (``"mail.send"``, or ``"search"`` for a
    top-level one) with ``me`` (a parameter name) filled by the calling identity, ``project``
    (a parameter name) by the server's project key, ``fixed`` parameters set, ``hidden`` ones
    left at their defaults, ``defaults`` and ``maximum`` (numeric bounds) overriding the
    operation's for the wire. ``lead`` replaces the docstring's first sentence when the tool
    is a specialisation of its operation."""

    name: str
    operation: str
    area: str
    me: str | None = None
    project: str | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    maximum: Mapping[str, float] = field(default_factory=dict)
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    lead: str | None = None
    core: bool = False
    read_only: bool = False

    @cached_property
    def _hints(self) -> dict[str, Any]:
        hints = typing.get_type_hints(_operation_named(self.operation).fn)
        returned = hints.pop("return")
        hints["return"] = typing.get_args(returned)[2]  # Op[T] is Generator[Any, Any, T]
        return hints

    def offered(self, operator: bool) -> list[str]:
        """The parameters the tool takes from its caller."""
        names = [
            name
            for name in _operation_named(self.operation).signature().parameters
            if name not in self.fixed
            and name not in self.hidden
            and name not in (self.me, self.project)
        ]
        if operator and self.me is not None:
            names.append(AS_IDENTITY)
        return names

    def arguments(self, operator: bool) -> type[BaseModel]:
        """The pydantic model of the tool's arguments (validates a call's ``arguments``)."""
        parameters = _operation_named(self.operation).signature().parameters
        fields: dict[str, Any] = {}
        for name in self.offered(operator):
            if name == AS_IDENTITY:
                described = Field(
                    default=None, description="The identity to act as (default: the server's)."
                )
                fields[name] = (str | None, described)
                continue
            wire = _wire(self._hints[name])
            vocabulary = self.choices.get(name) or _VOCABULARY.get(name)
            if vocabulary is not None:
                wire = _restricted(wire, vocabulary)
            if name in self.maximum:
                wire = Annotated[wire, Field(ge=0, le=self.maximum[name])]
            default = self.defaults.get(name, parameters[name].default)
            if isinstance(default, timedelta):  # on the wire a duration is seconds
                default = default.total_seconds()
            fields[name] = (wire, ... if default is inspect.Parameter.empty else default)
        config = ConfigDict(extra="forbid", arbitrary_types_allowed=False, strict=True)
        model: type[BaseModel] = create_model(f"{self.name}_arguments", __config__=config, **fields)
        return model

    def input_schema(self, operator: bool) -> dict[str, Any]:
        """The JSON schema of the arguments (titles dropped: they repeat the names; every
        node typed; each parameter's bounds, default and format said in its description)."""
        schema: dict[str, Any] = _typed(_untitled(self.arguments(operator).model_json_schema()))
        for prop in schema.get("properties", {}).values():
            said = _bounds_said(prop)
            if said:
                described = prop.get("description")
                prop["description"] = (
                    f"{described} ({said})" if described else said[0].upper() + said[1:]
                )
        return schema

    def call_arguments(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        """The validated wire values as the operation's arguments: a pair's array as a
        tuple, seconds as a ``timedelta`` where the operation takes one and no number."""
        kwargs = dict(validated)
        for name, value in validated.items():
            if name == AS_IDENTITY:
                continue
            kinds = _flat(self._hints[name])
            if isinstance(value, list) and any(typing.get_origin(k) is tuple for k in kinds):
                kwargs[name] = tuple(value)
            elif (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and timedelta in kinds
                and float not in kinds
                and int not in kinds
            ):
                try:
                    kwargs[name] = timedelta(seconds=value)
                except (OverflowError, ValueError):  # inf, NaN, beyond timedelta's range
                    raise InvalidArgument(
                        f"{name} must be a finite number of seconds, at most "
                        f"{int(timedelta.max.total_seconds())}, got {value!r}"
                    ) from None
        return kwargs

    @cached_property
    def result(self) -> TypeAdapter[Any]:
        """Serializes the operation's result to JSON-compatible values."""
        return TypeAdapter(self._hints["return"])

    @cached_property
    def wraps_result(self) -> bool:
        """Whether the result travels as ``{"result": ...}`` (it is not a model)."""
        returned = self._hints["return"]
        return not (isinstance(returned, type) and dataclasses.is_dataclass(returned))

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of ``structuredContent``: always an object, every node typed."""
        schema: dict[str, Any] = _typed(_untitled(self.result.json_schema(mode="serialization")))
        if not self.wraps_result:
            return schema
        defs = schema.pop("$defs", None)
        wrapped: dict[str, Any] = {
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
        }
        if defs:
            wrapped["$defs"] = defs
        return wrapped

    def structured(self, value: Any) -> dict[str, Any]:
        """``value`` (the operation's result) as the tool's JSON object."""
        dumped = self.result.dump_python(value, mode="json")
        return {"result": dumped} if self.wraps_result else typing.cast(dict[str, Any], dumped)

    def description(self) -> str:
        """The operation's docstring, as plain text for an LLM, with who acts said."""
        fn = _operation_named(self.operation).fn
        text = inspect.cleandoc(fn.__doc__ or "")
        text = re.sub(r"``([^`]+)``", r"`\1`", text)
        for python, wire in _WIRE_WORDS:
            text = python.sub(wire, text)
        text = re.sub(r"`store\.([\w.]+)`", _tool_for, text)
        text = re.sub(r"`([A-Z][A-Z0-9_]+)`", lambda m: _value_of(m, fn.__globals__), text)
        refused = (*self.hidden, *([self.project] if self.project else []))
        text = _unsaid(text, [h for h in refused if (self.name, h) not in _HIDDEN_SAID])
        if self.lead is not None:
            text = self.lead + "\n\n" + text
        if self.me is not None:
            text += f"\n\nActs as the calling agent's identity (`{self.me}`)."
        if self.project is not None:
            text += (
                "\n\nOnly this project's task lists and those of no project (a list belongs "
                "to its owner's project)."
            )
        if len(text) > MAX_DESCRIPTION:
            text = text[: MAX_DESCRIPTION - 1] + "…"
        return text

    def bind(self, store: Any) -> Callable[..., Any]:
        """The operation bound to ``store`` (either face)."""
        space, _, name = self.operation.rpartition(".")
        owner = getattr(store, space) if space else store
        bound: Callable[..., Any] = getattr(owner, name)
        return bound


#: Hidden parameters a description may still name: a sentence about errors that names it.
_HIDDEN_SAID = frozenset({("register", "agent_uuid")})


def _unsaid(text: str, hidden: Sequence[str]) -> str:
    """``text`` without what names a parameter in ``hidden`` in code (telling an agent to
    pass what the tool refuses): a paragraph that opens with it, else the sentences."""
    if not hidden:
        return text
    name = re.compile(rf"\b(?:{'|'.join(hidden)})\b")

    def naming(part: str) -> list[str]:
        return [span for span in re.findall(r"`[^`]*`", part) if name.search(span)]

    paragraphs = []
    for paragraph in text.split("\n\n"):
        named = naming(paragraph)
        if named and paragraph.startswith(named[0]):
            continue
        if named:
            sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", paragraph.replace("\n", " "))
            paragraph = " ".join(s for s in sentences if not naming(s))
        if paragraph:
            paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)


def _value_of(match: re.Match[str], constants: Mapping[str, Any]) -> str:
    """A constant's name as its value (a collection: the schema's list of it)."""
    value = constants.get(match[1])
    if isinstance(value, re.Pattern):
        return f"`{value.pattern}`"
    if isinstance(value, tuple | frozenset):
        return "the values its schema lists"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return match[0]


def _tool_for(match: re.Match[str]) -> str:
    """`store.<operation>` as the tool that runs it (as it was when no tool does)."""
    for tool in TOOLS:
        if tool.operation == match[1] and not tool.fixed:
            return f"`{tool.name}`"
    return match[0]


@functools.cache
def _operation_named(path: str) -> ops.operation[..., Any]:
    """The operation ``path`` names (``"mail.send"``, or ``"search"`` for a top-level one)."""
    space, _, name = path.rpartition(".")
    owner = NAMESPACES[space] if space else Operations
    op = inspect.getattr_static(owner, name)
    if not isinstance(op, ops.operation):  # pragma: no cover - a table error
        raise TypeError(f"{path} is not an operation")
    return op


def _untitled(schema: Any) -> Any:
    """``schema`` without pydantic's ``title`` keys (they repeat names and cost tokens); a
    property named ``title`` stays."""
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: {name: _untitled(sub) for name, sub in value.items()}
        if key in ("properties", "$defs")
        else _untitled(value)
        for key, value in schema.items()
        if key != "title"
    }


#: Any JSON value, said explicitly (an empty schema is one clients handle badly).
ANY_JSON: dict[str, Any] = {
    "anyOf": [
        {"type": "object"},
        {"type": "array"},
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ]
}
#: The keywords that say what a schema node holds (a node with none of them is untyped).
_TYPING = frozenset(
    {"type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties", "items", "not"}
)


_SUBSCHEMAS = frozenset({"items", "additionalProperties", "not", "anyOf", "oneOf", "allOf"})


def _typed(schema: Any) -> Any:
    """``schema`` with every untyped node (``{}``, ``{"default": null}``) made ``ANY_JSON``
    (its other keys kept)."""
    if isinstance(schema, list):
        return [_typed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            out[key] = {name: _typed(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMAS and isinstance(value, dict | list):
            out[key] = _typed(value)
        else:
            out[key] = value
    if not _TYPING & out.keys():
        out = {**ANY_JSON, **out}
    return out


def _bounds_said(prop: Mapping[str, Any]) -> str:
    """A property's bounds, format and default in words (clients that drop the keywords
    still show the description)."""
    nodes = [prop, *(n for n in prop.get("anyOf", ()) if isinstance(n, dict))]
    words: list[str] = []
    for node in nodes:
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and high is not None:
            words.append(f"{low:g} to {high:g}")
        elif low is not None:
            words.append(f"at least {low:g}")
        elif high is not None:
            words.append(f"at most {high:g}")
        if node.get("minLength") is not None or node.get("maxLength") is not None:
            words.append(
                f"{node.get('minLength', 0)} to {node['maxLength']} characters"
                if node.get("maxLength") is not None
                else f"at least {node['minLength']} characters"
            )
        if node.get("minItems") is not None and node.get("minItems") == node.get("maxItems"):
            words.append(f"exactly {node['minItems']} items")
        if node.get("format") == "date-time":
            numbers = any(n.get("type") == "number" for n in nodes)
            words.append(
                "an ISO 8601 date-time with a UTC offset" + (", or seconds" if numbers else "")
            )
    if prop.get("default") not in (None, [], {}, False, ""):
        words.append(f"default {json.dumps(prop['default'])}")
    return "; ".join(dict.fromkeys(words))


def _flat(tp: Any) -> list[Any]:
    """The members of a union type (``tp`` itself if it is none)."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        return [member for arg in typing.get_args(tp) for member in _flat(arg)]
    return [tp]


#: Parameters whose values come from one vocabulary wherever they appear.
_VOCABULARY: dict[str, tuple[str, ...]] = {
    "priority": models.PRIORITIES,
    "review_type": models.REVIEW_TYPES,
    "decision": models.REVIEW_DECISIONS,
    "event": models.REVIEW_EVENTS,
    "activity_type": models.ACTIVITY_TYPES,
}


def _restricted(wire: Any, vocabulary: tuple[str, ...]) -> Any:
    """``wire`` (``str`` or ``str | None``) as an enum of ``vocabulary`` for the schema."""
    choice = Literal[vocabulary]  # type: ignore[valid-type]
    return choice | None if type(None) in typing.get_args(wire) else choice


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _wire(tp: Any) -> Any:
    """The JSON-facing type of an operation parameter's type (see the module's invariants)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        kept: list[Any] = []
        for arg in args:
            if not _is_model(arg) and (wired := _wire(arg)) not in kept:
                kept.append(wired)
        return Union[tuple(kept)] if len(kept) > 1 else kept[0]  # noqa: UP007
    if tp is timedelta:
        return float
    if tp is UUID:
        return str
    if origin in (abc.Sequence, abc.Iterable, list):
        return list[_wire(args[0])]  # type: ignore[misc]
    if origin in (abc.Mapping, dict):
        return dict[str, Any]
    if origin is tuple:
        kinds: list[Any] = list(dict.fromkeys(_wire(a) for a in args))
        item = Union[tuple(kinds)] if len(kinds) > 1 else kinds[0]  # noqa: UP007
        return Annotated[list[item], Field(min_length=len(args), max_length=len(args))]  # type: ignore[valid-type]
    return tp


def _tools() -> tuple[Tool, ...]:
    claim_lead = "`claim` is `[mail_id, token]` of the claim."
    lease_lead = "`lease` is `[resource, token]` of the reservation."
    return (
        # identities
        Tool("whoami", "identities.heartbeat", "identities", me="name", core=True,
             lead="Who this agent is (its identity), marking it active."),
        Tool("register", "identities.register", "identities",
             hidden=("agent_uuid", "hostname"),
             lead="Register a new identity (another agent's, e.g. a helper you start). This "
                  "server goes on acting as the identity it has (`whoami`)."),
        Tool("list_agents", "identities.discover", "identities", read_only=True),
        Tool("get_agent", "identities.get", "identities", read_only=True),
        # mail
        Tool("send_mail", "mail.send", "mail", me="sender", core=True,
             hidden=("attachments",)),
        Tool("reply", "mail.reply", "mail", me="sender", core=True),
        Tool("fetch_inbox", "mail.inbox", "mail", me="identity", core=True, read_only=True,
             choices={"state": models.MAIL_STATES}),
        Tool("read_message", "mail.read", "mail", me="identity"),
        Tool("ack_message", "mail.ack", "mail", me="identity", core=True),
        Tool("set_mail_state", "mail.set_state", "mail", me="identity",
             choices={"state": models.MAIL_STATES},
             lead="Star, snooze, archive, trash or mark read/unread one of your mails."),
        Tool("read_thread", "mail.thread", "mail", me="identity", read_only=True),
        Tool("search_mail", "mail.search", "mail", me="identity", read_only=True,
             hidden=("before",)),
        Tool("mail_status", "mail.counts", "mail", me="identity", read_only=True),
        Tool("wait_for_mail", "mail.wait", "mail", me="identity",
             defaults={"timeout": 30.0}, maximum={"timeout": 120.0},
             lead="Wait (at most 120 s) for mail to arrive."),
        # topics
        Tool("list_topics", "topics.list", "topics", read_only=True),
        Tool("create_topic", "topics.create", "topics", choices={"kind": models.TOPIC_KINDS}),
        Tool("subscribe", "topics.subscribe", "topics", me="identity"),
        Tool("unsubscribe", "topics.unsubscribe", "topics", me="identity"),
        Tool("publish", "mail.publish", "topics", me="sender",
             hidden=("attachments", "wait_for_offset")),
        Tool("publish_many", "mail.publish_many", "topics", me="sender",
             hidden=("wait_for_offset",)),
        Tool("poll_topics", "topics.poll", "topics", me="identity"),
        Tool("commit_offset", "topics.commit", "topics", me="identity"),
        Tool("claim_message", "topics.claim", "topics", me="identity",
             hidden=("complete",), maximum={"wait": 120.0}),
        Tool("complete_message", "topics.complete", "topics", lead=claim_lead),
        Tool("release_message", "topics.release", "topics", lead=claim_lead),
        Tool("extend_claim", "topics.extend", "topics", lead=claim_lead),
        # leases: file and resource reservations
        Tool("reserve", "leases.acquire", "leases", me="holder", core=True,
             lead="Reserve a file, glob or other resource (file reservations are resources "
                  "`file:/absolute/path`; the edit hook enforces them)."),
        Tool("renew_reservation", "leases.renew", "leases", lead=lease_lead),
        Tool("release_reservation", "leases.release", "leases", core=True, lead=lease_lead),
        Tool("list_reservations", "leases.held", "leases", core=True, read_only=True),
        Tool("wait_for_reservation", "leases.wait_for", "leases", me="waiter"),
        # reviews
        Tool("request_review", "reviews.create", "reviews", me="requester"),
        Tool("review_status", "reviews.get", "reviews", read_only=True),
        Tool("list_reviews", "reviews.list", "reviews", read_only=True,
             choices={"state": models.REVIEW_STATES}),
        Tool("record_review", "reviews.record_iteration", "reviews", me="reviewer"),
        Tool("open_issues", "reviews.open_issues", "reviews", read_only=True),
        Tool("resolve_issue", "reviews.resolve_issue", "reviews",
             choices={"status": models.ISSUE_STATUSES}),
        Tool("review_event", "reviews.fire", "reviews", me="by"),
        # plans
        Tool("submit_plan", "plans.submit", "plans", me="requester"),
        Tool("plan_status", "plans.get", "plans", read_only=True),
        Tool("decide_plan", "plans.decide", "plans", me="reviewed_by",
             choices={"state": PLAN_DECISIONS}),
        # tasks
        Tool("task_lists", "tasks.lists", "tasks", project="project_key", read_only=True),
        Tool("create_task_list", "tasks.create_list", "tasks", me="owner"),
        Tool("list_tasks", "tasks.list", "tasks", read_only=True,
             choices={"status": models.TASK_STATUSES}),
        Tool("upsert_task", "tasks.upsert", "tasks", core=True, hidden=("owner",),
             choices={"status": models.TASK_STATUSES}),
        Tool("available_tasks", "tasks.available", "tasks", project="project_key", core=True,
             read_only=True),
        Tool("claim_task", "tasks.claim", "tasks", me="owner", core=True),
        Tool("complete_task", "tasks.complete", "tasks", me="owner", core=True),
        Tool("release_task", "tasks.release", "tasks", me="owner"),
        Tool("task_stats", "tasks.stats", "tasks", read_only=True),
        # activity feed
        Tool("activity_feed", "activities.feed", "activities", read_only=True),
        Tool("record_activity", "activities.record", "activities", me="identity"),
        # the agents' own history
        Tool("search_history", "search", "history", read_only=True, hidden=("before",)),
        Tool("replay_session", "replay_session", "history", read_only=True),
        Tool("replay_agent", "replay_agent", "history", read_only=True),
    )  # fmt: skip


#: Every tool, in ``tools/list`` order.
TOOLS: tuple[Tool, ...] = _tools()
#: The areas ``--tools`` accepts besides ``core`` and ``full``.
AREAS: tuple[str, ...] = tuple(dict.fromkeys(tool.area for tool in TOOLS))
#: The default set: mail, reservations and tasks.
CORE: tuple[Tool, ...] = tuple(tool for tool in TOOLS if tool.core)


def select(spec: str | Sequence[str]) -> tuple[Tool, ...]:
    """The tools named by ``spec``: ``core``, ``full`` or a comma-separated list of areas
    and tool names (``mail,leases,claim_task``). ``ValueError`` for an unknown word."""
    chosen = set(select_names(spec, ((tool.name, tool.area, tool.core) for tool in TOOLS)))
    return tuple(tool for tool in TOOLS if tool.name in chosen)
