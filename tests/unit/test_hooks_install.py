"""``ikigai-store hooks install``: merging our hooks and MCP server into a project's Claude Code
settings without losing anything (no database)."""

from __future__ import annotations

import json
import os
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ikigai_store.cli import cli
from ikigai_store.hooks import install

PROGRAM = "/opt/venv/bin/ikigai-store"


@pytest.fixture(autouse=True)
def running_as_ikigai_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sys.argv[0] is an ``ikigai-store`` script (as when run from a shell); no database URL
    and no data directory in the environment (the embedded default), unless a test sets
    one."""
    monkeypatch.delenv("IKIGAI_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("IKIGAI_DATA_DIR", raising=False)
    script = tmp_path / "bin" / "ikigai-store"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "argv", [str(script), "hooks", "install"])
    return script


def installed(project: Path, *args: str) -> Result:
    """Run ``hooks install --project PROJECT ARGS`` in-process."""
    return CliRunner().invoke(
        cli, ["hooks", "install", "--project", str(project), *args], catch_exceptions=False
    )


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    """Our hook entries under ``event`` (with their group's matcher)."""
    return [
        {**hook, "matcher": group.get("matcher")}
        for group in settings["hooks"][event]
        for hook in group["hooks"]
        if " hook " in hook.get("command", "") and "ikigai-store" in hook["command"]
    ]


EXISTING_SETTINGS = {
    "permissions": {"allow": ["Bash(git status)"]},
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check-bash.sh"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "say hi"}]}],
    },
}


def test_fresh_project_gets_every_hook_and_the_server(
    tmp_path: Path, running_as_ikigai_store: Path
) -> None:
    """Into an empty project: the five hooks (matchers on the tool events) with this
    executable's absolute path, and the MCP server; files are 2-space JSON."""
    result = installed(tmp_path)
    assert result.exit_code == 0, result.output
    exe = str(running_as_ikigai_store.resolve())
    settings_path = tmp_path / ".claude" / "settings.json"
    settings = read(settings_path)
    for event, hook, matcher in install.HOOK_EVENTS:
        [entry] = ours(settings, event)
        assert entry == {
            "type": "command",
            "command": f"{exe} hook {hook}",
            "timeout": install.HOOK_TIMEOUT,
            "matcher": matcher,
        }
    assert settings_path.read_text().startswith('{\n  "hooks": {\n    "SessionStart"')
    assert read(tmp_path / ".mcp.json") == {
        "mcpServers": {"ikigai-store": {"command": exe, "args": ["mcp"]}}
    }
    assert f"{settings_path}: written" in result.output


def test_merge_keeps_other_keys_and_hooks_and_a_second_run_changes_nothing(
    tmp_path: Path,
) -> None:
    """Existing keys, hook entries and events are kept; our entries join them; running
    again writes nothing (byte-identical files, "unchanged")."""
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(json.dumps(EXISTING_SETTINGS, indent=4))
    assert installed(tmp_path, "--as", "Ada", "--role", "lead").exit_code == 0
    settings = read(settings_path)
    assert settings["permissions"] == EXISTING_SETTINGS["permissions"]
    assert settings["model"] == "opus"
    assert settings["hooks"]["Notification"] == EXISTING_SETTINGS["hooks"]["Notification"]
    assert settings["hooks"]["PreToolUse"][0] == EXISTING_SETTINGS["hooks"]["PreToolUse"][0]
    assert settings["hooks"]["Stop"][0] == EXISTING_SETTINGS["hooks"]["Stop"][0]
    [stop] = ours(settings, "Stop")
    assert stop["command"].endswith("hook stop --as Ada --role lead")
    mcp = read(tmp_path / ".mcp.json")
    assert mcp["mcpServers"]["ikigai-store"]["args"] == ["mcp", "--as", "Ada", "--role", "lead"]

    before = {p: p.read_bytes() for p in (settings_path, tmp_path / ".mcp.json")}
    mtimes = {p: p.stat().st_mtime_ns for p in before}
    again = installed(tmp_path, "--as", "Ada", "--role", "lead")
    assert again.exit_code == 0 and again.output.count("unchanged") == 3
    assert {p: p.read_bytes() for p in before} == before
    assert {p: p.stat().st_mtime_ns for p in before} == mtimes


