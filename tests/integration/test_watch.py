"""``store.watch`` and ``ikigai-store watch``: what concerns an identity, pushed as it commits.

The operations run on both faces in a test transaction (``ikigai_store``); waking needs real
commits, so those tests use the file's committing store, and the CLI tests real processes: a
watcher prints a mail's line within a second of the send's commit in another process, a second
watcher is refused, ``--rewake`` exits 2 with a digest, and a watcher survives a killed and
restarted PostgreSQL with nothing missed and nothing printed twice.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest

import ikigai_store as ik
from ikigai_store import migrate
from ikigai_store.cli.watch import Watcher, _Signals, _Stop
from ikigai_store.models import Seen
from ikigai_store.watch import MAX_SHOWN
from tests.integration.test_outage import _kill_server, _start, private_server

pytestmark = pytest.mark.db

__all__ = ["private_server"]  # the fixture, imported for this file's tests


def fresh(prefix: str = "w") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def texts(batch: ik.WatchBatch) -> list[str]:
    return [n.text for n in batch.notices]


# ------------------------------------------------------------------------------ operations


def test_next_reports_mail_tasks_and_freed_leases_once(ikigai_store: Any) -> None:
    """Unread mail, the project's claimable tasks and freed waited resources are reported
    once while pending; read mail goes from ``seen``, and mail unread again is new again."""
    store = ikigai_store
    me = store.identities.register("me", project_key="/p")
    other = store.identities.register("other", project_key="/p")
    stranger = store.identities.register("stranger", project_key="/q")
    first = store.mail.send(other, me, "First\nline", "b", priority="urgent")
    store.tasks.create_list("L", owner=other)
    store.tasks.upsert("L", "t1", subject="Do it")
    store.tasks.upsert("L", "t2", subject="Later", blocked_by=["t1"])
    store.tasks.create_list("Q", owner=stranger)
    store.tasks.upsert("Q", "q1", subject="Not ours")
    lease = store.leases.acquire(other, "build-slot", ttl=60)
    store.leases.wait_for(me, "build-slot")

    batch = store.watch.next(me)
    assert texts(batch) == [
        f"mail #{first.id} from other [urgent]: First line",
        "task L/t1 is available: Do it",
    ]
    assert store.watch.next(me, seen=batch.seen).notices == ()

    store.leases.release(lease)
    second = store.mail.send(other, me, "Second", "b")
    store.mail.read(me, first.id)
    store.tasks.claim("L", "t1", owner=other)
    later = store.watch.next(me, seen=batch.seen)
    assert texts(later) == [
        f"mail #{second.id} from other [normal]: Second",
        "lease freed: build-slot",
    ]
    assert later.seen == Seen(frozenset({second.id}), frozenset(), frozenset({"build-slot"}))
    store.watch.save(me, later.seen)
    assert store.watch.next(me, seen=later.seen).notices == ()

    store.mail.set_state(me, first.id, "unread")
    store.tasks.release("L", "t1", owner=other)
    again = store.watch.next(me, seen=later.seen)
    assert [n.kind for n in again.notices] == ["mail", "task"]
    assert again.notices[0].id == first.id and again.notices[1].detail["external_id"] == "t1"


def test_next_reports_the_tasks_of_shared_lists(ikigai_store: Any) -> None:
    """A list whose owner has no project is shared: every watcher is told of its tasks (a
    watcher of no project, of those alone), never of another project's."""
    store = ikigai_store
    me = store.identities.register("me", project_key="/p")
    nobody = store.identities.register("nobody")
    loner = store.identities.register("loner")
    stranger = store.identities.register("stranger", project_key="/q")
    for list_id, owner in (("S", nobody), ("M", loner), ("Q", stranger)):
        store.tasks.create_list(list_id, owner=owner)
        store.tasks.upsert(list_id, "1", subject=f"work in {list_id}")
    shared = ["task S/1 is available: work in S", "task M/1 is available: work in M"]
    assert texts(store.watch.next(me)) == texts(store.watch.next(loner)) == shared
    assert [t.list_id for t in store.tasks.available(project_key="/p")] == ["S", "M"]
    assert [t.list_id for t in store.tasks.available(project_key="/q")] == ["S", "M", "Q"]


