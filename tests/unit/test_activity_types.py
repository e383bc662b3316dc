"""The activity vocabulary is written once: ``ACTIVITY_TYPES`` equals the CHECK of
``activities.type`` and contains every type any query inserts (no database).

Subtrate's CHECK was never widened for its review activities, which then failed silently; here
a type that a query writes but the CHECK (or ``ACTIVITY_TYPES``) lacks fails this test. A query
writes an activity either itself (``INSERT INTO activities``) or through ``post_mail()``
(migration 0016), whose ``activity_type =>`` argument is read the same way.
"""

from __future__ import annotations

import re

import ikigai_store as ik
from ikigai_store._resources import migrations_dir, queries_dir

LITERAL = re.compile(r"'([^']*)'")


def check_lists() -> list[tuple[str, list[str]]]:
    """(migration file, its type list) for every definition of activities_type_check."""
    found = []
    for path in sorted(migrations_dir().glob("*.sql")):
        if path.name.endswith(".rollback.sql"):
            continue
        text = path.read_text()
        for match in re.finditer(
            r"activities_type_check\s+CHECK\s*\(\s*type\s+IN\s*\(([^)]*)\)", text, re.I
        ):
            found.append((path.name, LITERAL.findall(match.group(1))))
    return found


def test_activity_types_equal_the_latest_check() -> None:
    """The newest CHECK on activities.type lists exactly ACTIVITY_TYPES, in order."""
    lists = check_lists()
    assert lists, "no migration defines activities_type_check"
    assert lists[0][0] == "0011-activities-and-summaries.sql"
    assert lists[-1][1] == list(ik.ACTIVITY_TYPES)
    assert len(set(ik.ACTIVITY_TYPES)) == len(ik.ACTIVITY_TYPES)


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside parentheses and quotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _closing(text: str, open_at: int) -> int:
    """The index of the parenthesis closing the one at ``open_at`` (quotes respected)."""
    depth, quoted = 0, False
    for i in range(open_at, len(text)):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise AssertionError(f"unbalanced parentheses after: {text[open_at : open_at + 80]!r}")


END = re.compile(r"\b(FROM|WHERE|ON\s+CONFLICT|RETURNING|UNION|ORDER|LIMIT)\b|;", re.I)


def type_expressions(sql: str) -> list[str]:
    """The SQL expression each ``INSERT INTO activities`` in ``sql`` stores as ``type``."""
    found = []
    for match in re.finditer(r"INSERT\s+INTO\s+activities\b(\s+AS\s+\w+)?\s*", sql, re.I):
        assert sql[match.end() : match.end() + 1] == "(", (
            f"an activity insert must name its columns: {sql[match.start() : match.end() + 40]!r}"
        )
        cols_end = _closing(sql, match.end())
        columns = [c.strip().lower() for c in sql[match.end() + 1 : cols_end].split(",")]
        assert "type" in columns, f"an activity insert without a type: {columns}"
        position = columns.index("type")
        rest = sql[cols_end + 1 :]
        source = re.match(r"\s*(VALUES\s*\(|SELECT\s+(DISTINCT\s+)?)", rest, re.I)
        assert source, f"cannot read the rows of: {rest[:80]!r}"
        if source.group(1).upper().startswith("VALUES"):
            open_at = cols_end + 1 + source.end() - 1
            items = _split_top(sql[open_at + 1 : _closing(sql, open_at)])
        else:
            body = rest[source.end() :]
            # the select list ends at the first top-level FROM/WHERE/...
            depth, quoted, cut = 0, False, len(body)
            for i, ch in enumerate(body):
                if ch == "'":
                    quoted = not quoted
                elif not quoted and ch == "(":
                    depth += 1
                elif not quoted and ch == ")":
                    if depth == 0:
                        cut = i
                        break
                    depth -= 1
                elif not quoted and depth == 0 and END.match(body, i):
                    cut = i
                    break
            items = _split_top(body[:cut])
        assert len(items) == len(columns), f"{len(items)} values for columns {columns}"
        found.append(items[position].strip())
    return found


NAMED = re.compile(r"\s*(\w+)\s*=>(.*)", re.S)


#: The functions that write an activity, with the parameter naming its type (migrations 0016
#: and 0033).
WRITERS = {"post_mail": "activity_type", "ikigai_insert_activity": "act_type"}