def test_our_entries_are_replaced_in_place(tmp_path: Path) -> None:
    """An older entry of ours (another path, other options, a key the user added) is
    updated where it stands, a duplicate of it removed; the user's hooks beside it stay."""
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    old = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Edit|Write",
                    "hooks": [
                        {"type": "command", "command": "lint.sh"},
                        {
                            "type": "command",
                            "command": "/old/venv/bin/ikigai-store hook pre-tool --role x",
                            "statusMessage": "checking reservations",
                        },
                    ],
                },
                {"hooks": [{"type": "command", "command": "ikigai-store hook pre-tool"}]},
            ]
        }
    }
    settings_path.write_text(json.dumps(old))
    assert installed(tmp_path, "--auto-reserve").exit_code == 0
    groups = read(settings_path)["hooks"]["PreToolUse"]
    assert len(groups) == 1 and groups[0]["matcher"] == "Edit|Write"
    lint, ours_ = groups[0]["hooks"]
    assert lint == {"type": "command", "command": "lint.sh"}
    assert ours_["command"].endswith("/ikigai-store hook pre-tool --auto-reserve")
    assert not ours_["command"].startswith("/old/")
    assert ours_["statusMessage"] == "checking reservations"
    assert ours_["timeout"] == install.HOOK_TIMEOUT


def test_mcp_json_keeps_other_servers(tmp_path: Path) -> None:
    """.mcp.json's other servers and keys stay; our server's extra keys (env) are kept."""
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "github": {"command": "gh-mcp", "args": ["--stdio"]},
                    "ikigai-store": {"command": "old", "args": [], "env": {"X": "1"}},
                },
                "other": True,
            }
        )
    )
    assert installed(tmp_path).exit_code == 0
    data = read(path)
    assert data["other"] is True
    assert data["mcpServers"]["github"] == {"command": "gh-mcp", "args": ["--stdio"]}
    assert data["mcpServers"]["ikigai-store"]["env"] == {"X": "1"}
    assert data["mcpServers"]["ikigai-store"]["args"] == ["mcp"]


def test_dry_run_prints_diffs_and_writes_nothing(tmp_path: Path) -> None:
    """--dry-run prints a unified diff per file and creates or changes no file."""
    path = tmp_path / ".mcp.json"
    path.write_text('{"mcpServers": {}}\n')
    result = installed(tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "--- /dev/null" in result.output
    assert f"+++ {tmp_path / '.claude' / 'settings.json'}" in result.output
    assert f"--- {path}" in result.output and '+    "ikigai-store": {' in result.output
    assert not (tmp_path / ".claude").exists()
    assert path.read_text() == '{"mcpServers": {}}\n'
    assert installed(tmp_path).exit_code == 0
    assert installed(tmp_path, "--dry-run").output.count("unchanged") == 3


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"hooks": []}', '"hooks" must be a JSON object'),
        ('{"hooks": {"Stop": {}}}', '"hooks"."Stop" must be a JSON list'),
    ],
)
def test_invalid_settings_are_refused_and_nothing_is_written(
    tmp_path: Path, text: str, match: str
) -> None:
    """A settings file that is not JSON, or not Claude Code's shape, is refused with a
    message naming it (exit 1, one Error: line) and neither file is written."""
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(text)
    result = installed(tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1
    assert match in result.stderr and str(settings_path) in result.stderr
    assert settings_path.read_text() == text
    assert not (tmp_path / ".mcp.json").exists()


def test_invalid_mcp_json_is_refused_before_settings_are_written(tmp_path: Path) -> None:
    """A broken .mcp.json stops the install before settings.json is written."""
    (tmp_path / ".mcp.json").write_text("{,}")
    result = installed(tmp_path)
    assert result.exit_code == 1 and "is not valid JSON" in result.stderr
    assert not (tmp_path / ".claude").exists()


def test_files_are_written_atomically_keeping_their_mode(tmp_path: Path) -> None:
    """An existing file keeps its permissions, and no temporary file is left behind."""
    path = tmp_path / ".mcp.json"
    path.write_text("{}")
    os.chmod(path, 0o600)
    assert installed(tmp_path).exit_code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".claude", ".mcp.json", "bin"]
    assert sorted(p.name for p in (tmp_path / ".claude").iterdir()) == [
        "settings.json",
        "settings.local.json",
    ]


