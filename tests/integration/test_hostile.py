"""Hostile data (issue 6, items 8-11): refused cleanly with nothing written, or stored and read.

- nesting deeper than MAX_JSON_DEPTH is refused before writing; rows nested deeper by other
  writers are still readable (``DeepJSON``) by replay, messages, search and the CLI;
- a 4 MB tool log is stored and its first 100,000 characters are searchable; content above
  MAX_CONTENT_BYTES is refused;
- every integer argument must fit a bigint and every string must be UTF-8 text;
- JSON: object keys must be strings; values come back equal (``==``), floats possibly as ints.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ikigai_store as ik

pytestmark = pytest.mark.db


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def test_depth_limit_is_exact(ikigai_store: ik.Store) -> None:
    """MAX_JSON_DEPTH levels are stored; one more is InvalidArgument and nothing is written."""
    sid = ikigai_store.create_session()
    assert ikigai_store.append(sid, "user", "ok", _nested(ik.MAX_JSON_DEPTH)).data == _nested(
        ik.MAX_JSON_DEPTH
    )
    for depth in (ik.MAX_JSON_DEPTH + 1, 990, 5000):
        with pytest.raises(ik.InvalidArgument, match="MAX_JSON_DEPTH"):
            ikigai_store.append(sid, "user", "deep", _nested(depth))
    assert ikigai_store.count_messages(sid) == 1


def test_cyclic_data_is_refused(ikigai_store: ik.Store) -> None:
    """A list that contains itself is InvalidArgument, not an endless walk."""
    sid = ikigai_store.create_session()
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ik.InvalidArgument):
        ikigai_store.append(sid, "user", "loop", cyclic)


def test_deep_rows_from_other_writers_stay_readable(ikigai_store: ik.Store) -> None:
    """A row nested 3000 deep (raw SQL) reads back as DeepJSON; replay, messages, search work."""
    sid = ikigai_store.create_session()
    deep_text = "[" * 3000 + "1" + "]" * 3000
    with ikigai_store._connection() as conn:
        conn.execute(
            "INSERT INTO messages (session_id, kind, content, data) "
            "VALUES (%s, 'user', 'deep words here', %s::jsonb)",
            (sid, deep_text),
        )
    for read in (
        lambda: ikigai_store.messages(sid)[0].data,
        lambda: ikigai_store.replay_session(sid).messages[0].data,
        lambda: ikigai_store.search("deep words", session_id=sid)[0].message.data,
    ):
        data = read()
        assert isinstance(data, ik.DeepJSON)
        assert json.loads(data.text.replace("[", "").replace("]", "")) == 1
    ikigai_store.append(sid, "assistant", "later")  # and the store goes on working
    assert len(ikigai_store.messages(sid)) == 2


def test_cli_reads_deep_rows(ikigai_db_url: str) -> None:
    """The CLI's replay (text and --json) prints a deep row instead of failing."""
    with ik.Store(ikigai_db_url) as store:
        sid = store.create_session()
        with store._connection() as conn:
            conn.execute(
                "INSERT INTO messages (session_id, kind, data) VALUES (%s, 'user', %s::jsonb)",
                (sid, "[" * 2000 + "]" * 2000),
            )
        command = [sys.executable, "-m", "ikigai_store", "--database", ikigai_db_url, "replay"]
        for extra in ([], ["--json"]):
            done = subprocess.run(
                [*command, "--session", str(sid), *extra],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert "[[[[" in done.stdout
        store._truncate_all()


def test_large_tool_log_is_stored_and_its_prefix_searchable(ikigai_store: ik.Store) -> None:
    """A 4 MB log of distinct words is stored whole; words in the first 100,000 chars are found."""
    sid = ikigai_store.create_session()
    words = [f"w{i:07d}x" for i in range(400_000)]  # 10 chars each: ~4 MB of distinct words
    log = " ".join(words)
    stored = ikigai_store.append(sid, "tool_result", log, {"tool_call_id": "c1"})
    assert ikigai_store.messages(sid)[0].content == log == stored.content
    early, late = words[100], words[-1]
    assert [h.message.id for h in ikigai_store.search(early, session_id=sid)] == [stored.id]
    assert ikigai_store.search(late, session_id=sid) == []  # beyond the searchable prefix


def test_content_over_the_limit_is_refused(ikigai_store: ik.Store) -> None:
    """Content above MAX_CONTENT_BYTES (UTF-8) is InvalidArgument and nothing is written."""
    sid = ikigai_store.create_session()
    with pytest.raises(ik.InvalidArgument, match="MAX_CONTENT_BYTES"):
        ikigai_store.append(sid, "tool_result", "é" * (ik.MAX_CONTENT_BYTES // 2 + 1))
    assert ikigai_store.count_messages(sid) == 0


BIG = 2**63
BAD_TEXT = "\ud800"


def _calls(store: Any, sid: int, uuid: str) -> list[tuple[str, Callable[[], Any]]]:
    """Every public method with a hostile argument that must be refused before any write."""
    rng = ik.ReplayRange
    return [
        ("list_sessions(2**63)", lambda: store.list_sessions(limit=BIG)),
        ("list_sessions(0)", lambda: store.list_sessions(limit=0)),
        ("get_session(2**63)", lambda: store.get_session(BIG)),
        ("get_session(True)", lambda: store.get_session(True)),
        ("end_session(-1)", lambda: store.end_session(-1)),
        ("create_session(surrogate)", lambda: store.create_session(BAD_TEXT)),
        ("set_session_title(NUL)", lambda: store.set_session_title(sid, "a\x00b")),
        ("append(session 2**63)", lambda: store.append(BIG, "user", "x")),
        ("append(agent surrogate)", lambda: store.append(sid, "user", "x", agent_uuid=BAD_TEXT)),
        ("append(content surrogate)", lambda: store.append(sid, "user", BAD_TEXT)),
        ("append(data key int)", lambda: store.append(sid, "user", "x", {1: "a"})),
        ("append(data nested key)", lambda: store.append(sid, "user", "x", {"a": [{None: 1}]})),
        ("append(data surrogate)", lambda: store.append(sid, "user", "x", {"a": BAD_TEXT})),
        ("append(data nan)", lambda: store.append(sid, "user", "x", {"a": math.nan})),
        ("append(data set)", lambda: store.append(sid, "user", "x", {"a": {1}})),
        (
            "append(rewind target 2**63)",
            lambda: store.append(sid, "rewind", None, {"target_message_id": BIG}),
        ),
        ("messages(2**63)", lambda: store.messages(BIG)),
        ("count_messages(1.0)", lambda: store.count_messages(1.0)),
        ("replay_session(2**64)", lambda: store.replay_session(2**64)),
        ("create_agent(name surrogate)", lambda: store.create_agent(sid, name=BAD_TEXT)),
        ("create_agent(session 2**63)", lambda: store.create_agent(BIG)),
        ("fork_agent(surrogate)", lambda: store.fork_agent(BAD_TEXT)),
        ("fork_agent(model NUL)", lambda: store.fork_agent(uuid, model="a\x00")),
        ("get_agent(surrogate)", lambda: store.get_agent(BAD_TEXT)),
        ("kill_agent(65 chars)", lambda: store.kill_agent("a" * 65)),
        ("reap_agent(int)", lambda: store.reap_agent(1)),
        ("set_agent_idle(1)", lambda: store.set_agent_idle(uuid, 1)),
        ("update_agent_model(surrogate)", lambda: store.update_agent_model(uuid, model=BAD_TEXT)),
        ("running_agents(2**63)", lambda: store.running_agents(BIG)),
        ("children(None)", lambda: store.children(None)),
        ("ensure_root_agent(unknown)", lambda: store.ensure_root_agent(sid, colour="red")),
        ("ensure_root_agent(surrogate)", lambda: store.ensure_root_agent(sid, name=BAD_TEXT)),
        ("find_clear(max_id 2**63)", lambda: store._find_clear(uuid, BIG)),
        ("find_clear(max_id 1.5)", lambda: store._find_clear(uuid, 1.5)),
        ("replay_ranges(surrogate)", lambda: store._replay_ranges(BAD_TEXT)),
        ("query_range(start 2**63)", lambda: store._query_range(rng(uuid, BIG, None))),
        ("query_range(end -2**64)", lambda: store._query_range(rng(uuid, 0, -(2**64)))),
        ("replay_agent(surrogate)", lambda: store.replay_agent(BAD_TEXT)),
        ("mark(label surrogate)", lambda: store.mark(uuid, BAD_TEXT)),
        ("rewind(label surrogate)", lambda: store.rewind(uuid, BAD_TEXT)),
        ("search(surrogate)", lambda: store.search(BAD_TEXT)),
        ("search(limit 2**63)", lambda: store.search("x", limit=BIG)),
        ("search(session -1)", lambda: store.search("x", session_id=-1)),
    ]


def test_hostile_arguments_everywhere(ikigai_store: ik.Store) -> None:
    """Every public method refuses out-of-range integers and non-UTF-8 text: InvalidArgument."""
    sid = ikigai_store.create_session()
    uuid = ikigai_store.create_agent(sid).uuid
    before = ikigai_store.count_messages(sid)
    for name, call in _calls(ikigai_store, sid, uuid):
        with pytest.raises(ik.InvalidArgument):
            call()
            pytest.fail(f"{name} was accepted")
    assert ikigai_store.count_messages(sid) == before
    assert [a.uuid for a in ikigai_store.running_agents(sid)] == [uuid]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text().filter(lambda s: "\x00" not in s),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=5).filter(lambda s: "\x00" not in s), children, max_size=4
        )
    ),
    max_leaves=20,
)


