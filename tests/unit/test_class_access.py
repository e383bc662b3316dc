"""Read through a class, every operation is a plain function (a coroutine function on the
asyncio face) with the operation's signature and docstring: what ``help()``, pydoc, griffe and
Sphinx read."""

from __future__ import annotations

import inspect
import pydoc

import pytest

import ikigai_store as ik
from ikigai_store import ops
from ikigai_store.api import NAMESPACES, Operations
from ikigai_store.ops import AsyncFace, SyncFace

#: The store's own top-level areas (SessionOps, EventOps, …).
TOP_AREAS: list[type] = list(Operations.__mro__[1:-3])


def _operations(cls: type) -> dict[str, ops.operation[..., object]]:
    return {
        name: member
        for klass in reversed(cls.__mro__)
        for name, member in vars(klass).items()
        if isinstance(member, ops.operation)
    }


def _top_level() -> dict[str, ops.operation[..., object]]:
    return {name: op for area in TOP_AREAS for name, op in _operations(area).items()}


#: (face class, is it the asyncio face)
FACES = [(ik.Store, False), (ik.AsyncStore, True)]


def _expected(op: ops.operation[..., object]) -> inspect.Signature:
    """The operation's public signature with ``self`` first, as a method's (positional-only
    when the operation's first parameter is)."""
    sig = op.signature()
    params = list(sig.parameters.values())
    positional = bool(params) and params[0].kind is inspect.Parameter.POSITIONAL_ONLY
    kind = (
        inspect.Parameter.POSITIONAL_ONLY if positional else inspect.Parameter.POSITIONAL_OR_KEYWORD
    )
    return sig.replace(parameters=[inspect.Parameter("self", kind), *params])


def _check(function: object, op: ops.operation[..., object], name: str, is_async: bool) -> None:
    assert inspect.isfunction(function), f"{name} is {function!r}"
    assert inspect.signature(function) == _expected(op), name
    assert function.__doc__ == op.fn.__doc__, name
    assert function.__name__ == name.rpartition(".")[2], name
    assert inspect.iscoroutinefunction(function) is is_async, name


@pytest.mark.parametrize(("face", "is_async"), FACES, ids=["sync", "async"])
def test_top_level_operations_are_functions_on_the_class(face: type, is_async: bool) -> None:
    """``Store.append`` / ``AsyncStore.append`` and every other top-level operation."""
    found = _top_level()
    assert {"append", "replay_session", "search", "fork_agent"} <= set(found)
    for name, op in found.items():
        _check(getattr(face, name), op, f"{face.__name__}.{name}", is_async)


@pytest.mark.parametrize(("face", "is_async"), FACES, ids=["sync", "async"])
@pytest.mark.parametrize("space", sorted(NAMESPACES))
def test_namespace_operations_are_functions_on_the_class(
    face: type, is_async: bool, space: str
) -> None:
    """``Store.mail.send`` / ``AsyncStore.mail.send`` and every other namespaced operation;
    ``Store.mail`` is ``MailCalls`` itself, ``AsyncStore.mail`` a subclass of it."""
    namespace = getattr(face, space)
    assert issubclass(namespace, NAMESPACES[space])
    assert (namespace is NAMESPACES[space]) is not is_async
    for name, op in _operations(NAMESPACES[space]).items():
        _check(getattr(namespace, name), op, f"{face.__name__}.{space}.{name}", is_async)


def test_the_namespace_class_itself_is_the_sync_face() -> None:
    """``MailCalls.send`` (read from the generic class) is a plain function."""
    _check(ik.MailCalls.send, _operations(ik.MailCalls)["send"], "MailCalls.send", False)


def test_class_level_functions_call_the_instance() -> None:
    """Called with an instance, the class-level function runs that instance's operation,
    like any method (here only its validation: the face has no database)."""

    class Validating(SyncFace):
        def _run(self, op: ops.Op[object]) -> None:  # type: ignore[override]
            ops.validate(op)

    mail = ik.MailCalls(Validating())
    with pytest.raises(ik.InvalidArgument):
        ik.MailCalls.send(mail, "", ["x"], "s", "b")
    assert ik.Store.mail.send is ik.MailCalls.send


def test_instances_are_unchanged() -> None:
    """An instance's namespace is still its own bound object, and its operations bound
    methods without ``self``."""
    sync, asyn = Operations(SyncFace()), Operations(AsyncFace())
    assert type(sync.mail) is ik.MailCalls and type(asyn.mail) is ik.MailCalls
    assert "self" not in inspect.signature(sync.mail.send).parameters
    assert inspect.iscoroutinefunction(asyn.mail.send)
    assert not inspect.iscoroutinefunction(sync.append)


@pytest.mark.parametrize(("face", "is_async"), FACES, ids=["sync", "async"])
def test_pydoc_shows_methods(face: type, is_async: bool) -> None:
    """``help(Store)`` lists every top-level operation as a method with its signature (no
    ``<ikigai_store.ops.operation object>``), and ``help(Store.mail)`` every mail operation."""
    text = pydoc.render_doc(face, renderer=pydoc.plaintext)
    assert "ops.operation object" not in text
    prefix = "async " if is_async else ""
    for name in _top_level():
        if not name.startswith("_"):  # pydoc lists public names only
            assert f"{prefix}{name}(self" in text, name
    mail = pydoc.render_doc(face.mail, renderer=pydoc.plaintext)
    assert "ops.operation object" not in mail
    for name in _operations(ik.MailCalls):
        assert f"{prefix}{name}(self" in mail, name
    first = inspect.getdoc(ik.MailCalls.send)
    assert first is not None and first.splitlines()[0] in mail


@pytest.mark.parametrize("name", ["migrate", "pending_migrations", "close", "transaction", "url"])
def test_both_faces_document_their_own_methods_alike(name: str) -> None:
    """The methods each face defines itself carry the same docstring on both faces, not a
    "see Store.migrate" (the async face only awaits them)."""
    sync, asyn = getattr(ik.Store, name), getattr(ik.AsyncStore, name)
    sync_doc, async_doc = inspect.getdoc(sync), inspect.getdoc(asyn)
    assert sync_doc and async_doc and "see ``Store" not in async_doc.lower()
    if name in ("migrate", "pending_migrations", "close", "url"):
        assert async_doc == sync_doc, name
    if name != "url":
        sync_params = inspect.signature(sync).parameters
        assert sync_params == inspect.signature(asyn).parameters, name
    if name in ("migrate", "pending_migrations", "close"):
        assert inspect.iscoroutinefunction(asyn) and not inspect.iscoroutinefunction(sync)
