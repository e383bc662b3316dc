"""Migrations: schema, idempotence, yoyo CLI agreement, C-era adoption, failures, concurrency."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ikigai_store as ik
from ikigai_store import migrate
from ikigai_store._resources import migrations_dir
from ikigai_store.config import to_yoyo_url

pytestmark = pytest.mark.db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "migrations"
ALL = [
    "0001-initial-schema",
    "0002-session-replay-indexes",
    "0003-agents",
    "0004-messages-agent-uuid",
    "0005-lineage-walk-and-kinds",
    "0006-search-bounded-prefix",
    "0007-identities-and-mail",
    "0008-topics-and-queues",
    "0009-mail-keeps-recipients",
    "0010-queue-claim-cost",
    "0011-activities-and-summaries",
    "0012-reviews-and-plans",
    "0013-tasks",
    "0014-leases",
    "0015-search-stored-vectors",
    "0016-post-mail",
    "0017-watch-and-notify",
    "0018-timeline-controls",
    "0019-session-imports",
    "0020-pop-events",
    "0021-session-keys",
    "0022-hot-paths",
    "0023-mail-unread-row-trigger",
    "0024-session-listened-until",
    "0025-queue-hot-path",
    "0026-mail-hand-off",
    "0027-runtime-stores",
    "0028-topic-sequencer",
    "0030-citus-distribution",
    "0031-lease-clock",
    "0032-wake-after-commit",
    "0033-citus-more-distributed",
    "0035-langgraph-copies-own-special-writes",
    "0036-citus-tasks-by-list",
    "0037-langgraph-chain-reads",
    "0038-citus-reviews-by-review",
    "0039-post-mail-batch",
    "0040-checks-in-values",
    "0041-routed-batches",
    "0042-agent-replay-one-read",
    "0043-citus-no-local-copies",
    "0044-append-idempotency-keys",
    "0045-append-many-idempotency-keys",
    "0046-unsearchable-topics",
    "0047-queue-delays",
    "0048-queue-priorities",
    "0049-post-mail-without-recipients",
    "0050-queue-wakes-while-listened",
    "0051-publish-many-idempotency-keys",
]
LATEST = 51


def _since(migration: str) -> int:
    """How many migrations, from ``migration`` on, a rollback to just before it undoes."""
    return len(ALL) - ALL.index(migration)


def _q(url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def _tables(url: str) -> set[str]:
    rows = _q(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {r[0] for r in rows}


def _indexes(url: str) -> dict[str, str]:
    rows = _q(url, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
    return {r[0]: r[1] for r in rows}


def _version(url: str) -> int:
    return int(_q(url, "SELECT max(schema_version) FROM schema_metadata")[0][0])


def test_fresh_database_gets_seed_schema(ikigai_empty_db_url: str) -> None:
    """Applying to an empty database creates the seed tables, indexes and the latest version."""
    url = ikigai_empty_db_url
    assert migrate.apply(url) == ALL
    assert {"schema_metadata", "sessions", "messages"} <= _tables(url)
    cols = _q(
        url,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = 'messages' ORDER BY ordinal_position",
    )
    assert cols == [
        ("id", "bigint", "NO"),
        ("session_id", "bigint", "NO"),
        ("kind", "text", "NO"),
        ("content", "text", "YES"),
        ("data", "jsonb", "YES"),
        ("created_at", "timestamp with time zone", "NO"),
        ("agent_uuid", "text", "YES"),
        ("search_vector", "tsvector", "YES"),
        ("idempotency_key", "text", "YES"),
    ]
    idx = _indexes(url)
    # 0044: a key is unique within its session; events without one have no entry
    assert idx["messages_idempotency_key_idx"].endswith(
        "(session_id, idempotency_key) WHERE (idempotency_key IS NOT NULL)"
    )
    # 0015: a stored vector under GIN replaced 0006's expression index
    assert idx["idx_messages_search_vector"].endswith("USING gin (search_vector)")
    assert "idx_messages_search" not in idx
    assert idx["idx_messages_kind"].endswith("(kind, id)")
    assert idx["idx_messages_created"].endswith("(created_at, id)")
    assert idx["idx_messages_session"].endswith("(session_id, id)")
    assert "started_at DESC" in idx["idx_sessions_started"]
    assert "WHERE (kind = 'clear'::text)" in idx["idx_messages_session_clear"]
    fks = dict(
        _q(
            url,
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'messages'::regclass AND contype = 'f'",
        )
    )
    assert fks["messages_agent_uuid_fkey"] == "FOREIGN KEY (agent_uuid) REFERENCES agents(uuid)"
    assert fks["messages_agent_session_fkey"] == (
        "FOREIGN KEY (agent_uuid, session_id) REFERENCES agents(uuid, session_id)"
    )
    assert _version(url) == LATEST


def test_second_apply_is_noop(ikigai_empty_db_url: str) -> None:
    """A second apply applies nothing and pending() is empty."""
    migrate.apply(ikigai_empty_db_url)
    assert migrate.apply(ikigai_empty_db_url) == []
    assert migrate.pending(ikigai_empty_db_url) == []


def test_an_up_to_date_apply_does_not_need_yoyo(ikigai_empty_db_url: str) -> None:
    """On a database with every packaged migration applied, apply() decides without importing
    yoyo (a fresh process: what a hook pays); with one missing, it applies it as before."""
    migrate.apply(ikigai_empty_db_url)
    code = (
        "import sys\n"
        "from ikigai_store import migrate\n"
        f"assert migrate.apply({ikigai_empty_db_url!r}) == []\n"
        "print('yoyo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
    migrate.rollback(ikigai_empty_db_url, 1)
    assert migrate.apply(ikigai_empty_db_url) == ALL[-1:]


def test_store_migrate_and_schema_version(ikigai_empty_db_url: str) -> None:
    """Store.migrate() reports what it applied; schema_version() follows."""
    with ik.open(ikigai_empty_db_url, migrate=False) as store:
        assert store.schema_version() == 0
        assert store.pending_migrations() == ALL
        assert store.migrate() == ALL
        assert store.migrate() == []
        assert store.schema_version() == LATEST


def test_an_unmigrated_database_says_to_migrate(ikigai_empty_db_url: str) -> None:
    """A store opened with migrate=False on a database without the schema: the first call's
    error names the missing relation and says how to migrate (not a bare PostgreSQL error)."""
    with ik.open(ikigai_empty_db_url, migrate=False) as store:
        assert store.schema_version() == 0
        with pytest.raises(ik.DatabaseError, match=r"does not exist \(is the database migrated"):
            store.create_session()


def test_status_says_when_the_schema_is_newer_than_the_code(ikigai_empty_db_url: str) -> None:
    """A database a newer ikigai-store migrated: ``status`` says to upgrade, not just
    "pending: none"."""
    from click.testing import CliRunner

    from ikigai_store.cli import cli

    with ik.open(ikigai_empty_db_url) as store:
        assert store.schema_version() == LATEST
    _q(ikigai_empty_db_url, "UPDATE schema_metadata SET schema_version = %s", (LATEST + 1,))
    result = CliRunner().invoke(cli, ["--database", ikigai_empty_db_url, "status"])
    assert result.exit_code == 0, result.output
    assert f"{LATEST + 1} (newer than this ikigai-store's {LATEST}: upgrade it)" in result.stdout


def _yoyo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yoyo", *args, "--batch", "--no-config-file"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_plain_yoyo_apply_agrees(ikigai_empty_db_url: str) -> None:
    """Plain `yoyo apply` applies the same migrations and ours then finds nothing pending."""
    url = ikigai_empty_db_url
    done = _yoyo("apply", "-d", to_yoyo_url(url), str(migrations_dir()))
    assert done.returncode == 0, done.stderr
    assert migrate.pending(url) == []
    assert _version(url) == LATEST
    listed = _yoyo("list", "-d", to_yoyo_url(url), str(migrations_dir()))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("| A |") == len(ALL) or all(m in listed.stdout for m in ALL)


def test_yoyo_after_ours_has_nothing_to_do(ikigai_empty_db_url: str) -> None:
    """After our migrate, `yoyo apply` applies nothing (same bookkeeping table)."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    before = _q(url, "SELECT count(*) FROM _yoyo_migration")[0][0]
    done = _yoyo("apply", "-d", to_yoyo_url(url), str(migrations_dir()))
    assert done.returncode == 0, done.stderr
    assert _q(url, "SELECT count(*) FROM _yoyo_migration")[0][0] == before == len(ALL)


