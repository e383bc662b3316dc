"""The real coding agents, run offline in the suite: Claude Code and Codex (npm packages pinned
in ``tests/clients/package.json``, installed by ``.ci/run`` into ``$IKIGAI_AGENTS_DIR``), each
against a ``tests.fakemodel.FakeModel`` on loopback, in a private HOME.

- ``agents_dir()``: where the packages are (``$IKIGAI_AGENTS_DIR``, else
  ``~/.cache/ikigai-store/agents``); ``binary(name)`` the ``claude``/``codex`` there; when one
  is missing the test is skipped, except in CI (``CI`` set) or with ``IKIGAI_REQUIRE_AGENTS=1``
  (which ``.ci/run`` exports): then it fails saying why, so CI never passes by skipping.
- ``Project``: a throwaway project directory and home, the environment the agents run in
  (nothing of the user's: HOME, CODEX_HOME and the state dir are the test's), and
  ``ikigai-store`` run as a user would (``install``), then ``claude(...)`` / ``codex(...)``.

Claude Code is run with ``ANTHROPIC_BASE_URL`` at the fake, ``ANTHROPIC_API_KEY=sk-test`` and
its non-essential traffic, telemetry and auto-updater off; as root it refuses
``--dangerously-skip-permissions``, so tools are allowed by name (``--allowedTools``). Its
``--debug-file`` log (``Run.debug``) shows each hook's duration and why a setting was skipped.
Codex is run with a ``wire_api = "responses"`` provider at the fake in ``$CODEX_HOME``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.fakemodel import FakeModel

#: The Claude Code server name of our MCP server, and the prefix of its tools.
CLAUDE_PREFIX = "mcp__ikigai-store__"
#: Codex's namespace for our MCP server's tools.
CODEX_NAMESPACE = "mcp__ikigai_store"
#: How long one agent run may take.
RUN_TIMEOUT = int(os.environ.get("IKIGAI_AGENT_TIMEOUT", "180"))


def agents_dir() -> Path:
    """Where ``.ci/run`` installs the agents' npm packages."""
    configured = os.environ.get("IKIGAI_AGENTS_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "ikigai-store" / "agents"


def agents_required() -> bool:
    """True in CI or with ``IKIGAI_REQUIRE_AGENTS=1``: a missing agent fails, not skips."""
    return bool(os.environ.get("CI")) or os.environ.get("IKIGAI_REQUIRE_AGENTS") == "1"


def _unavailable(reason: str) -> NoReturn:
    if agents_required():
        pytest.fail(f"{reason} (required: CI or IKIGAI_REQUIRE_AGENTS=1 is set)", pytrace=False)
    pytest.skip(reason)


def binary(name: str) -> Path:
    """The installed ``claude`` or ``codex`` (skipped or failed when missing, see above)."""
    path = agents_dir() / "node_modules" / ".bin" / name
    if not path.exists():
        _unavailable(
            f"{path} is missing: run .ci/run, or npm install --prefix {agents_dir()} the "
            "packages of tests/clients/package.json"
        )
    return path


def node_modules() -> Path:
    """The agents' ``node_modules`` (the TypeScript SDK and ajv are there too)."""
    path = agents_dir() / "node_modules"
    if not (path / "@modelcontextprotocol" / "sdk").is_dir():
        _unavailable(f"{path}/@modelcontextprotocol/sdk is missing: run .ci/run")
    return path


def ikigai_store() -> str:
    """The installed ``ikigai-store`` script (what a user runs and the hooks name)."""
    script = Path(sys.executable).with_name("ikigai-store")
    assert script.exists(), f"{script} is missing: install the package (pip install -e .)"
    return str(script)


@dataclass
class Run:
    """One finished agent run: its exit status, output and (Claude Code) debug log."""

    returncode: int
    stdout: str
    stderr: str
    debug: str


class Project:
    """A throwaway project with its own home, for one agent session or a few (see module)."""

    def __init__(self, root: Path, database_url: str) -> None:
        self.root = root
        self.dir = root / "project"
        self.home = root / "home"
        self.codex_home = self.home / ".codex"
        for path in (self.dir, self.home, self.codex_home):
            path.mkdir(parents=True, exist_ok=True)
        self.dir = self.dir.resolve()
        self.database_url = database_url
        self.env = {
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "XDG_STATE_HOME": str(root / "state"),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "IKIGAI_DATABASE_URL": database_url,
            "IKIGAI_OUTBOX": str(root / "outbox.sqlite3"),
            "PGCONNECT_TIMEOUT": "10",
            "LANG": "C.UTF-8",
            # the run's local services: ended soon after their last use, and with the run
            **{
                k: os.environ[k]
                for k in ("IKIGAI_RUNTIME_DIR", "IKIGAI_SERVICE_IDLE")
                if k in os.environ
            },
        }
        self.runs = 0

    def ikigai(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run ``ikigai-store ARGS`` in the project as its user would; its stdout."""
        done = subprocess.run(
            [ikigai_store(), *args],
            cwd=self.dir,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def install(self, *args: str) -> str:
        """``ikigai-store hooks install --project DIR ARGS``."""
        return self.ikigai("hooks", "install", "--project", str(self.dir), *args)

    def claude(
        self,
        fake: FakeModel,
        prompt: str,
        *,
        allowed: Sequence[str] = (),
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Run:
        """``claude -p PROMPT`` in the project against ``fake`` (tools ``allowed`` by name)."""
        self.runs += 1
        debug = self.root / f"claude-debug-{self.runs}.log"
        args = [str(binary("claude")), "-p", prompt, "--debug", "--debug-file", str(debug)]
        if allowed:
            args += ["--allowedTools", ",".join(allowed)]
        done = subprocess.run(
            [*args, *extra],
            cwd=self.dir,
            env={**self.claude_env(fake), **(env or {})},
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        text = debug.read_text(errors="replace") if debug.exists() else ""
        return Run(done.returncode, done.stdout, done.stderr, text)

    def claude_session(self, fake: FakeModel) -> subprocess.Popen[str]:
        """A Claude Code session fed user messages on stdin (``--input-format stream-json``):
        it stays open, idle between turns, until stdin closes. ``say`` sends one."""
        self.runs += 1
        debug = self.root / f"claude-debug-{self.runs}.log"
        return subprocess.Popen(
            [
                str(binary("claude")),
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--debug-file",
                str(debug),
            ],
            cwd=self.dir,
            env=self.claude_env(fake),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def trust_in_claude_code(self) -> None:
        """Mark the project trusted in Claude Code's ``~/.claude.json`` (as the user does by
        accepting its trust dialog)."""
        path = self.home / ".claude.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.setdefault("projects", {})[str(self.dir)] = {"hasTrustDialogAccepted": True}
        path.write_text(json.dumps(data))

    def claude_env(self, fake: FakeModel) -> dict[str, str]:
        """The environment Claude Code runs in: offline, at ``fake``."""
        return {
            **self.env,
            "ANTHROPIC_BASE_URL": fake.url,
            "ANTHROPIC_API_KEY": "sk-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }

    def claude_command(self, fake: FakeModel, *args: str) -> subprocess.CompletedProcess[str]:
        """``claude ARGS`` (a subcommand: ``mcp list``) in the project, against ``fake``."""
        return subprocess.run(
            [str(binary("claude")), *args],
            cwd=self.dir,
            env=self.claude_env(fake),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )

    def codex_provider(self, fake: FakeModel) -> None:
        """Point Codex at ``fake``: a ``responses`` provider in ``$CODEX_HOME/config.toml``
        (written before ``install --codex``, which must keep it)."""
        config = self.codex_home / "config.toml"
        config.write_text(
            'model = "fake-model"\n'
            'model_provider = "fake"\n'
            "\n"
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{fake.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "FAKE_API_KEY"\n'
        )

    def codex(self, fake: FakeModel, prompt: str) -> Run:
        """``codex exec --json PROMPT`` in the project against ``fake``."""
        done = subprocess.run(
            [str(binary("codex")), "exec", "--skip-git-repo-check", "--json", prompt],
            cwd=self.dir,
            env={**self.env, "FAKE_API_KEY": "sk-test"},
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        return Run(done.returncode, done.stdout, done.stderr, "")


def say(session: subprocess.Popen[str], text: str) -> None:
    """Send a user message to a ``claude_session``."""
    assert session.stdin is not None
    message = {"type": "user", "message": {"role": "user", "content": text}}
    session.stdin.write(json.dumps(message) + "\n")
    session.stdin.flush()


def codex_events(run: Run) -> list[dict[str, object]]:
    """The JSON events ``codex exec --json`` printed."""
    events = []
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    return events
