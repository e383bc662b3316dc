"""Benchmark report: batches sent as binary arrays (0.9) vs psycopg's text arrays, same run.

Usage: ``python scripts/bench_batches.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server).

Every pooled connection of the library sends a ``list`` parameter as a binary array since 0.9
(``ikigai_store.pool._binary_lists``). Before, psycopg's default dumped a list of strings in
the text form, which searches every element for characters to quote. Two stores on one
scratch database, one connection each (``pool_size=1``): one as the library opens it, one
whose connection is given psycopg's text-form list dumper back. Interleaved rounds time, p50
per call and the client's CPU per call (``time.process_time``):

1. ``store.mail.publish_many`` of 100 mails with 1 KB bodies to a queue topic created
   ``searchable=False``, and to a searchable one;
2. ``store.append_many`` of 100 events with 1 KB contents and a small metadata object each.

Checked after the run: each side stored exactly what its calls sent (100 mails or events a
call) and the bodies read back are the ones sent. Nothing is asserted on timings; the exit
status is non-zero only on errors or a failed check. ``--quick``: a smoke run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

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
    us,
)
from psycopg.types.array import ListDumper

import ikigai_store as ik

CONTENT = (BODY * 8)[:1024]
#: Mails or events in each batch.
BATCH = 100


def text_lists(store: ik.Store) -> None:
    """Give ``store``'s one pooled connection psycopg's default list dumper back (the text
    form, as before 0.9)."""
    with store._pool.connection() as conn:
        conn.adapters.register_dumper(list, ListDumper)


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    started = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    rounds, per_round = (4, 3) if args.quick else (12, 10)
    scratch = Scratch(server, "batches")
    rows: list[Row] = []
    try:
        url = scratch.create("db")
        with ik.Store(url, pool_size=1) as binary, ik.Store(url, pool_size=1) as text:
            text_lists(text)
            binary.identities.register("sender")
            binary.topics.create("jobs", "queue", searchable=False)
            binary.topics.create("news", "queue")
            sessions = {
                "binary": binary.create_session("binary"),
                "text": text.create_session("text"),
            }
            stores = {"binary": binary, "text": text}
            calls = {side: 0 for side in stores}
            cpu: dict[str, float] = {}

            def timed(name: str, fn: Callable[[], object]) -> Callable[[], object]:
                def call() -> object:
                    t0 = time.process_time()
                    result = fn()
                    cpu[name] = cpu.get(name, 0.0) + time.process_time() - t0
                    return result

                return call

            def publish(side: str, topic: str) -> Callable[[], object]:
                store = stores[side]

                def call() -> object:
                    calls[side] += 1
                    return store.mail.publish_many("sender", topic, [CONTENT] * BATCH, subject="s")

                return call

            def append(side: str) -> Callable[[], object]:
                store, sid = stores[side], sessions[side]
                events = [("user", CONTENT, {"n": k}) for k in range(BATCH)]
                return lambda: store.append_many(sid, events)

            measures = {
                "publish_many, unsearchable topic": lambda side: publish(side, "jobs"),
                "publish_many, searchable topic": lambda side: publish(side, "news"),
                "append_many": append,
            }
            for measure, make in measures.items():
                sides = {side: timed(f"{measure} {side}", make(side)) for side in stores}
                got = interleaved(sides, rounds=rounds, per_round=per_round, warmup=2)
                n = len(got.calls["binary"]) + 2  # the warm-up calls are not timed
                b_cpu = cpu[f"{measure} binary"] / n
                t_cpu = cpu[f"{measure} text"] / n
                print(f"\n{measure}, {BATCH} x 1 KB a call")
                for side in stores:
                    print(f"  {side:7} {got.line(side)}")
                print(f"  {got.round_ratios('text', 'binary')} (text / binary)")
                print(f"  client CPU a call: binary {us(b_cpu)}, text {us(t_cpu)}")
                rows.append(
                    Row(
                        f"{measure}: text arrays / binary (p50 time a call)",
                        f"{got.ratio('text', 'binary'):.2f}x faster "
                        f"({us(got.p50('binary'))} vs {us(got.p50('text'))})",
                        "> 1.0x",
                        got.ratio("text", "binary") > 1.0,
                    )
                )
                rows.append(
                    Row(
                        f"{measure}: client CPU a call, text / binary",
                        f"{t_cpu / b_cpu:.2f}x ({us(b_cpu)} vs {us(t_cpu)})",
                        "",
                        None,
                    )
                )
            # Checked: every call stored its batch, and the bodies read back are the ones sent.
            published = sum(calls.values())
            stored = len(binary.topics.read("jobs", limit=100_000)) + len(
                binary.topics.read("news", limit=100_000)
            )
            events = {
                side: len(stores[side].replay_session(sessions[side]).messages) for side in stores
            }
            bodies = {m.body for m in binary.topics.read("jobs", limit=100_000)}
            ok = (
                stored == published * BATCH
                and bodies == {CONTENT}
                and events["binary"] == events["text"] > 0
                and events["binary"] % BATCH == 0
            )
            rows.append(
                Row(
                    "every batch stored whole, bodies as sent",
                    f"{stored} mails of {published} batches; events {events}",
                    "all",
                    bool(ok),
                    check=True,
                )
            )
    finally:
        scratch.drop_all()
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