def test_rollback_really_undoes(ikigai_empty_db_url: str) -> None:
    """Rolling back every migration removes our schema; applying again restores it."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    assert migrate.rollback(url, count=len(ALL) - 1) == ALL[:0:-1]
    assert "idx_messages_session_clear" not in _indexes(url)
    assert "agents" not in _tables(url)
    assert _version(url) == 1
    assert migrate.rollback(url) == ["0001-initial-schema"]
    assert not {"schema_metadata", "sessions", "messages"} & _tables(url)
    assert migrate.apply(url) == ALL


def test_post_mail_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back every migration down to 0016 drops post_mail() (all three: one mail,
    0039's batch and 0051's keyed batch) and sets version 15; applying them again restores
    them."""
    url = ikigai_empty_db_url
    exists = "SELECT count(*) FROM pg_proc WHERE proname = 'post_mail'"
    migrate.apply(url)
    assert _q(url, exists)[0][0] == 3
    n = _since("0016-post-mail")
    assert migrate.rollback(url, count=n) == ALL[: -n - 1 : -1]
    assert _q(url, exists)[0][0] == 0
    assert _version(url) == 15
    assert migrate.apply(url) == ALL[-n:]
    assert _q(url, exists)[0][0] == 3
    assert _version(url) == LATEST


def test_watch_and_notify_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back every migration down to 0017 removes 0017's tables, column and triggers,
    and new mail still notifies ikigai_mail; applying them again restores them."""
    url = ikigai_empty_db_url
    added = {"watchers", "lease_waits", "session_listeners"}
    parent = (
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'identities' AND column_name = 'parent_id'"
    )
    migrate.apply(url)
    assert added <= _tables(url) and _q(url, parent)[0][0] == 1
    n = _since("0017-watch-and-notify")
    assert migrate.rollback(url, count=n) == ALL[: -n - 1 : -1]
    assert not added & _tables(url) and _q(url, parent)[0][0] == 0
    assert _version(url) == 16
    triggers = _q(url, "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
    assert ("mail_recipients_notify_insert",) in triggers
    assert not [t for (t,) in triggers if t.startswith(("tasks_notify", "leases_notify"))]
    assert migrate.apply(url) == ALL[-n:]
    assert added <= _tables(url)
    assert _version(url) == LATEST


def test_timeline_controls_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back every migration down to 0018 drops the timeline's partial index and sets
    version 17; applying them again builds the index again."""
    url = ikigai_empty_db_url
    index = (
        "SELECT count(*) FROM pg_indexes WHERE indexname IN "
        "('idx_messages_session_controls', 'idx_messages_session_replay_controls')"
    )
    migrate.apply(url)
    assert _q(url, index)[0][0] == 1
    n = _since("0018-timeline-controls")
    assert migrate.rollback(url, count=n) == ALL[: -n - 1 : -1]
    assert _q(url, index)[0][0] == 0 and _version(url) == 17
    assert migrate.apply(url) == ALL[-n:]
    assert _q(url, index)[0][0] == 1 and _version(url) == LATEST


