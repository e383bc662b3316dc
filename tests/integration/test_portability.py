"""Export, import and retention of sessions, against real databases.

The property test builds random histories (agents forking at random points, marks, rewinds
to live and stale marks, clears, kills) in one database, exports them, imports them into a
second database, and checks that the session and every agent replay to the same contents,
up to the id mapping. The other tests pin the file format's refusals (nothing written), the
--once record, retention, and the CLI.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ikigai_store as ik
from ikigai_store import migrate
from ikigai_store.testing import drop_test_database, fresh_database, test_database_name

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def other_url(request: pytest.FixtureRequest, ikigai_server_url: str) -> Iterator[str]:
    """A second migrated database: where the imports go. Its ids start far from the first
    one's, so an id left unmapped by an import cannot pass for a mapped one."""
    name = test_database_name(request.path, "_other")
    url = fresh_database(ikigai_server_url, name)
    migrate.apply(url)
    with ik.Store(url, pool_size=1) as store, store._connection() as conn:
        conn.execute("SELECT setval('messages_id_seq', 1000000), setval('sessions_id_seq', 5000)")
    yield url
    drop_test_database(ikigai_server_url, name)


@pytest.fixture(scope="module")
def other(other_url: str) -> Iterator[ik.Store]:
    store = ik.Store(other_url, pool_size=2)
    yield store
    store.close()


def _shape(ctx: ik.ReplayContext, ids: dict[int, int]) -> list[Any]:
    """A replayed context with event ids mapped (``ids``: old id → its position), so two
    copies of a session compare equal."""
    return (
        [(ids[m.id], m.kind, m.content, _data(m.data, ids)) for m in ctx.messages]
        + [("marks", [(ids[k.message_id], k.label, k.context_idx) for k in ctx.marks])]
        + [("skipped", [ids[s] for s in ctx.skipped])]
    )


def _data(data: Any, ids: dict[int, int]) -> Any:
    if isinstance(data, dict) and isinstance(data.get("target_message_id"), int):
        target = data["target_message_id"]
        return {**data, "target_message_id": ("event", ids.get(target, target))}
    return data


def _positions(store: ik.Store, session_id: int) -> dict[int, int]:
    return {m.id: i for i, m in enumerate(store.messages(session_id))}


def _same(a: ik.Store, sid_a: int, b: ik.Store, sid_b: int, agents: dict[str, str]) -> None:
    """Session ``sid_a`` of ``a`` and ``sid_b`` of ``b`` hold the same events and replay the
    same, for the session and for each agent (``agents``: a's uuid → b's)."""
    pa, pb = _positions(a, sid_a), _positions(b, sid_b)
    ea, eb = a.messages(sid_a), b.messages(sid_b)
    assert [(e.kind, e.content, _data(e.data, pa), e.created_at) for e in ea] == [
        (e.kind, e.content, _data(e.data, pb), e.created_at) for e in eb
    ]
    assert [agents.get(e.agent_uuid or "", e.agent_uuid) for e in ea] == [e.agent_uuid for e in eb]
    assert _shape(a.replay_session(sid_a), pa) == _shape(b.replay_session(sid_b), pb)
    assert set(agents) == {x.uuid for x in _agents(a, sid_a)}
    for old, new in agents.items():
        x, y = a.get_agent(old), b.get_agent(new)
        assert (x.name, x.status, x.idle, x.model, x.created_at, x.ended_at) == (
            y.name,
            y.status,
            y.idle,
            y.model,
            y.created_at,
            y.ended_at,
        )
        assert agents.get(x.parent_uuid or "") == y.parent_uuid
        assert pa.get(x.fork_message_id, x.fork_message_id) == pb.get(
            y.fork_message_id, y.fork_message_id
        )
        assert _shape(a.replay_agent(old), pa) == _shape(b.replay_agent(new), pb)


def _agents(store: ik.Store, session_id: int) -> list[ik.Agent]:
    """Every agent of the session, dead ones included."""
    with store._connection() as conn:
        rows = conn.execute("SELECT uuid FROM agents WHERE session_id = %s", (session_id,))
        return [store.get_agent(row["uuid"]) for row in rows.fetchall()]


steps = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "user",
                "assistant",
                "mark",
                "mark",
                "rewind",
                "rewind",
                "stale",
                "pop",
                "clear",
                "fork",
                "fork",
                "kill",
            ]
        ),
        st.integers(0, 7),
        st.text(max_size=12).filter(lambda t: "\x00" not in t),
    ),
    min_size=3,
    max_size=40,
)


