"""A scripted Anthropic Messages API on loopback, for running real agent clients in tests.

``FakeAnthropic`` serves ``POST /v1/messages`` (streamed as server-sent events when the request
asks for ``stream``, else one JSON message) and ``POST /v1/messages/count_tokens`` on
127.0.0.1, answering each model call with the next scripted text (the last one again when the
script runs out), and records every request it gets: the request is where you see what the
model was really given. Anything else gets an empty JSON object, so a client's side requests
never fail a test. Point a client at it with ``ANTHROPIC_BASE_URL=fake.url`` and any
``ANTHROPIC_API_KEY``.

Used as a context manager (``with FakeAnthropic(["hello"]) as fake: ...``); the server runs in
a daemon thread and is shut down on exit. Standard library only.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnthropic", "Recorded"]


@dataclass(frozen=True)
class Recorded:
    """One request the fake received: method, path, headers and the JSON body (or None)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def is_model_call(self) -> bool:
        """A ``POST /v1/messages`` (not ``count_tokens``)."""
        return self.method == "POST" and self.path.split("?")[0] == "/v1/messages"


class FakeAnthropic:
    """A loopback Messages API answering with scripted texts (see the module docstring)."""

    def __init__(self, replies: Sequence[str], *, model: str = "claude-test") -> None:
        if not replies:
            raise ValueError("give at least one scripted reply")
        self.replies = list(replies)
        self.model = model
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._answered = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeAnthropic:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Listen on a free port of 127.0.0.1, serving from a daemon thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _record(self, body: Any) -> Recorded:
                recorded = Recorded(self.command, self.path, dict(self.headers), body)
                with fake._lock:
                    fake.requests.append(recorded)
                return recorded

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._record(None)
                self._json(200, {})

            def do_HEAD(self) -> None:
                self._record(None)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                recorded = self._record(self._body())
                path = self.path.split("?")[0]
                if path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": 10})
                    return
                if not recorded.is_model_call:
                    self._json(200, {})
                    return
                text = fake._next_reply()
                body = recorded.body if isinstance(recorded.body, dict) else {}
                if body.get("stream"):
                    self._stream(text)
                else:
                    self._json(200, fake.message(text))

            def _stream(self, text: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event, data in fake.events(text):
                    chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the client's ``ANTHROPIC_BASE_URL``."""
        if self._server is None:
            raise RuntimeError("the fake is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ------------------------------------------------------------ answers

    def _next_reply(self) -> str:
        with self._lock:
            text = self.replies[min(self._answered, len(self.replies) - 1)]
            self._answered += 1
            return text

    def model_calls(self) -> list[Recorded]:
        """The ``POST /v1/messages`` requests received, in order."""
        with self._lock:
            return [r for r in self.requests if r.is_model_call]

    def message(self, text: str) -> dict[str, Any]:
        """A complete (non-streamed) Messages API response carrying ``text``."""
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": max(1, len(text.split()))},
        }

    def events(self, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The server-sent events of a streamed response carrying ``text``, in order."""
        message = self.message("")
        message["content"] = []
        message["stop_reason"] = None
        message["usage"] = {"input_tokens": 10, "output_tokens": 1}
        yield "message_start", {"type": "message_start", "message": message}
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == len(words) - 1 else word + " "
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": max(1, len(words))},
            },
        )
        yield "message_stop", {"type": "message_stop"}
