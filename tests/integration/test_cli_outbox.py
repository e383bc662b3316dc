"""The CLI when the database cannot be reached: ``mail send``, ``mail reply`` and ``topic
publish`` queue in the outbox and say "queued (offline)"; the next command that connects
delivers them first; ``outbox list|drain|clear|stats``. Each test has its own outbox file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import ikigai_store as ik
from ikigai_store.cli import cli

pytestmark = pytest.mark.db

#: Nothing listens there: every connection is refused at once.
OFFLINE = "postgresql://nobody@127.0.0.1:9/nothing"


def run(db: str, box: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["--database", db, "--outbox", str(box), *args], catch_exceptions=False
    )


def ok(db: str, box: Path, *args: str) -> Result:
    result = run(db, box, *args)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def box(tmp_path: Path) -> Path:
    return tmp_path / "outbox.sqlite3"


@pytest.fixture
def names(ikigai_db_url: str) -> tuple[str, str]:
    """Two fresh identities, committed."""
    pair = (f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}")
    with ik.open(ikigai_db_url) as store:
        for name in pair:
            store.identities.register(name)
    return pair


def test_offline_send_is_queued_then_delivered_by_the_next_command(
    ikigai_db_url: str, box: Path, names: tuple[str, str]
) -> None:
    ann, bob = names
    result = ok(OFFLINE, box, "mail", "send", "--from", ann, "--to", bob, "-s", "hi", "body")
    first = result.stdout.splitlines()[0]
    assert first.startswith("queued (offline): ")
    key = first.split(": ", 1)[1]
    assert "outbox drain" in result.stderr
    listed = json.loads(ok(OFFLINE, box, "outbox", "list", "--json").stdout)
    assert [(o["idempotency_key"], o["operation"], o["status"]) for o in listed] == [
        (key, "send", "pending")
    ]
    assert "hi" in ok(OFFLINE, box, "outbox", "list").stdout
    result = ok(ikigai_db_url, box, "mail", "inbox", bob, "--json")
    assert "outbox: 1 delivered" in result.stderr
    [item] = json.loads(result.stdout)["items"]
    assert (item["mail"]["subject"], item["mail"]["idempotency_key"]) == ("hi", key)
    assert ok(OFFLINE, box, "outbox", "list").stdout.strip() == "nothing queued"
    stats = json.loads(ok(OFFLINE, box, "outbox", "stats", "--json").stdout)
    assert (stats["pending"], stats["delivered"], stats["path"]) == (0, 1, str(box))


def test_offline_reply_and_publish_are_queued_in_order(
    ikigai_db_url: str, box: Path, names: tuple[str, str]
) -> None:
    ann, bob = names
    with ik.open(ikigai_db_url) as store:
        mail = store.mail.send(ann, [bob], "plan", "go")
        topic = f"t-{uuid.uuid4().hex[:8]}"
        store.topics.create(topic)
    queued = json.loads(
        ok(OFFLINE, box, "mail", "reply", str(mail.id), "ok", "--from", bob, "--json").stdout
    )
    assert queued["queued"] is True and queued["operation"] == "reply"
    out = ok(OFFLINE, box, "topic", "publish", topic, "news", "--from", ann).stdout
    assert out.startswith("queued (offline): ")
    report = json.loads(ok(ikigai_db_url, box, "outbox", "drain", "--json").stdout)
    assert report == {"delivered": 2, "failed": 0, "expired": 0, "pending": 0}
    with ik.open(ikigai_db_url) as store:
        [reply] = [m for m in store.mail.thread(mail.thread_id) if m.parent_id == mail.id]
        assert reply.idempotency_key == queued["idempotency_key"]
        [published] = store.topics.read(topic)
        assert published.body == "news" and published.log_offset == 1


def test_offline_send_with_bad_arguments_is_an_error_and_queues_nothing(
    box: Path,
) -> None:
    result = run(OFFLINE, box, "mail", "send", "--from", "-bad", "--to", "x", "body")
    assert result.exit_code == 1 and result.stderr.startswith("Error: ")
    assert not box.exists()


def test_drain_reports_refusals_and_clear_forgets(
    ikigai_db_url: str, box: Path, names: tuple[str, str]
) -> None:
    ann, _ = names
    ok(OFFLINE, box, "mail", "send", "--from", ann, "--to", "nobody-here", "x")
    ok(OFFLINE, box, "mail", "send", "--from", ann, "--to", ann, "self")
    out = ok(ikigai_db_url, box, "outbox", "drain").stdout
    assert out.strip() == "1 delivered, 1 failed, 0 expired, 0 still queued"
    listed: list[dict[str, Any]] = json.loads(
        ok(OFFLINE, box, "outbox", "list", "--all", "--json").stdout
    )
    assert [o["status"] for o in listed] == ["failed", "delivered"]
    assert "nobody-here" in listed[0]["last_error"]
    assert "failed" in ok(OFFLINE, box, "outbox", "list", "--all").stdout
    ok(OFFLINE, box, "mail", "send", "--from", ann, "--to", ann, "waiting")
    assert ok(OFFLINE, box, "outbox", "clear").stdout.strip() == "2 operations cleared"
    assert ok(OFFLINE, box, "outbox", "clear", "--all").stdout.strip() == "1 operation cleared"
    assert ok(OFFLINE, box, "outbox", "list", "--all").stdout.strip() == "the outbox is empty"


def test_outbox_commands_work_without_a_file(box: Path) -> None:
    assert ok(OFFLINE, box, "outbox", "list").stdout.strip() == "nothing queued"
    assert "pending    0" in ok(OFFLINE, box, "outbox", "stats").stdout
    assert not box.exists()
    result = run(OFFLINE, box, "outbox", "drain")
    assert result.exit_code == 1 and "cannot connect" in result.stderr


def _own_outbox(tmp_path: Path, db: str, *args: str) -> Result:
    """The CLI with no ``--outbox`` nor ``IKIGAI_OUTBOX``: each database's own file."""
    return CliRunner().invoke(
        cli,
        ["--database", db, *args],
        env={"IKIGAI_OUTBOX": None, "XDG_STATE_HOME": str(tmp_path)},
        catch_exceptions=False,
    )