def _history(store: ik.Store, program: list[tuple[str, int, str]]) -> int:
    """Run ``program`` on a new session: each step on the agent picked by its integer (or on
    the session itself, for 0). Returns the session id."""
    sid = store.create_session("exported")
    agents = [store.create_agent(sid, name="root", model="m1")]
    for step, pick, text in program:
        running = [a for a in agents if store.get_agent(a.uuid).status == "running"]
        agent = running[pick % len(running)] if running and pick else None
        uuid = agent.uuid if agent else None
        if step in ("user", "assistant"):
            store.append(
                sid, step, text or None, {"n": pick} if pick % 2 else None, agent_uuid=uuid
            )
        elif step == "mark" and agent:
            store.mark(agent.uuid, text or None)
        elif step == "mark":
            store.append(sid, "mark", text, {"label": text})
        elif step in ("rewind", "stale"):
            marks = [m for m in store.messages(sid) if m.kind == "mark"]
            if marks:
                target = marks[-1 if step == "rewind" else pick % len(marks)]
                store.append(sid, "rewind", None, {"target_message_id": target.id}, agent_uuid=uuid)
        elif step == "pop" and agent and pick % 2:
            store.pop(agent.uuid)
        elif step == "pop":  # a pop aimed at any event of the session: honoured or skipped
            targets = [m for m in store.messages(sid) if m.kind not in ("clear", "pop")]
            if targets:
                target = targets[pick % len(targets)]
                store.append(sid, "pop", None, {"target_message_id": target.id}, agent_uuid=uuid)
        elif step == "clear":
            store.append(sid, "clear", agent_uuid=uuid)
        elif step == "fork" and agent:
            agents.append(store.fork_agent(agent.uuid, name=text or None))
        elif step == "kill" and agent and agent.parent_uuid is not None:
            store.kill_agent(agent.uuid)
    if pick_end(program):
        store.end_session(sid)
    return sid


def pick_end(program: list[tuple[str, int, str]]) -> bool:
    return len(program) % 2 == 1


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(program=steps)
@example(
    program=[
        ("mark", 1, "plan"),
        ("user", 1, "a"),
        ("fork", 1, "child"),
        ("user", 2, "b"),
        ("rewind", 2, ""),
        ("mark", 0, "top"),
        ("stale", 1, ""),
        ("clear", 1, ""),
        ("assistant", 2, "c"),
    ]
)
def test_export_import_replays_the_same(
    ikigai_module_store: ik.Store, other: ik.Store, program: list[tuple[str, int, str]]
) -> None:
    """Random histories with forks, marks, rewinds (to live and stale marks), pops and clears:
    exported, imported into another database, they replay equal up to the id mapping."""
    store = ikigai_module_store
    sid = _history(store, program)
    buffer = io.BytesIO()
    exported = store.export_session(sid, buffer)
    assert exported.lines == len(buffer.getvalue().splitlines())
    buffer.seek(0)
    imported = other.import_session(buffer)
    assert imported.events == store.count_messages(sid)
    _same(store, sid, other, imported.session_id, imported.agents)
    assert other.get_session(imported.session_id).title == "exported"
    assert (other.get_session(imported.session_id).ended_at is None) == (not pick_end(program))


def test_both_faces_round_trip_inside_a_transaction(ikigai_store: Any) -> None:
    """On both faces, inside a rolled-back transaction: two imports of one file are two
    sessions; the temporary tables do not collide."""
    sid = ikigai_store.create_session("t")
    agent = ikigai_store.create_agent(sid, name="a")
    ikigai_store.mark(agent.uuid, "m")
    ikigai_store.append(sid, "user", "hello", agent_uuid=agent.uuid)
    ikigai_store.rewind(agent.uuid, "m")
    buffer = io.BytesIO()
    ikigai_store.export_session(sid, buffer)
    first = ikigai_store.import_session(io.BytesIO(buffer.getvalue()))
    second = ikigai_store.import_session(io.BytesIO(buffer.getvalue()))
    assert len({sid, first.session_id, second.session_id}) == 3
    for done in (first, second):
        (new,) = done.agents.values()
        assert [m.kind for m in ikigai_store.replay_agent(new).messages] == ["mark", "rewind"]


