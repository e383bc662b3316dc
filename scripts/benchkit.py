"""What the benchmark scripts share: scratch databases, interleaved timing, the report table.

Imported by ``scripts/bench_mail.py`` and ``scripts/bench_topics.py`` (run as scripts, so this
directory is on ``sys.path``, in their spawned worker processes too). Nothing here asserts on a
timing: a benchmark reports, and its exit status follows only errors and correctness checks
(``Row.check``).
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import psycopg

import ikigai_store as ik
from ikigai_store.config import admin_url, redact
from ikigai_store.embedded import embedded_server_url
from ikigai_store.migrate import apply as migrate
from ikigai_store.pool import create_database, drop_database

SUBJECT = "Build finished"
BODY = (
    "The nightly build of branch main finished: 1,284 tests passed, 3 skipped. "
    "Artifacts are in the usual place; the flaky parser test did not fail this time."
)

# ------------------------------------------------------------------------------------ report


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of ``doc``, with the option every benchmark
    takes: ``--database URL`` (read it with ``server_url``)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument(
        "--database",
        metavar="URL",
        help="a PostgreSQL URL; scratch databases are created on its server (default: "
        "IKIGAI_DATABASE_URL, DATABASE_URL, else the embedded server)",
    )
    return parser


def server_url(database: str | None) -> str:
    """``--database``, else ``IKIGAI_DATABASE_URL``, else ``DATABASE_URL``, else the embedded
    server (started if need be)."""
    return (
        database
        or os.environ.get("IKIGAI_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or embedded_server_url()
    )


def summary(rows: list[Row], started: float) -> int:
    """Print the summary table (with the machine's load now) and the total time since
    ``started`` (a ``time.perf_counter()``); the exit status: 1 if a checked row failed."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    table(rows, f"summary (nproc {nproc()}, load average now {load})")
    print(f"\ntotal time {time.perf_counter() - started:.1f} s; goals are targets, not assertions")
    return 0 if all(r.met is not False for r in rows if r.check) else 1


def run(main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s status; a library, driver or setup error is one line, status 1."""
    try:
        sys.exit(main())
    except (ik.IkigaiStoreError, psycopg.Error, RuntimeError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs``, nearest rank."""
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


@dataclass
class Row:
    """One line of the final table; ``met`` None for lines reported without a goal;
    ``check``: a correctness check (its failure makes the exit status non-zero)."""

    measure: str
    result: str
    goal: str
    met: bool | None
    check: bool = False

    @property
    def verdict(self) -> str:
        return "info" if self.met is None else "yes" if self.met else "**NO**"


def table(rows: list[Row], title: str) -> None:
    print(f"\n{title}\n")
    print("| measure | result | goal | met? |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r.measure} | {r.result} | {r.goal} | {r.verdict} |")


def nproc() -> int:
    """What ``nproc`` prints: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def environment(server_url: str) -> None:
    """Print the machine, the libraries and the server's settings that move the numbers."""
    names = ("server_version", "shared_buffers", "fsync", "synchronous_commit", "max_connections")
    with psycopg.connect(server_url) as conn:
        settings = {
            name: str((conn.execute(f"SHOW {name}").fetchone() or ("?",))[0]) for name in names
        }
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("environment")
    print(
        f"  cores       : {os.cpu_count()} ({platform.machine()}), nproc {nproc()}; "
        f"load average {load}"
    )
    print(f"  Python      : {platform.python_version()} ({platform.python_implementation()})")
    print(f"  psycopg     : {psycopg.__version__} (libpq {psycopg.pq.version()})")
    print(f"  ikigai_store: {ik.__version__}")
    print(
        f"  PostgreSQL  : {settings['server_version']} (shared_buffers "
        f"{settings['shared_buffers']}, fsync {settings['fsync']}, synchronous_commit "
        f"{settings['synchronous_commit']}, max_connections {settings['max_connections']})"
    )
    print(f"  server      : {redact(server_url)}")


@contextmanager
def step(what: str) -> Iterator[None]:
    print(f"  {what} ...", end="", flush=True)
    t0 = time.perf_counter()
    yield
    print(f" {time.perf_counter() - t0:.1f} s", flush=True)


# ------------------------------------------------------------------------------------ databases


class Scratch:
    """Scratch databases ``ikigai_bench_<pid>_<area>_<role>`` on one server, migrated; every
    one created is dropped by ``drop_all`` (or earlier by ``drop``)."""

    def __init__(self, server_url: str, area: str) -> None:
        self.server_url = server_url
        self.area = area
        self.created: list[str] = []

    def _name(self, role: str) -> str:
        return f"ikigai_bench_{os.getpid()}_{self.area}_{role}"

    def create(self, role: str) -> str:
        name = self._name(role)
        drop_database(self.server_url, name)
        create_database(self.server_url, name)
        self.created.append(name)
        url = admin_url(self.server_url, name)
        migrate(url)
        return url

    def drop(self, role: str) -> None:
        name = self._name(role)
        drop_database(self.server_url, name)
        self.created.remove(name)

    def drop_all(self) -> None:
        for name in reversed(self.created):
            try:
                drop_database(self.server_url, name)
            except ik.IkigaiStoreError as exc:
                print(f"warning: could not drop scratch database {name}: {exc}", file=sys.stderr)
        self.created.clear()


def register(url: str, *names: str) -> dict[str, int]:
    """Register identities; their ids."""
    with ik.Store(url, pool_size=1) as store:
        for name in names:
            store.identities.register(name)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT name, id FROM identities WHERE name = ANY(%s)", (list(names),)
        ).fetchall()
    return {name: int(i) for name, i in rows}


# ------------------------------------------------------------------------------------ timing


@dataclass
class Timings:
    """Per-call wall times of each side, and each side's median per round."""

    calls: dict[str, list[float]]
    rounds: dict[str, list[float]]

    def line(self, side: str) -> str:
        xs = self.calls[side]
        return (
            f"mean {us(statistics.fmean(xs))}  p50 {us(statistics.median(xs))}  "
            f"p90 {us(pct(xs, 0.9))}"
        )

    def p50(self, side: str) -> float:
        return statistics.median(self.calls[side])

    def ratio(self, ours: str, base: str) -> float:
        return self.p50(ours) / self.p50(base)

    def round_ratios(self, ours: str, base: str) -> str:
        rr = sorted(a / b for a, b in zip(self.rounds[ours], self.rounds[base], strict=True))
        return (
            f"per-round p50 ratios min {rr[0]:.3f} median {statistics.median(rr):.3f} "
            f"max {rr[-1]:.3f} ({len(rr)} rounds)"
        )


def interleaved(
    sides: Mapping[str, Callable[[], object]], *, rounds: int, per_round: int, warmup: int
) -> Timings:
    """``per_round`` timed calls of each side per round; the side going first rotates every
    round and the order reverses every other cycle, so drift hits every side alike."""
    clock = time.perf_counter
    names = list(sides)
    for _ in range(warmup):
        for name in names:
            sides[name]()
    result = Timings({n: [] for n in names}, {n: [] for n in names})
    for r in range(rounds):
        k = r % len(names)
        order = names[k:] + names[:k]
        if (r // len(names)) % 2:
            order.reverse()
        for name in order:
            fn, out = sides[name], []
            for _ in range(per_round):
                t0 = clock()
                fn()
                out.append(clock() - t0)
            result.calls[name] += out
            result.rounds[name].append(statistics.median(out))
    return result


# ------------------------------------------------------------------------------------ waits

_ACTIVITY = """
SELECT a.state, a.wait_event_type, a.wait_event, l.locktype, l.classid::regclass::text, l.objid
FROM pg_stat_activity AS a
LEFT JOIN pg_locks AS l ON l.pid = a.pid AND NOT l.granted
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  AND a.backend_type = 'client backend'
"""


def what_backends_do(url: str, stop: threading.Event, counts: collections.Counter[str]) -> None:
    """Sample what the database's client backends wait on, every 10 ms, until ``stop``."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(0.01):
            for state, kind, event, locktype, classid, objid in conn.execute(_ACTIVITY):
                if state != "active":
                    label = f"{state} (waiting for the client)"
                elif kind is None:
                    label = "running (CPU)"
                elif locktype == "object" and classid == "pg_database" and objid == 0:
                    label = "Lock/object on pg_database 0 (NOTIFY's commit lock)"
                else:
                    label = f"{kind}/{event}"
                counts[label] += 1


def describe_waits(counts: collections.Counter[str], top: int = 5) -> str:
    total = sum(counts.values()) or 1
    return "; ".join(f"{v / total:.0%} {k}" for k, v in counts.most_common(top))


def backend_cpu(pid: int) -> float | None:
    """Seconds of CPU (user + system) the process ``pid`` has used (a server backend, from
    ``/proc``); None if not readable (the server runs on another machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
