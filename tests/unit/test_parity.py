"""Every operation is defined once and bound to both faces with its signature and docstring,
read through an instance (a bound method) or through a class (a plain function, a coroutine
function on the asyncio face: what ``help()``, pydoc, griffe and Sphinx read)."""

from __future__ import annotations

import inspect
import pydoc

import pytest

import ikigai_store as ik
from ikigai_store import mail as mail_ops
from ikigai_store import ops
from ikigai_store import tasks as tasks_ops
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


class _Renaming(ops.Area[ops.FaceT]):
    """How a later rename keeps the old name for one minor release (0.6's aliases are gone)."""

    claim = ops.operation(tasks_ops.claim_task)
    claim_task = ops.deprecated(claim, "claim_task")
    inbox = ops.operation(mail_ops.inbox, renamed={"before_id": "before"})


def test_deprecated_aliases_warn_naming_the_new_name() -> None:
    """A renamed operation keeps its old name: the same signature, and a DeprecationWarning
    naming the new one when called."""
    area = _Renaming(Validating())
    assert inspect.signature(area.claim_task) == inspect.signature(area.claim)
    with (
        pytest.warns(DeprecationWarning, match="claim_task is deprecated; use claim$"),
        pytest.raises(ik.InvalidArgument),  # validation runs before the (absent) database
    ):
        area.claim_task(123, "x", "ann")


def test_renamed_keywords_warn_and_are_mapped() -> None:
    """A renamed keyword (``before_id`` -> ``before``) still works, with a warning."""
    area = _Renaming(Validating())
    with (
        pytest.warns(DeprecationWarning, match=r"inbox\(before_id=...\) is deprecated"),
        pytest.raises(ik.InvalidArgument, match="before"),
    ):
        area.inbox("ann", before_id=-1)


def test_the_aliases_of_0_6_are_gone() -> None:
    """0.6's old names were to go in 0.8 (0.8.0 still had them): an old method name, keyword
    or ``Async*Calls`` class is an error now."""
    tasks = ik.TaskCalls(Validating())
    assert not hasattr(tasks, "claim_task") and not hasattr(ik, "AsyncMailCalls")
    with pytest.raises(TypeError, match="before_id"):
        ik.MailCalls(Validating()).inbox("ann", before_id=1)  # type: ignore[call-arg]
    for area in AREAS:
        assert not [n for n, op in _operations(area).items() if op.deprecated or op.renamed]


def test_validation_runs_before_any_connection() -> None:
    """A bound operation validates its arguments before asking its face for a connection."""
    with pytest.raises(ik.InvalidArgument):
        ik.LeaseCalls(Validating()).acquire("ann", "", ttl=5)


# ---------------------------------------------------------------- read through a class

#: The store's own top-level areas (SessionOps, EventOps, …).
TOP_AREAS: list[type] = list(Operations.__mro__[1:-3])


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
