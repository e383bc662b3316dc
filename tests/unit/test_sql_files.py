"""Conventions of queries/ and migrations/ that the code relies on (no database)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import aiosql

import ikigai_store as ik
from ikigai_store import sql as sqlmod
from ikigai_store._resources import migrations_dir, queries_dir
from ikigai_store.migrate import migration_number

PACKAGE = Path(ik.__file__).resolve().parent


def test_query_names_are_unique(tmp_path: Path) -> None:
    """No query name is defined twice, and load_queries refuses a duplicate."""
    assert all(len(files) == 1 for files in sqlmod.query_names(queries_dir()).values())
    (tmp_path / "a.sql").write_text("-- name: same()\nSELECT 1;\n")
    (tmp_path / "b.sql").write_text("-- name: same()\nSELECT 2;\n")
    try:
        sqlmod.load_queries(directory=tmp_path)
    except RuntimeError as exc:
        assert "same" in str(exc)
    else:
        raise AssertionError("duplicate query names were accepted")


def test_every_query_declares_parameters_and_docstring() -> None:
    """Each named query declares its parameters (aiosql 15) and has a comment docstring."""
    for path in queries_dir().glob("*.sql"):
        blocks = re.split(r"(?m)^-- name: ", path.read_text())[1:]
        for block in blocks:
            header, *rest = block.splitlines()
            assert re.match(r"^\w+\([\w, ]*\)[$^#!*<]*$", header), f"{path.name}: {header}"
            assert rest and rest[0].startswith("-- "), f"{path.name}: {header} has no docstring"
            declared = set(re.findall(r"\w+", header.split("(", 1)[1]))
            used = set(re.findall(r"(?<![:\w]):(\w+)", "\n".join(rest)))
            assert used <= declared, f"{path.name}: {header} uses undeclared {used - declared}"


def test_every_parameter_is_bound() -> None:
    """Every :name of a loaded PostgreSQL query became a bound parameter: aiosql skips what it
    takes for a string literal, so an odd apostrophe in a comment ("-- the topic's") hid the
    rest of a statement's parameters, which then reached the server as ":name"."""
    for name in postgres_query_names():
        sql = getattr(ik.queries, name).sql
        code = re.sub(r"--[^\n]*", "", sql)  # comments, then literals and dollar-quoted text
        code = re.sub(r"\$(\w*)\$.*?\$\1\$", "", re.sub(r"'(?:[^']|'')*'", "''", code), flags=re.S)
        assert re.findall(r"(?<![:\w]):[A-Za-z_]\w*", code) == [], name


def postgres_query_names() -> list[str]:
    """The names of queries/ that run on PostgreSQL (not the outbox's SQLite ones)."""
    names = sqlmod.query_names(queries_dir())
    return [n for n, files in names.items() if not set(files) & set(sqlmod.LOCAL_FILES)]


def test_loaded_queries_are_public() -> None:
    """ik.queries exposes every named PostgreSQL query of queries/, and no SQLite one."""
    for name in postgres_query_names():
        assert callable(getattr(ik.queries, name))
    local = set(sqlmod.query_names(queries_dir())) - set(postgres_query_names())
    assert local == set(sqlmod.outbox_queries.available_queries) - {f"{n}_cursor" for n in local}
    assert not local & set(ik.queries.available_queries)


def test_fast_load_equals_aiosqls_own() -> None:
    """The loader that skips aiosql's /* */ scan gives every query the same SQL, signature,
    docstring and operation as aiosql's own loader, on both adapters and the outbox file."""
    for adapter in ("psycopg", "apsycopg"):
        fast = sqlmod.load_queries(adapter)
        slow = sqlmod.load_queries(adapter, fast=False)
        assert sorted(fast.available_queries) == sorted(slow.available_queries)
        for name in slow.available_queries:
            a, b = getattr(fast, name), getattr(slow, name)
            assert (a.sql, a.__doc__, a.operation) == (b.sql, b.__doc__, b.operation), name
            assert inspect.signature(a) == inspect.signature(b), name
    outbox = aiosql.from_path(queries_dir() / "outbox.sql", "sqlite3")
    for name in outbox.available_queries:
        assert getattr(sqlmod.outbox_queries, name).sql == getattr(outbox, name).sql, name


def test_fast_load_falls_back_on_block_comments(tmp_path: Path) -> None:
    """Text with a /* */ comment goes through aiosql's own scan (which removes it)."""
    (tmp_path / "a.sql").write_text("-- name: one()^\n-- One.\nSELECT /* gone */ 1 AS x;\n")
    assert "gone" not in sqlmod.load_queries(directory=tmp_path).one.sql


SQL_WORDS = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|TRUNCATE|WITH)\s", re.M)


def test_no_sql_strings_in_python_modules() -> None:
    """Package modules hold no SQL string (identifier DDL in pool.py is the one exception)."""
    allowed = ("CREATE DATABASE {}", "DROP DATABASE IF EXISTS {} WITH (FORCE)")
    offenders = []
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL_WORDS.match(node.value)
                and not (path.name == "pool.py" and node.value in allowed)
            ):
                offenders.append(f"{path.name}: {node.value[:40]!r}")
    assert offenders == []