def test_our_commands_are_recognised_by_their_words() -> None:
    """Ours: an ikigai-store executable (any path, options before `hook`) running `hook
    <name>`; not ours: other programs, other hooks, unparseable commands."""
    recognise = install._our_hook
    assert recognise("/a/b/ikigai-store hook stop --as X") == "stop"
    assert recognise("'/with space/ikigai-store' --database u hook prompt") == "prompt"
    assert recognise("ikigai-store mail inbox") is None
    assert recognise("my-ikigai-store-wrapper hook stop") is None
    assert recognise("echo 'unbalanced") is None
    assert recognise(None) is None


def test_the_executable_falls_back_to_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Not run as ikigai-store (python -m, a test runner): the one on PATH, absolute."""
    monkeypatch.setattr(sys, "argv", ["-m"])
    bin_dir = tmp_path / "pathbin"
    bin_dir.mkdir()
    exe = bin_dir / "ikigai-store"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert install.executable() == str(exe.resolve())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(Exception, match="cannot find the ikigai-store executable"):
        install.executable()


def _watch_entries(settings: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        hook
        for group in settings["hooks"]["Stop"]
        for hook in group["hooks"]
        if " watch" in hook.get("command", "")
    ]


def test_wake_rewake_adds_one_async_rewake_stop_entry(
    tmp_path: Path, running_as_ikigai_store: Path
) -> None:
    """--wake rewake adds the asyncRewake Stop entry running `watch --rewake` (with --as and
    --role), beside the user's Stop hooks and ours; again: unchanged; --wake none removes it."""
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(json.dumps(EXISTING_SETTINGS))
    assert installed(tmp_path, "--wake", "rewake", "--as", "Coder", "--role", "dev").exit_code == 0
    settings = read(settings_path)
    (entry,) = _watch_entries(settings)
    assert entry == {
        "type": "command",
        "command": f"{running_as_ikigai_store} watch --as Coder --role dev --rewake",
        "asyncRewake": True,
        "rewakeMessage": install.REWAKE_MESSAGE,
        "timeout": install.REWAKE_TIMEOUT,
    }
    assert {"type": "command", "command": "notify-send done", "timeout": 5} in [
        h for g in settings["hooks"]["Stop"] for h in g["hooks"]
    ]
    before = settings_path.read_text()
    again = installed(tmp_path, "--wake", "rewake", "--as", "Coder", "--role", "dev")
    assert "settings.json: unchanged" in again.output and settings_path.read_text() == before
    assert installed(tmp_path, "--as", "Coder", "--role", "dev").exit_code == 0
    assert _watch_entries(read(settings_path)) == []
    assert len(ours(read(settings_path), "Stop")) == 1


def test_an_earlier_monitor_plugin_is_disabled_and_the_mode_is_gone(tmp_path: Path) -> None:
    """--wake monitor no longer exists (Claude Code does not start a project plugin's monitor
    headless); an install disables the plugin an earlier one enabled, keeping the rest."""
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    key = "ikigai-store@ikigai-store-local"
    settings_path.write_text(json.dumps({"enabledPlugins": {key: True, "other@m": True}}))
    refused = installed(tmp_path, "--wake", "monitor")
    assert refused.exit_code != 0 and "monitor" in refused.output
    assert installed(tmp_path).exit_code == 0
    assert read(settings_path)["enabledPlugins"] == {key: False, "other@m": True}


