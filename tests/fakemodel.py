"""A scripted model endpoint on 127.0.0.1 that records every request: what the real coding
agents (Claude Code, Codex) are run against in the suite, offline.

It speaks the two wires the agents use: Anthropic's Messages API (``POST /v1/messages``,
streamed as server-sent events when ``stream`` is true; Claude Code) and OpenAI's Responses API
(``POST /v1/responses``, streamed; Codex with a ``wire_api = "responses"`` provider). Every
request is recorded (path, headers, JSON body) before it is answered: the request is where a
test sees what the model was really given (the tools, the system prompt, the hook context).

A test scripts the model's turns with ``Text`` and ``ToolCall`` replies, given in order to the
agent's main-loop requests (those that offer tools); a request offering no tools (a side
request: a title, a summary) and any main-loop request after the script ran out get a short
text. A ``ToolCall`` may name a tool by a suffix (``"whoami"``): the first offered tool whose
name ends with it is called, so one script fits both agents' MCP tool naming. Invariants:
- nothing leaves the machine: the server binds to 127.0.0.1 on a free port;
- every request is recorded, including those answered with an error (unknown path, bad JSON).
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeModel", "Recorded", "Text", "ToolCall", "deferred_tools", "tool_names"]


@dataclass(frozen=True)
class Text:
    """The model answers with this text and ends its turn."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model calls the tool ``name`` (an exact name, else the suffix of an offered one;
    or a deferred one Claude Code lists) with ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Reply = Text | ToolCall