def test_pop_events_and_session_keys_rollback(ikigai_empty_db_url: str) -> None:
    """0020 lets 'pop' events in and swaps the controls index for one that covers pops; 0021
    adds session_keys. Rolling both back restores 0018's index and kinds (the CHECK is left NOT
    VALID when pops are stored) and drops session_keys; applying them again restores them."""
    url = ikigai_empty_db_url
    indexdef = (
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE indexname LIKE 'idx_messages_session_%controls'"
    )
    migrate.apply(url)
    [(name, definition)] = _q(url, indexdef)
    assert name == "idx_messages_session_replay_controls" and "'pop'" in definition
    assert "session_keys" in _tables(url)
    _q(url, "INSERT INTO sessions (title) VALUES ('t')")
    _q(url, "INSERT INTO messages (session_id, kind) SELECT max(id), 'user' FROM sessions")
    _q(
        url,
        "INSERT INTO messages (session_id, kind, data) SELECT session_id, 'pop', "
        "jsonb_build_object('target_message_id', id) FROM messages",
    )
    n = _since("0020-pop-events")
    assert migrate.rollback(url, count=n)[-2:] == ["0021-session-keys", "0020-pop-events"]
    assert "session_keys" not in _tables(url) and _version(url) == 19
    [(name, definition)] = _q(url, indexdef)
    assert name == "idx_messages_session_controls" and "'pop'" not in definition
    [(valid,)] = _q(
        url, "SELECT convalidated FROM pg_constraint WHERE conname = 'messages_kind_check'"
    )
    assert valid is False
    with pytest.raises(psycopg.errors.CheckViolation):
        _q(url, "INSERT INTO messages (session_id, kind) SELECT max(id), 'pop' FROM sessions")
    assert migrate.apply(url) == ALL[-n:]
    [(valid,)] = _q(
        url, "SELECT convalidated FROM pg_constraint WHERE conname = 'messages_kind_check'"
    )
    assert valid is True and _version(url) == LATEST


C_ERA_SCHEMA = """
CREATE TABLE schema_metadata (schema_version INTEGER PRIMARY KEY);
INSERT INTO schema_metadata VALUES (1);
CREATE TABLE sessions (id BIGSERIAL PRIMARY KEY, started_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    ended_at TIMESTAMPTZ, title TEXT);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE TABLE messages (id BIGSERIAL PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, kind TEXT NOT NULL,
    content TEXT, data JSONB, created_at TIMESTAMPTZ NOT NULL DEFAULT NOW());
CREATE INDEX idx_messages_session ON messages(session_id, created_at);
CREATE INDEX idx_messages_search ON messages USING gin(to_tsvector('english', content));
INSERT INTO sessions (title) VALUES ('from C');
INSERT INTO messages (session_id, kind, content, data) VALUES
    (1, 'clear', NULL, '{}'), (1, 'user', 'hello from C', '{"model": "gpt-4"}'),
    (1, 'mark', 'cp', '{"label": "cp"}'), (1, 'user', 'gone', NULL),
    (1, 'rewind', 'cp', '{"target_message_id": 3}');
"""


def test_adopts_c_era_database(ikigai_empty_db_url: str) -> None:
    """A C-created database at version 1 gets 0001 recorded, the rest applied, data untouched."""
    url = ikigai_empty_db_url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(C_ERA_SCHEMA)
    before = _q(url, "SELECT * FROM messages ORDER BY id")
    assert migrate.pending(url) == ALL[1:]  # what apply will run; pending itself records nothing
    # pending() is read-only: not even yoyo's bookkeeping tables are created
    assert _q(url, "SELECT to_regclass('_yoyo_migration') IS NULL")[0][0]
    assert migrate.apply(url) == ALL[1:]
    assert (
        _q(url, "SELECT id, session_id, kind, content, data, created_at FROM messages ORDER BY id")
        == before
    )
    idx = _indexes(url)
    # the C program's whole-content search index became the bounded-prefix one (0006), then the
    # stored vector's (0015), filled for the adopted rows
    assert idx["idx_messages_search_vector"].endswith("USING gin (search_vector)")
    assert (
        _q(
            url, "SELECT count(*) FROM messages WHERE content IS NOT NULL AND search_vector IS NULL"
        )[0][0]
        == 0
    )
    assert idx["idx_messages_session"].endswith("(session_id, id)")
    assert idx["idx_messages_session_created"].endswith("(session_id, created_at)")
    assert _version(url) == LATEST
    with ik.open(url) as store:
        ctx = store.replay_session(1)
        assert [m.content for m in ctx.messages] == ["hello from C", "cp", "cp"]
        assert store.search("hello")[0].message.content == "hello from C"
    # and rolling 0002 back restores the C index under its original name
    migrate.rollback(url, count=len(ALL) - 1)
    assert _indexes(url)["idx_messages_session"].endswith("(session_id, created_at)")


def test_auto_test_fixture_migration(ikigai_empty_db_url: str) -> None:
    """Seed 001's 999-auto-test (a test fixture) applies after ours and sets version 999."""
    url = ikigai_empty_db_url
    applied = migrate.apply(url, extra_sources=[FIXTURES])
    assert applied == [*ALL, "0999-auto-test"]
    assert "auto_test" in _tables(url)
    assert _version(url) == 999
    assert "0999-auto-test" not in [p.stem for p in migrations_dir().glob("*.sql")]


def test_failing_migration_rolls_back_and_names_file(
    ikigai_empty_db_url: str, tmp_path: Path
) -> None:
    """A failing migration leaves nothing behind and MigrationError names file and PG error."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    (tmp_path / "0998-broken.sql").write_text(
        "-- depends: 0004-messages-agent-uuid\n"
        "CREATE TABLE half_done (id int);\n"
        "UPDATE schema_metadata SET schema_version = 998;\n"
        "SELECT no_such_column FROM sessions;\n"
    )
    with pytest.raises(ik.MigrationError) as info:
        migrate.apply(url, extra_sources=[tmp_path])
    message = str(info.value)
    assert "0998-broken.sql" in message
    assert "no_such_column" in message
    assert "half_done" not in _tables(url)
    assert _version(url) == LATEST
    assert migrate.pending(url, extra_sources=[tmp_path]) == ["0998-broken"]


def test_unreadable_migrations_raise_migration_error(
    ikigai_empty_db_url: str, tmp_path: Path
) -> None:
    """A missing directory or a non-UTF-8 file raises MigrationError (seed ERR_IO)."""
    with pytest.raises(ik.MigrationError, match="cannot read"):
        migrate.apply(ikigai_empty_db_url, extra_sources=[tmp_path / "missing"])
    (tmp_path / "0997-binary.sql").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ik.MigrationError, match=r"0997-binary\.sql"):
        migrate.apply(ikigai_empty_db_url, extra_sources=[tmp_path])
    assert "sessions" not in _tables(ikigai_empty_db_url)


MIGRATE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from ikigai_store import migrate
    print(json.dumps(migrate.apply(sys.argv[1], extra_sources=sys.argv[2:])))
    """
)