def test_watch_commands_are_recognised() -> None:
    assert install._our_hook("/x/ikigai-store watch --rewake") == "watch"
    assert install._our_hook("/x/ikigai-store --database u watch") == "watch"
    assert install._our_hook("/x/ikigai-store hook stop") == "stop"
    assert install._our_hook("watch ikigai-store-like") is None


# ------------------------------------------------------------------------ http hooks

SERVER = "http://127.0.0.1:8765"


def http_ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    """Our http hook entries under ``event`` (with their group's matcher)."""
    return [
        {**hook, "matcher": group.get("matcher")}
        for group in settings["hooks"][event]
        for hook in group["hooks"]
        if hook.get("type") == "http" and "/hooks/" in hook.get("url", "")
    ]


def test_http_hooks_post_to_the_server_and_never_hold_the_token(tmp_path: Path) -> None:
    """--http URL: each hook is an http entry posting to URL/hooks/<name> with the project in
    the query, the token and the agent's environment as $VARIABLE headers listed in
    allowedEnvVars, the same timeout and matcher; no token value is written; .mcp.json is
    what the command form writes."""
    project = tmp_path / "my project"
    project.mkdir()
    result = CliRunner().invoke(
        cli,
        ["hooks", "install", "--project", str(project), "--http", SERVER],
        catch_exceptions=False,
        env={"IKIGAI_MCP_TOKEN": "s3cret-value"},
    )
    assert result.exit_code == 0, result.output
    text = (project / ".claude" / "settings.json").read_text()
    assert "s3cret-value" not in text
    settings = json.loads(text)
    quoted = str(project.resolve()).replace(" ", "%20")
    for event, hook, matcher in install.HOOK_EVENTS:
        if hook in install.COMMAND_ONLY:  # Claude Code refuses http hooks for SessionStart
            assert http_ours(settings, event) == [] and len(ours(settings, event)) == 1
            continue
        [entry] = http_ours(settings, event)
        assert entry == {
            "type": "http",
            "url": f"{SERVER}/hooks/{hook}?project={quoted}",
            "headers": {
                "Authorization": "Bearer $IKIGAI_MCP_TOKEN",
                "X-Ikigai-Role": "$IKIGAI_ROLE",
                "X-Ikigai-As": "$IKIGAI_AS",
                "X-Ikigai-Task-List": "$CLAUDE_CODE_TASK_LIST_ID",
            },
            "allowedEnvVars": [
                "IKIGAI_MCP_TOKEN",
                "IKIGAI_ROLE",
                "IKIGAI_AS",
                "CLAUDE_CODE_TASK_LIST_ID",
            ],
            "timeout": install.HOOK_TIMEOUT,
            "matcher": matcher,
        }
    assert read(project / ".mcp.json")["mcpServers"]["ikigai-store"]["args"] == ["mcp"]


def test_http_options_go_into_the_query(tmp_path: Path) -> None:
    """--as, --role and --auto-reserve (pre-tool only, as seconds) are query parameters; the
    server URL may end in / or /mcp."""
    assert (
        installed(
            tmp_path, "--http", SERVER + "/mcp/", "--as", "Ada", "--role", "lead", "--auto-reserve"
        ).exit_code
        == 0
    )
    settings = read(tmp_path / ".claude" / "settings.json")
    project = str(tmp_path.resolve())
    [pre] = http_ours(settings, "PreToolUse")
    assert pre["url"] == (
        f"{SERVER}/hooks/pre-tool?project={project}&role=lead&as=Ada"
        f"&auto_reserve={install.AUTO_RESERVE_SECONDS}"
    )
    [stop] = http_ours(settings, "Stop")
    assert stop["url"] == f"{SERVER}/hooks/stop?project={project}&role=lead&as=Ada"


def test_auto_reserve_seconds_agree_with_the_hook() -> None:
    """install's copy of the default lease length is the hook's."""
    from ikigai_store.hooks.claude import AUTO_RESERVE_SECONDS

    assert install.AUTO_RESERVE_SECONDS == AUTO_RESERVE_SECONDS


