"""The code blocks of the README and of every page of the documentation site run verbatim.

Which files: ``README.md`` and every ``docs/**/*.md`` (found, not listed: a page added later is
covered without touching this file). The convention (the site's "Development" page states it
too):

- a ```python block is a complete program: it runs alone (``python -W error block.py``, nothing
  shared with other blocks) in an empty directory;
- a ```sh, ```bash or ```shell block runs with ``bash -e -o pipefail`` (it fails at the first
  failing command) in an empty directory, or, when its first line starts with
  ``# from a checkout``, in a fresh copy of the checkout (the files git tracks or would track);
- a block with any other fence (```console, ```text, ```sql, a bare ```) is shown, never run:
  use it for what must not run here (destructive or privileged commands, tools that may be
  missing such as psql, the CI script itself) and for output and diagrams.
- fences start at column 0; an unknown fence language is an error (so that ```py, say, is not
  silently left untested).

Where blocks run: every ``##`` section of a file gets a fresh, empty database on the test server,
and its blocks run in order on it. ``DATABASE_URL`` names it in yoyo's spelling
(``postgresql+psycopg://``, which ikigai_store accepts too; ``IKIGAI_DATABASE_URL`` is unset), so
blocks never touch your data; ``IKIGAI_DATA_DIR`` is a throwaway directory, in case a block uses
the embedded default; this interpreter's scripts come first on ``PATH`` (``ikigai-store``,
``yoyo``, ``python``).

The quick start is run for real (marked slow): in a copy of the checkout it creates ``.venv``,
installs the package, runs the demo (on the section's database, not the embedded default:
tests/integration/test_embedded.py covers that), installs the test extra and starts the whole
suite. Inside a block pytest only collects (``PYTEST_ADDOPTS=--collect-only``): collecting every
test proves the install brought what the suite imports, and this run is the real one. CI
(``.ci/run``) runs the README's test command itself; ``test_ci_runs_the_readme_test_command``
keeps the two in step.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ikigai_store.config import admin_url, to_yoyo_url
from ikigai_store.pool import create_database, drop_database
from ikigai_store.testing import test_database_name

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CI = ROOT / ".ci" / "run"
#: Every file whose blocks run: the README, then the site's pages.
FILES = [README, *sorted(DOCS.rglob("*.md"))]

RUN_PYTHON = {"python"}
RUN_SHELL = {"sh", "bash", "shell"}
SHOWN = {"", "console", "text", "sql", "json", "toml", "ini", "yaml", "diff"}
CHECKOUT_MARK = "# from a checkout"
TIMEOUT = 120
CHECKOUT_TIMEOUT = 900


@dataclass(frozen=True)
class Block:
    path: str  # the file, relative to the checkout
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    section: str  # the ## heading above it

    @property
    def in_checkout(self) -> bool:
        return self.code.startswith(CHECKOUT_MARK)

    @property
    def where(self) -> tuple[str, str]:
        """The database this block runs on: one per file and ``##`` section."""
        return (self.path, self.section)

    @property
    def name(self) -> str:
        page = re.sub(r"[^a-z0-9]+", "-", self.path.lower().removesuffix(".md")).strip("-")
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")
        return f"{page}-L{self.line}-{slug}-{self.lang or 'bare'}"


def file_blocks(path: Path) -> list[Block]:
    """Every fenced block of the file ``path`` in order, with its language and ``##``
    section."""
    rel = path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    section = "(top)"
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.startswith("```"):
            lang = line[3:].strip()
            end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
            if end is None:
                raise AssertionError(f"{rel}:{i + 1}: the block opened here is never closed")
            code = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(Block(rel, i + 1, lang, code, section))
            i = end
        i += 1
    return blocks


BLOCKS = [block for path in FILES for block in file_blocks(path)]
RUNNABLE = [b for b in BLOCKS if b.lang in RUN_PYTHON | RUN_SHELL]
README_RUNNABLE = [b for b in RUNNABLE if b.path == "README.md"]


# ------------------------------------------------------------------------ the convention itself


