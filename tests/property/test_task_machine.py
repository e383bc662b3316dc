"""Task lists, tasks and dependencies through the real database agree with the model.

A Hypothesis state machine creates lists (also with bad arguments, taken ids, missing or retired
owners), upserts tasks with every field drawn (subject, description, active_form, metadata,
status and owner, each sometimes None, empty or bad; blocked_by None, [] or a set of external
ids that may include the task itself, unknown ids or its dependents, so cycles are tried),
adds single dependency edges (often ones that would close a cycle), claims tasks (as their
owner, as someone else, blocked or finished ones), releases them (as their holder, as someone
else, or ones not in progress), completes and deletes them, syncs lists with
random active sets, prunes while a controllable clock (``ikigai.now``, see tests/mailtools.py)
moves, and retires identities. Every call is mirrored in ``RefTaskWorld``
(tests/reference_tasks.py). A refusal must be the same ``ik`` error as the model's, name what
the model names, and write nothing; a refused cycle must name a real cycle of the graph the
upsert would have made. After every step the lists, every list's tasks, ``available_tasks``
(per list and over all lists), ``task_stats`` (likewise) and the ``task_complete`` activities
(one per first completion by a live identity, none for a free-text owner) equal the model's.

Each example runs in a savepoint of the ``ikigai_store`` fixture's rolled-back transaction (on
each face), so examples do not see each other's rows or clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ikigai_store as ik
from tests.mailtools import EPOCH, Clock
from tests.reference_mail import RefConflict, RefError, RefInvalid, RefNotFound
from tests.reference_tasks import TASK_STATUSES, RefActivity, RefTask, RefTaskWorld

pytestmark = pytest.mark.db

NAMES = ["ann", "bob", "cat"]
#: Each identity's project: ann's and bob's lists are in projects of their own, cat's shared.
PROJECTS: dict[str, str | None] = {"ann": "p1", "bob": "p2", "cat": None}
LISTS = ["L1", "L2", "L3", "S"]
BAD_KEYS = ["", "x" * 201, "a\nb"]
EXTS = ["1", "2", "3", "4", "5", "6"]
STEPS = [timedelta(seconds=1), timedelta(minutes=30), timedelta(hours=2), timedelta(days=1)]
AGES = [timedelta(0), timedelta(seconds=1), timedelta(hours=1), timedelta(days=1)]

texts = st.sampled_from([None, None, "", "Write the parser", "line\nline ✓"])
metadatas: st.SearchStrategy[dict[str, Any] | None] = st.sampled_from(
    [None, None, {}, {"a": 1}, {"a": None, "b": [1, "x"]}, {"c": {}}]
)
statuses = st.sampled_from([None, None, "", *TASK_STATUSES])
owners = st.sampled_from([None, None, "", "ann", "bob", "agent one"])

ERRORS: dict[type[RefError], type[Exception]] = {
    RefInvalid: ik.InvalidArgument,
    RefNotFound: ik.NotFound,
    RefConflict: ik.Conflict,
}
STORE_ERRORS = (ik.InvalidArgument, ik.NotFound, ik.Conflict)

#: Everything a task call may write, in one round trip (a refusal must change none of it).
FOOTPRINT = """
SELECT md5(concat_ws('#',
  (SELECT string_agg(concat_ws('|', id, list_id, owner_id, watch_path, created_at,
                               last_synced_at), ',' ORDER BY id) FROM task_lists),
  (SELECT string_agg(concat_ws('|', id, list_id, external_id, subject, description, active_form,
                               metadata, status, owner, created_at, updated_at, started_at,
                               completed_at), ',' ORDER BY id) FROM tasks),
  (SELECT string_agg(task_id || '<' || blocked_by_id, ',' ORDER BY task_id, blocked_by_id)
   FROM task_deps),
  (SELECT string_agg(concat_ws('|', id, identity_id, type, description, metadata, created_at),
                     ',' ORDER BY id) FROM activities))) AS digest
