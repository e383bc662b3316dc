"""``ikigai_store._net``: which binds count as loopback, and binding errors."""

from __future__ import annotations

import socket

import pytest

from ikigai_store import InvalidArgument
from ikigai_store._net import is_loopback, listen, listens_on_loopback


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("localhost", True),
        ("agents.localhost", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("", False),
        (None, False),
    ],
)
def test_is_loopback_by_name(host: str | None, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_listen_binds_every_address_and_knows_loopback_from_the_rest() -> None:
    local = listen("localhost", 0)
    wildcard = listen("0.0.0.0", 0)
    try:
        assert local and listens_on_loopback(local)
        assert not listens_on_loopback(wildcard)
        assert not listens_on_loopback([])
    finally:
        for sock in (*local, *wildcard):
            sock.close()


def test_listen_refuses_what_it_cannot_bind_and_leaves_nothing_open() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InvalidArgument, match=rf"127\.0\.0\.1:{port}: Address already in use"):
            listen("127.0.0.1", port)
    with pytest.raises(InvalidArgument, match=r"cannot serve on nowhere\.invalid: "):
        listen("nowhere.invalid", 0)
    with pytest.raises(InvalidArgument, match="label too long"):
        listen("a" * 300, 0)
