"""The MCP tools' descriptions speak JSON, not Python: an agent reads them, not our code."""

from __future__ import annotations

import re

import pytest

from ikigai_store.mcp.tools import _HIDDEN_SAID, TOOLS, Tool

#: What only a Python caller would understand: Python's words, our module and constant names.
PYTHON = re.compile(
    r"\b(?:None|True|False|timedelta|datetime|dict)\b|store\.transaction|`store\.|`\w+=[^`]+`"
    r"|`ikigai_store\.|`[A-Z][A-Z0-9_]{2,}`"
)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_a_description_has_no_python_words(tool: Tool) -> None:
    text = tool.description()
    assert not PYTHON.findall(text), text


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_a_description_opens_with_what_the_tool_does(tool: Tool) -> None:
    """Dropping what names a hidden or filled parameter never leaves a description that
    opens with nothing but the added sentences."""
    text = tool.description()
    assert text == text.strip() and not text.startswith(("Acts as", "Only this project")), text


@pytest.mark.parametrize(
    "tool", [t for t in TOOLS if t.hidden or t.project], ids=lambda tool: tool.name
)
def test_a_description_never_asks_for_a_hidden_parameter(tool: Tool) -> None:
    """A parameter the tool refuses (hidden, or filled with the server's project) is not
    named in code (`before`, `before=`...)."""
    text = tool.description()
    for name in (*tool.hidden, *([tool.project] if tool.project else [])):
        if (tool.name, name) not in _HIDDEN_SAID:
            spans = re.findall(r"`[^`]*`", text)
            assert not [s for s in spans if re.search(rf"\b{name}\b", s)], (name, text)


def test_the_words_are_translated_not_dropped() -> None:
    """The sentences stay, in the caller's words (a lookup of a few of them)."""
    by_name = {tool.name: tool.description() for tool in TOOLS}
    assert "`timeout` (seconds, at most a day; 0: do not wait)" in by_name["wait_for_mail"]
    assert "null if none did" in by_name["wait_for_mail"]
    assert "(`exclusive: false`)" in by_name["reserve"]
    assert "(`activity_feed`)" in by_name["upsert_task"]
    assert "an ISO 8601 time with a UTC offset, or seconds from now" in by_name["set_mail_state"]
    assert "`limit` is capped at 1000." in by_name["search_mail"]
    assert "the newest 1000, best first" in by_name["search_history"]
    assert "`Conflict` for a name already\ntaken" in by_name["register"]
    # claim_message's paragraph on `complete` goes whole; the one after it stays
    assert "complete" not in by_name["claim_message"]
    assert "No\nmessage is held by two live leases." in by_name["claim_message"]
    # the pages of list_reviews and activity_feed are the tools' own `before` (an id)
    assert "`before`" in by_name["activity_feed"] and "`before: " in by_name["list_reviews"]
