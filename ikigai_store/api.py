"""The public operations of a store, gathered once for every face.

Owns ``Operations``: the top-level operations (sessions, events, agents, search, export and
import, schema) and the namespaces (``store.mail``, ``store.topics``, …), each defined in its
area module as an ``ops.Area`` whose attributes are ``ops.operation``s. ``Store`` is
``Operations[SyncFace]`` and ``AsyncStore`` is ``Operations[AsyncFace]``: nothing here or in the
faces repeats a signature.
Adding an operation to an area touches only that area's module (and its SQL and tests);
adding an area adds one line to ``Operations.__init__``. Invariant: both faces expose exactly
the same operations, with the same signatures and docstrings.
"""

from __future__ import annotations

from typing import Any

from .activities import ActivityCalls
from .admin import AdminOps
from .agents import AgentOps
from .events import EventOps
from .identities import IdentityCalls
from .leases import LeaseCalls
from .mail import MailCalls
from .ops import Area, AsyncFace, FaceT
from .plans import PlanCalls
from .portability import PortabilityOps
from .reviews import ReviewCalls
from .search import SearchOps
from .sessions import SessionOps
from .summaries import SummaryCalls
from .tasks import TaskCalls
from .topics import TopicCalls
from .watch import WatchCalls

__all__ = ["NAMESPACES", "Operations"]


class Operations(
    SessionOps[FaceT],
    EventOps[FaceT],
    AgentOps[FaceT],
    SearchOps[FaceT],
    PortabilityOps[FaceT],
    AdminOps[FaceT],
):
    """Every operation of a store, bound to the face ``self`` is (see ``ops.operation``)."""

    identities: IdentityCalls[FaceT]
    mail: MailCalls[FaceT]
    topics: TopicCalls[FaceT]
    tasks: TaskCalls[FaceT]
    activities: ActivityCalls[FaceT]
    summaries: SummaryCalls[FaceT]
    leases: LeaseCalls[FaceT]
    reviews: ReviewCalls[FaceT]
    plans: PlanCalls[FaceT]
    watch: WatchCalls[FaceT]

    def __init__(self, face: FaceT) -> None:
        self._face = face
        #: Identities: named participants of mail (``IdentityCalls``).
        self.identities = IdentityCalls(face)
        #: Direct mail between identities, and publishing to topics (``MailCalls``).
        self.mail = MailCalls(face)
        #: Topics, subscriptions, offsets and work queues (``TopicCalls``).
        self.topics = TopicCalls(face)
        #: Task lists, tasks with dependencies, claims (``TaskCalls``).
        self.tasks = TaskCalls(face)
        #: The activity feed (``ActivityCalls``).
        self.activities = ActivityCalls(face)
        #: Agent summaries and runtime context summaries (``SummaryCalls``).
        self.summaries = SummaryCalls(face)
        #: Leases on resources, enforced by the database (``LeaseCalls``).
        self.leases = LeaseCalls(face)
        #: Code reviews: the review state machine, iterations and issues (``ReviewCalls``).
        self.reviews = ReviewCalls(face)
        #: Plan reviews: plans approved before they are carried out (``PlanCalls``).
        self.plans = PlanCalls(face)
        #: What concerns an identity, as it commits: ``ikigai-store watch`` (``WatchCalls``).
        self.watch = WatchCalls(face)


class _Namespace:
    """A namespace read through a store's class: ``Store.mail`` is ``MailCalls`` (its
    operations plain functions), ``AsyncStore.mail`` the subclass of ``MailCalls`` whose
    operations are coroutine functions, so ``help()``, pydoc and documentation generators see
    each face's methods. An instance's own namespace (set by ``Operations.__init__``) hides it."""

    def __init__(self, name: str, cls: type[Area[Any]]) -> None:
        self.name = name
        self.cls = cls
        self._async_view: type[Area[Any]] | None = None

    def __get__(self, obj: object, owner: type | None = None) -> type[Area[Any]]:
        if obj is not None:  # pragma: no cover - Operations.__init__ sets every namespace
            raise AttributeError(f"{type(obj).__name__} has no namespace {self.cls.__name__}")
        if owner is None or not issubclass(owner, AsyncFace):
            return self.cls
        if self._async_view is None:
            self._async_view = type(
                self.cls.__name__,
                (self.cls,),
                {
                    "__module__": self.cls.__module__,
                    "__qualname__": self.cls.__qualname__,
                    "__doc__": f"``AsyncStore.{self.name}``: ``{self.cls.__name__}`` on the "
                    "asyncio face, every operation a coroutine function.\n\n"
                    f"{self.cls.__doc__ or ''}",
                    "_async_face": True,
                },
            )
        return self._async_view


#: The namespace attributes of a store and their classes (for faces that list them: the CLI's
#: help, MCP tools, the parity tests).
NAMESPACES: dict[str, type] = {
    "identities": IdentityCalls,
    "mail": MailCalls,
    "topics": TopicCalls,
    "tasks": TaskCalls,
    "activities": ActivityCalls,
    "summaries": SummaryCalls,
    "leases": LeaseCalls,
    "reviews": ReviewCalls,
    "plans": PlanCalls,
    "watch": WatchCalls,
}

for _name, _cls in NAMESPACES.items():
    setattr(Operations, _name, _Namespace(_name, _cls))