def test_event_times_are_iso_utc_whatever_the_connection_says(
    ikigai_module_store: ik.Store, other: ik.Store
) -> None:
    """Event lines carry ISO 8601 times in UTC under any DateStyle and TimeZone; the caller's
    settings are put back; the file imports to the same instants."""
    store = ikigai_module_store
    sid = store.create_session("times")
    first = store.append(sid, "user", "when?")
    buffer = io.BytesIO()
    with store.transaction(), store._connection() as conn:
        conn.execute("SET LOCAL DateStyle = 'SQL, DMY'")
        conn.execute("SET LOCAL TimeZone = 'America/New_York'")
        store.export_session(sid, buffer)
        row = conn.execute(
            "SELECT current_setting('DateStyle') AS d, current_setting('TimeZone') AS t"
        )
        assert row.fetchone() == {"d": "SQL, DMY", "t": "America/New_York"}
    (event,) = [x for x in _lines(buffer.getvalue()) if x.startswith(b"%d\t" % first.id)]
    when = first.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S").encode()
    assert event.endswith(b"+00\n") and when in event
    done = other.import_session(io.BytesIO(buffer.getvalue()))
    assert other.messages(done.session_id)[0].created_at == first.created_at


def test_copy_text_escapes_and_an_empty_session_round_trip(
    ikigai_module_store: ik.Store, other: ik.Store
) -> None:
    """Contents that look like COPY's own markers (``\\N``, ``\\.``), tabs, carriage returns,
    empty text and JSON with escapes come back as they were; a session without events too."""
    store = ikigai_module_store
    sid = store.create_session("escapes\t\\N")
    contents = ["\\N", "\\.", "a\tb\\tc", "", "line\r\n", "\x7f\x01 é \u2028", None]
    for text in contents:
        store.append(sid, "user", text, {"k": 'tab\there \\N "q"', "n": [1, None]})
    empty = store.create_session("nothing")
    for session, count in ((sid, len(contents)), (empty, 0)):
        buffer = io.BytesIO()
        store.export_session(session, buffer)
        done = other.import_session(io.BytesIO(buffer.getvalue()))
        assert done.events == count
        got = other.messages(done.session_id)
        want = store.messages(session)
        assert [(e.kind, e.content, e.data, e.created_at) for e in got] == [
            (e.kind, e.content, e.data, e.created_at) for e in want
        ]
        assert other.get_session(done.session_id).title == store.get_session(session).title


@pytest.fixture
def exported(ikigai_module_store: ik.Store) -> bytes:
    store = ikigai_module_store
    sid = store.create_session("to damage")
    agent = store.create_agent(sid)
    store.mark(agent.uuid, "m")
    for i in range(5):
        store.append(sid, "user", f'line {i} with \\ and " and \n and é', agent_uuid=agent.uuid)
    store.rewind(agent.uuid, "m")
    buffer = io.BytesIO()
    store.export_session(sid, buffer)
    return buffer.getvalue()


def _count(store: ik.Store) -> tuple[int, int, int]:
    with store._connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages), "
            "(SELECT count(*) FROM agents)"
        ).fetchone()
    assert row is not None
    return tuple(row)  # type: ignore[return-value]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _events(data: bytes, change: Any) -> bytes:
    """``data`` with ``change`` applied to its event lines (those after the events line), and
    a matching trailer: only the events can be wrong."""
    lines = _lines(data)[:-1]
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"type": "events"')) + 1
    return _retrailered(lines[:at] + change(lines[at:]))


