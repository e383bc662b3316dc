"""The LangGraph saver agrees with a reference model under random histories (Hypothesis).

The reference (``Model``, below) is written from LangGraph's contract, not from our SQL: each
thread maps a namespace to its checkpoints (id, parent, values, metadata, pending writes);
a copy is a deep copy; delete_thread forgets a thread; prune(keep_latest) keeps the newest
checkpoint of each namespace; delete_for_runs drops the checkpoints of those runs everywhere.
The machine steps threads (appending one message to a messages list, from the newest
checkpoint or forking a past one), puts writes, copies, deletes, prunes, deletes runs, and
checks that ``list`` and ``get_tuple`` agree with the model, through the saver that wrote (its
cache) and through a fresh saver (the chains of appends, the copies' lineage).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langgraph.checkpoint.base.id import uuid6

import ikigai_store as ik
from ikigai_store.integrations.langgraph import IkigaiSaver

pytestmark = [pytest.mark.db]

NAMESPACES = ("", "child:1")
RUNS = ("run-a", "run-b", "run-c")


@dataclass
class Checkpoint:
    checkpoint_id: str
    parent_id: str | None
    messages: list[str]
    version: str
    metadata: dict[str, Any]
    writes: dict[tuple[str, int], tuple[str, Any]] = field(default_factory=dict)


#: thread -> namespace -> checkpoint id -> Checkpoint
Model = dict[str, dict[str, dict[str, Checkpoint]]]


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> Iterator[ik.Store]:
    """A Store on this file's database whose writes are rolled back after the test."""
    with ikigai_module_store.transaction(force_rollback=True):
        yield ikigai_module_store


