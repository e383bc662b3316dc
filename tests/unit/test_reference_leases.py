"""Hand-checked cases for the leases reference model (tests/reference_leases.py); no database."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.reference_leases import EPOCH, RefLeaseWorld, periods_overlap
from tests.reference_mail import RefConflict, RefInvalid, RefNotFound

SECOND = timedelta(seconds=1)


def world(*names: str) -> RefLeaseWorld:
    w = RefLeaseWorld()
    for name in names:
        w.register(name)
    return w


def tok(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def test_exclusive_excludes_and_shared_share() -> None:
    """Exclusive refuses any other live holder; shared refuses only a live exclusive one."""
    w = world("ann", "bob", "cat")
    w.acquire("ann", "r", 10, True, tok(1))
    with pytest.raises(RefConflict) as refused:
        w.acquire("bob", "r", 10, False, tok(2))
    assert refused.value.named == ("r", "ann")
    w.acquire("ann", "s", 10, False, tok(3))
    w.acquire("bob", "s", 10, False, tok(4))
    with pytest.raises(RefConflict) as refused:
        w.acquire("cat", "s", 10, True, tok(5))
    assert refused.value.named == ("s", "ann", "bob")
    w.check()


def test_expiry_frees_at_the_exact_end() -> None:
    """A lease is live while expires_at > now: at its end another holder takes the resource,
    and the old lease can neither be renewed nor released as live."""
    w = world("ann", "bob")
    w.acquire("ann", "r", 10, True, tok(1))
    w.advance(10 * SECOND - timedelta(microseconds=1))
    with pytest.raises(RefConflict):
        w.acquire("bob", "r", 10, True, tok(2))
    w.advance(timedelta(microseconds=1))
    got = w.acquire("bob", "r", 10, True, tok(2))
    assert got.acquired_at == EPOCH + 10 * SECOND
    with pytest.raises(RefConflict):
        w.renew("r", tok(1), 5)
    assert w.release("r", tok(1)) is False


def test_reacquire_replaces_and_renew_keeps_the_start() -> None:
    """The same holder acquiring again replaces its lease (old token dead); renew moves the
    end only."""
    w = world("ann")
    w.acquire("ann", "r", 10, False, tok(1))
    w.advance(2 * SECOND)
    second = w.acquire("ann", "r", timedelta(seconds=30), True, tok(2))
    assert [x.token for x in w.held()] == [tok(2)]
    with pytest.raises(RefConflict):
        w.renew("r", tok(1), 5)
    w.advance(SECOND)
    renewed = w.renew("r", tok(2), 5)
    assert (renewed.acquired_at, renewed.expires_at) == (second.acquired_at, EPOCH + 8 * SECOND)
    assert w.release("r", tok(2)) is True and w.release("r", tok(2)) is False


def test_arguments_and_identities() -> None:
    """Checks run in order: holder, resource, ttl, exclusive; then missing and retired."""
    w = world("ann")
    for args, named in [
        (("bad name", "r", 1, True), "holder"),
        (("ann", "", 1, True), "resource"),
        (("ann", "r", 0, True), "ttl"),
        (("ann", "r", 86401, True), "ttl"),
        (("ann", "r", 1e-9, True), "ttl"),
        (("ann", "r", True, True), "ttl"),
        (("ann", "r", 1, "yes"), "exclusive"),
    ]:
        with pytest.raises(RefInvalid) as refused:
            w.acquire(*args, token=None)
        assert refused.value.named == (named,)
    with pytest.raises(RefNotFound):
        w.acquire("ghost", "r", 1, True, None)
    w.retire("ann")
    with pytest.raises(RefInvalid):
        w.acquire("ann", "r", 1, True, None)
    with pytest.raises(RefInvalid):
        w.renew("r", "not-a-token", 1)


def test_held_is_literal_and_ordered() -> None:
    """held matches prefixes literally and orders by resource, then acquisition."""
    w = world("ann", "bob")
    for n, resource in enumerate(["b_x", "a%b", "abb", "b_x"]):
        w.acquire(("ann", "bob")[n % 2] if n < 3 else "bob", resource, 10, False, tok(n))
    assert [(x.resource, x.holder) for x in w.held()] == [
        ("a%b", "bob"),
        ("abb", "ann"),
        ("b_x", "ann"),
        ("b_x", "bob"),
    ]
    assert [x.resource for x in w.held("a%")] == ["a%b"]
    assert [x.resource for x in w.held("b_", "ann")] == ["b_x"]
    assert w.force_release("b_x") == 2
    with pytest.raises(RefNotFound):
        w.held("", "ghost")


def test_periods_end_when_leases_end() -> None:
    """A released, force-released or replaced lease's period ends then, not at its expiry;
    the next holder's period starts no earlier, and the model's check holds."""
    w = world("ann", "bob")
    first = w.acquire("ann", "r", 10, True, tok(1))
    w.advance(2 * SECOND)
    assert w.release("r", tok(1)) is True
    assert (first.acquired_at, first.end) == (EPOCH, EPOCH + 2 * SECOND)
    second = w.acquire("bob", "r", 10, True, tok(2))
    assert second.acquired_at == first.end
    w.advance(SECOND)
    w.acquire("bob", "r", 10, False, tok(3))  # replaced: ends now
    assert second.end == EPOCH + 3 * SECOND
    w.advance(20 * SECOND)  # expired: ends at its expiry, not later
    assert w.history[-1].end == EPOCH + 13 * SECOND
    w.check()


def test_periods_overlap_names_the_pair() -> None:
    """Periods overlap only for one resource, different holders, one exclusive, and a common
    instant ([start, end): touching ends do not overlap)."""
    t = [EPOCH + n * SECOND for n in range(4)]
    a = ("r", "ann", True, t[0], t[2])
    assert periods_overlap([a, ("r", "bob", False, t[2], t[3])]) is None
    assert periods_overlap([a, ("s", "bob", True, t[1], t[3])]) is None
    assert periods_overlap([a, ("r", "ann", True, t[1], t[3])]) is None
    assert (
        periods_overlap([("r", "ann", False, t[0], t[2]), ("r", "bob", False, t[1], t[3])]) is None
    )
    late = ("r", "bob", False, t[1], t[3])
    assert periods_overlap([a, late]) == (a, late)
