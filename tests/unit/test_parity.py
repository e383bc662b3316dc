"""The two faces expose the same API: every public Store method has an AsyncStore twin."""

from __future__ import annotations

import inspect

import pytest

import ikigai_store as ik

# Differences that are the point of each face.
SYNC_ONLY = {"__enter__", "__exit__"}
ASYNC_ONLY = {"__aenter__", "__aexit__", "connect"}


def _public(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if (not name.startswith("_") or name in SYNC_ONLY | ASYNC_ONLY)
        and (callable(member) or isinstance(member, property))
    }


#: (sync class, async twin): the stores and their namespaces (store.identities, store.mail).
TWINS = [
    (ik.Store, ik.AsyncStore),
    (ik.IdentityCalls, ik.AsyncIdentityCalls),
    (ik.MailCalls, ik.AsyncMailCalls),
    (ik.TopicCalls, ik.AsyncTopicCalls),
    (ik.TaskCalls, ik.AsyncTaskCalls),
    (ik.ActivityCalls, ik.AsyncActivityCalls),
    (ik.SummaryCalls, ik.AsyncSummaryCalls),
    (ik.LeaseCalls, ik.AsyncLeaseCalls),
    (ik.ReviewCalls, ik.AsyncReviewCalls),
    (ik.PlanCalls, ik.AsyncPlanCalls),
]


@pytest.mark.parametrize(("sync_cls", "async_cls"), TWINS)
def test_same_public_names(sync_cls: type, async_cls: type) -> None:
    """Each sync class and its async twin have the same public methods and properties."""
    sync, asyn = _public(sync_cls), _public(async_cls)
    assert set(sync) - SYNC_ONLY == set(asyn) - ASYNC_ONLY


def test_namespaces_are_the_same_on_both_faces() -> None:
    """Both stores expose store.identities, .mail and .topics, typed as the twin classes."""
    namespaces = {"identities": TWINS[1], "mail": TWINS[2], "topics": TWINS[3]}
    namespaces["tasks"] = (ik.TaskCalls, ik.AsyncTaskCalls)
    namespaces["activities"] = (ik.ActivityCalls, ik.AsyncActivityCalls)
    namespaces["summaries"] = (ik.SummaryCalls, ik.AsyncSummaryCalls)
    namespaces["leases"] = (ik.LeaseCalls, ik.AsyncLeaseCalls)
    namespaces["reviews"] = (ik.ReviewCalls, ik.AsyncReviewCalls)
    namespaces["plans"] = (ik.PlanCalls, ik.AsyncPlanCalls)
    for attr, (sync_cls, async_cls) in namespaces.items():
        assert f"self.{attr} = {sync_cls.__name__}(self)" in inspect.getsource(ik.Store.__init__)
        assert f"self.{attr} = {async_cls.__name__}(self)" in inspect.getsource(
            ik.AsyncStore.__init__
        )


@pytest.mark.parametrize(("sync_cls", "async_cls"), TWINS)
def test_same_signatures_and_async_methods(sync_cls: type, async_cls: type) -> None:
    """Each twin has the same signature; the async one is a coroutine (or async context manager)."""
    for name, member in _public(sync_cls).items():
        if name in SYNC_ONLY or isinstance(member, property):
            continue
        twin = getattr(async_cls, name)
        assert inspect.signature(member).parameters.keys() == (
            inspect.signature(twin).parameters.keys()
        ), name
        for (pname, p), (_, q) in zip(
            inspect.signature(member).parameters.items(),
            inspect.signature(twin).parameters.items(),
            strict=True,
        ):
            assert (p.kind, p.default, p.annotation) == (q.kind, q.default, q.annotation), (
                f"{name}({pname})"
            )
        if name == "transaction":
            assert hasattr(twin(object.__new__(ik.AsyncStore)), "__aenter__")
        else:
            assert inspect.iscoroutinefunction(twin), f"AsyncStore.{name} is not async"


def test_twins_are_documented() -> None:
    """Every public method of both faces has a docstring (the async ones default to Store's)."""
    for cls in [c for pair in TWINS for c in pair]:
        for name, member in _public(cls).items():
            if name.startswith("_"):
                continue
            assert inspect.getdoc(member), f"{cls.__name__}.{name} has no docstring"


def test_open_and_open_async_take_the_same_options() -> None:
    """ik.open_async accepts exactly ik.open's arguments, with the same defaults."""
    assert (
        str(inspect.signature(ik.open)).split(" ->")[0]
        == (str(inspect.signature(ik.open_async)).split(" ->")[0])
    )
