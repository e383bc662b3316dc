"""The CLI's one JSON converter (``render.json_text``): models as their fields, as ``SHAPES``
adjusts them (no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import UUID

from ikigai_store.cli.render import as_dict, json_text
from ikigai_store.models import DeepJSON, Mail, MailHit, Topic, TopicInfo

T = datetime(2025, 6, 1, 9, 30, tzinfo=UTC)


MAIL = Mail(
    id=7,
    thread_id="t",
    parent_id=None,
    sender="alice",
    to=("bob", "carol"),
    subject="Hi",
    body="ünïcode",
    priority="normal",
    deadline_at=None,
    attachments=[{"a": 1}],
    metadata=DeepJSON("[[1]]"),
    idempotency_key=None,
    deleted_by_sender=False,
    created_at=T,
)


def test_json_is_the_fields_in_order_with_values_converted() -> None:
    """A model's JSON is its fields in order: times as ISO text, tuples as lists, DeepJSON as
    its text, nested models as objects, non-ASCII kept."""
    doc = json.loads(json_text([MAIL], indent=2))
    assert list(doc[0]) == [f for f in Mail.__dataclass_fields__]
    assert doc[0]["to"] == ["bob", "carol"]
    assert doc[0]["created_at"] == "2025-06-01T09:30:00+00:00"
    assert doc[0]["metadata"] == "[[1]]"
    assert "ünïcode" in json_text(MAIL)


def test_shapes_leave_out_rename_inline_and_add() -> None:
    """SHAPES: a hit has no horizon; topic info inlines its topic without the id and with
    retention in seconds; a timedelta or UUID anywhere becomes seconds or text."""
    assert list(as_dict(MailHit(MAIL, 0.5, "s", horizon=9))) == [
        "mail",
        "rank",
        "snippet",
    ]
    info = TopicInfo(Topic(3, "news", "broadcast", timedelta(hours=1), 5, T), 2, 10, 10)
    assert json.loads(json_text(info)) == {
        "name": "news",
        "kind": "broadcast",
        "retention_seconds": 3600.0,
        "max_attempts": 5,
        "created_at": "2025-06-01T09:30:00+00:00",
        "searchable": True,
        "subscribers": 2,
        "messages": 10,
        "last_offset": 10,
        "available": 0,
        "claimed": 0,
        "dead": 0,
    }
    uuid = UUID(int=1)
    assert json.loads(json_text({"u": uuid})) == {"u": str(uuid)}