def post_mail_types(sql: str) -> list[str]:
    """The expression each ``post_mail(...)`` (or ``ikigai_insert_activity(...)``) call in
    ``sql`` passes as the activity's type (calls name their arguments; a post_mail call
    without one writes no activity)."""
    found = []
    for match in re.finditer(r"\b(post_mail|ikigai_insert_activity)\s*\(", sql):
        open_at = match.end() - 1
        arguments = _split_top(sql[open_at + 1 : _closing(sql, open_at)])
        named = [NAMED.fullmatch(a) for a in arguments]
        assert all(named), f"{match.group(1)} arguments must be named: {arguments}"
        key = WRITERS[match.group(1)]
        found += [m.group(2).strip() for m in named if m and m.group(1) == key]
    return found


def test_post_mail_takes_activity_type() -> None:
    """post_mail (migration 0016) has the parameter the reader looks for."""
    definition = (migrations_dir() / "0016-post-mail.sql").read_text()
    head = definition.split("FUNCTION post_mail(", 1)[1].split(")", 1)[0]
    assert re.search(r"(?m)^\s*activity_type\s+TEXT\b", head)


def test_every_activity_type_a_query_inserts_is_known() -> None:
    """Every literal a query stores as an activity's type, itself or through post_mail, is in
    ACTIVITY_TYPES (parameters are checked by the code that binds them: record_activity
    validates its type). The task and review statements' functions (migrations 0036, 0038)
    count as queries."""
    unknown = []
    tasks = migrations_dir() / "0036-citus-tasks-by-list.sql"
    reviews = migrations_dir() / "0038-citus-reviews-by-review.sql"
    for path in [*sorted(queries_dir().glob("*.sql")), tasks, reviews]:
        text = path.read_text()
        for expression in [*type_expressions(text), *post_mail_types(text)]:
            for literal in LITERAL.findall(expression):
                if literal not in ik.ACTIVITY_TYPES:
                    unknown.append(f"{path.name}: {literal!r}")
    assert unknown == []


def test_the_reader_finds_literal_types() -> None:
    """type_expressions reads VALUES, SELECT lists, CASE expressions and CTE-nested inserts
    (so the test above cannot pass by reading nothing)."""
    sql = """
    WITH a AS (
        INSERT INTO activities (identity_id, type, description, metadata)
        SELECT r.id, CASE WHEN :ok THEN 'review_approved' ELSE 'review_rejected' END,
               'decided (' || r.state || ')', jsonb_build_object('k', 'v')
        FROM reviews AS r
        RETURNING id
    )
    INSERT INTO activities AS x (type, identity_id, description) VALUES ('plan_decided', 1, 'x, y');
    INSERT INTO activities (identity_id, type, description) SELECT 1, :type, 'z';
    """
    assert type_expressions(sql) == [
        "CASE WHEN :ok THEN 'review_approved' ELSE 'review_rejected' END",
        "'plan_decided'",
        ":type",
    ]
    assert LITERAL.findall(type_expressions(sql)[0]) == ["review_approved", "review_rejected"]


def test_the_reader_finds_post_mail_types() -> None:
    """post_mail_types reads activity_type => from calls (nested parentheses and quoted commas
    included), ignores calls without it, and refuses positional arguments."""
    sql = """
    SELECT post_mail(thread_id => u.thread_id, subject => format(:s, VARIADIC f.args),
                     activity_type => CASE WHEN :ok THEN 'plan_decided' ELSE 'x, y' END,
                     description => 'a (b', metadata => '{}') AS mail FROM u, f;
    SELECT post_mail(thread_id => t.thread_id, sender_id => s.id) AS mail FROM s, t;
    SELECT post_mail(sender_id => s.id, activity_type => :activity_type) FROM s;
    """
    assert post_mail_types(sql) == [
        "CASE WHEN :ok THEN 'plan_decided' ELSE 'x, y' END",
        ":activity_type",
    ]
    try:
        post_mail_types("SELECT post_mail(u.thread_id, 'plan_decided')")
    except AssertionError as exc:
        assert "must be named" in str(exc)
    else:
        raise AssertionError("a positional post_mail call was read")


def test_queries_still_write_activities_the_reader_sees() -> None:
    """The plan queries' and the task upsert's literal types are found (this file cannot pass
    by reading nothing)."""
    found = post_mail_types((queries_dir() / "plans.sql").read_text())
    assert found == ["'plan_submitted'", "'plan_decided'", "'plan_submitted'"]
    tasks = (migrations_dir() / "0036-citus-tasks-by-list.sql").read_text()
    assert post_mail_types(tasks) == ["'task_complete'"]