@dataclass
class Recorded:
    """One request the agent sent: its path, headers and JSON body (None if not JSON)."""

    path: str
    headers: dict[str, str]
    body: Any

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools the request offers (either wire)."""
        if not isinstance(self.body, dict):
            return []
        tools = self.body.get("tools") or []
        return [tool for tool in tools if isinstance(tool, dict)]

    @property
    def text(self) -> str:
        """Everything the request carries, as one JSON text (for ``in`` checks)."""
        return json.dumps(self.body, ensure_ascii=False)


def tool_names(request: Recorded) -> list[str]:
    """The names of the tools a request offers, on either wire; a tool of a Codex
    ``namespace`` (how it offers an MCP server's tools) is ``<namespace>.<tool>``."""
    names = []
    for tool in request.tools:
        name = tool.get("name")
        if not isinstance(name, str):
            continue
        if tool.get("type") == "namespace":
            names += [f"{name}.{inner.get('name')}" for inner in tool.get("tools") or []]
        else:
            names.append(name)
    return names


def offered_tool(request: Recorded, name: str) -> dict[str, Any] | None:
    """The definition of the offered tool ``name`` (``<namespace>.<tool>`` for Codex's)."""
    space, _, short = name.rpartition(".")
    for tool in request.tools:
        if tool.get("type") == "namespace" and tool.get("name") == space:
            for inner in tool.get("tools") or []:
                if inner.get("name") == short:
                    return dict(inner)
        elif not space and tool.get("name") == name:
            return tool
    return None


_DEFERRED = re.compile(r"^(mcp__[\w.-]+__[\w.-]+)$", re.MULTILINE)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def deferred_tools(request: Recorded) -> list[str]:
    """The MCP tool names a Claude Code request lists, one a line, outside ``tools`` (newer
    versions list MCP tools as deferred tools, loaded with ToolSearch, in a message)."""
    body = dict(request.body) if isinstance(request.body, dict) else {}
    body.pop("tools", None)
    found: set[str] = set()
    for text in _strings(body):
        found.update(_DEFERRED.findall(text))
    return sorted(found)


Script = Callable[[Recorded], Reply | None]


class FakeModel:
    """The endpoint (``url``: its base, ``http://127.0.0.1:PORT``), answering from ``replies``
    (see the module docstring); ``requests`` lists what arrived, in order. A context manager:
    stops its server on exit."""

    def __init__(self, replies: Sequence[Reply] = (), *, model: str = "fake-model") -> None:
        self.model = model
        self.requests: list[Recorded] = []
        self._replies = list(replies)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The endpoint's base URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._replies.extend(replies)

    def turns(self, path: str) -> list[Recorded]:
        """The main-loop requests (those offering tools) to ``path``."""
        return [r for r in self.requests if r.path == path and r.tools]

    # ------------------------------------------------------------------ answering

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            if request.tools and self._replies:
                return self._replies.pop(0)
        return Text("ok")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._record(self, None)
                self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = fake._record(self, body)
                path = self.path.split("?", 1)[0]
                if not isinstance(body, dict):
                    self._json(400, {"error": {"type": "invalid_request", "message": "JSON"}})
                elif path.endswith("/messages/count_tokens"):
                    self._json(200, {"input_tokens": len(request.text) // 4})
                elif path.endswith("/messages"):
                    fake._anthropic(self, request)
                elif path.endswith("/responses"):
                    fake._responses(self, request)
                else:
                    self._json(404, {"error": {"type": "not_found", "message": path}})

            def _json(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> Recorded:
        request = Recorded(handler.path.split("?", 1)[0], dict(handler.headers.items()), body)
        with self._lock:
            self.requests.append(request)
        return request

    def _resolve(self, call: ToolCall, request: Recorded) -> str:
        offered = tool_names(request) + deferred_tools(request)
        if call.name in offered:
            return call.name
        for name in offered:
            if name.endswith("__" + call.name) or name.endswith("." + call.name):
                return name
        return call.name

    @staticmethod
    def _sse(handler: BaseHTTPRequestHandler, events: list[tuple[str, dict[str, Any]]]) -> None:
        payload = b"".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
        )
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _anthropic(self, handler: BaseHTTPRequestHandler, request: Recorded) -> None:
        reply = self._next(request)
        usage = {"input_tokens": len(request.text) // 4, "output_tokens": 5}
        if isinstance(reply, ToolCall):
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": "toolu_" + uuid.uuid4().hex[:20],
                "name": self._resolve(reply, request),
                "input": reply.arguments,
            }
            stop = "tool_use"
        else:
            block = {"type": "text", "text": reply.text}
            stop = "end_turn"
        message = {
            "id": "msg_" + uuid.uuid4().hex[:20],
            "type": "message",
            "role": "assistant",
            "model": request.body.get("model", self.model),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not request.body.get("stream"):
            payload = json.dumps(message).encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        start = {**message, "content": [], "stop_reason": None}
        if block["type"] == "tool_use":
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self._sse(
            handler,
            [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": opened},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ],
        )

    def _responses(self, handler: BaseHTTPRequestHandler, request: Recorded) -> None:
        reply = self._next(request)
        response_id = "resp_" + uuid.uuid4().hex[:20]
        if isinstance(reply, ToolCall):
            space, _, name = self._resolve(reply, request).rpartition(".")
            item: dict[str, Any] = {
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:20],
                "call_id": "call_" + uuid.uuid4().hex[:20],
                **({"namespace": space} if space else {}),
                "name": name,
                "arguments": json.dumps(reply.arguments),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": "msg_" + uuid.uuid4().hex[:20],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        tokens = len(request.text) // 4
        usage = {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + 5,
        }
        base = {"id": response_id, "object": "response", "model": self.model}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": {**base, "output": []}}),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
        ]
        if item["type"] == "message":
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": reply.text if isinstance(reply, Text) else "",
                    },
                )
            )
        events += [
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**base, "status": "completed", "output": [item], "usage": usage},
                },
            ),
        ]
        self._sse(handler, events)


def iter_tool_results(request: Recorded) -> Iterator[str]:
    """The text of each tool result a request carries back to the model (either wire), in
    order."""
    body = request.body if isinstance(request.body, dict) else {}
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_result":
                inner = part.get("content")
                if isinstance(inner, str):
                    yield inner
                else:  # one text per result (a ToolSearch result has none: "")
                    yield "".join(
                        sub["text"]
                        for sub in (inner if isinstance(inner, list) else [])
                        if isinstance(sub, dict) and isinstance(sub.get("text"), str)
                    )
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            yield output if isinstance(output, str) else json.dumps(output)
