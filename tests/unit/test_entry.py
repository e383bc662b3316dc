"""The console script's fast path takes exactly the command lines it understands and leaves
every other one to click (which parses it and says what is wrong)."""

from __future__ import annotations

import pytest

from ikigai_store._entry import _database, _parse

HOOK = {"--as": "name", "--role": "role"}


@pytest.mark.parametrize(
    ("args", "found"),
    [
        ([], {}),
        (["--as", "ann", "--role=reviewer"], {"name": "ann", "role": "reviewer"}),
        (["--as=ann"], {"name": "ann"}),
        (["--auto-reserve"], {"reserve": True}),
        (["--auto-reserve", "60"], {"reserve": "60"}),
        (["--auto-reserve=60", "--as", "x"], {"reserve": "60", "name": "x"}),
        (["--auto-reserve", "--as", "x"], {"reserve": True, "name": "x"}),
    ],
)
def test_options_it_understands(args: list[str], found: dict[str, object]) -> None:
    """Valued options in both spellings, and an optional value present or not."""
    assert _parse(args, HOOK, optional={"--auto-reserve": "reserve"}) == found


@pytest.mark.parametrize(
    "args", [["--help"], ["--as"], ["--as", "--role", "x"], ["--asx", "y"], ["extra"], ["-h"]]
)
def test_anything_else_goes_to_click(args: list[str]) -> None:
    """Help, a missing value, an unknown option or a stray argument: not the fast path's."""
    assert _parse(args, HOOK) is None


def test_the_global_database_option() -> None:
    """``--database URL`` / ``--database=URL`` before the command; alone it is click's."""
    assert _database(["--database", "u", "hook"]) == ("u", 2)
    assert _database(["--database=u", "hook"]) == ("u", 1)
    assert _database(["hook", "prompt"]) == (None, 0)
    assert _database(["--database"]) is None
    assert _database(["--databasex=u"]) is None