def test_review_and_plan_events_are_named(ikigai_store: Any) -> None:
    """A review request reaches its reviewer as mail, reported with the review's id."""
    store = ikigai_store
    author = store.identities.register("author")
    reviewer = store.identities.register("reviewer")
    review = store.reviews.submit(
        store.reviews.create(author, reviewers=[reviewer], branch="feature")
    )
    batch = store.watch.next(reviewer)
    assert len(batch.notices) == 1
    notice = batch.notices[0]
    assert notice.kind == "mail" and notice.text.endswith(f"(review {review.review_id[:8]})")
    assert notice.detail["review_id"] == review.review_id


def test_many_notices_are_summed_up(ikigai_store: Any) -> None:
    """At most MAX_SHOWN notices of a kind; the rest are one summary and count as reported."""
    store = ikigai_store
    me, other = store.identities.register("me"), store.identities.register("other")
    for i in range(MAX_SHOWN + 5):
        store.mail.send(other, me, f"m{i}", "b")
    batch = store.watch.next(me)
    assert len(batch.notices) == MAX_SHOWN + 1
    assert batch.notices[-1].text == "mail: 5 more" and batch.notices[-1].id is None
    assert len(batch.seen.mail) == MAX_SHOWN + 5
    assert store.watch.next(me, seen=batch.seen).notices == ()


def test_start_is_one_watcher_per_identity_and_reads_what_was_saved(ikigai_store: Any) -> None:
    """start takes watch:<name>, refuses a second watcher (even of the same identity) naming
    the lease, and returns the saved ``seen``; after release it starts again."""
    store = ikigai_store
    me = store.identities.register("me")
    store.identities.register("me2")  # watch:me is not watch:me2 (a prefix)
    other = store.identities.register("other")
    mail = store.mail.send(other, me, "s", "b")
    watch = store.watch.start("me2")
    watch = store.watch.start(me)
    assert watch.lease.resource == "watch:me" and watch.seen == Seen()
    with pytest.raises(ik.Conflict, match=r"me is already watched.*watch:me"):
        store.watch.start(me)
    store.watch.save(me, store.watch.next(me).seen)
    store.leases.release(watch.lease)
    assert store.watch.start(me).seen == Seen(frozenset({mail.id}))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.watch.next("ghost"), ik.NotFound),
        (lambda s: s.watch.next("me", timeout=-1), ik.InvalidArgument),
        (lambda s: s.watch.next("me", timeout=86401), ik.InvalidArgument),
        (lambda s: s.watch.next("me", seen={1}), ik.InvalidArgument),
        (lambda s: s.watch.next("bad name"), ik.InvalidArgument),
        (lambda s: s.watch.start("me", ttl=0), ik.InvalidArgument),
        (lambda s: s.watch.save("me", None), ik.InvalidArgument),
        (lambda s: s.watch.start("retired"), ik.InvalidArgument),
        (lambda s: s.leases.wait_for("ghost", "r"), ik.NotFound),
        (lambda s: s.leases.wait_for("me", ""), ik.InvalidArgument),
        (lambda s: s.leases.wait_for("retired", "r"), ik.InvalidArgument),
    ],
)
def test_bad_input_writes_nothing(ikigai_store: Any, call: Any, error: type[Exception]) -> None:
    store = ikigai_store
    store.identities.register("me")
    store.identities.retire(store.identities.register("retired"))
    with pytest.raises(error):
        call(store)
    assert store.leases.held("watch:") == []
    assert store.watch.next("me").notices == ()


# ------------------------------------------------------------------------------ waking


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> ik.Store:
    """The file's store, committing."""
    return ikigai_module_store


def _later(seconds: float, fn: Any) -> threading.Thread:
    def go() -> None:
        time.sleep(seconds)
        fn()

    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_next_wakes_on_mail_task_and_freed_lease(store: ik.Store) -> None:
    """A waiting next returns within a second of the commit that concerns it: a mail, a task
    in the project's list, the release of a lease it waits for; not of someone else's mail."""
    project = "/" + fresh("proj")
    me = store.identities.register(fresh(), project_key=project)
    other = store.identities.register(fresh(), project_key=project)
    seen = store.watch.next(me).seen
    store.mail.send(other, other, "not for me", "b")

    list_id = fresh("list")
    store.tasks.create_list(list_id, owner=other)
    lease = store.leases.acquire(other, fresh("res"), ttl=60)
    store.leases.wait_for(me, lease.resource)
    for act, kind in (
        (lambda: store.mail.send(other, me, "hi", "b"), "mail"),
        (lambda: store.tasks.upsert(list_id, "t1", subject="go"), "task"),
        (lambda: store.leases.release(lease), "lease"),
    ):
        thread = _later(0.3, act)
        started = time.monotonic()
        batch = store.watch.next(me, seen=seen, timeout=10)
        elapsed = time.monotonic() - started
        thread.join()
        assert [n.kind for n in batch.notices] == [kind], batch
        assert 0.25 < elapsed < 1.3, elapsed
        seen = batch.seen