def _retrailered(lines: list[bytes]) -> bytes:
    """``lines`` (header and body) with a matching trailer: only the content can be wrong."""
    import hashlib

    body = b"".join(lines)
    trailer = {"type": "end", "lines": len(lines), "sha256": hashlib.sha256(body).hexdigest()}
    return body + json.dumps(trailer).encode() + b"\n"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[: len(d) // 2], "truncated"),
        (lambda d: d[:-1], "truncated"),
        (lambda d: b"".join(_lines(d)[:-1]), "truncated"),
        (lambda d: d.replace(b"line 3", b"line 9"), "corrupted"),
        (lambda d: b"".join(_lines(d)[:3] + _lines(d)[4:]), "corrupted"),
        (lambda d: d.replace(b'"version": 2', b'"version": 3', 1), "newer than this library"),
        (lambda d: d.replace(b"ikigai-session", b"other-format", 1), "not an ikigai-store"),
        (lambda d: b"", "not an ikigai-store"),
        (lambda d: b"\x00\xff garbage\n", "not an ikigai-store"),
        (lambda d: _retrailered([*_lines(d)[:1], b"{not json\n", *_lines(d)[1:-1]]), "malformed"),
        (lambda d: _retrailered(_lines(d)[:2] + _lines(d)[3:-1]), "malformed"),
        (
            lambda d: _events(d, lambda ls: [x.replace(b"\tuser\t", b"\tnonsense\t") for x in ls]),
            "malformed",
        ),
        (
            lambda d: _events(d, lambda ls: [x.replace(b"\t20", b"\tx20") for x in ls]),
            "malformed",
        ),
        (
            lambda d: _retrailered([x for x in _lines(d)[:-1] if b'{"type": "events"' not in x]),
            "no events line",
        ),
        (
            lambda d: _retrailered(
                [x.replace(b'"kind", "content"', b'"content", "kind"') for x in _lines(d)[:-1]]
            ),
            "no events line",
        ),
        (lambda d: _events(d, lambda ls: [ls[0][:-1] + b"\textra\n", *ls[1:]]), "malformed"),
        (lambda d: _events(d, lambda ls: [ls[1], ls[0], *ls[2:]]), "not above the last"),
        (
            lambda d: _events(
                d, lambda ls: [b"\tSomeoneElse\t".join(ls[0].split(b"\t", 2)[::2]), *ls[1:]]
            ),
            "agent is not in the file",
        ),
    ],
    ids=[
        "half",
        "no-final-newline",
        "no-trailer",
        "altered",
        "line-removed",
        "newer-version",
        "other-format",
        "empty",
        "garbage",
        "bad-json-line",
        "agent-line-missing",
        "bad-kind",
        "bad-time",
        "events-line-missing",
        "events-columns-changed",
        "event-extra-column",
        "event-ids-out-of-order",
        "event-agent-unknown",
    ],
)
def test_a_damaged_file_is_refused_and_nothing_written(
    other: ik.Store, exported: bytes, damage: Any, message: str
) -> None:
    """A truncated, altered, newer or malformed file is refused saying which; nothing is
    written."""
    assert exported.splitlines()[0].startswith(b'{"format": "ikigai-session", "version": 2,')
    before = _count(other)
    with pytest.raises(ik.InvalidArgument, match=message):
        other.import_session(io.BytesIO(damage(exported)))
    assert _count(other) == before


#: An export of format version 1 (JSON Lines throughout), written by ikigai-store 0.7.0: a
#: session with a fork, a mark and a rewind to it, a clear, a NULL content, escapes.
V1 = Path(__file__).parent.parent / "fixtures" / "portability" / "session-v1.jsonl"


def test_an_events_line_of_other_spacing_is_read(other: ik.Store, exported: bytes) -> None:
    """The events line is read as JSON, not as bytes: compact separators import alike."""
    from ikigai_store.portability import EVENT_COLUMNS

    events = {"type": "events", "columns": list(EVENT_COLUMNS), "encoding": "postgresql-copy-text"}
    compact = json.dumps(events, separators=(",", ":")).encode()
    lines = [compact + b"\n" if x.startswith(b'{"type": "events"') else x for x in _lines(exported)]
    done = other.import_session(io.BytesIO(_retrailered(lines[:-1])))
    assert done.events == 7


