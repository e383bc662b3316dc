"""docs/clients.md's ``sh`` blocks run verbatim (``bash -e -o pipefail``), each ``##`` section's
blocks in order in one fresh directory, with a private HOME, ``DATABASE_URL`` naming this
file's database and this interpreter's scripts first on PATH; other fences are shown only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.integration.test_readme import Block, file_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
BLOCKS = file_blocks(DOC)
SHOWN = {"", "console", "text", "json", "toml"}


def test_fences_are_known() -> None:
    """Every block is a run ``sh`` block or a shown one (no unknown fence slips by)."""
    assert {b.lang for b in BLOCKS} <= SHOWN | {"sh"}
    assert any(b.lang == "sh" for b in BLOCKS)


def sections() -> dict[str, list[Block]]:
    grouped: dict[str, list[Block]] = defaultdict(list)
    for block in BLOCKS:
        if block.lang == "sh":
            grouped[block.section].append(block)
    return grouped


@pytest.mark.db
@pytest.mark.parametrize("section", sorted(sections()))
def test_docs_clients_section_runs(section: str, ikigai_db_url: str, tmp_path: Path) -> None:
    """This section's sh blocks run verbatim and succeed."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("IKIGAI_DATABASE_URL", "DATABASE_URL", "CODEX_HOME")
    }
    env |= {
        "HOME": str(home),
        "DATABASE_URL": ikigai_db_url,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    }
    for block in sections()[section]:
        proc = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, (
            f"docs/clients.md:{block.line} exited {proc.returncode}\n--- block\n{block.code}"
            f"--- stdout\n{proc.stdout[-3000:]}--- stderr\n{proc.stderr[-3000:]}"
        )
