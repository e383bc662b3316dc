"""Every operation is defined once and bound to both faces with its signature and docstring."""

from __future__ import annotations

import inspect
import warnings

import pytest

import ikigai_store as ik
from ikigai_store import ops
from ikigai_store.api import NAMESPACES, Operations
from ikigai_store.ops import AsyncFace, SyncFace


class Validating(SyncFace):
    """A face that runs only an operation's validation (no database)."""

    def _run(self, op: ops.Op[object]) -> None:  # type: ignore[override]
        ops.validate(op)


#: Every class of operations: the store's own top-level ones, then the namespaces.
AREAS: list[type] = [*Operations.__mro__[1:-3], *NAMESPACES.values()]


def _operations(cls: type) -> dict[str, ops.operation[..., object]]:
    return {
        name: member
        for klass in reversed(cls.__mro__)
        for name, member in vars(klass).items()
        if isinstance(member, ops.operation)
    }


def _faces(cls: type) -> tuple[object, object]:
    """An instance of ``cls`` bound to each face (the binding needs no database)."""
    return cls(SyncFace()), cls(AsyncFace())


def test_areas_found() -> None:
    """The parity checks below see the top-level areas and all ten namespaces."""
    names = {cls.__name__ for cls in AREAS}
    assert {"SessionOps", "EventOps", "AgentOps", "SearchOps", "AdminOps"} <= names
    assert len(NAMESPACES) == 10
    assert sum(len(_operations(cls)) for cls in AREAS) > 120


@pytest.mark.parametrize("cls", AREAS, ids=lambda c: c.__name__)
def test_every_operation_has_its_signature_and_docstring_on_both_faces(cls: type) -> None:
    """Sync and async bound methods carry the operation's exact signature (returning T, not
    Op[T]), its docstring and name; the async one is a coroutine function, the sync one not."""
    sync, asyn = _faces(cls)
    for name, op in _operations(cls).items():
        expected = op.signature()
        assert "Op[" not in str(expected.return_annotation), name
        assert op.__doc__, f"{cls.__name__}.{name} has no docstring"
        for face, is_async in ((sync, False), (asyn, True)):
            bound = getattr(face, name)
            assert inspect.signature(bound) == expected, name
            assert bound.__doc__ == op.fn.__doc__, name
            assert bound.__name__ == name
            assert inspect.iscoroutinefunction(bound) is is_async, name


@pytest.mark.parametrize("cls", AREAS, ids=lambda c: c.__name__)
def test_options_are_keyword_only_and_no_parameter_shadows_a_builtin(cls: type) -> None:
    """The API rule: no parameter is named like a builtin (type, list, id, …)."""
    import builtins

    for name, op in _operations(cls).items():
        for param in op.signature().parameters.values():
            assert not hasattr(builtins, param.name), f"{cls.__name__}.{name}({param.name})"


def test_both_stores_have_every_namespace() -> None:
    """``Store`` and ``AsyncStore`` are the same ``Operations`` on two faces: the namespaces
    are the same classes, bound to each face."""
    assert issubclass(ik.Store, Operations) and issubclass(ik.AsyncStore, Operations)
    sync, asyn = Operations(SyncFace()), Operations(AsyncFace())
    for attr, cls in NAMESPACES.items():
        assert type(getattr(sync, attr)) is cls and type(getattr(asyn, attr)) is cls


def test_deprecated_aliases_warn_naming_the_new_name() -> None:
    """A renamed operation keeps its old name for one minor release: the same signature, and
    a DeprecationWarning naming the new one when called."""
    tasks = ik.TaskCalls(Validating())
    assert inspect.signature(tasks.claim_task) == inspect.signature(tasks.claim)
    with (
        pytest.warns(DeprecationWarning, match="claim_task is deprecated; use claim$"),
        pytest.raises(ik.InvalidArgument),  # validation runs before the (absent) database
    ):
        tasks.claim_task(123, "x", "ann")


def test_renamed_keywords_warn_and_are_mapped() -> None:
    """A renamed keyword (``before_id`` -> ``before``) still works, with a warning."""
    mail = ik.MailCalls(Validating())
    with (
        pytest.warns(DeprecationWarning, match=r"inbox\(before_id=...\) is deprecated"),
        pytest.raises(ik.InvalidArgument, match="before"),
    ):
        mail.inbox("ann", before_id=-1)


def test_old_async_namespace_names_are_deprecated_aliases() -> None:
    """``ik.AsyncMailCalls`` (0.5) is now ``ik.MailCalls`` (one class for both faces)."""
    with pytest.warns(DeprecationWarning, match="use ikigai_store.MailCalls"):
        assert ik.AsyncMailCalls is ik.MailCalls  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ik.MailCalls is not None


def test_validation_runs_before_any_connection() -> None:
    """A bound operation validates its arguments before asking its face for a connection."""
    with pytest.raises(ik.InvalidArgument):
        ik.LeaseCalls(Validating()).acquire("ann", "", ttl=5)
