"""Where a lease's acquire + release spends its time, against a bare INSERT + DELETE (issue 38).

Usage: ``python scripts/bench_lease_anatomy.py [--database URL] [--pairs N]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server).

Each side acquires and releases one of 7 free resources in turn (what a holder looping over
its files does, so the resources' index entries churn), on a table holding 1,000 other live
leases, each on its own connection (``autocommit``: a commit per statement, as the library
does) to a database of its own (the same identities and leases in each): the churn one side
leaves in the indexes (dead entries, and the marks that let a scan skip them) never lands on
another's. The sides run in turns of ``N / 8`` pairs, rotating, and report per pair:

- the **server's CPU**: the side's backend process' user + system time, read from
  ``/proc/<pid>/stat`` (only when the server runs on this machine, as the embedded one does;
  "n/a" otherwise). The CPU is what a busy machine's load does not make up, unlike wall time;
  the commit's WAL flush is a wait, not CPU, and is the same for every side;
- this process' CPU (psycopg, and the library for the last side);
- the p50 wall time of a pair;

each with its ratio to the bare pair measured in the same run. The sides:

1. ``bare``: ``INSERT ... RETURNING`` + ``DELETE`` on a plain table with a unique key;
2. ``leases floor``: the same two statements on the ``leases`` table (its holder foreign key,
   exclusion constraint, token and five indexes: the schema's floor);
3. ``0.8.0 grant``: 0.8.0's ``leases_grant`` (its ``NOT EXISTS`` probe, planned as a bitmap
   scan) + our ``leases_release``;
4. ``grant``: our ``leases_grant`` + ``leases_release``, raw;
5. ``grant, no notify``: the same without their ``pg_notify`` (what the wake-ups cost);
6. ``sweeping``: ``leases_acquire`` (replaces and sweeps; one acquire in 8) + release, raw;
7. ``library``: ``store.leases.acquire`` + ``release``.

Nothing is asserted on timings. The scratch databases ``ikigai_bench_<pid>_leaseanatomy_*``
are dropped at the end.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from benchkit import Scratch, arguments, backend_cpu, environment, register, run, server_url

import ikigai_store as ik

RESOURCES = 7
#: 0.8.0's leases_grant, for the same-run comparison of its probe.
GRANT_080 = """
INSERT INTO leases (resource, holder_id, exclusive, expires_at)
SELECT %(resource)s, i.id, %(exclusive)s, ikigai_now() + CAST(%(ttl)s AS interval)
FROM identities AS i
WHERE i.name = %(holder)s AND i.retired_at IS NULL
  AND NOT EXISTS (SELECT FROM leases AS l
                  WHERE l.resource = %(resource)s AND l.holder_id = i.id)
ON CONFLICT DO NOTHING
RETURNING id, resource, CAST(%(holder)s AS text) AS holder, exclusive,
          CAST(token AS text) AS token, acquired_at, expires_at,
          pg_notify('ikigai_lease', CAST(holder_id AS text)) AS notified
"""
FLOOR_INSERT = (
    "INSERT INTO leases (resource, holder_id, exclusive, expires_at) "
    "VALUES (%(resource)s, %(holder_id)s, true, now() + interval '30 seconds') "
    "ON CONFLICT DO NOTHING RETURNING id, resource, holder_id, exclusive, CAST(token AS text)"
)
FLOOR_DELETE = "DELETE FROM leases WHERE id = %(id)s"
RAW = """
CREATE TABLE raw_leases (id bigserial PRIMARY KEY, resource text UNIQUE, holder_id bigint,
                         token uuid DEFAULT gen_random_uuid(), expires_at timestamptz)
