"""The documentation site builds, strictly, and its reference documents every public name.

``mkdocs build --strict`` (any warning fails: a broken link or anchor, a reference entry that
does not resolve) into a temporary directory, then the rendered pages are read: every public
name has its entry, an HTML heading whose id is the name's path (mkdocstrings' anchors):

- every name of ``ikigai_store.__all__`` (``ikigai_store.Store``, ``ikigai_store.Message``, …);
- every public member of both faces, operations included (``ikigai_store.Store.append``,
  ``ikigai_store.AsyncStore.replay_session``), and every operation of every namespace on
  both faces (``ikigai_store.Store.mail.send``, ``ikigai_store.AsyncStore.mail.send``), the
  async ones marked ``async``; deprecated aliases are left out (the CHANGELOG lists them);
- every ``ikigai-store`` command on the CLI page and every MCP tool on the MCP page.

The names are listed from the running package, not from the site's configuration, so a new
public name without an entry fails here. Needs the ``docs`` extra (``pip install
'.[docs]'``); without it the test is skipped, unless ``IKIGAI_REQUIRE_DOCS=1`` (CI) makes that
a failure.
"""

from __future__ import annotations

import html
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ikigai_store as ik
from ikigai_store import ops
from ikigai_store.api import NAMESPACES

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "mkdocs_click")
HEADING = re.compile(r'<h[1-6] id="([^"]+)" class="doc doc-heading"')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with ``mkdocs build --strict`` into a temporary directory."""
    missing = [m for m in NEEDED if importlib.util.find_spec(m.partition(".")[0]) is None]
    if missing:
        why = f"the docs extra is not installed (no {', '.join(missing)}): pip install '.[docs]'"
        if os.environ.get("IKIGAI_REQUIRE_DOCS") == "1":
            pytest.fail(why)
        pytest.skip(why)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    print(f"site built in {time.monotonic() - started:.1f} s")
    return out


def _pages(site: Path) -> Iterator[tuple[Path, str]]:
    for page in sorted(site.rglob("*.html")):
        yield page, page.read_text(encoding="utf-8")


def _public(cls: type) -> list[str]:
    """The public members of a face or namespace class, deprecated aliases left out."""
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(cls, name, None)
        if isinstance(static, ops.operation) and static.deprecated:
            continue
        names.append(name)
    return names


def public_entries() -> dict[str, bool]:
    """Every public name's entry id, mapped to whether it is a coroutine function."""
    entries = {f"ikigai_store.{name}": False for name in ik.__all__}
    for face in (ik.Store, ik.AsyncStore):
        for name in _public(face):
            member = getattr(face, name)
            path = f"ikigai_store.{face.__name__}.{name}"
            entries[path] = inspect.iscoroutinefunction(member)
            if name in NAMESPACES:
                for op in _public(NAMESPACES[name]):
                    entries[f"{path}.{op}"] = inspect.iscoroutinefunction(getattr(member, op))
    return entries


def test_the_list_of_public_names_is_complete() -> None:
    """The list checked below holds both faces' operations, top-level and namespaced, and the
    async face's are coroutine functions (the sync face's are not)."""
    entries = public_entries()
    for path in ("ikigai_store.Store.append", "ikigai_store.Store.mail.send"):
        assert entries[path] is False
        assert entries[path.replace(".Store.", ".AsyncStore.")] is True
    assert "ikigai_store.Store.tasks.claim_task" not in entries  # deprecated
    assert sum(p.startswith("ikigai_store.AsyncStore.") for p in entries) > 150


def test_every_public_name_has_a_rendered_entry(site: Path) -> None:
    """Each public name of the package and of both faces has a heading in the built site,
    and each coroutine function of the async face is labelled ``async``."""
    rendered: dict[str, str] = {}
    for _, text in _pages(site):
        for match in HEADING.finditer(text):
            end = text.find("</h", match.end())
            rendered[html.unescape(match[1])] = text[match.end() : end]
    entries = public_entries()
    missing = sorted(set(entries) - set(rendered))
    assert missing == [], f"{len(missing)} public names have no reference entry: {missing}"
    unlabelled = [p for p, is_async in entries.items() if is_async and "async" not in rendered[p]]
    assert unlabelled == [], f"not labelled async: {unlabelled}"
    print(f"{len(entries)} public names, each with a rendered reference entry")


def test_cli_and_mcp_references_are_complete(site: Path) -> None:
    """The CLI page shows every command (generated from click); the MCP page every tool with
    its description (generated from the tool table)."""
    from ikigai_store.cli.app import COMMAND_MODULES
    from ikigai_store.mcp.tools import TOOLS

    cli = html.unescape((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    absent = [name for name in COMMAND_MODULES if f"ikigai-store {name}" not in cli]
    assert absent == [], f"commands missing from the CLI page: {absent}"
    mcp = html.unescape((site / "reference" / "mcp" / "index.html").read_text(encoding="utf-8"))
    for tool in TOOLS:
        assert f'id="{tool.name}"' in mcp, tool.name
        first = tool.description().splitlines()[0]
        assert html.unescape(first) in mcp, tool.name


def test_screenshots_are_shown(site: Path) -> None:
    """Every screenshot of ``docs/images`` (made by scripts/web_screenshots.py) is on a page."""
    shown = "".join(text for _, text in _pages(site))
    for image in sorted((ROOT / "docs" / "images").glob("*.png")):
        assert f"images/{image.name}" in shown, image.name
