"""Benchmark report: OpenAI Agents SDK sessions on the store (issue 21, part 1), against
baselines measured in the same run.

Usage: ``python scripts/bench_openai_agents.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server; set ``IKIGAI_DATA_DIR`` to
run the embedded server on a private data directory). Needs ``openai-agents`` installed
(``pip install 'ikigai_store[openai-agents]'``).

Three measurements, on one scratch database holding every session:

1. ``IkigaiStoreSession.get_items(limit=50)`` on a session of 100,000 items (``--quick``:
   20,000) vs one of 1,000 items (SDK-shaped user/assistant messages of about 200 bytes).
   Goal: big/small p50 <= 1.5 (the newest items are read by index, the history is never
   folded). The same on a big and a small session whose contexts were then shaped by 20 marks,
   10 rewinds (each cutting 100 events) and 200 pops (goal <= 1.5 too: only those 230 events
   are folded, whatever the history), and shaped vs plain (info: what folding 230 control
   events costs).
2. ``get_items(limit=50)`` vs a bare ``SELECT data ... ORDER BY session_id DESC, id DESC
   LIMIT 50`` of the same session's rows on the same index (what a store that ignores replay,
   and pays no asyncio or pool, would pay): p50 ratio (info).
3. Round trips: ``add_items`` of 10 items and ``get_items(limit=50)``, counted as statements
   sent (every ``psycopg.AsyncCursor.execute`` call, wrapped while the call runs: one
   execute is one round trip) and, when the server has ``pg_stat_statements`` loaded, as the
   server's count of calls of the store's statements. Goal: 1 each (checked).

Nothing is asserted on timings (the exit status is non-zero only on errors or a failed
correctness check). All data lives in the scratch database ``ikigai_bench_<pid>_agents_sdk``,
dropped at the end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from benchkit import Row, Scratch, arguments, environment, interleaved, run, server_url, step
from benchkit import summary as report

import ikigai_store as ik
from ikigai_store.integrations.openai_agents import IkigaiStoreSession

SMALL = 1_000

#: The newest 50 rows of a session, walking idx_messages_session backwards (row comparisons,
#: as the store's queries write them: with "session_id = s" alone the planner walks the primary
#: key over every later row of other sessions).
BARE = """
SELECT data FROM messages
WHERE (session_id, id) > (%(sid)s, 0) AND (session_id, id) <= (%(sid)s, 9223372036854775807)
ORDER BY session_id DESC, id DESC
LIMIT 50
"""
SHAPED = " (230 marks, rewinds, pops)"

#: SDK-shaped items (about 200 bytes of JSON each), user and assistant turns alternating.
FILL = """
INSERT INTO messages (session_id, kind, content, data)
SELECT %(sid)s, k.kind, k.text, jsonb_build_object('role', k.kind, 'content', k.text)
FROM generate_series(1, %(n)s) AS g,
     LATERAL (SELECT CASE WHEN g %% 2 = 0 THEN 'assistant' ELSE 'user' END AS kind,
                     'turn ' || g || ': ' || repeat('lorem ipsum ', 12) AS text) AS k
ORDER BY g
"""


def fill(url: str, sid: int, n: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FILL, {"sid": sid, "n": n})


def shape(store: ik.Store, sid: int) -> None:
    """20 marks, 10 rewinds (each to the mark just before it, cutting the events between)
    and 200 pops of the newest event, spread over the session (appended after the fill, so
    they cut and pop the newest items at each point — replay's work is the same)."""
    ids = [m.id for m in store.replay_tail(sid, limit=2_000)]
    for k in range(10):
        mark = store.append(sid, "mark", f"m{k}", {"label": f"m{k}"})
        store.append_many(sid, [("user", f"cut {k}.{j}", None) for j in range(100)])
        store.append(sid, "rewind", None, {"target_message_id": mark.id})
        store.append(sid, "mark", f"kept{k}", {"label": f"kept{k}"})
    for target in ids[-200:]:
        store.append(sid, "pop", None, {"target_message_id": target})


@contextmanager
def counting() -> Iterator[list[str]]:
    """Statements sent meanwhile: every AsyncCursor.execute call (one round trip each)."""
    sent: list[str] = []
    real = psycopg.AsyncCursor.execute

    async def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query).split("\n", 1)[0][:60])
        return await real(self, query, *args, **kwargs)

    psycopg.AsyncCursor.execute = execute  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.AsyncCursor.execute = real  # type: ignore[method-assign]


