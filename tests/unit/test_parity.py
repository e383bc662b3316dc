"""The two faces expose the same API: every public Store method has an AsyncStore twin."""

from __future__ import annotations

import inspect

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


def test_same_public_names() -> None:
    """Store and AsyncStore have the same public methods and properties (the face's own aside)."""
    sync, asyn = _public(ik.Store), _public(ik.AsyncStore)
    assert set(sync) - SYNC_ONLY == set(asyn) - ASYNC_ONLY


def test_same_signatures_and_async_methods() -> None:
    """Each twin has the same signature; the async one is a coroutine (or async context manager)."""
    for name, member in _public(ik.Store).items():
        if name in SYNC_ONLY or isinstance(member, property):
            continue
        twin = getattr(ik.AsyncStore, name)
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
    for cls in (ik.Store, ik.AsyncStore):
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