@pytest.mark.slow
def test_concurrent_migrators(ikigai_empty_db_url: str) -> None:
    """Four processes migrating one fresh database: all succeed, each migration runs once."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE_SCRIPT, ikigai_empty_db_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [o[1] for o in outputs]
    applied = sorted(o[0].strip() for o in outputs)
    assert applied == sorted(["[]", "[]", "[]", json.dumps(ALL)])
    assert _q(ikigai_empty_db_url, "SELECT count(*) FROM _yoyo_migration")[0][0] == len(ALL)


@pytest.mark.slow
def test_killed_migrator_leaves_no_lock(ikigai_empty_db_url: str, tmp_path: Path) -> None:
    """SIGKILL during a migration: the advisory lock is released and the next run proceeds."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    (tmp_path / "0996-slow.sql").write_text(
        "-- depends: 0004-messages-agent-uuid\nCREATE TABLE slow_one (id int);\n"
        "SELECT pg_sleep(3);\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", MIGRATE_SCRIPT, url, str(tmp_path)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        waiting = _q(
            url,
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%%pg_sleep(3)%%' "
            "AND pid <> pg_backend_pid()",
        )[0][0]
        if waiting:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the migrator never reached its slow migration")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # The next migrator must get the lock (not hang) and apply the slow migration itself.
    assert migrate.apply(url, extra_sources=[tmp_path]) == ["0996-slow"]
    assert "slow_one" in _tables(url)
    assert _q(url, "SELECT count(*) FROM yoyo_lock")[0][0] == 0


C_ERA_AGENTS = """
CREATE TYPE agent_status AS ENUM ('running', 'dead');
CREATE TABLE agents (uuid TEXT PRIMARY KEY, name TEXT,
    parent_uuid TEXT REFERENCES agents(uuid) ON DELETE RESTRICT, fork_message_id BIGINT,
    status agent_status NOT NULL DEFAULT 'running', created_at BIGINT NOT NULL, ended_at BIGINT,
    provider TEXT, model TEXT, thinking_level TEXT);
ALTER TABLE messages ADD COLUMN agent_uuid TEXT REFERENCES agents(uuid);
UPDATE schema_metadata SET schema_version = 9;
INSERT INTO agents (uuid, name, parent_uuid, fork_message_id, status, created_at, ended_at) VALUES
    ('child-of-zero-aaaaaaaa', 'child', 'agent-zero-aaaaaaaaaaa', 3, 'running', 1700000100, NULL),
    ('agent-zero-aaaaaaaaaaa', 'zero', NULL, NULL, 'running', 1700000000, NULL),
    ('dead-grandchild-aaaaaa', NULL, 'child-of-zero-aaaaaaaa', 0, 'dead', 1700000200, 1700000300);
UPDATE messages SET agent_uuid = 'agent-zero-aaaaaaaaaaa';
INSERT INTO messages (session_id, agent_uuid, kind, content) VALUES
    (1, 'child-of-zero-aaaaaaaa', 'user', 'child speaks');
"""


def test_adopts_c_era_agents(ikigai_empty_db_url: str) -> None:
    """A C database at version 9 with its agents table: converted in place, data kept."""
    url = ikigai_empty_db_url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(C_ERA_SCHEMA)
        conn.execute(C_ERA_AGENTS)
    before = _q(url, "SELECT id, agent_uuid, kind, content FROM messages ORDER BY id")
    # 0001 is recorded as applied; the converters (ikigai-adopt: run) run although <= 9.
    assert migrate.apply(url) == ALL[1:]
    assert _q(url, "SELECT id, agent_uuid, kind, content FROM messages ORDER BY id") == before
    assert _version(url) == LATEST
    rows = _q(
        url,
        "SELECT uuid, session_id, fork_message_id, status, created_at = to_timestamp(1700000000),"
        " ended_at IS NOT NULL FROM agents ORDER BY id",
    )
    assert [r[0] for r in rows] == [
        "agent-zero-aaaaaaaaaaa",
        "child-of-zero-aaaaaaaa",
        "dead-grandchild-aaaaaa",
    ]  # parents numbered before children although inserted later
    assert [(r[1], r[2], r[3]) for r in rows] == [
        (1, 0, "running"),
        (1, 3, "running"),
        (1, 0, "dead"),
    ]
    assert rows[0][4] is True and rows[2][5] is True
    assert not _q(url, "SELECT 1 FROM pg_type WHERE typname = 'agent_status'")
    with ik.open(url) as store:
        child = store.get_agent("child-of-zero-aaaaaaaa")
        ctx = store.replay_agent(child.uuid)
        assert [m.content for m in ctx.messages] == ["hello from C", "cp", "child speaks"]
        assert [a.uuid for a in store.running_agents()] == [
            "agent-zero-aaaaaaaaaaa",
            "child-of-zero-aaaaaaaa",
        ]
        new = store.fork_agent(child.uuid)
        assert store.get_agent(new.uuid).fork_message_id == ctx.messages[-1].id
    with pytest.raises(psycopg.errors.CheckViolation), psycopg.connect(url) as conn:
        conn.execute("UPDATE agents SET status = 'zombie'")