def _same(stored: Any, original: Any) -> bool:
    """The documented contract: equal values; a float may come back as an int of equal value
    (jsonb numerics keep no float type), so floats compare through float()."""
    if isinstance(original, float):
        return isinstance(stored, (int, float)) and float(stored) == original
    if isinstance(original, (list, tuple)):
        return len(stored) == len(original) and all(map(_same, stored, original))
    if isinstance(original, dict):
        return stored.keys() == original.keys() and all(
            _same(stored[k], v) for k, v in original.items()
        )
    return bool(stored == original) and type(stored) is type(original)


@settings(max_examples=60, deadline=None)
@given(value=json_values)
def test_json_round_trip_contract(ikigai_db_url: str, value: Any) -> None:
    """Any JSON value append accepts reads back equal under the documented contract."""
    with ik.Store(ikigai_db_url, pool_size=1) as store, store.transaction(force_rollback=True):
        sid = store.create_session()
        stored = store.append(sid, "user", None, value)
        assert _same(stored.data, value), (stored.data, value)
        assert _same(store.messages(sid)[0].data, value)


def test_documented_json_examples(ikigai_store: ik.Store) -> None:
    """1e20 comes back as the int 10**20, -0.0 as 0.0, a tuple as a list; {1: 'a'} is refused."""
    sid = ikigai_store.create_session()
    data = ikigai_store.append(sid, "user", None, {"a": 1e20, "b": -0.0, "c": (1, 2)}).data
    assert data == {"a": 10**20, "b": 0.0, "c": [1, 2]}
    assert type(data["a"]) is int
    with pytest.raises(ik.InvalidArgument, match="object key"):
        ikigai_store.append(sid, "user", None, {1: "a"})


def test_raw_psycopg_errors_never_escape(ikigai_store: ik.Store) -> None:
    """Values the old code passed to PostgreSQL raw (2**63, surrogates) never reach psycopg."""
    for bad in (BIG, -BIG - 1):
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.list_sessions(limit=bad)
    try:
        ikigai_store.append(1, "user", BAD_TEXT)
    except ik.InvalidArgument:
        pass
    except (psycopg.Error, UnicodeError) as exc:  # pragma: no cover - the bug this guards
        pytest.fail(f"raw driver error: {exc!r}")
