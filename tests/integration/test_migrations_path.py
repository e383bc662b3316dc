"""`ikigai-store migrations-path` and the plain-yoyo commands of docs/how-to/migrate.md, run from
outside a checkout.

yoyo reads the migrations from a directory given on its command line; a relative `migrations`
exists only in a checkout (elsewhere yoyo silently applies nothing and exits 0). These tests run
the guide's commands through a shell, from an empty working directory, with the installed
`ikigai-store` and `yoyo` on PATH and one `DATABASE_URL` in yoyo's spelling for both tools.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import ikigai_store as ik
from ikigai_store._resources import migrations_dir
from ikigai_store.cli import cli
from ikigai_store.config import to_yoyo_url

pytestmark = pytest.mark.db

ALL = sorted(
    p.name.removesuffix(".sql")
    for p in migrations_dir().glob("*.sql")
    if not p.name.endswith(".rollback.sql")
)
TABLES = ("sessions", "messages", "agents", "schema_metadata")

SOURCES = '-d "$DATABASE_URL" "$(ikigai-store migrations-path)"'
APPLY = f"yoyo apply --batch {SOURCES}"
ROLLBACK_ALL = f"yoyo rollback --batch --all {SOURCES}"


def shell(command: str, cwd: Path, database_url: str) -> str:
    """Run ``command`` with bash in ``cwd``: this interpreter's scripts first on PATH, only
    ``DATABASE_URL`` configured. Assert it succeeded; return its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("IKIGAI_DATABASE_URL", "PGDATABASE")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DATABASE_URL"] = database_url
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass('public.' || t) IS NOT NULL",
            (list(TABLES),),
        )
        return {r[0] for r in rows}


def applied(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('_yoyo_migration') IS NULL").fetchone() == (True,):
            return []
        rows = conn.execute("SELECT migration_id FROM _yoyo_migration ORDER BY migration_id")
        return [r[0] for r in rows]


def test_migrations_path_prints_the_packaged_directory() -> None:
    """`migrations-path` prints the migrations directory the package applies, without
    connecting to any database (the URL given points nowhere)."""
    result = CliRunner().invoke(
        cli, ["--database", "postgresql://u@127.0.0.1:1/x", "migrations-path"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{migrations_dir()}\n"
    assert Path(result.stdout.strip()).is_absolute()
    assert {f"{m}.sql" for m in ALL} <= {p.name for p in migrations_dir().iterdir()}


@pytest.mark.slow
def test_readme_yoyo_commands_outside_a_checkout(ikigai_empty_db_url: str, tmp_path: Path) -> None:
    """From an empty directory, the guide's `yoyo apply` creates the whole schema, our CLI
    (same DATABASE_URL) then finds nothing pending, `--revision` rolls back one migration and
    its dependants, and `rollback --all` removes the schema."""
    url = ikigai_empty_db_url
    yoyo_url = to_yoyo_url(url)
    assert yoyo_url.startswith("postgresql+psycopg://")
    assert tables(url) == set()

    shell(APPLY, tmp_path, yoyo_url)
    assert tables(url) == set(TABLES)
    assert applied(url) == ALL
    assert shell("ikigai-store migrate", tmp_path, yoyo_url).strip() == "up to date"
    with ik.open(url, migrate=False) as store:
        assert store.schema_version() == int(ALL[-1][:4])

    shell(f"yoyo rollback --batch --revision {ALL[-1][:4]} {SOURCES}", tmp_path, yoyo_url)
    assert applied(url) == ALL[:-1]
    status = shell("ikigai-store status", tmp_path, yoyo_url)
    assert re.search(rf"^pending:\s+{ALL[-1]}$", status, re.MULTILINE), status

    shell(ROLLBACK_ALL, tmp_path, yoyo_url)
    assert tables(url) == set()
    assert applied(url) == []
    assert list(tmp_path.iterdir()) == []  # yoyo wrote no yoyo.ini or anything else here