def _hang_a_migrator(url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    """Start a migrator that takes the lock for a slow migration, then SIGSTOP it there.
    Only this database's sessions count: another test's hung migrator (pytest -n) sleeps in
    its own."""
    (tmp_path / "0997-hangs.sql").write_text(
        "-- depends: 0004-messages-agent-uuid\nSELECT pg_sleep(30);\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", MIGRATE_SCRIPT, url, str(tmp_path)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sleeping = _q(
            url,
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%%pg_sleep(30)%%' "
            "AND pid <> pg_backend_pid() AND datname = current_database()",
        )[0][0]
        if sleeping:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the migrator never reached its slow migration")
    os.kill(proc.pid, signal.SIGSTOP)
    return proc


@pytest.mark.slow
def test_hung_migrator_does_not_block_up_to_date_opens(
    ikigai_empty_db_url: str, tmp_path: Path
) -> None:
    """With nothing pending, apply and ik.open take no lock: a stopped migrator can't block them."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    proc = _hang_a_migrator(url, tmp_path)
    try:
        assert migrate.apply(url, lock_timeout=600) == []
        with ik.open(url, migration_lock_timeout=600) as store:
            assert store.schema_version() == LATEST
        assert migrate.pending(url, extra_sources=[tmp_path]) == ["0997-hangs"]
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_migration_lock_wait_ends_naming_the_holder(
    ikigai_empty_db_url: str, tmp_path: Path
) -> None:
    """A pending migration waits lock_timeout for a stopped holder, then names its pids."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    proc = _hang_a_migrator(url, tmp_path)
    try:
        holder = _q(
            url,
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (f"ikigai-store migrate pid={proc.pid} host={os.uname().nodename}"[:63],),
        )
        assert len(holder) == 1
        with pytest.raises(ik.MigrationError) as info:
            migrate.apply(url, extra_sources=[tmp_path], lock_timeout=0.5)
        message = str(info.value)
        assert f"server pid {holder[0][0]}" in message
        assert f"pid={proc.pid}" in message
        assert "0997-hangs" not in _applied(url)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    # the killed holder's lock went with its connection: the next migrator proceeds
    _q(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE query LIKE '%%pg_sleep(30)%%' AND pid <> pg_backend_pid()"
        " AND datname = current_database()",
    )
    (tmp_path / "0997-hangs.sql").write_text("-- depends: 0004-messages-agent-uuid\nSELECT 1;\n")
    assert migrate.apply(url, extra_sources=[tmp_path], lock_timeout=30) == ["0997-hangs"]


def _applied(url: str) -> list[str]:
    return [r[0] for r in _q(url, "SELECT migration_id FROM _yoyo_migration")]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "5", True, 10**6])
def test_lock_timeout_is_validated(ikigai_empty_db_url: str, bad: Any) -> None:
    """lock_timeout must be a number of seconds in (0, 86400]."""
    with ik.Store(ikigai_empty_db_url) as store, pytest.raises(ik.InvalidArgument):
        store.migrate(lock_timeout=bad)


def _check_values(url: str, table: str, constraint: str) -> set[str]:
    definition = _q(
        url,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND conname = %s",
        (table, constraint),
    )[0][0]
    return set(re.findall(r"'([^']+)'::text", definition))


def test_python_vocabularies_equal_the_schema_checks(ikigai_empty_db_url: str) -> None:
    """VALID_KINDS and AGENT_STATUSES are exactly the values the database's CHECKs allow."""
    migrate.apply(ikigai_empty_db_url)
    assert _check_values(ikigai_empty_db_url, "messages", "messages_kind_check") == ik.VALID_KINDS
    assert _check_values(ikigai_empty_db_url, "agents", "agents_status_check") == (
        ik.AGENT_STATUSES
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        _q(
            ikigai_empty_db_url,
            "INSERT INTO sessions DEFAULT VALUES; "
            "INSERT INTO messages (session_id, kind) SELECT max(id), 'User' FROM sessions",
        )


def test_mail_unread_row_trigger_rollback(ikigai_empty_db_url: str) -> None:
    """0023 makes mail_recipients' update trigger a row trigger firing only for rows that
    become unread; rolling it back restores 0007's statement trigger, and both notify
    ikigai_mail with the identity's id when a read mail becomes unread again."""
    url = ikigai_empty_db_url
    kind = (
        "SELECT tgtype & 1 FROM pg_trigger "  # bit 0: FOR EACH ROW
        "WHERE tgname = 'mail_recipients_notify_update' AND NOT tgisinternal"
    )

    def notified_when_unread_again() -> list[str]:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO identities (name) VALUES ('a') ON CONFLICT DO NOTHING;"
                "INSERT INTO mail (thread_id, sender_id, recipients, subject, body) "
                "SELECT 't', id, ARRAY['a'], 's', 'b' FROM identities WHERE name = 'a';"
                "INSERT INTO mail_recipients (mail_id, identity_id, state, read_at) "
                "SELECT max(m.id), max(i.id), 'read', now() FROM mail AS m, identities AS i"
            )
            conn.execute("LISTEN ikigai_mail")
            conn.execute("UPDATE mail_recipients SET state = 'unread' WHERE state = 'read'")
            me = conn.execute("SELECT id FROM identities WHERE name = 'a'").fetchone()
            assert me is not None
            heard = [n.payload for n in conn.notifies(timeout=0.5)]
            assert heard == [str(me[0])]
            return heard

    migrate.apply(url)
    assert _q(url, kind) == [(1,)]
    notified_when_unread_again()
    n = _since("0023-mail-unread-row-trigger")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _q(url, kind) == [(0,)] and _version(url) == 22
    notified_when_unread_again()
    assert migrate.apply(url) == ALL[-n:]
    assert _q(url, kind) == [(1,)] and _version(url) == LATEST


