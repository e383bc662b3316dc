"""Benchmark report: the Claude Agent SDK session store (issue 35) against the SDK's reference
``InMemorySessionStore`` and a plain jsonb-row table on the same server, in the same run.

Usage: ``python scripts/bench_claude_agent.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server). Needs the
``claude-agent`` extra.

Two measurements, with transcript entries shaped like Claude Code's (user and assistant
messages of about 300 bytes of JSON, each with a uuid):

1. ``append`` of a batch of 50 entries (what the SDK flushes per turn) to a growing main
   transcript: ours (one transaction: dedup by uuid, the summary folded and stored) vs the
   in-memory store (a Python list; no durability) vs a plain table (one ``INSERT ... SELECT
   FROM unnest`` of 50 jsonb rows, autocommit: no dedup, no summary), p50 ratios (info).
2. ``load`` of a 10,000-entry transcript (``--quick``: 2,000): ours vs the in-memory store vs
   ``SELECT entry FROM plain WHERE key = ... ORDER BY id``, p50 ratios (info); every side is
   checked to return the same entries.

Nothing is asserted on timings. The scratch database is dropped at the end.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import psycopg
from benchkit import Row, Scratch, arguments, environment, interleaved, run, server_url, step
from benchkit import summary as report
from claude_agent_sdk import InMemorySessionStore

import ikigai_store as ik
from ikigai_store.integrations.claude_agent import IkigaiSessionStore

PLAIN = """
CREATE TABLE plain_transcripts (
    id BIGSERIAL PRIMARY KEY,
    key TEXT NOT NULL,
    entry JSONB NOT NULL
);
CREATE INDEX ON plain_transcripts (key, id);
"""
PLAIN_APPEND = """
INSERT INTO plain_transcripts (key, entry)
SELECT %(key)s, CAST(e AS jsonb)
FROM unnest(CAST(%(entries)s AS text[])) WITH ORDINALITY AS u (e, n)
ORDER BY n
"""
PLAIN_LOAD = "SELECT entry FROM plain_transcripts WHERE key = %(key)s ORDER BY key, id"


def entry(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    content: Any = f"turn {i}: please look at the parser and tell me why it fails on tabs"
    if role == "assistant":
        content = [{"type": "text", "text": f"turn {i}: the lexer treats a tab as two spaces"}]
    return {
        "type": role,
        "uuid": str(uuid.uuid4()),
        "parentUuid": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "sessionId": "bench",
        "cwd": "/work/project",
        "message": {"role": role, "content": content},
    }


def bench(url: str, big: int, rounds: int, per_round: int) -> list[Row]:
    rows: list[Row] = []
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(ik.AsyncStore.connect(url, pool_size=1))
    raw = psycopg.connect(url, autocommit=True)
    try:
        raw.execute(PLAIN)
        ours = IkigaiSessionStore(store, namespace="bench")
        memory = InMemorySessionStore()

        print("\n[1] append of 50 entries")
        counter = iter(range(10**9))

        def batch() -> list[dict[str, Any]]:
            return [entry(next(counter)) for _ in range(50)]

        key: Any = {"project_key": "bench", "session_id": "appends"}
        t = interleaved(
            {
                "ours": lambda: loop.run_until_complete(ours.append(key, batch())),
                "in-memory": lambda: loop.run_until_complete(memory.append(key, batch())),
                "plain table": lambda: raw.execute(
                    PLAIN_APPEND,
                    {"key": "appends", "entries": [json.dumps(e) for e in batch()]},
                ),
            },
            rounds=rounds,
            per_round=per_round,
            warmup=3,
        )
        for side in t.calls:
            print(f"  {side:12}: {t.line(side)}")
        for base in ("in-memory", "plain table"):
            ratio = t.ratio("ours", base)
            rows.append(
                Row(
                    f"append(50 entries): ours / {base}, p50",
                    f"{t.p50('ours') * 1e3:.2f} ms / {t.p50(base) * 1e3:.3f} ms = {ratio:.2f}x",
                    "info",
                    None,
                )
            )

        print(f"\n[2] load of a {big:,}-entry transcript")
        entries = [entry(i) for i in range(big)]
        long_key: Any = {"project_key": "bench", "session_id": "long"}
        with step(f"append {big:,} entries to each side, 500 at a time"):
            for i in range(0, big, 500):
                chunk = entries[i : i + 500]
                loop.run_until_complete(ours.append(long_key, chunk))
                loop.run_until_complete(memory.append(long_key, chunk))
                raw.execute(
                    PLAIN_APPEND, {"key": "long", "entries": [json.dumps(e) for e in chunk]}
                )
            raw.execute("VACUUM ANALYZE")
        same = (
            loop.run_until_complete(ours.load(long_key))
            == loop.run_until_complete(memory.load(long_key))
            == [r[0] for r in raw.execute(PLAIN_LOAD, {"key": "long"}).fetchall()]
            == entries
        )
        rows.append(Row(f"load({big:,}): the three sides agree", str(same), "True", same, True))
        t = interleaved(
            {
                "ours": lambda: loop.run_until_complete(ours.load(long_key)),
                "in-memory": lambda: loop.run_until_complete(memory.load(long_key)),
                "plain table": lambda: raw.execute(PLAIN_LOAD, {"key": "long"}).fetchall(),
            },
            rounds=rounds,
            per_round=max(2, per_round // 4),
            warmup=2,
        )
        for side in t.calls:
            print(f"  {side:12}: {t.line(side)}")
        for base in ("in-memory", "plain table"):
            ratio = t.ratio("ours", base)
            rows.append(
                Row(
                    f"load({big:,} entries): ours / {base}, p50",
                    f"{t.p50('ours') * 1e3:.1f} ms / {t.p50(base) * 1e3:.2f} ms = {ratio:.2f}x",
                    "info",
                    None,
                )
            )
    finally:
        raw.close()
        loop.run_until_complete(store.close())
        loop.close()
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000 entries, fewer rounds")
    args = parser.parse_args()
    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "claude")
    try:
        url = scratch.create("store")
        big = 2_000 if args.quick else 10_000
        rows = bench(url, big, rounds=4 if args.quick else 6, per_round=8 if args.quick else 12)
    finally:
        scratch.drop_all()
    return report(rows, t0)


if __name__ == "__main__":
    run(main)
