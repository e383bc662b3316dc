"""Benchmark report: what an append's idempotency key costs (migration 0044), same run.

Usage: ``python scripts/bench_append_keys.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server).

Two scratch databases on one server: one migrated to the newest schema, one rolled back to
the schema before 0044 (no key column, no key index). One connection each (``ik.Store`` with
``pool_size=1``), one session each; every call appends a 1 KB ``user`` event. Interleaved
rounds time, p50 per call:

1. ``store.append`` without a key, on 0044 vs before it: what the partial index on
   ``(session_id, idempotency_key)`` costs the events that carry no key (the common case);
2. ``store.append(..., idempotency_key=...)`` with a new key each call vs without a key, on
   0044: what a keyed append costs (``ikigai_append_keyed``: a lookup of the key, then the
   insert);
3. a retried keyed append (the key already stored: a lookup, no insert) vs an append without a
   key;
4. ``store.append_many`` of 10 events with a new key each call vs without a key (migration
   0045's ``ikigai_append_batch_keyed``: the key stored on the batch's first event), and a
   retried keyed batch vs one without a key, on 0044's database (in a session of their own).

Checked after the run: each database holds exactly the events the calls stored (a retry stores
nothing). Nothing is asserted on timings; the exit status is non-zero only on errors or a
failed check. ``--quick``: a smoke run.
"""

from __future__ import annotations

import itertools
import time

from benchkit import (
    BODY,
    Row,
    Scratch,
    arguments,
    environment,
    interleaved,
    run,
    server_url,
    summary,
)

import ikigai_store as ik
from ikigai_store import migrate

CONTENT = (BODY * 8)[:1024]
#: Events in each append_many call.
BATCH = 10


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    started = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    rounds, per_round = (4, 50) if args.quick else (20, 200)
    scratch = Scratch(server, "append_keys")
    try:
        new = scratch.create("new")
        old = scratch.create("old")
        assert migrate.rollback(old, count=migrate.packaged_version() - 43) != []
        with ik.Store(new, pool_size=1) as ours, ik.Store(old, pool_size=1) as before:
            sid_new, sid_old = ours.create_session("keys"), before.create_session("no keys")
            keys = (f"key-{n}" for n in itertools.count())
            retry = ours.append(sid_new, "user", CONTENT, idempotency_key="retried")
            sid_batch = ours.create_session("batches")
            batch = [("user", CONTENT, None)] * BATCH
            batch_keys = (f"batch-{n}" for n in itertools.count())
            retry_batch = ours.append_many(sid_batch, batch, idempotency_key="retried")
            timings = interleaved(
                {
                    "plain, 0044": lambda: ours.append(sid_new, "user", CONTENT),
                    "plain, before 0044": lambda: before.append(sid_old, "user", CONTENT),
                    "keyed": lambda: ours.append(
                        sid_new, "user", CONTENT, idempotency_key=next(keys)
                    ),
                    "retried": lambda: ours.append(
                        sid_new, "user", CONTENT, idempotency_key="retried"
                    ),
                    "batch": lambda: ours.append_many(sid_batch, batch),
                    "keyed batch": lambda: ours.append_many(
                        sid_batch, batch, idempotency_key=next(batch_keys)
                    ),
                    "retried batch": lambda: ours.append_many(
                        sid_batch, batch, idempotency_key="retried"
                    ),
                },
                rounds=rounds,
                per_round=per_round,
                warmup=50,
            )
            stored_keys = next(keys).removeprefix("key-")
            plain = len(timings.calls["plain, 0044"]) + 50
            expected_new = plain + int(stored_keys) + 1  # + the retried key's one event
            expected_old = len(timings.calls["plain, before 0044"]) + 50
            got_new, got_old = ours.count_messages(sid_new), before.count_messages(sid_old)
            same = ours.append(sid_new, "user", CONTENT, idempotency_key="retried") == retry
            batches = len(timings.calls["batch"]) + 50 + int(next(batch_keys).split("-")[1]) + 1
            expected_batch = BATCH * batches
            got_batch = ours.count_messages(sid_batch)
            same = same and (
                ours.append_many(sid_batch, batch, idempotency_key="retried") == retry_batch
            )
    finally:
        scratch.drop_all()
    print()
    for side in timings.calls:
        print(f"  {side:<20} {timings.line(side)}")
    ok = got_new == expected_new and got_old == expected_old and same
    ok = ok and got_batch == expected_batch
    rows = [
        Row(
            "append without a key: 0044 / before 0044 (p50)",
            f"{timings.ratio('plain, 0044', 'plain, before 0044'):.2f}x",
            "info",
            None,
        ),
        Row(
            "append with a new key / without a key (p50)",
            f"{timings.ratio('keyed', 'plain, 0044'):.2f}x",
            "info",
            None,
        ),
        Row(
            "a retried keyed append / an append without a key (p50)",
            f"{timings.ratio('retried', 'plain, 0044'):.2f}x",
            "info",
            None,
        ),
        Row(
            f"append_many of {BATCH} with a new key / without a key (p50)",
            f"{timings.ratio('keyed batch', 'batch'):.2f}x",
            "info",
            None,
        ),
        Row(
            f"a retried keyed append_many of {BATCH} / one without a key (p50)",
            f"{timings.ratio('retried batch', 'batch'):.2f}x",
            "info",
            None,
        ),
        Row(
            "events stored: each call once, a retry never (checked)",
            f"{got_new} of {expected_new}, {got_old} of {expected_old}, "
            f"batches {got_batch} of {expected_batch}"
            + ("" if same else "; the retry returned another event"),
            "exact",
            ok,
            check=True,
        ),
    ]
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