def test_hot_paths_rollback(ikigai_empty_db_url: str) -> None:
    """0022 swaps the lease notify triggers for the statements' own pg_notify, computes
    lease_key() without a regular expression (the same values, so leases_exclusion's index
    stays valid) and adds lease_refused(); rolling it back restores 0017's triggers
    and function, and applying it again removes them."""
    url = ikigai_empty_db_url
    triggers = "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'leases_notify_%'"
    column = "SELECT count(*) FROM pg_proc WHERE proname = 'lease_refused'"
    keys = "SELECT lease_key('src/a.py'), lease_key('x'), lease_key(repeat('é', 512))"
    migrate.apply(url)
    new_keys = _q(url, keys)
    assert _q(url, triggers)[0][0] == 0 and _q(url, column)[0][0] == 1
    n = _since("0022-hot-paths")
    assert migrate.rollback(url, count=n)[-1] == "0022-hot-paths"
    assert _q(url, triggers)[0][0] == 3 and _q(url, column)[0][0] == 0
    assert _q(url, keys) == new_keys and _version(url) == 21
    assert migrate.apply(url) == ALL[-n:]
    assert _q(url, triggers)[0][0] == 0 and _q(url, column)[0][0] == 1
    assert _version(url) == LATEST


def test_session_listened_until_rollback(ikigai_empty_db_url: str) -> None:
    """0024 adds sessions.listened_until, filled from the live session_listeners rows;
    rolling it back drops the column, and applying it again fills it again."""
    url = ikigai_empty_db_url
    n = _since("0024-session-listened-until")
    migrate.apply(url)
    assert migrate.rollback(url, count=n)[-1] == "0024-session-listened-until"
    assert _version(url) == 23
    sid = _q(url, "INSERT INTO sessions (title) VALUES ('s') RETURNING id")[0][0]
    _q(url, "INSERT INTO sessions (title) VALUES ('quiet')")
    _q(
        url,
        "INSERT INTO session_listeners VALUES (%s, gen_random_uuid(), '2100-01-01'),"
        " (%s, gen_random_uuid(), '2099-01-01')",
        (sid, sid),
    )
    column = "SELECT count(*) FROM pg_attribute WHERE attrelid = 'sessions'::regclass"
    column += " AND attname = 'listened_until' AND NOT attisdropped"
    assert _q(url, column)[0][0] == 0
    assert migrate.apply(url) == ALL[-n:]
    until = "SELECT title, extract(year FROM listened_until) FROM sessions ORDER BY id"
    assert _q(url, until) == [("s", 2100), ("quiet", None)]
    assert _version(url) == LATEST


def test_queue_hot_path_rollback(ikigai_empty_db_url: str) -> None:
    """0025 adds queue_items.outcome (generated from state: NULL while open, else done or
    dead), moves the open and dead indexes' predicates onto it, drops the lease index and
    0010's notify trigger and lowers the fillfactor, so a claim is a HOT update; every row
    keeps its state. Rolling it back restores 0008/0010's indexes (the same rows in each), the
    trigger and the version; applying it again gives the same outcomes."""
    url = ikigai_empty_db_url
    states = "SELECT mail_id, state, attempts, CAST(token AS text) FROM queue_items ORDER BY 1"
    outcomes = "SELECT state, outcome FROM queue_items ORDER BY mail_id"
    in_index = (
        "SELECT count(*) FROM queue_items WHERE {} "
        "AND topic_id = (SELECT id FROM topics WHERE name = 'jobs')"
    )
    migrate.apply(url)
    with ik.Store(url) as store:
        for name in ("pub", "w"):
            store.identities.register(name)
        store.topics.create("jobs", "queue", max_attempts=1)
        store.topics.subscribe("w", "jobs")
        for k in range(4):
            store.mail.publish("pub", "jobs", f"j{k}", "x")
        store.topics.complete(store.topics.claim("w", "jobs"))  # done
        dead = store.topics.claim("w", "jobs")
        assert dead is not None and store.topics.release(dead) == "dead"
        assert store.topics.claim("w", "jobs") is not None  # claimed; the last one available
    before = _q(url, states)
    assert _q(url, outcomes) == [
        ("done", "done"),
        ("dead", "dead"),
        ("claimed", None),
        ("available", None),
    ]
    assert "queue_items_lease_idx" not in _indexes(url)
    trigger = "SELECT count(*) FROM pg_trigger WHERE tgname = 'queue_items_notify_update'"
    assert _q(url, trigger) == [(0,)]
    assert _q(url, "SELECT reloptions FROM pg_class WHERE relname = 'queue_items'") == [
        (["fillfactor=70"],)
    ]
    n = _since("0025-queue-hot-path")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 24 and _q(url, states) == before
    indexes = _indexes(url)
    assert "state = ANY" in indexes["queue_items_open_idx"]
    assert "state = 'dead'" in indexes["queue_items_dead_idx"]
    assert "state = 'claimed'" in indexes["queue_items_lease_idx"]
    column = "SELECT count(*) FROM information_schema.columns WHERE column_name = 'outcome'"
    assert _q(url, column) == [(0,)]
    assert _q(url, in_index.format("state IN ('available', 'claimed')")) == [(2,)]
    assert _q(url, trigger) == [(1,)]
    assert migrate.apply(url) == ALL[-n:]
    assert _version(url) == LATEST and _q(url, states) == before
    assert [r[1] for r in _q(url, outcomes)] == ["done", "dead", None, None]
    assert _q(url, in_index.format("outcome IS NULL")) == [(2,)]
    assert _q(url, trigger) == [(0,)]


def test_mail_hand_off_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back 0026 makes a pending hand-off unread again, drops mail_waiters and its
    functions, restores 0016's post_mail() (which sends still call) and sets version 25;
    applying it again restores them."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO identities (name) VALUES ('a'), ('b')")
        conn.execute(
            "SELECT post_mail(thread_id => 't', sender_id => 1, recipient_ids => ARRAY[2::bigint],"
            " recipients => ARRAY['b'], subject => 's', body => 'b', priority => 'normal',"
            " metadata => '{}', handed_ids => ARRAY[2::bigint])"
        )
        conn.execute(
            "INSERT INTO mail_waiters (id, identity_id, liveness, expires_at, handed_mail_id,"
            " handed_at) SELECT 7, 2, 1, now() + interval '1 hour', mail_id, state_changed_at"
            " FROM mail_recipients"
        )
    assert _q(url, "SELECT state FROM mail_recipients") == [("read",)]
    n = _since("0026-mail-hand-off")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _q(url, "SELECT state, read_at FROM mail_recipients") == [("unread", None)]
    assert "mail_waiters" not in _tables(url) and _version(url) == 25
    gone = (
        "SELECT count(*) FROM pg_proc"
        " WHERE proname IN ('mail_waiters_reap', 'mail_waiters_drop', 'mail_waiters_take')"
    )
    assert _q(url, gone)[0][0] == 0
    assert _q(url, "SELECT pronargs FROM pg_proc WHERE proname = 'post_mail'") == [(18,)]
    assert migrate.apply(url) == ALL[-n:]
    assert "mail_waiters" in _tables(url) and _version(url) == LATEST
    one_mail = "SELECT pronargs FROM pg_proc WHERE proname = 'post_mail' AND pronargs > 12"
    assert _q(url, one_mail) == [(19,)]  # 0039's and 0051's batch overloads take 11 and 12