def test_next_wakes_when_a_waited_lease_expires(store: ik.Store) -> None:
    """An expiry notifies nobody: next sleeps until the lease it waits behind expires."""
    me, other = store.identities.register(fresh()), store.identities.register(fresh())
    lease = store.leases.acquire(other, fresh("res"), ttl=1.0)
    store.leases.wait_for(me, lease.resource)
    started = time.monotonic()
    batch = store.watch.next(me, timeout=10)
    assert texts(batch) == [f"lease freed: {lease.resource}"]
    assert time.monotonic() - started < 2.5


# ------------------------------------------------------------------------------ the CLI


def _spawn(url: str, *args: str, cwd: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "IKIGAI_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    for name in ("CLAUDE_PROJECT_DIR", "IKIGAI_ROLE", "IKIGAI_AS"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "ikigai_store", "watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )


class Lines:
    """The lines a process writes on one stream, read by a thread, with their arrival times."""

    def __init__(self, stream: IO[str]) -> None:
        self.items: list[tuple[float, str]] = []
        self._cond = threading.Condition()
        self._stream = stream
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        """After the process exited: the rest read, the stream closed."""
        self._thread.join(timeout=10)
        self._stream.close()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._cond:
                self.items.append((time.monotonic(), line.rstrip("\n")))
                self._cond.notify_all()

    def wait(self, count: int, timeout: float = 20) -> list[tuple[float, str]]:
        with self._cond:
            self._cond.wait_for(lambda: len(self.items) >= count, timeout)
            return list(self.items)

    @property
    def text(self) -> list[str]:
        return [t for _, t in self.items]


@pytest.fixture
def watcher(ikigai_db_url: str) -> Iterator[Any]:
    """Start watchers; each is stopped (SIGTERM) at the end."""
    started: list[tuple[subprocess.Popen[str], Lines, Lines]] = []

    def start(*args: str, url: str = ikigai_db_url) -> tuple[subprocess.Popen[str], Lines, Lines]:
        process = _spawn(url, *args)
        assert process.stdout is not None and process.stderr is not None
        started.append((process, Lines(process.stdout), Lines(process.stderr)))
        return started[-1]

    yield start
    for process, out, err in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        out.close()
        err.close()


def _watching(err: Lines) -> None:
    lines = err.wait(1)
    assert lines and "watching" in lines[0][1], err.text


def test_cli_prints_a_mail_within_a_second_and_refuses_a_second_watcher(
    store: ik.Store, watcher: Any, ikigai_db_url: str
) -> None:
    """The line of a mail sent by another process arrives within 1 s of that process's commit;
    a second watcher of the identity exits 1 naming the lease; SIGTERM releases the lease."""
    me, other = fresh(), fresh()
    store.identities.register(me)
    store.identities.register(other)
    process, out, err = watcher("--as", me)
    _watching(err)

    second = _spawn(ikigai_db_url, "--as", me)
    _, second_err = second.communicate(timeout=30)
    assert second.returncode == 1 and f"{me} is already watched" in second_err
    rewake = _spawn(ikigai_db_url, "--as", me, "--rewake")
    assert rewake.communicate(timeout=30) == ("", "") and rewake.returncode == 0

    sender = subprocess.run(
        [
            sys.executable,
            "-m",
            "ikigai_store",
            "mail",
            "send",
            "--from",
            other,
            "--to",
            me,
            "-s",
            "wake up",
            "body",
        ],
        env={**os.environ, "IKIGAI_DATABASE_URL": ikigai_db_url},
        capture_output=True,
        text=True,
        check=True,
    )
    committed = time.monotonic()  # the sender has exited: its send committed before this
    mail_id = int(sender.stdout.split()[0])
    ((arrived, line),) = out.wait(1)
    assert line == f"mail #{mail_id} from {other} [normal]: wake up"
    assert arrived - committed < 1.0
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    assert store.leases.held(f"watch:{me}") == []


