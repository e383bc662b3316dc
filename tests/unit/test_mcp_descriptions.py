"""The MCP tools' descriptions speak JSON, not Python: an agent reads them, not our code."""

from __future__ import annotations

import re

import pytest

from ikigai_store.mcp.tools import TOOLS, Tool

#: What only a Python caller would understand.
PYTHON = re.compile(
    r"\b(?:None|True|False|timedelta|datetime)\b|store\.transaction|`store\.|`\w+=[^`]+`"
)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_a_description_has_no_python_words(tool: Tool) -> None:
    text = tool.description()
    assert not PYTHON.findall(text), text


def test_the_words_are_translated_not_dropped() -> None:
    """The sentences stay, in the caller's words (a lookup of a few of them)."""
    by_name = {tool.name: tool.description() for tool in TOOLS}
    assert "`timeout` (seconds, at most a day; 0: do not wait)" in by_name["wait_for_mail"]
    assert "null if none did" in by_name["wait_for_mail"]
    assert "(`exclusive: false`)" in by_name["reserve"]
    assert "(`activity_feed`)" in by_name["upsert_task"]
    assert "an ISO 8601 time with a UTC offset, or seconds from now" in by_name["set_mail_state"]