def test_switching_between_command_and_http_replaces_in_place(tmp_path: Path) -> None:
    """A command install, then --http: each entry of ours becomes an http one where it
    stood (the user's keys kept, no command left), and running it again changes nothing;
    installing without --http turns them back into commands (no url, headers left)."""
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(json.dumps(EXISTING_SETTINGS))
    assert installed(tmp_path).exit_code == 0
    settings = read(settings_path)
    settings["hooks"]["PreToolUse"][1]["hooks"][0]["statusMessage"] = "checking reservations"
    settings_path.write_text(json.dumps(settings))

    assert installed(tmp_path, "--http", SERVER).exit_code == 0
    settings = read(settings_path)
    bash, ours_ = settings["hooks"]["PreToolUse"]
    assert bash == EXISTING_SETTINGS["hooks"]["PreToolUse"][0]
    [entry] = ours_["hooks"]
    assert entry["type"] == "http" and "command" not in entry
    assert entry["statusMessage"] == "checking reservations"
    assert settings["hooks"]["Stop"][0] == EXISTING_SETTINGS["hooks"]["Stop"][0]
    for event, hook, _ in install.HOOK_EVENTS:
        http_count, command_count = (0, 1) if hook in install.COMMAND_ONLY else (1, 0)
        assert len(http_ours(settings, event)) == http_count
        assert len(ours(settings, event)) == command_count
    again = installed(tmp_path, "--http", SERVER)
    assert again.exit_code == 0 and again.output.count("unchanged") == 3

    assert installed(tmp_path).exit_code == 0
    settings = read(settings_path)
    [entry] = settings["hooks"]["PreToolUse"][1]["hooks"]
    assert set(entry) == {"type", "command", "timeout", "statusMessage"}
    assert entry["command"].endswith("hook pre-tool")
    for event, _, _ in install.HOOK_EVENTS:
        assert len(ours(settings, event)) == 1 and http_ours(settings, event) == []


@pytest.mark.parametrize(
    "url",
    ["ftp://127.0.0.1:8765", "127.0.0.1:8765", "http://", "http://h:99999", "http://h/?q=1"],
)
def test_a_bad_server_url_is_refused(tmp_path: Path, url: str) -> None:
    """--http takes an http(s) URL with a host (no query): else one Error: line, no file."""
    result = installed(tmp_path, "--http", url)
    assert result.exit_code == 1 and result.stderr.startswith("Error: --http: ")
    assert not (tmp_path / ".claude").exists() and not (tmp_path / ".mcp.json").exists()


def test_our_http_entries_are_recognised_by_path_and_token_variable() -> None:
    """Ours: an http entry posting to .../hooks/<one of our hooks> that lists
    IKIGAI_MCP_TOKEN; not ours: another path or hook, or a user's hook without it."""
    token = {"allowedEnvVars": ["IKIGAI_MCP_TOKEN"]}
    recognise = install._ours
    assert recognise({"type": "http", "url": f"{SERVER}/hooks/pre-tool?x=1", **token}) == (
        "pre-tool"
    )
    assert recognise({"type": "http", "url": "https://h/base/hooks/stop", **token}) == "stop"
    assert recognise({"type": "http", "url": f"{SERVER}/hooks/pre-tool"}) is None
    assert recognise({"type": "http", "url": f"{SERVER}/hooks/other", **token}) is None
    assert recognise({"type": "http", "url": f"{SERVER}/pre-tool", **token}) is None
    assert recognise({"type": "http", "url": 7, **token}) is None
    assert recognise({"type": "command", "command": "ikigai-store hook stop"}) == "stop"
    assert recognise("not an entry") is None


def test_the_install_approves_the_server_in_settings_local_json(tmp_path: Path) -> None:
    """The server the user installs is approved where Claude Code honours it
    (``enabledMcpjsonServers`` in .claude/settings.local.json; a rejection of it lifted),
    keeping what the file held; installing again changes nothing."""
    local = tmp_path / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(ls)"]},
                "enabledMcpjsonServers": ["other"],
                "disabledMcpjsonServers": ["ikigai-store", "third"],
            }
        )
    )
    assert installed(tmp_path).exit_code == 0
    assert read(local) == {
        "permissions": {"allow": ["Bash(ls)"]},
        "enabledMcpjsonServers": ["other", "ikigai-store"],
        "disabledMcpjsonServers": ["third"],
    }
    assert installed(tmp_path).output.count("unchanged") == 3