class _StoppedAtFlush(io.StringIO):
    """stdout whose flush sends this process SIGTERM: a stop right after a line is printed
    (where the CI run of test_cli_json_and_rewake once caught the watcher)."""

    def flush(self) -> None:
        super().flush()
        if self.getvalue():
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("rewake", [False, True], ids=["print", "rewake"])
def test_a_stop_right_after_printing_still_saves_what_was_printed(
    store: ik.Store, ikigai_db_url: str, rewake: bool
) -> None:
    """SIGTERM as the line leaves (stdout, or --rewake's digest on stderr): the watcher stops
    with what it printed saved as seen, so the next watcher does not print it again."""
    me, other = fresh(), fresh()
    store.identities.register(me)
    store.identities.register(other)
    store.mail.send(other, me, "once only", "b")
    stopping = _StoppedAtFlush()  # where the notices go ("watching ..." goes to stderr)
    out, err = (io.StringIO(), stopping) if rewake else (stopping, io.StringIO())
    watcher = Watcher(
        ikigai_db_url, name=me, project=os.getcwd(), role="main", ttl=timedelta(seconds=30),
        as_json=False, rewake=rewake, out=out, err=err,
    )  # fmt: skip
    assert watcher.run() == 0  # stopped, not woken
    assert "once only" in stopping.getvalue()
    watch = store.watch.start(me)
    assert not store.watch.next(me, seen=watch.seen).notices
    store.leases.release(watch.lease)


def test_a_second_signal_stops_a_held_watcher_at_once() -> None:
    """Inside the held section the first SIGTERM waits for its end; a second one (a stuck
    stdout) stops at once. Outside it, the first one stops."""
    signals = _Signals()
    steps: list[str] = []
    with signals.installed():
        with pytest.raises(_Stop), signals.held():
            os.kill(os.getpid(), signal.SIGTERM)
            steps.append("held")
        with pytest.raises(_Stop), signals.held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            steps.append("not reached")
    assert steps == ["held"]


def test_cli_json_and_rewake(store: ik.Store, watcher: Any) -> None:
    """--json prints one object per line; --rewake waits, then exits 2 with a digest on
    stderr, and the next --rewake does not report the same mail again."""
    me, other = fresh(), fresh()
    store.identities.register(me)
    store.identities.register(other)
    mail = store.mail.send(other, me, "json please", "b")
    process, out, err = watcher("--as", me, "--json")
    _watching(err)
    doc = json.loads(out.wait(1)[0][1])
    assert doc["kind"] == "mail" and doc["id"] == mail.id and doc["subject"] == "json please"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0

    rewake, out, err = watcher("--as", me, "--rewake")
    # Started once it holds its lease (under load that took longer than the pause below).
    deadline = time.monotonic() + 20
    while not store.leases.held(f"watch:{me}") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    assert rewake.poll() is None  # the mail was reported already: it waits
    store.mail.send(other, me, "second", "b")
    assert rewake.wait(timeout=20) == 2
    assert out.wait(0) == [] and "second" in "\n".join(t for _, t in err.wait(2))
    assert store.leases.held(f"watch:{me}") == []


@pytest.mark.slow
def test_cli_survives_a_database_restart(private_server: Path, watcher: Any) -> None:
    """PostgreSQL SIGKILLed while a watcher runs, mail sent while it is down can't be, then
    after the restart: the watcher reconnects, reports the mail sent after the restart once,
    and none of what it had printed again."""
    url = _start(private_server)
    migrate.apply(url)
    with ik.Store(url) as db:
        me, other = db.identities.register(fresh()), db.identities.register(fresh())
        before = db.mail.send(other, me, "before", "b")
    process, out, err = watcher("--as", me.name, url=url)
    _watching(err)
    assert out.wait(1)[0][1].startswith(f"mail #{before.id} ")

    _kill_server(private_server)
    assert any("unavailable" in t for _, t in err.wait(2))
    time.sleep(1.0)
    url = _start(private_server)
    with ik.Store(url) as db:
        after = db.mail.send(other, me, "after", "b")
        lines = out.wait(2)
        assert [t.split(" ")[1] for _, t in lines] == [f"#{before.id}", f"#{after.id}"]
        time.sleep(1.0)
        assert len(out.text) == 2
        assert db.leases.held(f"watch:{me.name}")[0].holder == me.name
    assert process.poll() is None