def test_topic_sequencer_keeps_offsets_both_ways(ikigai_empty_db_url: str) -> None:
    """Rolling back 0028 sequences what is pending and puts every offset back in
    mail.log_offset (version 27); applying it again moves them to topic_log unchanged, mail
    written under 0027 included, and the next publish continues after them."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    with ik.Store(url, pool_size=1) as store:
        store.identities.register("a")
        store.topics.create("feed")
        first = [store.mail.publish("a", "feed", "s", "b").id for _ in range(2)]
    with psycopg.connect(url, autocommit=True) as conn:  # a publisher that died before sequencing
        pending = conn.execute(
            "SELECT (post_mail(thread_id => 't', sender_id => 1, recipient_ids => '{}',"
            " recipients => '{}', subject => 's', body => 'b', priority => 'normal',"
            " metadata => '{}', topic_id => 1)).id"
        ).fetchone()
        assert pending is not None
        conn.execute("INSERT INTO topic_log (mail_id, topic_id) VALUES (%s, 1)", pending)
    ids = [*first, pending[0]]
    offsets = "SELECT id, log_offset FROM mail WHERE topic_id IS NOT NULL ORDER BY id"
    n = _since("0028-topic-sequencer")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 27 and "topic_log" not in _tables(url)
    assert _q(url, offsets) == [(i, k + 1) for k, i in enumerate(ids)]
    with psycopg.connect(url, autocommit=True) as conn:  # a publish under 0027
        conn.execute("UPDATE topics SET next_offset = 5")
        old = conn.execute(
            "SELECT (post_mail(thread_id => 't', sender_id => 1, recipient_ids => '{}',"
            " recipients => '{}', subject => 's', body => 'b', priority => 'normal',"
            " metadata => '{}', topic_id => 1, log_offset => 4)).id"
        ).fetchone()
        assert old is not None
    ids.append(old[0])
    assert migrate.apply(url) == ALL[-n:]
    assert _version(url) == LATEST
    assert _q(url, "SELECT mail_id, log_offset FROM topic_log ORDER BY mail_id") == [
        (i, k + 1) for k, i in enumerate(ids)
    ]
    assert _q(url, offsets) == [(i, None) for i in ids]
    with ik.Store(url, pool_size=1) as store:
        assert store.mail.publish("a", "feed", "s", "b").log_offset == 5
        assert [m.log_offset for m in store.topics.read("feed")] == [1, 2, 3, 4, 5]


def test_unsearchable_topics_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back 0046 makes mail.search_vector a generated column again (every mail's
    vector computed, an unsearchable topic's too) and drops topics.searchable; applying it
    again keeps those vectors, every topic searchable, and new mail of a topic created
    unsearchable gets none."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    with ik.Store(url, pool_size=1) as store:
        store.identities.register("a")
        store.topics.create("quiet", searchable=False)
        store.mail.publish("a", "quiet", "s", "zebra")
    generated = (
        "SELECT attgenerated FROM pg_attribute "
        "WHERE attrelid = 'mail'::regclass AND attname = 'search_vector'"
    )
    vectors = "SELECT body, search_vector IS NOT NULL FROM mail ORDER BY id"
    assert _q(url, generated) == [("",)]
    assert _q(url, vectors) == [("zebra", False)]
    n = _since("0046-unsearchable-topics")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 45
    assert _q(url, generated) == [("s",)]
    assert _q(url, vectors) == [("zebra", True)]
    assert "mail_search_idx" in _indexes(url)
    assert migrate.apply(url) == ALL[-n:]
    assert _q(url, generated) == [("",)]
    assert _q(url, vectors) == [("zebra", True)]
    with ik.Store(url, pool_size=1) as store:
        assert store.topics.get("quiet").searchable
        store.topics.create("quieter", searchable=False)
        store.mail.publish("a", "quieter", "s", "yak")
        assert [h.mail.body for h in store.mail.search("zebra")] == ["zebra"]
        assert store.mail.search("yak") == []
    assert _q(url, vectors) == [("zebra", True), ("yak", False)]


def _queue_and_worker(store: ik.Store) -> None:
    """Identity "a", subscribed to the queue topic "jobs"."""
    store.identities.register("a")
    store.topics.create("jobs", "queue")
    store.topics.subscribe("a", "jobs")


def test_queue_delays_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back 0047 drops queue_items.available_at (a delayed message is claimable at
    once, version 46); applying it again restores delays."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    with ik.Store(url, pool_size=1) as store:
        _queue_and_worker(store)
        store.mail.publish("a", "jobs", "later", "x", delay=3600)
        assert store.topics.claim("a", "jobs") is None
    n = _since("0047-queue-delays")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 46
    assert _q(
        url,
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'queue_items' AND column_name = 'available_at'",
    ) == [(0,)]
    assert migrate.apply(url) == ALL[-n:]
    with ik.Store(url, pool_size=1) as store:
        claim = store.topics.claim("a", "jobs")
        assert claim is not None and claim.mail.subject == "later"
        assert store.topics.release(claim, delay=3600) == "available"
        assert store.topics.claim("a", "jobs") is None


def test_queue_priorities_rank_existing_work_and_roll_back(ikigai_empty_db_url: str) -> None:
    """Rolling back 0048 drops the rank and restores 0025's index (claims by id); applying it
    again ranks the queue rows by their mail's priority, so claims take the urgent first."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    with ik.Store(url, pool_size=1) as store:
        _queue_and_worker(store)
        low = store.mail.publish("a", "jobs", "low", "x", priority="low").id
        normal = store.mail.publish("a", "jobs", "normal", "x").id
        urgent = store.mail.publish("a", "jobs", "urgent", "x", priority="urgent").id
    n = _since("0048-queue-priorities")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 47
    assert _indexes(url)["queue_items_open_idx"].endswith(
        "(topic_id, mail_id) WHERE (outcome IS NULL)"
    )
    assert migrate.apply(url) == ALL[-n:]
    assert _indexes(url)["queue_items_open_idx"].endswith(
        "(topic_id, priority_rank, mail_id) WHERE (outcome IS NULL)"
    )
    assert _q(url, "SELECT mail_id, priority_rank FROM queue_items ORDER BY mail_id") == [
        (low, 2),
        (normal, 1),
        (urgent, 0),
    ]
    with ik.Store(url, pool_size=1) as store:
        taken = [store.topics.claim("a", "jobs") for _ in range(3)]
        assert [c.mail.id for c in taken if c is not None] == [urgent, normal, low]


