"""The runtime integration pages (docs/integrations/*.md) run verbatim: every ```python block
is a complete program, run alone (``python -W error``) in an empty directory with
``DATABASE_URL`` naming a fresh database of the test server (one per page; the blocks of a
page run in order on it), as tests/integration/test_readme.py does for the README."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ikigai_store.config import admin_url, to_yoyo_url
from ikigai_store.pool import create_database, drop_database
from ikigai_store.testing import test_database_name

pytestmark = [pytest.mark.db]

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "integrations").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a page, in order."""
    return [code for lang, code in FENCE.findall(page.read_text()) if lang == "python"]


def test_every_page_has_a_complete_example() -> None:
    """Each integration page has at least one runnable Python block."""
    assert {p.name for p in PAGES} >= {"langgraph.md", "claude-agent-sdk.md"}
    for page in PAGES:
        assert python_blocks(page), page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_examples_run(page: Path, ikigai_server_url: str, tmp_path: Path) -> None:
    """The page's Python blocks run, in order, on a fresh database, and exit 0."""
    name = test_database_name(page, "docs")
    drop_database(ikigai_server_url, name)
    create_database(ikigai_server_url, name)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IKIGAI_", "PYTEST_"))}
        env["DATABASE_URL"] = to_yoyo_url(admin_url(ikigai_server_url, name))
        env["IKIGAI_DATA_DIR"] = str(tmp_path / "data")
        for i, code in enumerate(python_blocks(page)):
            script = tmp_path / f"block{i}.py"
            script.write_text(code)
            work = tmp_path / f"work{i}"
            work.mkdir()
            done = subprocess.run(
                [sys.executable, "-W", "error", str(script)],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, f"{page.name} block {i}:\n{done.stdout}\n{done.stderr}"
    finally:
        drop_database(ikigai_server_url, name)
