"""The shipped MCP catalog (what ``ikigai-store mcp`` answers before the service is reached) is
the SDK server's own answers for this code, and the thin clients' constants agree with the
modules they stand in for."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ikigai_store import _entry
from ikigai_store.hooks import claude
from ikigai_store.mcp import catalog, snapshot


def test_the_shipped_catalog_is_what_the_server_answers() -> None:
    """catalog.json equals a fresh recording (run ``python -m ikigai_store.mcp.snapshot``
    after changing a tool)."""
    with ThreadPoolExecutor(1) as thread:  # its own event loop, whatever this thread runs
        fresh = thread.submit(snapshot.build).result()
    assert catalog.PATH.read_text(encoding="utf-8") == catalog.render(fresh)


def test_the_fast_entry_knows_every_hook_and_the_auto_reserve_default() -> None:
    """The console script's fast path routes exactly the hooks there are, with the same
    --auto-reserve default."""
    assert set(claude.HOOKS) == _entry._HOOKS
    assert _entry._AUTO_RESERVE_DEFAULT == claude.AUTO_RESERVE_SECONDS
