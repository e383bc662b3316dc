"""Probe: what a topic publish's rows cost by themselves, against ``pgmq.send`` (issue 38).

Usage: ``python scripts/probe_publish_floor.py [--database URL] [--seconds S]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server). Needs ``pgbench`` (a
PostgreSQL client program) on ``PATH``: it fails saying so when it is missing.

``pgbench`` (C, no Python, prepared statements) runs one statement per transaction from 4 and
then 16 clients for S seconds (default 6), twice, and prints transactions per second. Each
statement writes a 1 KB body to one queue topic, as ``scripts/bench_peers_pgmq.py``'s
producers do; each variant runs in a scratch database of its own (migrated, the topic and 16
subscribed identities made as that script makes them):

1. ``mail row``: the ``INSERT`` of the mail row alone (its stored search vector, its GIN and
   four B-tree indexes, its foreign keys);
2. ``mail row, no search vector``: the same with the ``search_vector`` column (and so its GIN
   index) dropped;
3. ``mail row, no foreign keys``: the same with the sender's and the topic's foreign keys
   dropped (their key-share locks on one topic row, taken by every writer);
4. ``mail + log + queue rows``: the mail row, its ``topic_log`` row (pending: no offset) and its
   ``queue_items`` row in one statement: a publish's rows without the statement around
   ``post_mail()`` and without the sequencer;
5. the same with the queue's NOTIFY trigger disabled: raw SQL notifies inside its transaction
   (the library's connections send their wake-ups after the commit, migration 0032);
6. ``pgmq.send``: pgmq 1.5.1's, from its SQL install script (``scripts/vendor/pgmq/``).

The publish statement itself is not run here (without its sequencer runs, every publish after
the first contended one would stay pending); ``scripts/bench_peers_pgmq.py`` measures the
library's publish against ``pgmq.send``. Nothing is asserted on the numbers; the scratch
databases are dropped at the end.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
from bench_peers_pgmq import BODY_1K, ours_topic, pgmq_database, pgmq_message, pgmq_queue
from benchkit import Scratch, arguments, server_url

CLIENTS = (4, 16)
NAMES = [f"p{k}" for k in range(1, 17)]


def mail_insert(url: str) -> str:
    """The mail row's INSERT for the topic ``q``, sender p1, with ``url``'s ids."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT t.id, i.id FROM topics AS t, identities AS i WHERE t.name = 'q' "
            "AND i.name = 'p1'"
        ).fetchone()
    assert row is not None
    topic, sender = row
    body = BODY_1K.replace("'", "''")
    return (
        "INSERT INTO mail (thread_id, sender_id, recipients, subject, body, priority, "
        f"request_hash, topic_id) VALUES (md5(random()::text), {sender}, '{{}}', 's', "
        f"'{body}', 'normal', 'h', {topic})"
    )


def three_rows(url: str) -> str:
    """The mail row, its pending topic_log row and its queue_items row, one statement."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT id FROM topics WHERE name = 'q'").fetchone()
    assert row is not None
    return (
        f"WITH m AS ({mail_insert(url)} RETURNING id), "
        f"l AS (INSERT INTO topic_log (mail_id, topic_id) SELECT id, {row[0]} FROM m) "
        f"INSERT INTO queue_items (mail_id, topic_id) SELECT id, {row[0]} FROM m"
    )


def variant(scratch: Scratch, role: str, *changes: str) -> str:
    """A scratch database with the queue topic ``q``, after ``changes`` (SQL)."""
    url = scratch.create(role)
    ours_topic(url, NAMES, "q")
    with psycopg.connect(url, autocommit=True) as conn:
        for change in changes:
            conn.execute(change)  # type: ignore[arg-type]
    return url


def tps(url: str, statement: str, clients: int, seconds: int, workdir: Path) -> float:
    """pgbench's transactions per second for ``statement`` from ``clients`` clients."""
    script = workdir / "statement.sql"
    script.write_text(statement + ";\n")
    with psycopg.connect(url) as conn:
        info = conn.info
        host, port, dbname, user = info.host, str(info.port), info.dbname, info.user
    command = ["pgbench", "-n", "-h", host, "-p", port, "-U", user, "-c", str(clients)]
    command += ["-j", "2", "-T", str(seconds), "-M", "prepared", "-f", str(script), dbname]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"tps = ([\d.]+)", result.stdout)
    if result.returncode or not found:
        raise SystemExit(f"pgbench failed: {result.stdout[-400:]} {result.stderr[-400:]}")
    return float(found.group(1))


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=int, default=6, help="each pgbench run (default 6)")
    args = parser.parse_args()
    if shutil.which("pgbench") is None:
        print("probe_publish_floor: needs pgbench (a PostgreSQL client program) on PATH")
        return 2
    scratch = Scratch(server_url(args.database), "publishfloor")
    try:
        plain = variant(scratch, "plain")
        no_vector = variant(scratch, "novector", "ALTER TABLE mail DROP COLUMN search_vector")
        no_keys = variant(
            scratch,
            "nokeys",
            "ALTER TABLE mail DROP CONSTRAINT mail_sender_id_fkey",
            "ALTER TABLE mail DROP CONSTRAINT mail_topic_id_fkey",
        )
        no_trigger = variant(
            scratch,
            "notrigger",
            "ALTER TABLE queue_items DISABLE TRIGGER queue_items_notify_insert",
        )
        peer = pgmq_database(scratch)
        pgmq_queue(peer)
        message = pgmq_message().replace("'", "''")
        sides = [
            ("mail row", plain, mail_insert(plain)),
            ("mail row, no search vector", no_vector, mail_insert(no_vector)),
            ("mail row, no foreign keys", no_keys, mail_insert(no_keys)),
            ("mail + log + queue rows", plain, three_rows(plain)),
            ("the same, no NOTIFY trigger", no_trigger, three_rows(no_trigger)),
            ("pgmq.send", peer, f"SELECT pgmq.send('bench', '{message}'::jsonb)"),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for clients in CLIENTS:
                results: dict[str, list[float]] = {name: [] for name, _, _ in sides}
                for _ in range(2):
                    for name, url, statement in sides:
                        results[name].append(tps(url, statement, clients, args.seconds, Path(tmp)))
                peer_tps = results["pgmq.send"]
                print(f"\n{clients} clients{'':<24}{'tx/s, two runs':>22}{'vs pgmq.send':>16}")
                for name, got in results.items():
                    ratios = " / ".join(f"{g / p:.2f}" for g, p in zip(got, peer_tps, strict=True))
                    line = " / ".join(f"{g:,.0f}" for g in got)
                    print(f"{name:<34}{line:>22}{ratios:>16}")
    finally:
        scratch.drop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
