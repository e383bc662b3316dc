"""The collection loop of search (no database): whatever the estimates, the steps it takes
return exactly the newest matches, cover consecutive id ranges, and stay few.

A fake runs each step the way queries/search.sql documents it (a walk reads at most ``window``
rows newest first and stops at ``need`` matches; a probe returns the newest ``need`` matches of
an id range), over a table given as a list of (id, matches?) rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ikigai_store import search
from ikigai_store.ops import Call

Q = search.Queries(
    start="search_start",
    estimate="search_estimate",
    walk="search_walk",
    probe="search_probe",
    probe_index="search_probe_range",
    hits="search_hits",
    filters={"session_id": None},
)


class Table:
    """Rows (id, match, phrase) and what each step read."""

    def __init__(self, rows: list[tuple[int, bool, bool]]) -> None:
        self.rows = sorted(rows, reverse=True)  # newest first
        self.steps: list[tuple[str, Mapping[str, Any]]] = []

    def run(self, call: Call) -> dict[str, Any]:
        p = call.params
        self.steps.append((call.name, p))
        below = [r for r in self.rows if r[0] < p["hi"]]
        if call.name == "search_walk":
            hits = []
            for r in below[: p["window"]]:
                if r[1]:
                    hits.append(r)
                    if len(hits) == p["need"]:
                        break
            full = len(hits) >= p["need"]
            window = below[: p["window"]]
            floor = hits[-1][0] if full else (window[-1][0] if window else None)
            exhausted = not full and len(window) < p["window"]
            return self._row(hits, p, floor) | {"exhausted": exhausted}
        lo = p.get("lo", -(2**63)) if call.name != "search_probe" else -(2**63)
        hits = [r for r in below if r[1] and r[0] >= lo][: p["need"]]
        floor = (
            hits[-1][0] if len(hits) >= p["need"] else (lo if call.name != "search_probe" else None)
        )
        return self._row(hits, p, floor)

    @staticmethod
    def _row(
        hits: list[tuple[int, bool, bool]], p: Mapping[str, Any], floor: Any
    ) -> dict[str, Any]:
        return {
            "found": len(hits),
            "ids": [h[0] for h in hits][: p["keep"]],
            "phrase_ids": [h[0] for h in hits if h[2] and p["phrase"]],
            "floor": floor,
        }


def drive(table: Table, guess: search.Estimate, *, hi: int, need: int, keep: int) -> Any:
    op = search._collect(Q, query="q", phrase=True, guess=guess, hi=hi, need=need, keep=keep)
    try:
        call = next(op)
        while True:
            call = op.send(table.run(call))
    except StopIteration as stop:
        return stop.value


rows_strategy = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=400).map(
    lambda flags: [(i + 1, m, m and p) for i, (m, p) in enumerate(flags)]
)


@settings(max_examples=200, deadline=None)
@given(
    rows=rows_strategy,
    density=st.floats(min_value=0.0, max_value=1.0),
    need=st.integers(min_value=1, max_value=60),
    walk_density=st.sampled_from([0.0, 0.1, 2.0]),
    max_walk=st.sampled_from([1, 5, 20_000]),
    slack=st.sampled_from([0.01, 1.5]),
    cut=st.integers(min_value=0, max_value=450),
)
def test_steps_return_the_newest_matches(
    rows: list[tuple[int, bool, bool]],
    density: float,
    need: int,
    walk_density: float,
    max_walk: int,
    slack: float,
    cut: int,
) -> None:
    """Any table, any estimate, any strategy setting: the newest ``need`` matches below hi,
    newest first, and the phrase matches among exactly those."""
    saved = search._WALK_DENSITY, search._MAX_WALK, search._PROBE_SLACK
    search._WALK_DENSITY, search._MAX_WALK, search._PROBE_SLACK = walk_density, max_walk, slack
    try:
        table = Table(rows)
        total = max(1.0, float(len(rows)))
        guess = search.Estimate(max(1.0, density * total), total, max(1.0, density * total), total)
        hi = cut + 1
        got = drive(table, guess, hi=hi, need=need, keep=need)
    finally:
        search._WALK_DENSITY, search._MAX_WALK, search._PROBE_SLACK = saved
    want = [r for r in sorted(rows, reverse=True) if r[1] and r[0] < hi][:need]
    assert got.ids == [r[0] for r in want]
    assert got.phrase_ids == [r[0] for r in want if r[2]]
    assert got.found == len(want)
    # Consecutive ranges, newest first: each probe starts where the previous step stopped.
    uppers = [p["hi"] for name, p in table.steps]
    assert uppers == sorted(uppers, reverse=True)


def test_steps_are_few() -> None:
    """A rare word at a million rows: one probe. A common one: one walk. A middling one with a
    poor estimate: a handful of steps, never one per row."""
    n = 1_000_000
    common = Table([(i, i % 2 == 0, False) for i in range(1, n + 1)])
    drive(common, search.Estimate(n / 2, n, n / 2, n), hi=n + 1, need=1000, keep=1000)
    assert [s for s, _ in common.steps] == ["search_walk"]
    assert common.steps[0][1]["window"] <= 2500
    rare = Table([(i, i % 200_000 == 0, False) for i in range(1, n + 1)])
    drive(rare, search.Estimate(5, n, 5, n), hi=n + 1, need=1000, keep=1000)
    assert [s for s, _ in rare.steps] == ["search_probe"]
    for guessed in (n / 50, n / 5, n / 500):  # right, five times too many, ten times too few
        middle = Table([(i, i % 50 == 0, False) for i in range(1, n + 1)])
        drive(middle, search.Estimate(guessed, n, guessed, n), hi=n + 1, need=1000, keep=1000)
        assert len(middle.steps) <= 3, middle.steps
        read = sum(
            p["window"] if name == "search_walk" else (p["hi"] - max(1, p["lo"])) // 50
            for name, p in middle.steps
            if name != "search_probe"
        )
        assert read <= 8000, middle.steps


def test_estimate_reads_the_plan() -> None:
    """Estimate.from_row takes the four Append members of the EXPLAIN, at least 1 each."""
    member = {"Parent Relationship": "Member"}
    plan = {
        "Plan": {
            "Node Type": "Append",
            "Plans": [
                member | {"Plan Rows": 0},
                member | {"Plan Rows": 10},
                {"Parent Relationship": "InitPlan", "Plan Rows": 99},
                member | {"Plan Rows": 20},
                member | {"Plan Rows": 1000},
            ],
        }
    }
    assert search.Estimate.from_row({"QUERY PLAN": [plan]}) == search.Estimate(1, 10, 20, 1000)
    assert search.Estimate.from_row({"QUERY PLAN": [{"Plan": {"Plans": []}}]}) == search.UNKNOWN
    assert search.Estimate.from_row({"QUERY PLAN": None}) == search.UNKNOWN