def statements_calls(url: str) -> dict[str, int] | None:
    """pg_stat_statements' calls per query text of this database (None: not loaded)."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            rows = conn.execute(
                "SELECT query, calls FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchall()
    except psycopg.Error:
        return None
    return {str(q): int(c) for q, c in rows}


def bench(url: str, big_n: int, rounds: int, per_round: int) -> list[Row]:
    rows: list[Row] = []
    with ik.Store(url, pool_size=1) as store:
        names = ("big", "small", "shaped", "shaped small", "rt")
        sids = {name: store.create_session(name) for name in names}
        with step(f"fill big and shaped ({big_n:,}), small and shaped small ({SMALL:,})"):
            fill(url, sids["big"], big_n)
            fill(url, sids["shaped"], big_n)
            fill(url, sids["small"], SMALL)
            fill(url, sids["shaped small"], SMALL)
            shape(store, sids["shaped"])
            shape(store, sids["shaped small"])
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE messages")
        for name in ("big", "small", "shaped", "shaped small"):
            want = [m.id for m in store.replay_session(sids[name]).messages[-50:]]
            ok = [m.id for m in store.replay_tail(sids[name], limit=50)] == want
            rows.append(
                Row(f"replay_tail(50) = replay's newest 50 ({name})", str(ok), "True", ok, True)
            )
        newest_text = store.replay_tail(sids["big"], limit=1)[0].content

    loop = asyncio.new_event_loop()
    astore = loop.run_until_complete(ik.AsyncStore.connect(url, pool_size=1))
    raw = psycopg.connect(url, autocommit=True)
    try:
        sessions = {
            name: IkigaiStoreSession(name, astore, ikigai_session_id=sid)
            for name, sid in sids.items()
        }
        got = loop.run_until_complete(sessions["big"].get_items(limit=50))
        ok = len(got) == 50 and got[-1] == {"role": "assistant", "content": newest_text}
        rows.append(
            Row("get_items(50) on the big session: its newest 50 items", str(ok), "True", ok, True)
        )

        def get(name: str) -> Any:
            return lambda: loop.run_until_complete(sessions[name].get_items(limit=50))

        def bare() -> None:
            raw.execute(BARE, {"sid": sids["big"]}).fetchall()

        print(f"\n[1, 2] get_items(limit=50): {big_n:,} items vs {SMALL:,}; vs a bare SELECT")
        t = interleaved(
            {
                "big": get("big"),
                "small": get("small"),
                "shaped": get("shaped"),
                "shaped small": get("shaped small"),
                "bare": bare,
            },
            rounds=rounds,
            per_round=per_round,
            warmup=10,
        )
        for side in t.calls:
            print(f"  {side:7}: {t.line(side)}")
        print(f"  big/small {t.round_ratios('big', 'small')}")
        for big, small, what in (
            ("big", "small", ""),
            ("shaped", "shaped small", SHAPED),
        ):
            ratio = t.ratio(big, small)
            rows.append(
                Row(
                    f"get_items(50), {big_n // 1000}k vs {SMALL // 1000}k items{what}, p50",
                    f"{t.p50(big) * 1e6:,.0f} µs vs {t.p50(small) * 1e6:,.0f} µs = {ratio:.2f}x",
                    "≤ 1.5x",
                    ratio <= 1.5,
                )
            )
        ratio = t.ratio("shaped", "big")
        rows.append(
            Row(
                f"get_items(50), {big_n // 1000}k items{SHAPED} vs none, p50",
                f"{t.p50('shaped') * 1e6:,.0f} µs vs {t.p50('big') * 1e6:,.0f} µs = {ratio:.2f}x",
                "info",
                None,
            )
        )
        ratio = t.ratio("big", "bare")
        rows.append(
            Row(
                f"get_items(50) vs bare SELECT ... LIMIT 50 ({big_n // 1000}k items), p50",
                f"{t.p50('big') * 1e6:,.0f} µs vs {t.p50('bare') * 1e6:,.0f} µs = {ratio:.2f}x",
                "info",
                None,
            )
        )

        print("\n[3] round trips")
        items: list[Any] = [{"role": "user", "content": f"item {i}"} for i in range(10)]
        before = statements_calls(url)
        with counting() as sent:
            loop.run_until_complete(sessions["rt"].add_items(items))
        print(f"  add_items(10 items): {len(sent)} statement(s): {sent}")
        after = statements_calls(url)
        rows.append(
            Row("add_items(10 items): statements sent", str(len(sent)), "1", len(sent) == 1, True)
        )
        if before is not None and after is not None:
            ours = {q: c - before.get(q, 0) for q, c in after.items() if "unnest" in q}
            calls = sum(ours.values())
            rows.append(
                Row(
                    "add_items(10 items): pg_stat_statements calls",
                    str(calls),
                    "1",
                    calls == 1,
                    True,
                )
            )
        else:
            print("  (pg_stat_statements is not loaded on this server: client-side count only)")
        stored = loop.run_until_complete(astore.messages(sids["rt"]))
        consecutive = [m.id for m in stored] == list(range(stored[0].id, stored[0].id + 10))
        rows.append(
            Row(
                "add_items(10 items): ids consecutive, order kept",
                str(consecutive),
                "True",
                consecutive and [m.data for m in stored] == items,
                True,
            )
        )
        with counting() as sent:
            loop.run_until_complete(sessions["big"].get_items(limit=50))
        print(f"  get_items(limit=50): {len(sent)} statement(s): {sent}")
        rows.append(
            Row("get_items(50): statements sent", str(len(sent)), "1", len(sent) == 1, True)
        )
    finally:
        raw.close()
        loop.run_until_complete(astore.close())
        loop.close()
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="20k items, fewer rounds")
    args = parser.parse_args()
    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "agents")
    try:
        url = scratch.create("sdk")
        big_n = 20_000 if args.quick else 100_000
        rows = bench(url, big_n, rounds=6 if args.quick else 12, per_round=20 if args.quick else 40)
    finally:
        scratch.drop_all()
    return report(rows, t0)


if __name__ == "__main__":
    run(main)
