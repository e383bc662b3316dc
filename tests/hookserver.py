"""A real ``ikigai-store mcp --http`` process answering Claude Code's ``http`` hooks, as Claude
Code calls them: a POST of the hook's JSON event to ``/hooks/<name>``."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

#: Environment variables that would change who the server thinks an agent is.
IDENTITY_ENV = ("CLAUDE_PROJECT_DIR", "IKIGAI_ROLE", "IKIGAI_AS", "CLAUDE_CODE_TASK_LIST_ID")
SERVER = (sys.executable, "-m", "ikigai_store")


class HookServer:
    """``python -m ikigai_store --database URL mcp --http --port 0 ARGS``, its stderr in a file
    (read with ``log()``), started with the identity variables removed from its environment."""

    def __init__(
        self, url: str, state_dir: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = state_dir / f"server-{os.getpid()}-{time.monotonic_ns()}.log"
        base = {k: v for k, v in os.environ.items() if k not in IDENTITY_ENV}
        base.pop("IKIGAI_MCP_TOKEN", None)
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [*SERVER, "--database", url, "mcp", "--http", "--port", "0", *args],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={**base, "XDG_STATE_HOME": str(state_dir), **(env or {})},
            )
        deadline = time.monotonic() + 120
        while (found := re.search(r"serving http://([\d.]+):(\d+)/mcp", self.log())) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"no server: {self.log()}")
            time.sleep(0.05)
        self.host, self.port = found.group(1), int(found.group(2))

    def log(self) -> str:
        """Everything the server wrote on stderr so far."""
        return self.log_path.read_text()

    def post(
        self,
        path: str,
        body: bytes | str | dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """POST ``body`` (a dict is sent as JSON) to ``path``: (status, response body)."""
        data = json.dumps(body) if isinstance(body, dict) else body
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request(
                "POST", path, data, {"Content-Type": "application/json", **(headers or {})}
            )
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def hook(
        self,
        hook: str,
        event: dict[str, Any],
        *args: str,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """What the hook answers over http, given the command's options ``args`` (``--role R``,
        ``--as N``, ``--auto-reserve [SECONDS]``) as query parameters: None for ``{}``."""
        status, body = self.post(f"/hooks/{hook}{query(args)}", event, headers)
        assert status == 200, body
        answer: dict[str, Any] = json.loads(body)
        return answer or None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            self.proc.wait()


def query(args: tuple[str, ...]) -> str:
    """The query string standing for the hook command's options ``args``."""
    params, rest = [], list(args)
    names = {"--role": "role", "--as": "as"}
    while rest:
        option = rest.pop(0)
        if option in names:
            params.append((names[option], rest.pop(0)))
        elif option == "--auto-reserve":
            seconds = rest.pop(0) if rest and not rest[0].startswith("--") else ""
            params.append(("auto_reserve", seconds))
        else:
            raise ValueError(f"no query parameter for {option!r}")
    return "?" + urlencode(params) if params else ""