"""
NOTIFY = ",\n          pg_notify('ikigai_lease', CAST(holder_id AS text)) AS notified"
GRANT_NOTIFY = ", pg_notify('ikigai_lease', CAST(holder_id AS text)) AS notified"


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--pairs", type=int, default=4000, help="pairs per side (default 4000)")
    args = parser.parse_args(argv)
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "leaseanatomy")
    try:
        return measure(scratch, max(8, args.pairs))
    finally:
        scratch.drop_all()


def measure(scratch: Scratch, pairs: int) -> int:
    names = [f"holder-{k:02d}" for k in range(32)]
    made = iter(range(100))
    holder_ids: set[int] = set()

    def database() -> str:
        url = scratch.create(f"d{next(made)}")
        holder_ids.add(register(url, *names)["holder-00"])
        with ik.Store(url, pool_size=1) as store:
            for k in range(1000):
                store.leases.acquire(names[k % 32], f"busy/{k}", ttl=timedelta(hours=1))
        return url

    conns: list[psycopg.Connection[Any]] = []

    def connect(where: str) -> tuple[psycopg.Connection[Any], int]:
        conn = psycopg.connect(where, autocommit=True)
        conns.append(conn)
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return conn, int(row[0])

    turn = iter(range(10**12))

    def params() -> dict[str, Any]:
        return {
            "holder": "holder-00",
            "holder_id": min(holder_ids),
            "resource": f"free/{next(turn) % RESOURCES}",
            "exclusive": True,
            "ttl": timedelta(seconds=30),
        }

    def pair(grant: str, release: str) -> tuple[Callable[[], None], int]:
        conn, pid = connect(database())

        def once() -> None:
            row = conn.execute(grant, params()).fetchone()
            assert row is not None, "not granted"
            conn.execute(release, {"resource": row[1], "token": row[4], "id": row[0]})

        return once, pid

    with ik.Store(database(), pool_size=1) as store:
        bare_conn, bare_pid = connect(database())
        bare_conn.execute(RAW)

        def bare() -> None:
            p = params()
            bare_conn.execute(
                "INSERT INTO raw_leases (resource, holder_id, expires_at) "
                "VALUES (%(resource)s, %(holder_id)s, now() + interval '30 seconds') "
                "RETURNING id, token",
                p,
            ).fetchone()
            bare_conn.execute("DELETE FROM raw_leases")

        grant: str = ik.queries.leases_grant.sql
        sweeping: str = ik.queries.leases_acquire.sql
        release: str = ik.queries.leases_release.sql
        assert GRANT_NOTIFY in grant and NOTIFY in release

        def library() -> None:
            lease = store.leases.acquire("holder-00", params()["resource"], ttl=30)
            store.leases.release(lease)

        with store._pool.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
            assert row is not None
            library_pid = int(row["pid"])
        sides: dict[str, tuple[Callable[[], None], int]] = {
            "bare": (bare, bare_pid),
            "leases floor": pair(FLOOR_INSERT, FLOOR_DELETE),
            "0.8.0 grant": pair(GRANT_080, release),
            "grant": pair(grant, release),
            "grant, no notify": pair(grant.replace(GRANT_NOTIFY, ""), release.replace(NOTIFY, "")),
            "sweeping": pair(sweeping, release),
            "library": (library, library_pid),
        }
        server = {name: 0.0 for name in sides}
        client = {name: 0.0 for name in sides}
        walls: dict[str, list[float]] = {name: [] for name in sides}
        readable = all(backend_cpu(pid) is not None for _, pid in sides.values())
        names_ = list(sides)
        for r in range(8):
            for name in names_[r % len(names_) :] + names_[: r % len(names_)]:
                fn, pid = sides[name]
                for _ in range(20):
                    fn()
                s0, c0 = backend_cpu(pid) or 0.0, time.process_time()
                for _ in range(pairs // 8):
                    t0 = time.perf_counter()
                    fn()
                    walls[name].append(time.perf_counter() - t0)
                server[name] += (backend_cpu(pid) or 0.0) - s0
                client[name] += time.process_time() - c0
    for conn in conns:
        conn.close()
    assert len(holder_ids) == 1, "the same holder id in every database"
    n = (pairs // 8) * 8
    p50 = {name: statistics.median(w) for name, w in walls.items()}
    print(f"\nper acquire + release pair ({n} pairs a side; ratios vs bare, same run)")
    print(f"  {'':18} {'server CPU':>18} {'client CPU':>18} {'wall p50':>18}")
    for name in sides:
        cells = []
        if readable:
            cells.append(f"{server[name] / n * 1e6:7.0f} µs {server[name] / server['bare']:5.2f}x")
        else:
            cells.append(f"{'n/a':>16}")
        cells.append(f"{client[name] / n * 1e6:7.0f} µs {client[name] / client['bare']:5.2f}x")
        cells.append(f"{p50[name] * 1e6:7.0f} µs {p50[name] / p50['bare']:5.2f}x")
        print(f"  {name:18} " + "  ".join(cells))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average now {load}; timings are information, nothing is asserted")
    return 0


if __name__ == "__main__":
    run(main)