def test_every_page_is_covered() -> None:
    """The files whose blocks run are the README and every page of the site (found by the
    glob, so a new page is covered), and the site's pages hold runnable blocks."""
    pages = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert "README.md" in pages and "docs/index.md" in pages
    assert {"docs/tutorials/first-session.md", "docs/how-to/migrate.md"} <= pages
    assert sum(b.path.startswith("docs/") for b in RUNNABLE) >= 20


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fences_are_known_and_paired(path: Path) -> None:
    """Every fence is at column 0, pairs up, and names a language the convention knows."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    blocks = [b for b in BLOCKS if b.path == rel]
    indented = [n for n, x in enumerate(text.splitlines(), 1) if x.lstrip().startswith("```")]
    fences = [n for n, x in enumerate(text.splitlines(), 1) if x.startswith("```")]
    assert indented == fences, f"{rel}: fences must start at column 0"
    assert len(fences) == 2 * len(blocks)
    unknown = [(b.line, b.lang) for b in blocks if b.lang not in RUN_PYTHON | RUN_SHELL | SHOWN]
    assert unknown == [], "use python/sh/bash to run a block, console/text to only show it"
    if path == README:
        assert any(b.in_checkout for b in blocks), "the quick start runs from a checkout"


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` runs the README's quick-start test command: each step after creating the venv
    (with the venv's bin/ prefix dropped, as CI activates its venv) is a line of .ci/run, in
    the same order."""
    quick = next(b for b in README_RUNNABLE if b.section == "Quick start")
    [command] = [x for x in quick.code.splitlines() if x.endswith("-m pytest")]
    create, *steps = [step.strip() for step in command.split("&&")]
    assert create == "python3 -m venv .venv"
    steps = [step.removeprefix(".venv/bin/") for step in steps]
    assert steps == ["pip install '.[test]'", "python -m pytest"]
    ci = [x.strip() for x in CI.read_text(encoding="utf-8").splitlines()]
    assert any(x.startswith("python3 -m venv ") for x in ci)
    positions = [ci.index(step) for step in steps]
    assert positions == sorted(positions)


# ------------------------------------------------------------------------ running the blocks


class Databases:
    """One fresh, empty database per section of a file, created on first use."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.names: dict[tuple[str, str], str] = {}

    def url(self, where: tuple[str, str]) -> str:
        if where not in self.names:
            name = test_database_name(__file__, f"s{len(self.names)}")
            drop_database(self.server_url, name)
            create_database(self.server_url, name)
            self.names[where] = name
        return admin_url(self.server_url, self.names[where])

    def drop_all(self) -> None:
        for name in self.names.values():
            drop_database(self.server_url, name)


@pytest.fixture(scope="module")
def databases(ikigai_server_url: str) -> Iterator[Databases]:
    dbs = Databases(ikigai_server_url)
    yield dbs
    dbs.drop_all()


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """A throwaway IKIGAI_DATA_DIR (outside pytest's 0700 tmp tree: pgserver, run as root,
    opens every parent directory of its data dir to other users)."""
    top = Path(tempfile.mkdtemp(prefix="ikt-readme-"))
    yield top / "pgdata"
    shutil.rmtree(top, ignore_errors=True)


#: Kept from the test run: the services a block starts live in the run's runtime dir, end
#: soon after their last use and are stopped with the run (tests/conftest.py).
_KEPT = ("IKIGAI_RUNTIME_DIR", "IKIGAI_SERVICE_IDLE")


def block_env(database_url: str, data_dir: Path, home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("IKIGAI_", "PYTEST_")) or k in _KEPT
    }
    env.update(
        DATABASE_URL=to_yoyo_url(database_url),
        HOME=str(home),  # what a block installs into a client's config stays in the test
        IKIGAI_DATA_DIR=str(data_dir),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTEST_ADDOPTS="--collect-only -q",
    )
    return env


def copy_checkout(dest: Path) -> None:
    """Copy the checkout (tracked and untracked files git does not ignore, as they are in the
    work tree) into ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the quick start runs from one")
    for rel in listed.stdout.decode().split("\0"):
        if rel and (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)


def params() -> list[object]:
    slow = [pytest.mark.slow]
    return [pytest.param(b, id=b.name, marks=slow if b.in_checkout else ()) for b in RUNNABLE]


@pytest.mark.db
@pytest.mark.parametrize("block", params())
def test_readme_block_runs(
    block: Block, databases: Databases, data_dir: Path, tmp_path: Path
) -> None:
    """This block runs verbatim and succeeds (see the module docstring for where)."""
    home = tmp_path / "home"
    home.mkdir()
    env = block_env(databases.url(block.where), data_dir, home)
    cwd = tmp_path / "work"
    cwd.mkdir()
    if block.in_checkout:
        copy_checkout(cwd)
    if block.lang in RUN_PYTHON:
        script = tmp_path / f"{Path(block.path).stem}_L{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        argv = [sys.executable, "-W", "error", str(script)]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHECKOUT_TIMEOUT if block.in_checkout else TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{block.path}:{block.line} ({block.lang} block in {block.section!r}) exited "
        f"{proc.returncode}\n--- block\n{block.code}--- stdout\n{proc.stdout[-4000:]}"
        f"--- stderr\n{proc.stderr[-4000:]}"
    )
    assert "Traceback" not in proc.stderr, proc.stderr