def test_the_server_entry_names_the_database_without_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database the installer uses is named in the server's env: a URL without a
    password as it is; with a password, a ${IKIGAI_DATABASE_URL} reference (no password in
    the file); the embedded default: nothing."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("IKIGAI_DATABASE_URL", "postgresql://ann@db.internal/coord")
    assert installed(tmp_path).exit_code == 0
    entry = read(tmp_path / ".mcp.json")["mcpServers"]["ikigai-store"]
    assert entry["env"] == {"IKIGAI_DATABASE_URL": "postgresql://ann@db.internal/coord"}
    monkeypatch.setenv("IKIGAI_DATABASE_URL", "postgresql://ann:pw-secret@db.internal/coord")
    assert installed(tmp_path).exit_code == 0
    text = (tmp_path / ".mcp.json").read_text()
    assert "pw-secret" not in text
    entry = json.loads(text)["mcpServers"]["ikigai-store"]
    assert entry["env"] == {"IKIGAI_DATABASE_URL": "${IKIGAI_DATABASE_URL}"}
    monkeypatch.delenv("IKIGAI_DATABASE_URL")
    assert installed(tmp_path).exit_code == 0
    assert "env" not in read(tmp_path / ".mcp.json")["mcpServers"]["ikigai-store"]


def test_a_password_url_is_referenced_by_the_variable_that_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only $DATABASE_URL set (as real-server.md shows): the reference names it, for Claude
    Code and Codex; a password URL given with --database, in no variable: an error, nothing
    written (a reference to an unset variable would leave the server without a database)."""
    monkeypatch.delenv("IKIGAI_DATABASE_URL", raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", "postgresql://ann:pw-secret@db/coord")
    assert installed(tmp_path).exit_code == 0
    entry = read(tmp_path / ".mcp.json")["mcpServers"]["ikigai-store"]
    assert entry["env"] == {"IKIGAI_DATABASE_URL": "${DATABASE_URL}"}
    assert installed(tmp_path, "--codex").exit_code == 0
    table = tomllib.loads((tmp_path / "config.toml").read_text())["mcp_servers"]["ikigai-store"]
    assert table["env_vars"] == ["DATABASE_URL", *install.SERVICE_VARIABLES]
    monkeypatch.delenv("DATABASE_URL")
    other = tmp_path / "other"
    other.mkdir()
    result = CliRunner().invoke(
        cli,
        [
            "--database",
            "postgresql://ann:pw-secret@db/coord",
            "hooks",
            "install",
            "--project",
            str(other),
        ],
    )
    assert result.exit_code == 1 and "export it as IKIGAI_DATABASE_URL" in result.stderr
    assert not list(other.iterdir())  # nothing written


def test_the_server_entry_names_the_embedded_servers_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the embedded server and $IKIGAI_DATA_DIR set (a relative path here), the
    server's env names that directory as an absolute path, for Claude Code and for Codex
    (which gives servers an allow-listed environment); the user's own env keys stay; a URL
    takes its place; installing again without either removes it."""
    import tomllib

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IKIGAI_DATA_DIR", "agents/pgdata")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    wanted = {"IKIGAI_DATA_DIR": str((tmp_path / "agents" / "pgdata").resolve())}
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"ikigai-store": {"env": {"FOO": "bar"}}}})
    )
    assert installed(tmp_path).exit_code == 0
    entry = read(tmp_path / ".mcp.json")["mcpServers"]["ikigai-store"]
    assert entry["env"] == {"FOO": "bar", **wanted}
    assert installed(tmp_path, "--codex").exit_code == 0
    table = tomllib.loads((tmp_path / "codex" / "config.toml").read_text())
    assert table["mcp_servers"]["ikigai-store"]["env"] == wanted
    monkeypatch.setenv("IKIGAI_DATABASE_URL", "postgresql://ann@db.internal/coord")
    assert installed(tmp_path).exit_code == 0
    entry = read(tmp_path / ".mcp.json")["mcpServers"]["ikigai-store"]
    assert entry["env"] == {
        "FOO": "bar",
        "IKIGAI_DATABASE_URL": "postgresql://ann@db.internal/coord",
    }
    monkeypatch.delenv("IKIGAI_DATABASE_URL")
    monkeypatch.delenv("IKIGAI_DATA_DIR")
    assert installed(tmp_path).exit_code == 0
    assert read(tmp_path / ".mcp.json")["mcpServers"]["ikigai-store"]["env"] == {"FOO": "bar"}
    assert installed(tmp_path, "--codex").exit_code == 0
    table = tomllib.loads((tmp_path / "codex" / "config.toml").read_text())
    assert "env" not in table["mcp_servers"]["ikigai-store"]


