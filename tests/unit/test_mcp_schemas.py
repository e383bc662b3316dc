"""The MCP tools' JSON schemas hold only what every client handles: no ``prefixItems`` (draft-07
validators and Codex do not know it), no untyped node (``{}``, ``{"default": null}``), and each
parameter's bounds and format repeated in its description (Codex drops the keywords)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ikigai_store.mcp.tools import TOOLS, Tool

_TYPING = {"type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "properties", "items"}


def nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node under ``schema`` (properties, $defs, items, anyOf ...), with a path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in ("properties", "$defs"):
        for name, sub in schema.get(key, {}).items():
            yield from nodes(sub, f"{path}/{key}/{name}")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            yield from nodes(schema[key], f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key, [])):
            yield from nodes(sub, f"{path}/{key}/{i}")


def schemas(tool: Tool) -> Iterator[tuple[str, dict[str, Any]]]:
    yield f"{tool.name} input", tool.input_schema(False)
    yield f"{tool.name} operator input", tool.input_schema(True)
    yield f"{tool.name} output", tool.output_schema


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_no_tuple_keywords_and_no_untyped_node(tool: Tool) -> None:
    """No schema uses prefixItems, and every node says what it holds."""
    for what, schema in schemas(tool):
        assert "prefixItems" not in json.dumps(schema), what
        for path, node in nodes(schema):
            assert _TYPING & node.keys(), f"{what} {path or '/'} is untyped: {node}"


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_bounds_and_formats_are_said_in_the_description(tool: Tool) -> None:
    """A parameter with a minimum/maximum, a date-time format or a pair's length says so in
    its description."""
    for name, prop in tool.input_schema(False)["properties"].items():
        branches = [prop, *prop.get("anyOf", [])]
        text = prop.get("description", "").lower()
        for node in branches:
            if "maximum" in node:
                assert f"{node['maximum']:g}" in text, (tool.name, name, prop)
            if node.get("format") == "date-time":
                assert "iso 8601" in text, (tool.name, name, prop)
            if "minItems" in node and node.get("minItems") == node.get("maxItems"):
                assert f"exactly {node['minItems']} items" in text, (tool.name, name, prop)