def test_post_mail_without_recipients_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back 0049 restores 0033's post_mail() (its recipients' INSERT runs for every
    mail, version 48); both versions write the same rows: a queue mail without recipient rows,
    a broadcast mail with one per subscriber but the sender."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    skips = (
        "SELECT count(*) FROM pg_proc WHERE proname = 'post_mail' AND pronargs = 19 "
        "AND prosrc LIKE '%cardinality(post_mail.recipient_ids) > 0 THEN%'"
    )
    rows = (
        "SELECT m.subject, array_agg(r.identity_id ORDER BY r.identity_id) "
        "FILTER (WHERE r.identity_id IS NOT NULL) "
        "FROM mail AS m LEFT JOIN mail_recipients AS r ON r.mail_id = m.id "
        "GROUP BY m.id, m.subject ORDER BY m.id"
    )

    def write(store: ik.Store, tag: str) -> None:
        store.mail.publish("a", "jobs", f"job {tag}", "x")
        store.mail.publish("a", "news", f"news {tag}", "x")
        store.mail.send("a", ["b"], f"mail {tag}", "x")

    with ik.Store(url, pool_size=1) as store:
        _queue_and_worker(store)
        store.identities.register("b")
        for who in ("a", "b"):
            store.topics.subscribe(who, "news")
        write(store, "49")
    assert _q(url, skips) == [(1,)]
    n = _since("0049-post-mail-without-recipients")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 48 and _q(url, skips) == [(0,)]
    with ik.Store(url, pool_size=1) as store:
        write(store, "48")
    assert migrate.apply(url) == ALL[-n:]
    assert _version(url) == LATEST and _q(url, skips) == [(1,)]
    b = _q(url, "SELECT id FROM identities WHERE name = 'b'")[0][0]
    assert _q(url, rows) == [
        (f"{kind} {v}", None if kind == "job" else [b])
        for v in ("49", "48")
        for kind in ("job", "news", "mail")
    ]


def test_queue_wakes_while_listened_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back 0050 drops topics.listened_until and ikigai_queue_listen (version 49):
    every queue publish notifies again; applying it again, a publish to a topic nobody
    listens to notifies nothing, one to a registered topic does."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    with ik.Store(url, pool_size=1) as store:
        _queue_and_worker(store)
        topic = store.topics.get("jobs").id

    def heard(publish: str) -> list[str]:
        with ik.Store(url, pool_size=1) as store, psycopg.connect(url, autocommit=True) as ear:
            ear.execute("LISTEN ikigai_queue")
            store.mail.publish("a", "jobs", publish, "x")
            return [n.payload for n in ear.notifies(timeout=0.3)]

    assert heard("unheard") == []
    n = _since("0050-queue-wakes-while-listened")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 49
    assert _q(url, "SELECT count(*) FROM pg_proc WHERE proname = 'ikigai_queue_listen'") == [(0,)]
    assert heard("heard under 49") == [str(topic)]
    assert migrate.apply(url) == ALL[-n:]
    assert heard("unheard again") == []
    assert _q(url, "SELECT ikigai_queue_listen(%s, 60, 1)", (topic,)) == [(True,)]
    assert heard("listened") == [str(topic)]


def test_publish_many_idempotency_keys_rollback(ikigai_empty_db_url: str) -> None:
    """Rolling back 0051 drops the keyed batch overload of post_mail() and keeps 0039's
    (version 50); applying it again, a keyed batch repeated is stored once."""
    url = ikigai_empty_db_url
    migrate.apply(url)
    keyed = (
        "SELECT count(*) FROM pg_proc WHERE proname = 'post_mail' AND pronargs = 12"
        " AND proargtypes[11] = 'text'::regtype"
    )
    batch = (
        "SELECT count(*) FROM pg_proc WHERE proname = 'post_mail' AND pronargs = 11"
        " AND proargtypes[0] = 'text[]'::regtype"
    )
    assert _q(url, keyed) == _q(url, batch) == [(1,)]
    n = _since("0051-publish-many-idempotency-keys")
    assert migrate.rollback(url, count=n) == ALL[-n:][::-1]
    assert _version(url) == 50
    assert _q(url, keyed) == [(0,)]
    assert _q(url, batch) == [(1,)]
    assert migrate.apply(url) == ALL[-n:]
    with ik.Store(url, pool_size=1) as store:
        _queue_and_worker(store)
        first = store.mail.publish_many("a", "jobs", ["x", "y"], idempotency_key="b1")
        again = store.mail.publish_many("a", "jobs", ["x", "y"], idempotency_key="b1")
        assert [m.id for m in again] == [m.id for m in first]
        assert [m.log_offset for m in store.topics.read("jobs")] == [1, 2]