CODEX_CONFIG = """# my Codex settings
model = "o4"

[mcp_servers.ikigai-store]
command = "/old/ikigai-store"
startup_timeout_sec = 20

[mcp_servers.ikigai-store.env]
FOO = "bar"

[mcp_servers.other]
command = "other-server"
"""


def test_codex_install_merges_its_server_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--codex writes [mcp_servers.ikigai-store] into $CODEX_HOME/config.toml: ours replaced
    where it stood (the user's keys and env kept, its subtable folded in), every other line
    kept, the tools approved; a second run changes nothing; --dry-run writes nothing."""
    import tomllib

    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.delenv("IKIGAI_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    dry = installed(tmp_path, "--codex", "--dry-run", "--as", "Ada")
    assert dry.exit_code == 0 and '+args = ["mcp", "--as", "Ada"]' in dry.output
    assert config.read_text() == CODEX_CONFIG
    assert installed(tmp_path, "--codex", "--as", "Ada").exit_code == 0
    text = config.read_text()
    assert text.startswith('# my Codex settings\nmodel = "o4"\n')
    data = tomllib.loads(text)
    ours_ = data["mcp_servers"]["ikigai-store"]
    assert ours_["command"].endswith("ikigai-store") and ours_["command"] != "/old/ikigai-store"
    assert ours_["args"] == ["mcp", "--as", "Ada"]
    assert ours_["default_tools_approval_mode"] == "approve" and ours_["required"] is True
    assert ours_["startup_timeout_sec"] == 20 and ours_["env"] == {"FOO": "bar"}
    assert data["mcp_servers"]["other"] == {"command": "other-server"}
    assert text.count("[mcp_servers.ikigai-store") == 1
    again = installed(tmp_path, "--codex", "--as", "Ada")
    assert again.exit_code == 0 and again.output.strip().endswith("unchanged")
    assert config.read_text() == text
    assert not (tmp_path / ".mcp.json").exists() and not (tmp_path / ".claude").exists()


def test_codex_install_forwards_a_password_url_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a database URL holding a password, Codex is told to pass $IKIGAI_DATABASE_URL
    through (env_vars; Codex gives servers an allow-listed environment) and the password
    is not written; a broken config.toml is refused and left as it was."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    monkeypatch.setenv("IKIGAI_DATABASE_URL", "postgresql://ann:pw-secret@db/coord")
    assert installed(tmp_path, "--codex").exit_code == 0
    text = (tmp_path / "config.toml").read_text()
    assert "pw-secret" not in text
    forwarded = tomllib.loads(text)["mcp_servers"]["ikigai-store"]["env_vars"]
    assert forwarded == ["IKIGAI_DATABASE_URL", *install.SERVICE_VARIABLES]
    (tmp_path / "config.toml").write_text("[broken\n")
    result = installed(tmp_path, "--codex")
    assert result.exit_code == 1 and "is not valid TOML" in result.stderr
    assert (tmp_path / "config.toml").read_text() == "[broken\n"
