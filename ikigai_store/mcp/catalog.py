"""The MCP server's fixed answers, computed once and shipped as ``catalog.json`` beside this
module, so that ``ikigai-store mcp`` (the stdio proxy, ``service.proxy``) answers ``initialize``
and ``tools/list`` at once, importing only the standard library.

Owns the tool-set rule (``select_names``: the one definition ``tools.select`` uses too) and the
catalog's content: the ``initialize`` result the SDK's server gives (but the protocol version,
which is negotiated, and the package version, filled in at run time), the protocol versions it
accepts (the instructions without the sentence naming the database, which the proxy adds:
``_where.instructions``), and each tool as ``tools/list`` lists it, for a plain and for an
``--operator`` server.
Invariant: ``catalog.json`` is what ``snapshot.build()`` records from the SDK's server for this
code (tests/unit checks it; ``python -m ikigai_store.mcp.snapshot`` writes it again after a tool
changes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PATH", "load", "render", "select_names"]

#: Where the catalog is shipped.
PATH = Path(__file__).with_name("catalog.json")


def select_names(spec: str | Sequence[str], tools: Iterable[tuple[str, str, bool]]) -> list[str]:
    """The names of the ``tools`` (name, area, core) that ``spec`` chooses, in their order:
    ``core``, ``full`` or a comma-separated list of areas and tool names. ``ValueError`` for
    an unknown word."""
    known = list(tools)
    areas = list(dict.fromkeys(area for _, area, _ in known))
    names = {name for name, _, _ in known}
    chosen: set[str] = set()
    for word in (w.strip() for w in (spec.split(",") if isinstance(spec, str) else spec)):
        if word == "core":
            chosen.update(name for name, _, core in known if core)
        elif word == "full":
            chosen.update(names)
        elif word in areas:
            chosen.update(name for name, area, _ in known if area == word)
        elif word in names:
            chosen.add(word)
        else:
            words = ", ".join(("core", "full", *areas))
            raise ValueError(f"unknown tool set {word!r}: use {words}, or tool names")
    return [name for name, _, _ in known if name in chosen]


def load() -> dict[str, Any]:
    """The shipped catalog."""
    with PATH.open(encoding="utf-8") as f:
        catalog: dict[str, Any] = json.load(f)
    return catalog


def render(catalog: dict[str, Any]) -> str:
    """The catalog as the file holds it (compact: the proxy reads it on every start)."""
    return json.dumps(catalog, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