def test_migration_files_follow_the_rules() -> None:
    """Zero-padded names, a -- depends: line, a rollback file, and the version they set."""
    files = sorted(
        p for p in migrations_dir().glob("*.sql") if not p.name.endswith(".rollback.sql")
    )
    assert files, "no migrations found"
    for path in files:
        assert re.fullmatch(r"\d{4}-[a-z0-9-]+\.sql", path.name), path.name
        text = path.read_text()
        assert re.search(r"(?m)^-- depends:", text), f"{path.name} lacks -- depends:"
        assert path.with_name(path.stem + ".rollback.sql").exists(), f"{path.name} has no rollback"
        number = migration_number(path.stem)
        assert re.search(rf"schema_version = {number}\b", text) or (
            number == 1 and "SELECT 1 WHERE NOT EXISTS" in text
        ), f"{path.name} does not record version {number}"


def test_packaged_directories_match_checkout() -> None:
    """The SQL directories the package loads hold the same files as the top-level ones."""
    checkout = Path(__file__).resolve().parents[2]
    for name, found in (("queries", queries_dir()), ("migrations", migrations_dir())):
        top = checkout / name
        if top.is_dir():
            assert sorted(p.name for p in found.iterdir()) == sorted(p.name for p in top.iterdir())


def test_lineage_walk_is_written_once() -> None:
    """The recursive lineage walk exists once (agent_replay_ranges, as the newest migration
    defining it wrote it: 0030; 0005's is replaced); the replay queries use it."""
    assert not any("RECURSIVE walk" in p.read_text() for p in queries_dir().glob("*.sql"))
    defining = sorted(
        p
        for p in migrations_dir().glob("*.sql")
        if not p.name.endswith(".rollback.sql") and "RECURSIVE walk" in p.read_text()
    )
    newest = defining[-1].read_text()
    assert newest.count("RECURSIVE walk") == 1
    assert "FROM agent_replay_ranges(leaf_uuid)" in newest  # agent_replay_events uses it
    agents = (queries_dir() / "agents.sql").read_text()
    for name, call in (
        ("replay_ranges", "FROM agent_replay_ranges(:agent_uuid)"),
        ("replay_agent_events", "FROM agent_replay_events(:agent_uuid)"),
    ):
        block = agents.split(f"-- name: {name}(", 1)[1].split("-- name:", 1)[0]
        assert call in block, name


def test_queries_load_in_both_adapters_alike() -> None:
    """No $ or <! query (the sync and async adapters differ on those); both load every name."""
    for path in queries_dir().glob("*.sql"):
        for header in re.findall(r"(?m)^-- name: (.*)$", path.read_text()):
            assert not header.endswith(("$", "<!")), f"{path.name}: {header}"
    for name in postgres_query_names():
        assert callable(getattr(ik.aqueries, name)), name


CALL = re.compile(r"""\b(?:one|many|events|statement)\(\s*"(\w+)\"""")


def test_every_query_an_operation_calls_exists() -> None:
    """The query names the area modules yield exist (a typo would fail only on its rare path)."""
    names = set(sqlmod.query_names(queries_dir()))
    called = {
        (path.name, name)
        for path in PACKAGE.glob("*.py")
        for name in CALL.findall(path.read_text())
    }
    assert called, "no operation calls found"
    assert {c for c in called if c[1] not in names} == set()


def test_mail_is_written_once() -> None:
    """Mail and recipient rows are inserted in one place, post_mail (migration 0016), which the
    statements that write mail call (issue 18: they had each copied its INSERTs)."""
    texts = {p.name: p.read_text() for p in queries_dir().glob("*.sql")}
    insert = re.compile(r"INSERT\s+INTO\s+(mail|mail_recipients)\b", re.I)
    assert [name for name, text in texts.items() if insert.search(text)] == []
    migrations = {p.name: p.read_text() for p in migrations_dir().glob("*.sql")}
    # Only the migrations (or rollbacks) that define post_mail write mail, once each table:
    # 0016, and the hand-off's redefinition (0026) and its rollback's restoring of 0016's,
    # 0033's PL/pgSQL one (and 0033's rollback), 0039's batch overload, 0049's (and its
    # rollback's restoring of 0033's), and 0051's keyed batch overload.
    writers = {n: len(insert.findall(t)) for n, t in migrations.items() if insert.search(t)}
    # 0051's keyed batch overload inserts its first mail alone (whether its key is taken
    # decides whether the rest is written), then the rest, then the copies: three.
    assert writers and all(k == (3 if n.startswith("0051-") else 2) for n, k in writers.items())
    assert "0051-publish-many-idempotency-keys.sql" in writers
    assert all(re.search(r"FUNCTION post_mail\(", migrations[n]) for n in writers)
    callers = {
        block.split("(", 1)[0]
        for text in texts.values()
        for block in re.split(r"(?m)^-- name: ", text)[1:]
        if "post_mail(" in block
    }
    assert callers == {
        "send_mail",
        "publish_mail",
        "publish_mails",
        "review_fire",
        "plan_submit",
        "plan_decide",
        "plan_resubmit",
    }
    # review_record_iteration calls it through ikigai_review_record_iteration (migration 0038).
    reviews = migrations["0038-citus-reviews-by-review.sql"]
    assert "ikigai_review_record_iteration(" in texts["reviews.sql"]
    assert "PERFORM post_mail(" in reviews.split("FUNCTION ikigai_review_record_iteration(")[1]


def test_packaged_hashes_are_yoyos() -> None:
    """migrate's yoyo-free check of an up-to-date schema hashes exactly the migrations yoyo
    reads (so skipping yoyo when all are applied decides as yoyo would)."""
    from yoyo import read_migrations

    from ikigai_store import migrate

    assert migrate._packaged_hashes() == {m.hash for m in read_migrations(str(migrations_dir()))}