"""

CYCLE_PATH = re.compile(r": ((?:\S+ -> )+\S+) \(")


class Refused(Exception):
    """Both store and model refused the call (the same way)."""


def footprint(store: Any) -> str:
    with store._connection() as conn:
        return str(conn.execute(FOOTPRINT).fetchone()["digest"])


def task_view(task: ik.Task) -> tuple[Any, ...]:
    return (
        task.id,
        task.list_id,
        task.external_id,
        task.subject,
        task.description,
        task.active_form,
        task.metadata,
        task.status,
        task.owner,
        task.blocked_by,
        task.blocks,
        task.created_at,
        task.updated_at,
        task.started_at,
        task.completed_at,
    )


def list_view(x: ik.TaskList) -> tuple[Any, ...]:
    return (x.id, x.list_id, x.owner, x.watch_path, x.created_at, x.last_synced_at)


def activity_view(a: ik.Activity) -> tuple[Any, ...]:
    return (a.identity, a.type, a.description, a.metadata, a.created_at)


def ref_activity_view(a: RefActivity) -> tuple[Any, ...]:
    """What the store records for a model activity (the wording of tasks-readme.md)."""
    return (
        a.identity,
        "task_complete",
        f'completed task {a.external_id} "{a.subject}" in list {a.list_id}',
        {"list_id": a.list_id, "external_id": a.external_id, "task_id": a.task_id},
        a.created_at,
    )


class TasksMachine(RuleBasedStateMachine):
    """Drives task lists and tasks through the store and checks them against the model."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefTaskWorld()
        self.scope = ExitStack()
        self.scope.enter_context(store.transaction(force_rollback=True))
        self.clock = Clock(store, EPOCH)

    def teardown(self) -> None:
        self.scope.close()

    # -- helpers -------------------------------------------------------------------------------

    def pick(self, data: st.DataObject, choices: list[Any], label: str) -> Any:
        return data.draw(st.sampled_from(choices), label=label)

    def a_list(self, data: st.DataObject) -> str:
        """Mostly an existing list, sometimes a missing or a bad id."""
        if self.model.lists and data.draw(st.integers(0, 6), label="list exists?") > 0:
            return str(self.pick(data, sorted(self.model.lists), "list"))
        return str(self.pick(data, [*LISTS, *BAD_KEYS[:2]], "list"))

    def an_ext(self, data: st.DataObject, lst: str) -> str:
        """Mostly an existing task of the list, sometimes another id or a bad one."""
        known = sorted(e for (lz, e) in self.model.items if lz == lst)
        if known and data.draw(st.integers(0, 4), label="task exists?") > 0:
            return str(self.pick(data, known, "task"))
        return str(self.pick(data, [*EXTS, *BAD_KEYS], "task"))

    def existing(self) -> list[tuple[str, str]]:
        return sorted(self.model.items)

    def both(self, store_call: Callable[[], Any], model_call: Callable[[Any], Any]) -> Any:
        """Run the call on the store, then on the model (given the store's result): both
        succeed (the store's result and the model's are returned), or both refuse with the
        matching ``ik`` error naming what the model names, nothing written (``Refused``)."""
        before = footprint(self.store)
        try:
            got = store_call()
        except STORE_ERRORS as exc:
            try:
                model_call(None)
            except RefError as ref:
                wanted = ERRORS[type(ref)]
                assert type(exc) is wanted, f"store raised {exc!r}, model {ref!r}"
                for named in ref.named:
                    assert named in str(exc), f"{exc!r} does not name {named!r} ({ref!r})"
                assert footprint(self.store) == before, "a refused call wrote rows"
                raise Refused(str(exc)) from exc
            raise AssertionError(f"store raised {exc!r}; the model accepted") from exc
        try:
            expected = model_call(got)
        except RefError as ref:
            raise AssertionError(f"store returned {got!r}; the model refused: {ref!r}") from ref
        return got, expected

    def check_task(self, got: ik.Task, expected: RefTask) -> None:
        assert task_view(got) == self.model.view(expected)

    # -- rules: identities and lists -----------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """ann, bob and cat (in PROJECTS); list L1 owned by ann (project p1) with tasks 1 and 2
        (2 blocked by 1), and list S owned by cat (no project: shared) with task 1."""
        for name in NAMES:
            self.store.identities.register(name, project_key=PROJECTS[name])
            self.model.register(name, PROJECTS[name])
        for lst, owner in (("L1", "ann"), ("S", "cat")):
            made = self.store.tasks.create_list(lst, owner)
            self.model.create_list(lst, owner, id=made.id)
        for lst, ext, blockers in (("L1", "1", None), ("L1", "2", ["1"]), ("S", "1", None)):
            got = self.store.tasks.upsert(lst, ext, subject=f"task {ext}", blocked_by=blockers)
            self.check_task(
                got,
                self.model.upsert_task(lst, ext, f"task {ext}", blocked_by=blockers, id=got.id),
            )

    @precondition(lambda self: sum(not r for r in self.model.identities.values()) > 1)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        """A retired identity keeps its lists but cannot own a new one."""
        live = [n for n, retired in self.model.identities.items() if not retired]
        name = self.pick(data, live, "name")
        self.store.identities.retire(name)
        self.model.retire(name)

    @precondition(lambda self: len(self.model.lists) < len(LISTS))
    @rule(
        data=st.data(),
        owner=st.sampled_from([*NAMES, "ghost", "bad name"]),
        watch_path=st.sampled_from([None, None, "/w", ""]),
    )
    def create_list(self, data: st.DataObject, owner: str, watch_path: str | None) -> None:
        """create_list: new ids, identical repeats (idempotent), taken ids, bad arguments."""
        name = self.pick(data, [*LISTS, *BAD_KEYS], "list")
        try:
            got, expected = self.both(
                lambda: self.store.tasks.create_list(name, owner, watch_path=watch_path),
                lambda got: self.model.create_list(
                    name, owner, watch_path, id=None if got is None else got.id
                ),
            )
        except Refused:
            return
        assert list_view(got) == expected.view()

    # -- rules: tasks --------------------------------------------------------------------------

    def do_upsert(self, lst: str, ext: str, **fields: Any) -> None:
        blockers = fields.get("blocked_by")
        try:
            got, expected = self.both(
                lambda: self.store.tasks.upsert(lst, ext, **fields),
                lambda got: self.model.upsert_task(
                    lst, ext, **fields, id=None if got is None else got.id
                ),
            )
        except Refused as refusal:
            match = CYCLE_PATH.search(str(refusal))
            if "dependency cycle in list" in str(refusal):
                assert match is not None, refusal
                path = match.group(1).split(" -> ")
                assert self.model.is_cycle_path(lst, ext, list(blockers or []), path), refusal
                event("upsert: cycle refused")
            else:
                event("upsert: refused")
            return
        event("upsert: written")
        self.check_task(got, expected)

    @rule(
        data=st.data(),
        subject=texts,
        description=texts,
        active_form=texts,
        metadata=metadatas,
        status=statuses,
        owner=owners,
        deps=st.sampled_from(["none", "none", "empty", "some", "some"]),
    )
    def upsert(
        self,
        data: st.DataObject,
        subject: Any,
        description: Any,
        active_form: Any,
        metadata: Any,
        status: Any,
        owner: Any,
        deps: str,
    ) -> None:
        """An upsert with every field drawn; blocked_by None, [] or ids of the list (maybe the
        task itself, unknown ids, or tasks that depend on it)."""
        lst = self.a_list(data)
        ext = self.an_ext(data, lst)
        blocked_by: Any = None
        if deps == "empty":
            blocked_by = []
        elif deps == "some":
            blocked_by = data.draw(
                st.lists(st.sampled_from(EXTS), max_size=3, unique=True), label="blocked_by"
            )
        self.do_upsert(
            lst,
            ext,
            subject=subject,
            description=description,
            active_form=active_form,
            metadata=metadata,
            status=status,
            owner=owner,
            blocked_by=blocked_by,
        )

    @rule(
        data=st.data(),
        bad=st.sampled_from(
            [
                {"subject": 5},
                {"metadata": [1]},
                {"status": "done"},
                {"owner": "a\tb"},
                {"blocked_by": "1"},
                {"description": "a\x00"},
            ]
        ),
    )
    def upsert_bad(self, data: st.DataObject, bad: dict[str, Any]) -> None:
        """A bad argument is refused like the model refuses it, nothing written."""
        lst = self.a_list(data)
        self.do_upsert(lst, self.an_ext(data, lst), **{"subject": "s", **bad})

    @precondition(lambda self: len(self.model.items) >= 2)
    @rule(data=st.data(), toward=st.sampled_from(["dependent", "dependent", "any"]))
    def add_edge(self, data: st.DataObject, toward: str) -> None:
        """Add one blocker to a task's current ones: often a task that already depends on it
        (directly or not), which would close a cycle."""
        lst, ext = self.pick(data, self.existing(), "task")
        task = self.model.items[(lst, ext)]
        current = [b.external_id for b in self.model.blockers(task)]
        up = self.upstream(lst, ext)
        if toward == "dependent" and up:
            extra = self.pick(data, sorted(up), "dependent")
        else:
            others = sorted(e for (lz, e) in self.model.items if lz == lst and e != ext)
            if not others:
                return
            extra = self.pick(data, others, "other")
        self.do_upsert(lst, ext, blocked_by=[*current, extra])

    def upstream(self, lst: str, ext: str) -> set[str]:
        """Every task of the list that depends on ``ext``, directly or not."""
        found: set[str] = set()
        frontier = [ext]
        while frontier:
            node = frontier.pop()
            for (lz, e), names in self.model.deps.items():
                if lz == lst and node in names and e not in found:
                    found.add(e)
                    frontier.append(e)
        return found

    @rule(data=st.data(), who=st.sampled_from(["ann", "bob", "agent one", "", "a\x01"]))
    def claim(self, data: st.DataObject, who: str) -> None:
        """claim_task: available tasks, owned ones (by the claimant or not), blocked and
        finished ones; mostly existing tasks."""
        if self.model.items and data.draw(st.integers(0, 5), label="existing?") > 0:
            free = [(t.list_id, t.external_id) for t in self.model.available_tasks()]
            want_free: bool = data.draw(st.booleans(), label="an available one?")
            if free and want_free:
                lst, ext = self.pick(data, free, "task")
            else:
                lst, ext = self.pick(data, self.existing(), "task")
        else:
            lst = self.a_list(data)
            ext = self.an_ext(data, lst)
        try:
            got, expected = self.both(
                lambda: self.store.tasks.claim(lst, ext, who),
                lambda _: self.model.claim_task(lst, ext, who),
            )
        except Refused:
            event("claim: refused")
            return
        event("claim: won")
        self.check_task(got, expected)

    @rule(data=st.data(), as_holder=st.sampled_from([True, True, False]))
    def release(self, data: st.DataObject, as_holder: bool) -> None:
        """release_task: mostly in_progress tasks by their holder (they become available again
        once unblocked), sometimes by someone else, or tasks in other states, or missing ones."""
        running = [(t.list_id, t.external_id) for t in self.model.items.values()]
        running = [k for k in running if self.model.items[k].status == "in_progress"]
        if running and data.draw(st.integers(0, 3), label="in progress?") > 0:
            lst, ext = self.pick(data, sorted(running), "task")
        elif self.model.items and data.draw(st.booleans(), label="existing?"):
            lst, ext = self.pick(data, self.existing(), "task")
        else:
            lst = self.a_list(data)
            ext = self.an_ext(data, lst)
        holder = self.model.items[(lst, ext)].owner if (lst, ext) in self.model.items else None
        if as_holder and holder is not None:
            who = holder
        else:
            who = self.pick(data, ["ann", "bob", "agent one", "a\x01"], "who")
        try:
            got, expected = self.both(
                lambda: self.store.tasks.release(lst, ext, who),
                lambda _: self.model.release_task(lst, ext, who),
            )
        except Refused:
            event("release: refused")
            return
        event("release: released")
        self.check_task(got, expected)

    @precondition(lambda self: self.model.items)
    @rule(data=st.data(), status=st.sampled_from(["completed", "completed", "deleted"]))
    def finish(self, data: st.DataObject, status: str) -> None:
        """Complete (or delete) an existing task: its dependents may become available."""
        lst, ext = self.pick(data, self.existing(), "task")
        self.do_upsert(lst, ext, status=status)

    @rule(data=st.data())
    def sync(self, data: st.DataObject) -> None:
        """sync_list with a random active set (maybe naming unknown ids)."""
        lst = self.a_list(data)
        active = data.draw(st.lists(st.sampled_from(EXTS), max_size=6, unique=True), label="active")
        try:
            got, expected = self.both(
                lambda: self.store.tasks.sync(lst, active),
                lambda _: self.model.sync_list(lst, active),
            )
        except Refused:
            return
        assert got == expected
        event(f"sync: {'deleted some' if got else 'deleted none'}")

    @rule(
        data=st.data(),
        project_key=st.sampled_from(["p1", "p2", "p3", "", "a\x00b", 7]),
        in_list=st.booleans(),
    )
    def available_in_project(self, data: st.DataObject, project_key: object, in_list: bool) -> None:
        """available_tasks of one project (a list of it, of another project or of none, a
        missing list, a bad key), and lists of it: the model's, or refused as the model is."""
        lst = self.a_list(data) if in_list else None
        try:
            got, expected = self.both(
                lambda: self.store.tasks.available(lst, project_key=project_key),
                lambda _: self.model.available_tasks(lst, project_key),
            )
        except Refused:
            event("available in a project: refused")
            return
        assert [task_view(t) for t in got] == [self.model.view(t) for t in expected]
        event(f"available in a project: {'some' if got else 'none'}")
        if not in_list:
            assert [list_view(x) for x in self.store.tasks.lists(project_key=project_key)] == [
                x.view() for x in self.model.all_lists(project_key)
            ]

    @rule(age=st.sampled_from(AGES))
    def prune(self, age: timedelta) -> None:
        """prune deletes exactly the model's old finished tasks (and their edges)."""
        got = self.store.tasks.prune(older_than=age)
        assert got == self.model.prune(age)
        event(f"prune: {'deleted' if got else 'nothing'}")

    @rule(delta=st.sampled_from(STEPS))
    def advance_clock(self, delta: timedelta) -> None:
        """Time passes (finished tasks age)."""
        self.clock.set(self.model.advance(delta))

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def tasks_match(self) -> None:
        """Lists, every list's tasks, available tasks and stats equal the model's."""
        self.model.check()
        assert [list_view(x) for x in self.store.tasks.lists()] == [
            x.view() for x in self.model.all_lists()
        ]
        for lst in self.model.lists:
            assert [task_view(t) for t in self.store.tasks.list(lst)] == [
                self.model.view(t) for t in self.model.tasks(lst)
            ]
            assert [task_view(t) for t in self.store.tasks.available(lst)] == [
                self.model.view(t) for t in self.model.available_tasks(lst)
            ]
            assert tuple(vars_of(self.store.tasks.stats(lst))) == self.model.task_stats(lst)
        everywhere = self.store.tasks.available()
        assert [task_view(t) for t in everywhere] == [
            self.model.view(t) for t in self.model.available_tasks()
        ]
        if everywhere:
            event("invariant: something available")
        for project in ("p1", "p2"):
            assert [task_view(t) for t in self.store.tasks.available(project_key=project)] == [
                self.model.view(t) for t in self.model.available_tasks(None, project)
            ]
        assert tuple(vars_of(self.store.tasks.stats())) == self.model.task_stats()
        done = self.store.activities.feed(activity_type="task_complete", limit=1000)
        assert [activity_view(a) for a in reversed(done)] == [
            ref_activity_view(a) for a in self.model.activities
        ]
        if done:
            event("invariant: task_complete recorded")


def vars_of(stats: ik.TaskStats) -> list[int]:
    return [getattr(stats, name) for name in ik.TaskStats.__dataclass_fields__]


def test_task_machine(ikigai_store: ik.Store) -> None:
    """Lists, upserts, dependencies (cycles refused), claims, sync and prune equal the model
    after every step, and available_tasks is the model's."""

    class OnThisStore(TasksMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )
