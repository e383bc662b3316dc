"""A griffe extension for the documentation site: each face's operations as its methods.

griffe reads the package's source. There an operation is bound to a namespace class as an
attribute (``send = operation(send)``), and ``Store`` / ``AsyncStore`` get their operations
and namespaces from ``api.Operations`` at run time. This extension makes the model what the
running classes are (``tests/unit/test_parity.py`` checks those): in every area class,
each operation becomes a method with the operation's signature and docstring (taken from the
generator function griffe already read, returning ``T`` instead of ``Op[T]``); ``Store`` and
``AsyncStore`` get every top-level operation as a method (``async`` on ``AsyncStore``) and
each namespace as a class member (``Store.mail``, ``AsyncStore.mail``) holding its
operations. Deprecated aliases are left out (the CHANGELOG lists them). Nothing is written by
hand: adding an operation adds its reference entry.

Two readings of the source griffe does not make by itself: an attribute documented by ``#:``
comment lines above it gets them as its docstring, and a docstring's first paragraph is put on
one line (the summary tables show a first line; this package wraps sentences at 100 columns).

Used by ``mkdocs.yml`` (``extensions`` of the mkdocstrings Python handler).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import re
from typing import Any

import griffe

PACKAGE = "ikigai_store"


def _returned(expr: Any) -> Any:
    """``T`` for the annotation ``Op[T]``, else the annotation itself."""
    if isinstance(expr, griffe.ExprSubscript) and str(expr.left) == "Op":
        return expr.slice
    if isinstance(expr, str) and expr.startswith("Op[") and expr.endswith("]"):
        return expr[3:-1]
    return expr


def _annotation(text: Any, scope: griffe.Object) -> Any:
    """A run-time annotation (a string, under postponed evaluation) as a griffe expression
    resolved in ``scope``, or the text when it does not parse."""
    if not isinstance(text, str):
        return None if text is inspect.Parameter.empty else str(text)
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text
    return griffe.safe_get_annotation(node, parent=scope)  # type: ignore[arg-type]


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


def _one_line_summary(text: str) -> str:
    """``text`` with its first paragraph on one line. The summary tables show a docstring's
    first line, and this package's docstrings wrap their first sentence at 100 columns; the
    rendered text is the same (a paragraph's line breaks are spaces in Markdown)."""
    first, sep, rest = text.partition("\n\n")
    lines = first.splitlines()
    if len(lines) < 2 or any(re.match(r"\s|[-*+>|]|\d+\.|```", x) for x in lines[1:]):
        return text
    return " ".join(x.strip() for x in lines) + sep + rest


def _comment_docstring(attr: griffe.Object) -> None:
    """Give an attribute documented the Sphinx way, by ``#:`` comment lines right above it
    (``models.MAIL_STATES``), that text as its docstring."""
    if attr.docstring is not None or attr.lineno is None or attr.filepath is None:
        return
    try:
        lines = attr.lines_collection[attr.filepath]  # type: ignore[index]
    except KeyError:
        return
    found: list[str] = []
    i = attr.lineno - 2
    while i >= 0 and lines[i].strip().startswith("#:"):
        found.insert(0, lines[i].strip()[2:].strip())
        i -= 1
    if found:
        attr.docstring = griffe.Docstring(" ".join(found), parent=attr)


def _summarised(obj: griffe.Object) -> None:
    """Put the first paragraph of every docstring of ``obj`` and its members on one line;
    attributes documented by ``#:`` comments get them as docstrings."""
    if obj.is_attribute:
        _comment_docstring(obj)
    if obj.docstring is not None:
        obj.docstring.value = _one_line_summary(obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _summarised(member)  # type: ignore[arg-type]


class Faces(griffe.Extension):
    """Operations as methods of every area class and of both faces (see the module)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **_: Any) -> None:
        if pkg.name != PACKAGE:
            return
        self.collection = loader.modules_collection
        api = importlib.import_module(f"{PACKAGE}.api")
        ops = importlib.import_module(f"{PACKAGE}.ops")
        self.operation_type = ops.operation
        top_areas = [c for c in api.Operations.__mro__[1:] if issubclass(c, ops.Area)]
        top_areas = [c for c in top_areas if c is not ops.Area]
        for area in [*top_areas, *api.NAMESPACES.values()]:
            model = self._model(area)
            for name, op in self._operations(area).items():
                model.del_member(name)
                if not op.deprecated:
                    model.set_member(name, self._method(name, op, is_async=False))
        for face, is_async in (("Store", False), ("AsyncStore", True)):
            runtime = getattr(importlib.import_module(PACKAGE), face)
            model = self._model(runtime)
            for area in top_areas:
                for name, op in self._operations(area).items():
                    if not op.deprecated:
                        model.set_member(name, self._method(name, op, is_async=is_async))
            for space, area in api.NAMESPACES.items():
                model.set_member(space, self._namespace(space, area, runtime, is_async))
        _summarised(pkg)

    def _model(self, runtime: type) -> griffe.Class:
        found = self.collection.get_member(f"{runtime.__module__}.{runtime.__qualname__}")
        if isinstance(found, griffe.Alias):
            found = found.final_target
        if not isinstance(found, griffe.Class):  # pragma: no cover - a renamed class
            raise TypeError(f"{runtime.__qualname__} is not a class in the model")
        return found

    def _operations(self, area: type) -> dict[str, Any]:
        """The operations ``area`` itself defines, in source order."""
        return {n: v for n, v in vars(area).items() if isinstance(v, self.operation_type)}

    def _method(self, name: str, op: Any, *, is_async: bool) -> griffe.Function:
        """A method ``name`` running the operation ``op``: the generator function's
        parameters (as griffe read them) after ``self``, its docstring, ``T`` returned."""
        source = None
        with contextlib.suppress(KeyError, ValueError):  # not a function griffe read
            source = self.collection.get_member(f"{op.fn.__module__}.{op.fn.__name__}")
        if isinstance(source, griffe.Alias):
            source = source.final_target
        me = griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)
        if isinstance(source, griffe.Function):
            parameters = [
                griffe.Parameter(
                    p.name,
                    annotation=p.annotation,
                    kind=p.kind,
                    default=p.default,
                    docstring=p.docstring,
                )
                for p in source.parameters
            ]
            returns = _returned(source.returns)
            lineno, endlineno = source.lineno, source.endlineno
        else:  # made at run time (``queued``): its run-time signature
            module = self.collection.get_member(op.fn.__module__)
            signature = op.signature()
            parameters = [
                griffe.Parameter(
                    p.name,
                    annotation=_annotation(p.annotation, module),
                    kind=_KINDS[p.kind],
                    default=None if p.default is inspect.Parameter.empty else repr(p.default),
                )
                for p in signature.parameters.values()
            ]
            returns = _annotation(signature.return_annotation, module)
            lineno = endlineno = None
        if parameters and parameters[0].kind is griffe.ParameterKind.positional_only:
            me = griffe.Parameter("self", kind=griffe.ParameterKind.positional_only)
        method = griffe.Function(
            name,
            lineno=lineno,
            endlineno=endlineno,
            parameters=griffe.Parameters(me, *parameters),
            returns=returns,
        )
        method.docstring = griffe.Docstring(inspect.cleandoc(op.fn.__doc__ or ""), parent=method)
        if is_async:
            method.labels.add("async")
        return method

    def _namespace(self, space: str, area: type, face: type, is_async: bool) -> griffe.Class:
        """``Store.mail`` / ``AsyncStore.mail``: the namespace class with the face's methods."""
        model = self._model(area)
        namespace = griffe.Class(space, lineno=model.lineno, endlineno=model.endlineno)
        kind = "coroutine functions (awaited)" if is_async else "methods"
        namespace.docstring = griffe.Docstring(
            inspect.cleandoc(area.__doc__ or "")
            + f"\n\nOn ``{face.__name__}`` its operations are {kind}.",
            parent=namespace,
        )
        for name, op in self._operations(area).items():
            if not op.deprecated:
                namespace.set_member(name, self._method(name, op, is_async=is_async))
        return namespace
