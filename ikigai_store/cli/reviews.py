"""CLI ``review`` and ``plan`` commands.

``review``: create, list, show, submit, start, approve, request-changes, reject, resubmit,
cancel, iterate (record an iteration), issues, resolve. A review is named by its id, any
unique prefix of it (4+ hex digits; the 8 shown everywhere always suffice) or its thread id
(``review-1a2b3c4d``). ``create`` prints
the new review id alone on its first line; an event prints ``SHORT_ID STATE``.

``plan``: submit, decide, resubmit, show, pending, list. A plan review is named by its id, its
thread id (``plan-1a2b3c4d``) or the 8 hex digits of it. ``submit`` prints the new plan review
id alone on its first line.

Every command takes ``--json``. Illegal transitions and bad input are one ``Error:`` line.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import click

from ..models import (
    PLAN_STATES,
    PRIORITIES,
    REVIEW_DECISIONS,
    REVIEW_STATES,
    REVIEW_TYPES,
    PlanReview,
    Review,
    ReviewIssue,
    ReviewIteration,
)
from ..plans import DECISIONS
from ..reviews import RESOLUTIONS
from ..store import Store
from .app import TextArgs, cli
from .common import JSON_OPTION, open_store, show_help_without_command, text_or_stdin
from .params import JSON
from .render import age, as_dict, echo_table, iso, json_text, one_line

#: Width a title or summary is cut to in listings.
TITLE_WIDTH = 50

# ---------------------------------------------------------------- rendering


def _what(r: Review) -> str:
    return r.branch if r.branch is not None else "-"


def _echo_reviews(found: Sequence[Review]) -> None:
    if not found:
        click.echo("no reviews")
        return
    echo_table(
        ("id", "state", "requester", "reviewers", "branch", "iter", "age"),
        [
            (
                r.short_id,
                r.state,
                r.requester,
                ",".join(r.reviewers),
                one_line(_what(r), TITLE_WIDTH),
                str(r.iterations),
                age(r.created_at),
            )
            for r in found
        ],
        frozenset({"iter", "age"}),
    )


def _echo_issues(found: Sequence[ReviewIssue], indent: str = "") -> None:
    if not found:
        click.echo(f"{indent}no issues")
        return
    echo_table(
        ("id", "severity", "type", "status", "where", "title"),
        [
            (
                str(i.id),
                i.severity,
                i.issue_type,
                i.status,
                _where(i),
                one_line(i.title, TITLE_WIDTH),
            )
            for i in found
        ],
        frozenset({"id"}),
        indent,
    )


def _where(i: ReviewIssue) -> str:
    if i.file_path is None:
        return "-"
    if i.line_start is None:
        return i.file_path
    if i.line_end is None or i.line_end == i.line_start:
        return f"{i.file_path}:{i.line_start}"
    return f"{i.file_path}:{i.line_start}-{i.line_end}"


def _echo_review(r: Review, iterations: Sequence[ReviewIteration]) -> None:
    click.echo(f"review {r.review_id} ({r.state})")
    rows = [
        ("thread", r.thread_id),
        ("requester", r.requester),
        ("reviewers", ", ".join(r.reviewers)),
        ("type", f"{r.review_type}, priority {r.priority}"),
        ("branch", f"{_what(r)} -> {r.base_branch}"),
        ("commit", r.commit_sha or "-"),
        ("pull request", "-" if r.pr_number is None else f"#{r.pr_number}"),
        ("repository", r.repo_path or "-"),
        ("remote", r.remote_url or "-"),
        ("created", iso(r.created_at) or "-"),
        ("completed", iso(r.completed_at) or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"  {key:<{width}}  {value}")
    for it in iterations:
        click.echo(
            f"  iteration {it.iteration_num} by {it.reviewer}: {it.decision} "
            f"({len(it.issues)} issue(s)): {one_line(it.summary, 80)}"
        )


def _echo_plans(found: Sequence[PlanReview]) -> None:
    if not found:
        click.echo("no plan reviews")
        return
    echo_table(
        ("id", "state", "rev", "requester", "reviewer", "title", "age"),
        [
            (
                p.short_id,
                p.state,
                str(p.revision),
                p.requester,
                p.reviewer,
                one_line(p.title, TITLE_WIDTH),
                age(p.created_at),
            )
            for p in found
        ],
        frozenset({"rev", "age"}),
    )


def _echo_plan(p: PlanReview) -> None:
    click.echo(f"plan review {p.plan_review_id} ({p.state}, revision {p.revision})")
    rows = [
        ("thread", p.thread_id),
        ("title", p.title),
        ("plan", p.plan_path),
        ("requester", p.requester),
        ("reviewer", p.reviewer),
        ("session", p.session_key or "-"),
        ("decided by", p.reviewed_by or "-"),
        ("comment", p.reviewer_comment or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"  {key:<{width}}  {value}")
    if p.summary:
        click.echo("")
        click.echo(p.summary)


# ---------------------------------------------------------------- lookups

_PLAN_THREAD = re.compile(r"(?:plan-)?([0-9a-fA-F]{8})")


def _review(store: Store, ref: str) -> Review:
    """A review by its full id, else by a unique prefix of it, or by its thread id
    (``review-1a2b3c4d``: the thread names the review's first 8 hex digits)."""
    try:
        return store.reviews.get(str(uuid.UUID(ref)))
    except ValueError:
        return store.reviews.resolve_prefix(ref.removeprefix("review-"))


def _plan(store: Store, ref: str) -> PlanReview:
    """A plan review by its full id, its thread id, or the 8 hex digits of its thread."""
    match = _PLAN_THREAD.fullmatch(ref)
    if match is not None:
        return store.plans.by_thread(f"plan-{match.group(1).lower()}")
    try:
        return store.plans.get(str(uuid.UUID(ref)))
    except ValueError:
        raise click.ClickException(
            f"{ref!r} is not a plan review id, thread id (plan-1a2b3c4d) or its 8 hex digits"
        ) from None


# ---------------------------------------------------------------- review


@cli.group(invoke_without_command=True)
@click.pass_context
def review(ctx: click.Context) -> None:
    """Code reviews: the seed's state machine, iterations and issues.

    \b
    new --submit--> pending_review --start--> under_review
    under_review --approve | request-changes | reject--> approved | changes_requested | rejected
    changes_requested --resubmit--> re_review --start--> under_review
    any unfinished state --cancel--> cancelled

    Each change mails the review's thread and records an activity. REVIEW is an id or a unique
    prefix of one (4+ hex digits; the 8 shown in listings always suffice).
    """
    show_help_without_command(ctx)


@review.command("create", short_help="Create a review; print its id.")
@click.argument("requester")
@click.option(
    "--reviewer",
    "-r",
    "reviewers",
    multiple=True,
    required=True,
    metavar="NAME",
    help="A reviewer (repeat for several; the first is the default actor of reviewer events).",
)
@click.option("--branch", default=None, help="The branch to review.")
@click.option("--base-branch", default="main", show_default=True)
@click.option("--commit", "commit_sha", default=None, metavar="SHA")
@click.option("--repo", "repo_path", default=None, metavar="PATH")
@click.option("--remote", "remote_url", default=None, metavar="URL")
@click.option("--pr", "pr_number", type=int, default=None, metavar="N")
@click.option("--type", "review_type", type=click.Choice(REVIEW_TYPES), default="full")
@click.option("--priority", type=click.Choice(PRIORITIES), default="normal", show_default=True)
@click.option("--submit", is_flag=True, help="Submit it at once (mails the reviewers).")
@JSON_OPTION
def review_create(
    requester: str,
    reviewers: tuple[str, ...],
    branch: str | None,
    base_branch: str,
    commit_sha: str | None,
    repo_path: str | None,
    remote_url: str | None,
    pr_number: int | None,
    review_type: str,
    priority: str,
    submit: bool,
    as_json: bool,
) -> None:
    """Create a review REQUESTER asks of the reviewers; print its id, then its state."""
    with open_store() as store:
        made = store.reviews.create(
            requester,
            reviewers=list(reviewers),
            branch=branch,
            base_branch=base_branch,
            commit_sha=commit_sha,
            repo_path=repo_path,
            remote_url=remote_url,
            pr_number=pr_number,
            review_type=review_type,
            priority=priority,
        )
        if submit:
            made = store.reviews.submit(made)
    if as_json:
        click.echo(json_text(made, indent=2))
        return
    click.echo(made.review_id)
    click.echo(f"{made.short_id}: {made.state}, thread {made.thread_id}")


@review.command("list", short_help="List reviews, newest first.")
@click.option("--state", type=click.Choice(REVIEW_STATES), default=None)
@click.option("--requester", default=None, metavar="NAME")
@click.option("--active", is_flag=True, help="Every unfinished review, oldest first.")
@click.option("--limit", "-n", type=int, default=50, show_default=True)
@JSON_OPTION
def review_list(
    state: str | None, requester: str | None, active: bool, limit: int, as_json: bool
) -> None:
    """List reviews (newest first), or with --active every unfinished one (oldest first)."""
    with open_store() as store:
        if active:
            if state is not None or requester is not None:
                raise click.ClickException("--active lists every unfinished review: no filters")
            found = store.reviews.active()
        else:
            found = store.reviews.list(state=state, requester=requester, limit=limit)
    if as_json:
        click.echo(json_text(found, indent=2))
    else:
        _echo_reviews(found)


@review.command("show", short_help="Show a review, its iterations and open issues.")
@click.argument("ref", metavar="REVIEW")
@JSON_OPTION
def review_show(ref: str, as_json: bool) -> None:
    """Show REVIEW with its iterations and its open issues."""
    with open_store() as store:
        found = _review(store, ref)
        iterations = store.reviews.iterations(found)
        issues = store.reviews.open_issues(found)
    if as_json:
        doc = {**as_dict(found), "iteration_list": iterations, "open_issues": issues}
        click.echo(json_text(doc, indent=2))
        return
    _echo_review(found, iterations)
    click.echo("open issues:")
    _echo_issues(issues, "  ")


def _event_command(event: str, help_text: str) -> None:
    @review.command(event.replace("_", "-"), short_help=help_text)
    @click.argument("ref", metavar="REVIEW")
    @click.option("--by", default=None, metavar="NAME", help="Who acts (see `review --help`).")
    @JSON_OPTION
    def command(ref: str, by: str | None, as_json: bool) -> None:
        with open_store() as store:
            changed = store.reviews.fire(_review(store, ref), event, by=by)
        if as_json:
            click.echo(json_text(changed, indent=2))
        else:
            click.echo(f"{changed.short_id} {changed.state}")

    command.__doc__ = (
        f"{help_text} Print the short id and the new state. Without --by, the "
        f"{'requester' if event in ('submit', 'resubmit', 'cancel') else 'first reviewer'} acts."
    )


for _event, _help in (
    ("submit", "Submit a new review (mails the reviewers)."),
    ("start", "Start reviewing (pending_review or re_review -> under_review)."),
    ("approve", "Approve (mails the requester)."),
    ("request_changes", "Request changes (mails the requester)."),
    ("reject", "Reject (mails the requester)."),
    ("resubmit", "Resubmit after changes (mails the reviewers)."),
    ("cancel", "Cancel an unfinished review."),
):
    _event_command(_event, _help)


@review.command("iterate", cls=TextArgs, short_help="Record a review iteration.")
@click.argument("ref", metavar="REVIEW")
@click.argument("summary")
@click.option("--reviewer", required=True, metavar="NAME", help="Who reviewed.")
@click.option("--decision", type=click.Choice(REVIEW_DECISIONS), required=True)
@click.option(
    "--issues", "issues", type=JSON, default=None, metavar="JSON", help="A JSON list of issues."
)
@click.option(
    "--suggestions", type=JSON, default=None, metavar="JSON", help="Suggestions, as JSON."
)
@click.option("--files", "files_reviewed", type=int, default=None, metavar="N")
@click.option("--lines", "lines_analyzed", type=int, default=None, metavar="N")
@click.option("--duration-ms", type=int, default=None, metavar="MS")
@click.option("--cost", "cost_usd", type=float, default=None, metavar="USD")
@click.option("--session", "reviewer_session_id", default=None, metavar="ID")
@JSON_OPTION
def review_iterate(
    ref: str,
    summary: str,
    reviewer: str,
    decision: str,
    issues: Any,
    suggestions: Any,
    files_reviewed: int | None,
    lines_analyzed: int | None,
    duration_ms: int | None,
    cost_usd: float | None,
    reviewer_session_id: str | None,
    as_json: bool,
) -> None:
    """Record an iteration of REVIEW with SUMMARY (`-`: standard input). --decision approve,
    request_changes or reject applies that event; comment changes no state. Issues are dicts
    with issue_type, severity, title, description and optionally file_path, line_start,
    line_end, code_snippet, suggestion, claude_md_ref."""
    text = text_or_stdin(summary)
    if issues is None:
        issues = []
    elif not isinstance(issues, list):
        raise click.ClickException("--issues must be a JSON list of issue objects")
    with open_store() as store:
        found = _review(store, ref)
        it = store.reviews.record_iteration(
            found,
            reviewer,
            decision,
            text,
            issues=issues,
            suggestions=suggestions,
            files_reviewed=files_reviewed,
            lines_analyzed=lines_analyzed,
            duration_ms=duration_ms,
            cost_usd=cost_usd,
            reviewer_session_id=reviewer_session_id,
        )
        state = store.reviews.get(found).state
    if as_json:
        click.echo(json_text(it, indent=2))
        return
    click.echo(
        f"{found.short_id} iteration {it.iteration_num}: {it.decision}, "
        f"{len(it.issues)} issue(s); review {state}"
    )


@review.command("issues", short_help="A review's open issues, most severe first.")
@click.argument("ref", metavar="REVIEW")
@click.option("--all", "show_all", is_flag=True, help="Resolved ones too, in the order raised.")
@JSON_OPTION
def review_issues(ref: str, show_all: bool, as_json: bool) -> None:
    """REVIEW's open issues (critical, high, medium, low), or with --all every issue."""
    with open_store() as store:
        found = _review(store, ref)
        issues = store.reviews.issues(found) if show_all else store.reviews.open_issues(found)
    if as_json:
        click.echo(json_text(issues, indent=2))
    else:
        _echo_issues(issues)


@review.command("resolve", short_help="Resolve an open issue.")
@click.argument("issue_id", type=int)
@click.argument("status", type=click.Choice(RESOLUTIONS))
@click.option("--iteration", type=int, default=None, help="Resolved in (default: the latest).")
@JSON_OPTION
def review_resolve(issue_id: int, status: str, iteration: int | None, as_json: bool) -> None:
    """Mark open issue ISSUE_ID fixed, wont_fix or duplicate (issues are never reopened)."""
    with open_store() as store:
        resolved = store.reviews.resolve_issue(issue_id, status, iteration=iteration)
    if as_json:
        click.echo(json_text(resolved, indent=2))
    else:
        click.echo(
            f"issue {resolved.id} {resolved.status} in iteration {resolved.resolved_in_iteration}"
        )


# ---------------------------------------------------------------- plan


@cli.group(invoke_without_command=True)
@click.pass_context
def plan(ctx: click.Context) -> None:
    """Plan reviews: a plan approved before it is carried out.

    \b
    pending --decide--> approved | rejected | changes_requested
    changes_requested --resubmit--> pending (revision + 1)

    The default reviewer is the human, "User" (registered on first use). PLAN is a plan review
    id, its thread id (plan-1a2b3c4d) or those 8 hex digits.
    """
    show_help_without_command(ctx)


@plan.command("submit", cls=TextArgs, short_help="Submit a plan; print its id.")
@click.argument("requester")
@click.argument("plan_path")
@click.option("--title", "-t", required=True, help="What the plan is about.")
@click.option("--summary", "-s", default="", help="The summary (`-`: standard input).")
@click.option("--reviewer", default="User", show_default=True, metavar="NAME")
@click.option("--session", "session_key", default=None, metavar="KEY")
@JSON_OPTION
def plan_submit(
    requester: str,
    plan_path: str,
    title: str,
    summary: str,
    reviewer: str,
    session_key: str | None,
    as_json: bool,
) -> None:
    """Submit the plan at PLAN_PATH of REQUESTER for review; print its id, then its thread."""
    text = text_or_stdin(summary)
    with open_store() as store:
        made = store.plans.submit(
            requester, plan_path, title, text, reviewer=reviewer, session_key=session_key
        )
    if as_json:
        click.echo(json_text(made, indent=2))
        return
    click.echo(made.plan_review_id)
    click.echo(f"{made.short_id}: pending, asked of {made.reviewer}, thread {made.thread_id}")


@plan.command("decide", short_help="Approve, reject or ask for changes.")
@click.argument("ref", metavar="PLAN")
@click.argument("state", type=click.Choice(DECISIONS))
@click.option("--comment", "-c", default=None, help="Why (`-`: standard input).")
@click.option("--by", "reviewed_by", default=None, metavar="NAME", help="Default: its reviewer.")
@JSON_OPTION
def plan_decide(
    ref: str, state: str, comment: str | None, reviewed_by: str | None, as_json: bool
) -> None:
    """Decide pending plan PLAN: approved, rejected or changes_requested."""
    text = None if comment is None else text_or_stdin(comment)
    with open_store() as store:
        decided = store.plans.decide(
            _plan(store, ref), state, comment=text, reviewed_by=reviewed_by
        )
    if as_json:
        click.echo(json_text(decided, indent=2))
    else:
        click.echo(f"{decided.short_id} {decided.state}")


@plan.command("resubmit", short_help="Resubmit a plan after requested changes.")
@click.argument("ref", metavar="PLAN")
@click.option("--summary", "-s", default=None, help="The new summary (`-`: standard input).")
@click.option("--path", "plan_path", default=None, help="The new plan path.")
@JSON_OPTION
def plan_resubmit(ref: str, summary: str | None, plan_path: str | None, as_json: bool) -> None:
    """Resubmit PLAN (changes_requested -> pending, revision + 1); mails the reviewer."""
    text = None if summary is None else text_or_stdin(summary)
    with open_store() as store:
        again = store.plans.resubmit(_plan(store, ref), summary=text, plan_path=plan_path)
    if as_json:
        click.echo(json_text(again, indent=2))
    else:
        click.echo(f"{again.short_id} {again.state} (revision {again.revision})")


@plan.command("show", short_help="Show a plan review.")
@click.argument("ref", metavar="PLAN")
@JSON_OPTION
def plan_show(ref: str, as_json: bool) -> None:
    """Show PLAN: state, revision, people, decision and summary."""
    with open_store() as store:
        found = _plan(store, ref)
    if as_json:
        click.echo(json_text(found, indent=2))
    else:
        _echo_plan(found)


@plan.command("pending", short_help="A session's plans waiting for a decision.")
@click.option("--session", "session_key", required=True, metavar="KEY")
@JSON_OPTION
def plan_pending(session_key: str, as_json: bool) -> None:
    """The plan reviews of session KEY that wait for a decision, oldest first."""
    with open_store() as store:
        found = store.plans.pending_for_session(session_key)
    if as_json:
        click.echo(json_text(found, indent=2))
    else:
        _echo_plans(found)


@plan.command("list", short_help="List plan reviews, newest first.")
@click.option("--state", type=click.Choice(PLAN_STATES), default=None)
@click.option("--requester", default=None, metavar="NAME")
@click.option("--limit", "-n", type=int, default=50, show_default=True)
@JSON_OPTION
def plan_list(state: str | None, requester: str | None, limit: int, as_json: bool) -> None:
    """List plan reviews, newest first."""
    with open_store() as store:
        found = store.plans.list(state=state, requester=requester, limit=limit)
    if as_json:
        click.echo(json_text(found, indent=2))
    else:
        _echo_plans(found)