def test_saver_agrees_with_the_reference_model(store: ik.Store) -> None:
    """Random steps, forks, writes, copies, deletes, prunes and run deletions: the saver's
    list and get_tuple equal the model's, cached and cold (small max_appends, so chains of
    appends restart whole often)."""
    names = itertools.count()

    class Machine(RuleBasedStateMachine):
        threads = Bundle("threads")

        def __init__(self) -> None:
            super().__init__()
            self.tx = store.transaction(force_rollback=True)
            self.tx.__enter__()
            self.saver = IkigaiSaver(store, max_appends=3)
            self.model: Model = {}

        def teardown(self) -> None:
            self.tx.__exit__(None, None, None)

        @initialize(target=threads)
        def first_thread(self) -> str:
            """A thread with three checkpoints to start from (copies, prunes and forks then
            have something to work on from the first steps)."""
            name = self._new_thread()
            for run in RUNS:
                self.step(name, "", 0, run)
            return name

        def _new_thread(self) -> str:
            name = f"t{next(names)}"
            self.model[name] = {}
            return name

        @rule(target=threads)
        def new_thread(self) -> str:
            return self._new_thread()

        @rule(
            thread=threads,
            ns=st.sampled_from(NAMESPACES),
            fork=st.integers(min_value=0, max_value=6),
            run=st.sampled_from(RUNS),
        )
        def step(self, thread: str, ns: str, fork: int, run: str) -> None:
            """Append one message, on top of the newest checkpoint (fork 0) or a past one."""
            if thread not in self.model:
                return
            existing = sorted(self.model[thread].get(ns, {}))
            parent = None
            if existing:
                parent = self.model[thread][ns][existing[max(0, len(existing) - 1 - fork)]]
            messages = [*(parent.messages if parent else []), f"m{next(names)}"]
            version = self.saver.get_next_version(parent.version if parent else None, None)
            checkpoint_id = str(uuid6(clock_seq=-1))
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
            if parent is not None:
                config["configurable"]["checkpoint_id"] = parent.checkpoint_id
            body: Any = {
                "v": 4,
                "id": checkpoint_id,
                "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": {"messages": list(messages), "count": len(messages)},
                "channel_versions": {"messages": version, "count": version},
                "versions_seen": {},
            }
            metadata = {"source": "loop", "step": len(messages), "run_id": run}
            self.saver.put(config, body, metadata, {"messages": version, "count": version})
            self.model[thread].setdefault(ns, {})[checkpoint_id] = Checkpoint(
                checkpoint_id,
                parent.checkpoint_id if parent else None,
                messages,
                version,
                metadata,
            )

        @rule(thread=threads, ns=st.sampled_from(NAMESPACES), n=st.integers(2, 4))
        def steps(self, thread: str, ns: str, n: int) -> None:
            """Several steps in a row on the newest checkpoint (long chains of appends)."""
            for i in range(n):
                self.step(thread, ns, 0, RUNS[i % len(RUNS)])

        @rule(
            thread=threads,
            ns=st.sampled_from(NAMESPACES),
            task=st.sampled_from(("task-1", "task-2")),
            value=st.integers(0, 9),
            special=st.booleans(),
        )
        def put_writes(self, thread: str, ns: str, task: str, value: int, special: bool) -> None:
            """Writes for the namespace's newest checkpoint (an error write is replaced when
            put again, a plain one kept)."""
            checkpoints = self.model.get(thread, {}).get(ns)
            if not checkpoints:
                return
            newest = checkpoints[max(checkpoints)]
            channel = "__error__" if special else "messages"
            config: Any = {
                "configurable": {
                    "thread_id": thread,
                    "checkpoint_ns": ns,
                    "checkpoint_id": newest.checkpoint_id,
                }
            }
            self.saver.put_writes(config, [(channel, value)], task)
            idx = -1 if special else 0
            if special or (task, idx) not in newest.writes:
                newest.writes[(task, idx)] = (channel, value)

        @rule(source=threads, target=threads)
        def copy_thread(self, source: str) -> str:
            target = f"t{next(names)}"
            if source in self.model:
                self.saver.copy_thread(source, target)
                self.model[target] = copy.deepcopy(self.model[source])
            else:
                self.model[target] = {}
            return target

        @rule(thread=consumes(threads))
        def delete_thread(self, thread: str) -> None:
            self.saver.delete_thread(thread)
            self.model.pop(thread, None)

        @rule(thread=threads)
        def prune(self, thread: str) -> None:
            self.saver.prune([thread])
            for ns, checkpoints in self.model.get(thread, {}).items():
                if checkpoints:
                    newest = max(checkpoints)
                    self.model[thread][ns] = {newest: checkpoints[newest]}

        @precondition(lambda self: len(self.model) > 0)
        @rule(run=st.sampled_from(RUNS))
        def delete_for_runs(self, run: str) -> None:
            self.saver.delete_for_runs([run])
            for spaces in self.model.values():
                for ns, checkpoints in list(spaces.items()):
                    spaces[ns] = {
                        k: c for k, c in checkpoints.items() if c.metadata["run_id"] != run
                    }

        @rule(thread=threads, cold=st.booleans())
        def check_thread(self, thread: str, cold: bool) -> None:
            self._check(thread, IkigaiSaver(store) if cold else self.saver)

        @invariant()
        def the_newest_threads_agree(self) -> None:
            for thread in sorted(self.model)[-2:]:
                self._check(thread, self.saver)

        def _check(self, thread: str, saver: IkigaiSaver) -> None:
            for ns in NAMESPACES:
                expected = self.model.get(thread, {}).get(ns, {})
                config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                listed = list(saver.list(config))
                assert [t.config["configurable"]["checkpoint_id"] for t in listed] == sorted(
                    expected, reverse=True
                )
                for tup in listed:
                    want = expected[tup.config["configurable"]["checkpoint_id"]]
                    assert tup.checkpoint["channel_values"]["messages"] == want.messages
                    assert tup.checkpoint["channel_values"]["count"] == len(want.messages)
                    assert tup.metadata["run_id"] == want.metadata["run_id"]
                    parent = tup.parent_config
                    assert (parent and parent["configurable"]["checkpoint_id"]) == (want.parent_id)
                    got = {(w[0], w[1]): w[2] for w in tup.pending_writes or []}
                    assert got == {(t, ch): v for (t, _), (ch, v) in want.writes.items()}
                latest = saver.get_tuple(config)
                if not expected:
                    assert latest is None
                    continue
                assert latest is not None
                newest = expected[max(expected)]
                assert latest.config["configurable"]["checkpoint_id"] == newest.checkpoint_id
                assert latest.checkpoint["channel_values"]["messages"] == newest.messages

    run_state_machine_as_test(Machine)