def test_mail_queued_for_one_database_is_never_delivered_into_another(
    ikigai_db_url: str, tmp_path: Path, names: tuple[str, str]
) -> None:
    """Each database has its own outbox file: mail queued while one was unreachable waits for
    it, and a command on another database neither delivers nor lists it."""
    ann, bob = names
    queued = _own_outbox(tmp_path, OFFLINE, "mail", "send", "--from", ann, "--to", bob, "hi")
    assert queued.exit_code == 0 and queued.stdout.startswith("queued (offline): ")
    elsewhere = _own_outbox(tmp_path, ikigai_db_url, "mail", "inbox", bob, "--json")
    assert elsewhere.exit_code == 0 and "outbox:" not in elsewhere.stderr
    assert json.loads(elsewhere.stdout)["items"] == []
    listed = _own_outbox(tmp_path, ikigai_db_url, "outbox", "list")
    assert listed.stdout.strip() == "nothing queued"
    waiting = json.loads(_own_outbox(tmp_path, OFFLINE, "outbox", "stats", "--json").stdout)
    assert waiting["pending"] == 1
    assert Path(waiting["path"]).parent == tmp_path / "ikigai_store"
    assert Path(waiting["path"]).name.startswith("outbox-")


def test_a_legacy_shared_outbox_is_named_not_delivered(
    ikigai_db_url: str, tmp_path: Path, names: tuple[str, str]
) -> None:
    """Mail an earlier version queued in the one shared file stays there; commands say where."""
    ann, bob = names
    legacy = tmp_path / "ikigai_store" / "outbox.sqlite3"
    ik.Outbox(legacy).enqueue("send", {"sender": ann, "to": [bob], "subject": "old", "body": "b"})
    result = _own_outbox(tmp_path, ikigai_db_url, "mail", "inbox", bob, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["items"] == []
    assert f"1 operation(s) wait in {legacy}" in result.stderr
    assert "outbox drain" in result.stderr


def test_a_database_that_refuses_the_connection_is_an_error_not_an_outage(
    ikigai_db_url: str, tmp_path: Path, names: tuple[str, str]
) -> None:
    """No such database (or a wrong password): ``Error:``, exit 1, nothing queued."""
    ann, bob = names
    parts = conninfo_to_dict(ikigai_db_url)
    missing = make_conninfo(**{**parts, "dbname": f"no_such_db_{uuid.uuid4().hex[:8]}"})
    result = _own_outbox(tmp_path, missing, "mail", "send", "--from", ann, "--to", bob, "hi")
    assert result.exit_code == 1 and "does not exist" in result.stderr, result.output
    assert "queued" not in result.output
    assert not list((tmp_path / "ikigai_store").glob("outbox-*"))