def test_a_version_1_file_still_imports(other: ik.Store) -> None:
    """A file of the old format version 1 imports: its events, agents and replays."""
    data = V1.read_bytes()
    assert data.startswith(b'{"format": "ikigai-session", "version": 1,')
    done = other.import_session(io.BytesIO(data))
    assert done.events == 8 and len(done.agents) == 2
    events = other.messages(done.session_id)
    assert [(e.kind, e.content) for e in events] == [
        ("user", "Port the parser"),
        ("mark", "plan"),
        ("assistant", 'tab\there, newline\nthere, quote " and backslash \\ and é'),
        ("assistant", "child's turn"),
        ("rewind", "plan"),
        ("user", None),
        ("clear", None),
        ("user", "after the clear"),
    ]
    assert events[4].data == {"target_label": "plan", "target_message_id": events[1].id}
    assert events[0].data == {"model": "gpt-4"} and events[2].data is None
    assert events[0].created_at.isoformat() == "2026-11-27T23:22:43.673678+00:00"
    session = other.get_session(done.session_id)
    assert session.title == 'version 1 "export" \\ é' and session.ended_at is not None
    root, child = (done.agents[u] for u in ("iWaiucB1gKvaSurwFRAFDg", "kBjHbl09FQSYYQqSiLq4iQ"))
    assert other.get_agent(child).parent_uuid == root
    assert other.get_agent(child).fork_message_id == events[2].id
    assert [(m.kind, m.content) for m in other.replay_agent(child).messages] == [
        ("user", "Port the parser"),
        ("mark", "plan"),
        ("rewind", "plan"),
        ("user", None),
    ]
    assert [m.content for m in other.replay_agent(root).messages] == ["after the clear"]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.replace(b"Port the parser", b"Port the lexer"), "corrupted"),
        (lambda d: b"".join(_lines(d)[:-1]), "truncated"),
        (
            lambda d: _retrailered(
                [x.replace(b'"kind":"user"', b'"kind":"nonsense"') for x in _lines(d)[:-1]]
            ),
            "malformed",
        ),
        (
            lambda d: _retrailered(
                [x.replace(b'"created_at":"2', b'"created_at":"x2') for x in _lines(d)[:-1]]
            ),
            "malformed",
        ),
        (lambda d: _retrailered([*_lines(d)[:6], *_lines(d)[7:-1]]), "fork point is not an event"),
    ],
    ids=["altered", "no-trailer", "bad-kind", "bad-time", "fork-point-missing"],
)
def test_a_damaged_version_1_file_is_refused(other: ik.Store, damage: Any, message: str) -> None:
    """The refusals hold for version 1 files too; nothing is written."""
    before = _count(other)
    with pytest.raises(ik.InvalidArgument, match=message):
        other.import_session(io.BytesIO(damage(V1.read_bytes())))
    assert _count(other) == before


def test_once_refuses_the_same_file_again(other: ik.Store, exported: bytes, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(exported)
    first = other.import_session(path, once=True)
    before = _count(other)
    with pytest.raises(ik.Conflict, match=f"already imported as session {first.session_id}"):
        other.import_session(path, once=True)
    assert _count(other) == before
    assert other.import_session(path).session_id != first.session_id  # without --once: again


def test_export_of_an_unknown_session(ikigai_module_store: ik.Store, tmp_path: Path) -> None:
    with pytest.raises(ik.NotFound):
        ikigai_module_store.export_session(987654321, tmp_path / "x.jsonl")
    with pytest.raises(ik.InvalidArgument):
        ikigai_module_store.export_session(0, tmp_path / "x.jsonl")


def test_a_path_that_cannot_be_opened_is_invalid_and_writes_nothing(
    ikigai_db_url: str, ikigai_module_store: ik.Store, tmp_path: Path
) -> None:
    """A missing file to import, or an export into a missing directory: ``InvalidArgument``
    naming the path, nothing written (no session, no file); the CLI says it in one line."""
    store = ikigai_module_store
    sid = store.create_session("kept")
    store.append(sid, "user", "hello")
    before = len(store.list_sessions(limit=1000))
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(ik.InvalidArgument, match=r"cannot open .*nowhere\.jsonl.*No such file"):
        store.import_session(missing)
    into = tmp_path / "no-such-dir" / "out.jsonl"
    with pytest.raises(ik.InvalidArgument, match=r"cannot open .*no-such-dir"):
        store.export_session(sid, into)
    assert not into.parent.exists() and len(store.list_sessions(limit=1000)) == before
    for args in (("import", str(missing)), ("export", str(sid), "-o", str(into))):
        done = _cli(ikigai_db_url, *args)
        lines = done.stderr.decode().strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and "cannot open" in lines[0], lines


def _old_ended(store: ik.Store, events: int, *, ago: timedelta) -> int:
    """An ended session with a forked agent tree and ``events`` events, ended ``ago``."""
    sid = store.create_session("old")
    root = store.create_agent(sid)
    child = store.fork_agent(root.uuid)
    store.fork_agent(child.uuid)
    ids = [
        store.append(sid, "user", f"e{i}", agent_uuid=(child, root)[i % 2].uuid).id
        for i in range(events)
    ]
    store.summaries.add_context_summary(child.uuid, "s", ids[0], ids[0], 3)
    for agent in (root,):
        store.kill_agent(agent.uuid)
    store.end_session(sid)
    with store._connection() as conn:
        conn.execute(
            "UPDATE sessions SET ended_at = %s WHERE id = %s",
            (datetime.now(UTC) - ago, sid),
        )
    return sid


def test_prune_deletes_old_ended_sessions_only(ikigai_module_store: ik.Store) -> None:
    store = ikigai_module_store
    old = _old_ended(store, 7, ago=timedelta(days=40))
    recent = _old_ended(store, 2, ago=timedelta(days=1))
    active = store.create_session("active")
    store.append(active, "user", "still here")
    bound = store.identities.register(f"bound-{old}", agent_uuid=_agents(store, old)[1].uuid)
    dry = store.prune_sessions(ended_before=timedelta(days=30), dry_run=True)
    assert (dry.sessions, dry.events, dry.agents) >= (1, 7, 3)
    assert store.get_session(old).id == old
    done = store.prune_sessions(ended_before=timedelta(days=30), batch=2)
    assert done == dry
    with pytest.raises(ik.NotFound):
        store.get_session(old)
    assert store.count_messages(recent) == 2 and store.count_messages(active) == 1
    assert store.identities.get(bound.name).agent_uuid is None  # kept, unbound
    assert store.prune_sessions(ended_before=timedelta(days=30)) == ik.PruneReport(0, 0, 0)
    # an active session is never pruned, however old
    store.prune_sessions(ended_before=datetime.now(UTC) + timedelta(days=1))
    assert store.count_messages(active) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"ended_before": -1},
        {"ended_before": "1d"},
        {"ended_before": datetime(2020, 1, 1)},
        {"ended_before": 1, "batch": 0},
    ],
)
def test_prune_bad_input(ikigai_module_store: ik.Store, bad: dict[str, Any]) -> None:
    with pytest.raises(ik.InvalidArgument):
        ikigai_module_store.prune_sessions(**bad)


