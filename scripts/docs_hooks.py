"""MkDocs hooks for the documentation site: the parts of the reference made from the code.

A page asks for a generated part with a marker on a line of its own:

- ``<!-- reference: CATEGORY -->``: a mkdocstrings entry (``::: ikigai_store.NAME``) for each
  public name (``ikigai_store.__all__``) of that category (``category`` below: ``models``,
  ``errors``, ``constants``, ``namespaces``), so a new public name gets its entry without
  anyone listing it;
- ``<!-- mcp-tools -->``: every MCP tool of ``ikigai_store.mcp.tools.TOOLS``, by area: its
  description, the operation it runs, its parameters (from its input schema) and what it
  returns, exactly as ``tools/list`` gives them to an agent;
- ``<!-- mcp-resources -->``: the resource templates (``ikigai_store.mcp.resources``).

It also mends one thing of the CLI page (mkdocs-click): click 8.3+ reports "no default" as its
``Sentinel.UNSET``, shown as ``False`` for a flag and *none* for another option.

Used by ``mkdocs.yml`` (``hooks``); ``tests/integration/test_docs.py`` checks the result.
"""

from __future__ import annotations

import json
import re
from typing import Any

MARKER = re.compile(r"^<!-- (reference: (\w+)|mcp-tools|mcp-resources) -->$", re.MULTILINE)

#: Public names documented on their own page rather than by category.
OWN_PAGE = {
    "open": "store",
    "Store": "store",
    "open_async": "async-store",
    "AsyncStore": "async-store",
    "Outbox": "outbox",
}


def category(name: str) -> str:
    """Which reference page documents the public name ``name``."""
    import ikigai_store as ik
    from ikigai_store.ops import Area

    if name in OWN_PAGE:
        return OWN_PAGE[name]
    value = getattr(ik, name)
    if isinstance(value, type) and issubclass(value, Area):
        return "namespaces"
    if isinstance(value, type) and issubclass(value, BaseException):
        return "errors"
    if isinstance(value, type):
        return "models"
    return "constants"


def _entries(wanted: str) -> str:
    import ikigai_store as ik

    names = [n for n in ik.__all__ if category(n) == wanted]
    if not names:
        raise ValueError(f"no public name is in the reference category {wanted!r}")
    options = "    options:\n      members: false\n" if wanted == "namespaces" else ""
    return "\n".join(f"::: ikigai_store.{name}\n{options}" for name in names)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _schema_type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_schema_type(s) for s in schema["anyOf"])
    if "$ref" in schema:
        return schema["$ref"].rpartition("/")[2]
    kind = schema.get("type", "any")
    if kind == "array" and "items" in schema:
        items = schema["items"]
        if isinstance(items, dict):
            return f"array of {_schema_type(items)}"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return str(kind)


def _mcp_tools() -> str:
    from ikigai_store.mcp.tools import AREAS, TOOLS

    out: list[str] = [
        f"{len(TOOLS)} tools in {len(AREAS)} areas; `core` (the default set) has "
        f"{sum(t.core for t in TOOLS)}: "
        + ", ".join(f"[`{t.name}`](#{t.name})" for t in TOOLS if t.core)
        + ".\n"
    ]
    for area in AREAS:
        out.append(f"### {area}\n")
        for tool in (t for t in TOOLS if t.area == area):
            target = f"ikigai_store.Store.{tool.operation}"
            flags = ["core" if tool.core else None, "read-only" if tool.read_only else None]
            said = ", ".join(f for f in flags if f)
            out.append(f"#### `{tool.name}` {{#{tool.name}}}\n")
            out.append(
                f"Runs [`store.{tool.operation}`][{target}]"
                + (f" ({said})" if said else "")
                + (f"; acts as the calling identity (`{tool.me}`)" if tool.me else "")
                + ".\n"
            )
            out.append("```text\n" + tool.description() + "\n```\n")
            schema = tool.input_schema(False)
            required = set(schema.get("required", ()))
            rows = [
                f"| `{name}` | {_cell(_schema_type(prop))} | "
                f"{'required' if name in required else _cell(json.dumps(prop.get('default')))} |"
                for name, prop in schema.get("properties", {}).items()
            ]
            if rows:
                out.append("| parameter | type | default |\n|---|---|---|\n" + "\n".join(rows))
                out.append("")
            else:
                out.append("No parameters.\n")
            if tool.wraps_result:
                result = _schema_type(tool.output_schema["properties"]["result"])
                returned = f'`{{"result": {result}}}`'
            else:
                name = tool._hints["return"].__name__  # a model (a dataclass)
                returned = f"the fields of [`{name}`][ikigai_store.{name}]"
            out.append(f"Returns {returned} as structured content.\n")
    return "\n".join(out)


def _mcp_resources() -> str:
    from ikigai_store.mcp.resources import TEMPLATES

    rows = [f"| `{template}` | {title} | {_cell(text)} |" for _, template, title, text in TEMPLATES]
    return "| URI template | title | what a read returns |\n|---|---|---|\n" + "\n".join(rows)


def _replace(match: re.Match[str]) -> str:
    if match[2] is not None:
        return _entries(match[2])
    if match[1] == "mcp-tools":
        return _mcp_tools()
    return _mcp_resources()


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each marker of a page by what it asks for."""
    return MARKER.sub(_replace, markdown)


_ROW = re.compile(r"<tr>.*?</tr>", re.DOTALL)
_UNSET = "<code>Sentinel.UNSET</code>"


def _no_default(row: re.Match[str]) -> str:
    """A CLI option row whose default click 8.3+ shows as its ``UNSET`` sentinel: a flag's
    default is False, any other option's none."""
    text = row[0]
    if _UNSET not in text:
        return text
    flag = re.search(r"<td>boolean</td>", text) is not None
    return text.replace(_UNSET, "<code>False</code>" if flag else "<em>none</em>")


def on_page_content(html: str, page: Any, **_: Any) -> str:
    """The CLI page (mkdocs-click) without click's ``Sentinel.UNSET`` for "no default"."""
    if page.file.src_uri == "reference/cli.md":
        return _ROW.sub(_no_default, html)
    return html