def _cli(url: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "IKIGAI_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "ikigai_store", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_cli_export_import_prune(
    ikigai_db_url: str, other_url: str, ikigai_module_store: ik.Store, tmp_path: Path
) -> None:
    store = ikigai_module_store
    sid = _old_ended(store, 3, ago=timedelta(days=3))
    path = tmp_path / "s.jsonl"
    done = _cli(ikigai_db_url, "export", str(sid), "-o", str(path))
    assert done.returncode == 0, done.stderr
    piped = _cli(ikigai_db_url, "export", str(sid))
    assert piped.stdout.splitlines()[1:-1] == path.read_bytes().splitlines()[1:-1]
    done = _cli(other_url, "import", str(path), "--once")
    assert done.returncode == 0, done.stderr
    new = int(done.stdout)
    again = _cli(other_url, "import", str(path), "--once")
    assert again.returncode == 1 and b"already imported as session" in again.stderr
    done = _cli(other_url, "import", "-", "--json", stdin=path.read_bytes())
    assert json.loads(done.stdout)["events"] == 3
    dry = _cli(other_url, "session", "prune", "--ended-before", "2d", "--dry-run", "--json")
    assert json.loads(dry.stdout)["sessions"] >= 2
    done = _cli(other_url, "session", "prune", "--ended-before", "2d")
    assert done.returncode == 0 and done.stdout.startswith(b"deleted ")
    with ik.Store(other_url, pool_size=1) as check, pytest.raises(ik.NotFound):
        check.get_session(new)


def test_cli_prune_takes_a_date_or_an_age(
    ikigai_db_url: str, ikigai_module_store: ik.Store
) -> None:
    """`session prune --ended-before` takes an ISO date or time as well as an age (90d), and
    refuses anything else in one line naming both forms."""
    _old_ended(ikigai_module_store, 1, ago=timedelta(days=3))
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    for when, some in (("2000-01-01", False), (tomorrow, True), ("2d", True), ("2000d", False)):
        dry = _cli(ikigai_db_url, "session", "prune", "--ended-before", when, "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        assert (json.loads(dry.stdout)["sessions"] >= 1) is some, when
    junk = _cli(ikigai_db_url, "session", "prune", "--ended-before", "last week")
    assert junk.returncode == 1 and junk.stdout == b""
    assert b"is not an ISO-8601 time" in junk.stderr and b"duration ago" in junk.stderr
    assert junk.stderr.count(b"\n") == 1 and b"Traceback" not in junk.stderr
