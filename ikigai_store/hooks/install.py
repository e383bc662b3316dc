"""``ikigai-store hooks install``: register the Claude Code hooks and the MCP server in a project.

Owns the merge of our entries into ``<project>/.claude/settings.json`` (the hooks: SessionStart,
UserPromptSubmit, Stop, PostToolUse on the task tools, PreToolUse on the edit tools; with
``--wake rewake`` an asyncRewake Stop entry running ``watch --rewake``), ``<project>/.mcp.json``
(the ``ikigai-store`` MCP server) and ``<project>/.claude/settings.local.json`` (its
approval), and writing them. (A ``--wake monitor`` mode, a project plugin whose monitor ran
``watch``, was removed: Claude Code 2.1.332 does not register a project's plugin marketplace in
a headless session, and starts plugin monitors only in interactive ones behind a flag that is
off; an install disables the plugin an earlier one enabled.) The hooks are
``command`` hooks (``ikigai-store hook <name>``, a process per hook), or with ``http`` (the
base URL of a running ``ikigai-store mcp --http``) Claude Code ``http`` hooks posting to its
``/hooks/<name>``: the project, ``--as``, ``--role`` and ``--auto-reserve`` go into the URL's
query, the token and the agent's environment into headers filled in by Claude Code
(``Authorization: Bearer $IKIGAI_MCP_TOKEN``, ``X-Ikigai-Role: $IKIGAI_ROLE``, ...; listed in
``allowedEnvVars``), never a secret into the file (``watch`` stays a command). Invariants:
- nothing of the user's is lost: every other key, hook entry and MCP server stays as it was;
  our hook entries are recognised by their command (``<...>ikigai-store ... hook <name>``) or,
  for ``http`` ones, by their URL's path (``.../hooks/<name>``) together with
  ``IKIGAI_MCP_TOKEN`` in their ``allowedEnvVars``, and replaced where they are (a command by
  an ``http`` entry and back, keeping the keys the user added), so installing twice changes
  nothing the second time;
- a file that is not valid JSON, or whose shape is not Claude Code's (``hooks`` not an object,
  an event not a list, ...), is refused with a message naming it, and then no file is written;
- files are written atomically (a temporary file in the same directory, then a rename), as
  2-space-indented JSON, keeping an existing file's permissions; a dry run writes nothing.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from .._where import default_data_dir
from ..errors import InvalidArgument

__all__ = [
    "CODEX_APPROVAL",
    "COMMAND_ONLY",
    "DATABASE_VARIABLE",
    "DATA_DIR_VARIABLE",
    "HOOK_EVENTS",
    "MCP_SERVER",
    "WAKES",
    "Change",
    "apply_changes",
    "codex_config_path",
    "database_env",
    "executable",
    "hook_command",
    "hook_url",
    "http_hook",
    "installing_data_dir",
    "merge_codex",
    "merge_local_settings",
    "merge_mcp",
    "merge_settings",
    "plan",
    "plan_codex",
    "server_url",
    "watch_command",
]

#: (Claude Code event, our hook command, the tool matcher or None), in install order.
HOOK_EVENTS: tuple[tuple[str, str, str | None], ...] = (
    ("SessionStart", "session-start", None),
    ("UserPromptSubmit", "prompt", None),
    ("Stop", "stop", None),
    ("PostToolUse", "post-tool", "TaskCreate|TaskUpdate|TodoWrite"),
    ("PreToolUse", "pre-tool", "Edit|Write|MultiEdit|NotebookEdit"),
)
#: The hooks that stay commands with ``http``: Claude Code refuses http hooks for
#: SessionStart ("HTTP hooks are not supported for SessionStart").
COMMAND_ONLY = frozenset({"session-start"})
#: Our key under ``mcpServers``.
MCP_SERVER = "ikigai-store"
#: How an idle agent is woken (``merge_settings``' ``wake``): not at all (the hooks only),
#: or by an asyncRewake Stop hook (``watch --rewake``).
WAKES = ("none", "rewake")
#: The plugin an earlier ``--wake monitor`` install enabled (disabled now): its marketplace and
#: name.
MARKETPLACE = "ikigai-store-local"
PLUGIN = "ikigai-store"
#: Claude Code's limit for one ``watch --rewake`` run, in seconds (then it is stopped, and the
#: next Stop starts another: what it reported is kept in the database).
REWAKE_TIMEOUT = 86400
#: What Claude Code shows the model before the watcher's digest when it wakes the session
#: (without it the wake reads "Stop hook blocking error").
REWAKE_MESSAGE = "ikigai-store woke you: something new concerns you."
#: Claude Code's limit for one run of our hooks, in seconds (they give up after 10 by
#: themselves, failing open).
HOOK_TIMEOUT = 15
#: The variable holding the server's bearer token, in the agent's environment.
TOKEN_VARIABLE = "IKIGAI_MCP_TOKEN"
#: (header, variable): the agent's environment an ``http`` hook forwards to the server, where
#: a command hook would read it (``hooks.http`` reads these headers).
FORWARDED_ENV: tuple[tuple[str, str], ...] = (
    ("X-Ikigai-Role", "IKIGAI_ROLE"),
    ("X-Ikigai-As", "IKIGAI_AS"),
    ("X-Ikigai-Task-List", "CLAUDE_CODE_TASK_LIST_ID"),
)
#: ``--auto-reserve``'s lease, in seconds (``claude.AUTO_RESERVE_SECONDS``, not imported: this
#: module stays free of the store).
AUTO_RESERVE_SECONDS = 300
_PROGRAM = "ikigai-store"
_HOOK_NAMES = frozenset(hook for _, hook, _ in HOOK_EVENTS)
#: The keys of a hook entry that say how it runs: replaced (or dropped) by ours.
_FORM_KEYS = frozenset({"type", "command", "url", "headers", "allowedEnvVars", "timeout"})


def executable() -> str:
    """The absolute path of the running ``ikigai-store`` script (``sys.argv[0]``), else the one
    on ``PATH``: what Claude Code runs, even outside this virtualenv."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name.startswith(_PROGRAM) and argv0.is_file():
        return str(argv0.resolve())
    found = shutil.which(_PROGRAM)
    if found is None:
        raise InvalidArgument(
            f"cannot find the {_PROGRAM} executable (not run as {_PROGRAM}, none on PATH)"
        )
    return str(Path(found).resolve())


def _identity_args(name: str | None, role: str | None) -> list[str]:
    return [*(["--as", name] if name else []), *(["--role", role] if role else [])]


def hook_command(
    program: str,
    hook: str,
    *,
    name: str | None = None,
    role: str | None = None,
    auto_reserve: bool = False,
) -> str:
    """The shell command Claude Code runs for ``hook``."""
    extra = ["--auto-reserve"] if auto_reserve and hook == "pre-tool" else []
    return shlex.join([program, "hook", hook, *_identity_args(name, role), *extra])


def watch_command(
    program: str, *, name: str | None = None, role: str | None = None, rewake: bool = False
) -> str:
    """The shell command of ``ikigai-store watch`` (``--rewake``: the asyncRewake form)."""
    return shlex.join(
        [program, "watch", *_identity_args(name, role), *(["--rewake"] if rewake else [])]
    )


def server_url(url: str) -> str:
    """The base URL of an ``ikigai-store mcp --http`` server (``http://127.0.0.1:8765``; a
    trailing ``/`` or ``/mcp`` is dropped); ``InvalidArgument`` for anything else."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise InvalidArgument(f"--http: {url!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(f"--http: {url!r} is not an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise InvalidArgument(f"--http: {url!r} has a query or fragment; give the server's URL")
    path = parts.path.rstrip("/")
    path = path.removesuffix("/mcp")
    return f"{parts.scheme}://{parts.netloc}{path}"


def hook_url(
    server: str,
    hook: str,
    *,
    project: str,
    name: str | None = None,
    role: str | None = None,
    auto_reserve: bool = False,
) -> str:
    """The URL Claude Code posts ``hook``'s event to, on the server at ``server``."""
    query = [("project", project)]
    query += [("role", role)] if role else []
    query += [("as", name)] if name else []
    if auto_reserve and hook == "pre-tool":
        query.append(("auto_reserve", str(AUTO_RESERVE_SECONDS)))
    return f"{server_url(server)}/hooks/{hook}?{urlencode(query, quote_via=quote, safe='/')}"


def http_hook(
    server: str,
    hook: str,
    *,
    project: str,
    name: str | None = None,
    role: str | None = None,
    auto_reserve: bool = False,
) -> dict[str, Any]:
    """The ``http`` hook entry for ``hook`` (its URL, the token and environment headers)."""
    headers = {"Authorization": f"Bearer ${TOKEN_VARIABLE}"}
    headers |= {header: f"${variable}" for header, variable in FORWARDED_ENV}
    return {
        "type": "http",
        "url": hook_url(
            server, hook, project=project, name=name, role=role, auto_reserve=auto_reserve
        ),
        "headers": headers,
        "allowedEnvVars": [TOKEN_VARIABLE, *(variable for _, variable in FORWARDED_ENV)],
        "timeout": HOOK_TIMEOUT,
    }


def _our_http_hook(item: dict[str, Any]) -> str | None:
    """The hook name of one of our ``http`` entries, else None."""
    url, variables = item.get("url"), item.get("allowedEnvVars")
    if not isinstance(url, str) or not isinstance(variables, list):
        return None
    if TOKEN_VARIABLE not in variables:
        return None
    try:
        path = urlsplit(url).path
    except ValueError:
        return None
    head, _, hook = path.rpartition("/")
    return hook if head.endswith("/hooks") and hook in _HOOK_NAMES else None


def _ours(item: object) -> str | None:
    """The key of one of our entries (a hook's name, command or ``http``; ``"watch"``), else
    None."""
    if not isinstance(item, dict):
        return None
    if item.get("type") == "http":
        return _our_http_hook(item)
    return _our_hook(item.get("command"))


def _our_hook(command: object) -> str | None:
    """The hook name of one of our commands (``.../ikigai-store [options] hook <name> ...``),
    ``"watch"`` for ``.../ikigai-store [options] watch ...``, else None."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if os.path.basename(word) == _PROGRAM:
            rest = words[i + 1 :]
            if "hook" in rest:
                at = rest.index("hook")
                return rest[at + 1] if at + 1 < len(rest) else None
            return "watch" if "watch" in rest else None
    return None


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object, not {type(value).__name__}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidArgument(f"{where} must be a JSON list, not {type(value).__name__}")
    return value


def _replaced(item: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` in place of our ``item``: the keys the user added kept, in their order; those
    of the other form (``command`` for an ``http`` entry, ``url``... for a command) dropped."""
    kept = {k: v for k, v in item.items() if k in entry or k not in _FORM_KEYS}
    return {**kept, **entry}


def _place(
    hooks: dict[str, Any], event: str, key: str, matcher: str | None, entry: dict[str, Any] | None
) -> None:
    """Put ``entry`` in place of our entry ``key`` of ``event`` (another of ours for the same
    key is dropped), else append it as a new matcher group; ``entry`` None: drop ours."""
    groups = _list(hooks.setdefault(event, []), f'"hooks"."{event}"')
    placed = entry is None
    for group in list(groups):
        group_hooks = _object(group, f'a group of "hooks"."{event}"').get("hooks")
        if group_hooks is None:
            continue
        kept = []
        for item in _list(group_hooks, f'"hooks" of a group of "{event}"'):
            if _ours(item) != key:
                kept.append(item)
            elif not placed and entry is not None:
                kept.append(_replaced(item, entry))
                placed = True
                if matcher is not None and len(group_hooks) == 1:
                    group["matcher"] = matcher
        group["hooks"] = kept
        if not kept and group_hooks:  # it held only ours
            groups.remove(group)
    if not placed and entry is not None:
        groups.append({**({"matcher": matcher} if matcher else {}), "hooks": [entry]})


def merge_settings(
    settings: dict[str, Any],
    program: str,
    *,
    name: str | None = None,
    role: str | None = None,
    auto_reserve: bool = False,
    wake: str = "none",
    http: str | None = None,
    project: str | None = None,
) -> dict[str, Any]:
    """A copy of Claude Code's ``settings`` with our hook entries in it: each replaces our
    existing entry for that hook where it stands (another of ours for the same hook is
    dropped), else is appended to its event as a new matcher group. With ``http`` (a server's
    URL) the hook entries are ``http`` hooks posting to it for ``project`` (required then).
    ``wake`` (one of
    ``WAKES``): ``rewake`` adds the asyncRewake Stop entry running ``watch --rewake`` (any
    other value removes it). The plugin an earlier ``--wake monitor`` install enabled is
    disabled."""
    if wake not in WAKES:
        raise InvalidArgument(f"wake must be one of {', '.join(WAKES)}, got {wake!r}")
    if http is not None and project is None:
        raise InvalidArgument("http hooks need the project directory")
    merged = copy.deepcopy(_object(settings, "settings"))
    hooks = _object(merged.setdefault("hooks", {}), '"hooks"')
    for event, hook, matcher in HOOK_EVENTS:
        if http is not None and project is not None and hook not in COMMAND_ONLY:
            entry = http_hook(
                http, hook, project=project, name=name, role=role, auto_reserve=auto_reserve
            )
        else:
            entry = {
                "type": "command",
                "command": hook_command(
                    program, hook, name=name, role=role, auto_reserve=auto_reserve
                ),
                "timeout": HOOK_TIMEOUT,
            }
        _place(hooks, event, hook, matcher, entry)
    rewake = {
        "type": "command",
        "command": watch_command(program, name=name, role=role, rewake=True),
        "asyncRewake": True,
        "rewakeMessage": REWAKE_MESSAGE,
        "timeout": REWAKE_TIMEOUT,
    }
    _place(hooks, "Stop", "watch", None, rewake if wake == "rewake" else None)
    if isinstance(merged.get("enabledPlugins"), dict) and (
        merged["enabledPlugins"].get(f"{PLUGIN}@{MARKETPLACE}") is True
    ):  # enabled by an earlier --wake monitor install, a mode that no longer exists
        merged["enabledPlugins"][f"{PLUGIN}@{MARKETPLACE}"] = False
    return merged


#: The variable that names the database in the agent's environment (``config.resolve_url``).
DATABASE_VARIABLE = "IKIGAI_DATABASE_URL"
#: The variable that names the embedded server's data directory (``embedded.data_dir``).
DATA_DIR_VARIABLE = "IKIGAI_DATA_DIR"
#: The variables of a server's environment that install writes (others are kept).
_DATABASE_VARIABLES = frozenset({DATABASE_VARIABLE, DATA_DIR_VARIABLE})


def installing_data_dir() -> str | None:
    """The embedded server's data directory named in this process' environment
    (``IKIGAI_DATA_DIR``, as an absolute path); None when it is not set (the default one)."""
    return default_data_dir() if os.environ.get(DATA_DIR_VARIABLE) else None


def database_env(database: str | None, data_dir: str | None = None) -> dict[str, str]:
    """The environment an installed server gets so that it uses ``database`` (the URL the
    installer resolved): the URL itself, or, when it carries a password, a reference to
    ``$IKIGAI_DATABASE_URL`` (Claude Code expands ``${VAR}``), so no password is written
    into a file. ``database`` None is the embedded server: ``data_dir`` (the installer's
    ``IKIGAI_DATA_DIR``, absolute) when one was named, else nothing (the default one)."""
    if database is None:
        return {DATA_DIR_VARIABLE: data_dir} if data_dir else {}
    from ..config import password_of

    if password_of(database):
        return {DATABASE_VARIABLE: "${" + password_variable(database) + "}"}
    return {DATABASE_VARIABLE: database}


def password_variable(database: str) -> str:
    """The variable of this environment that holds ``database`` (a URL with a password), for
    the installed server to read it from: ``IKIGAI_DATABASE_URL`` or ``DATABASE_URL``.
    ``InvalidArgument`` when neither does (``--database`` on the command line): a reference
    to an unset variable would leave the server without a database."""
    from ..config import resolve_url

    for variable in (DATABASE_VARIABLE, "DATABASE_URL"):
        value = os.environ.get(variable)
        if value and resolve_url(value) == database:
            return variable
    raise InvalidArgument(
        "the database URL has a password, which install does not write into a file: export "
        f"it as {DATABASE_VARIABLE} (the installed server reads it from the agent's "
        "environment) instead of passing it with --database"
    )


def merge_mcp(
    config: dict[str, Any],
    program: str,
    *,
    name: str | None = None,
    role: str | None = None,
    database: str | None = None,
    data_dir: str | None = None,
) -> dict[str, Any]:
    """A copy of ``.mcp.json``'s ``config`` with our MCP server (its other keys kept); every
    other server is left alone. ``database`` (the URL the installer uses, None: the embedded
    server, of ``data_dir`` when named) goes into the server's ``env`` (``database_env``)."""
    merged = copy.deepcopy(_object(config, ".mcp.json"))
    servers = _object(merged.setdefault("mcpServers", {}), '"mcpServers"')
    ours = _object(servers.get(MCP_SERVER, {}), f'"mcpServers"."{MCP_SERVER}"')
    entry = {**ours, "command": program, "args": ["mcp", *_identity_args(name, role)]}
    env = {
        k: v
        for k, v in _object(entry.get("env", {}), f'"mcpServers"."{MCP_SERVER}"."env"').items()
        if k not in _DATABASE_VARIABLES
    }
    env |= database_env(database, data_dir)
    if env:
        entry["env"] = env
    else:
        entry.pop("env", None)
    servers[MCP_SERVER] = entry
    return merged


def merge_local_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``.claude/settings.local.json``'s ``settings`` approving our ``.mcp.json``
    server (``enabledMcpjsonServers``; taken out of ``disabledMcpjsonServers``): the user
    asked for it by installing, so Claude Code need not list it as "Pending approval"."""
    merged = copy.deepcopy(_object(settings, "settings.local.json"))
    enabled = _list(merged.setdefault("enabledMcpjsonServers", []), '"enabledMcpjsonServers"')
    if MCP_SERVER not in enabled:
        enabled.append(MCP_SERVER)
    disabled = merged.get("disabledMcpjsonServers")
    if isinstance(disabled, list) and MCP_SERVER in disabled:
        merged["disabledMcpjsonServers"] = [s for s in disabled if s != MCP_SERVER]
    return merged


def _dump(data: dict[str, Any]) -> str:
    return _dump_any(data)


def _dump_any(data: object) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Change:
    """One file to write: its path, its text now (None: it does not exist) and after."""

    path: Path
    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        """Whether writing would change the file."""
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff from the file as it is to the file as it would be written."""
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        return "".join(lines)


def _load(path: Path) -> tuple[str | None, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"{path} is not valid JSON ({exc}); fix or move it, then install again"
        ) from None
    return text, _object(data, str(path))


def plan(
    project: Path,
    program: str,
    *,
    name: str | None = None,
    role: str | None = None,
    auto_reserve: bool = False,
    wake: str = "none",
    http: str | None = None,
    database: str | None = None,
    data_dir: str | None = None,
) -> list[Change]:
    """What installing into ``project`` would write (reads only): ``.claude/settings.json``,
    then ``.mcp.json`` (the server, with ``database`` or ``data_dir``: see ``merge_mcp``), then
    ``.claude/settings.local.json`` (the server approved). ``InvalidArgument`` names a file
    that cannot be merged. With ``http`` (a running server's URL) the hooks are ``http``
    hooks (SessionStart stays a command); ``.mcp.json`` is the same."""
    if http is not None:
        http = server_url(http)

    def settings(data: dict[str, Any]) -> dict[str, Any]:
        return merge_settings(
            data,
            program,
            name=name,
            role=role,
            auto_reserve=auto_reserve,
            wake=wake,
            http=http,
            project=str(project),
        )

    def mcp(data: dict[str, Any]) -> dict[str, Any]:
        return merge_mcp(data, program, name=name, role=role, database=database, data_dir=data_dir)

    changes = []
    for path, merge in (
        (project / ".claude" / "settings.json", settings),
        (project / ".mcp.json", mcp),
        (project / ".claude" / "settings.local.json", merge_local_settings),
    ):
        before, data = _load(path)
        try:
            after = _dump(merge(data))
        except InvalidArgument as exc:
            raise InvalidArgument(f"{path}: {exc}; nothing was written") from None
        changes.append(Change(path, before, after))
    return changes


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def apply_changes(changes: Sequence[Change]) -> list[Path]:
    """Write the files that change; return their paths."""
    written = []
    for change in changes:
        if change.changed:
            _write_atomically(change.path, change.after)
            written.append(change.path)
    return written


# ---------------------------------------------------------------- Codex

#: What our Codex server entry says besides ``command``/``args``: the tools run without asking
#: (the user asked for them by installing), as Claude Code's ``enabledMcpjsonServers``; and
#: the server is required: Codex then waits for it before its first model request (an optional
#: server gets about a second, and a server that answers later leaves the model without its
#: tools), and says so when it cannot start instead of running without them.
CODEX_APPROVAL = {"default_tools_approval_mode": "approve", "required": True}
#: Passed through to Codex's server (which gets an allow-listed environment) when set, so it
#: finds the same local service as the hooks and the user's commands (``service.client``).
SERVICE_VARIABLES = [
    "XDG_RUNTIME_DIR",
    "IKIGAI_RUNTIME_DIR",
    "IKIGAI_SERVICE",
    "IKIGAI_SERVICE_IDLE",
]
#: The keys of our ``[mcp_servers.ikigai-store]`` table that install writes (others are kept).
_CODEX_KEYS = frozenset({"command", "args", "env", "env_vars", *CODEX_APPROVAL})
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TABLE = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def codex_config_path() -> Path:
    """Codex's configuration file: ``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml``."""
    home = os.environ.get("CODEX_HOME")
    return (Path(home) if home else Path.home() / ".codex") / "config.toml"


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string is JSON's
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise InvalidArgument(f"cannot write {type(value).__name__} values into TOML")


def _table_path(header: str) -> list[str] | None:
    """The dotted key of a TOML table header (``mcp_servers."ikigai-store"`` -> its parts)."""
    import tomllib

    try:
        parsed = tomllib.loads(f"[{header}]\n")
    except tomllib.TOMLDecodeError:
        return None
    parts: list[str] = []
    node: Any = parsed
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        parts.append(key)
    return parts


def merge_codex(
    text: str,
    program: str,
    *,
    name: str | None = None,
    role: str | None = None,
    database: str | None = None,
    data_dir: str | None = None,
    where: str = "config.toml",
) -> str:
    """Codex's ``config.toml`` (``text``) with our ``[mcp_servers.ikigai-store]`` table: its
    ``command``, ``args``, tool approval (``CODEX_APPROVAL``) and database (``database``, the
    URL the installer uses: written when it has no password; with one, Codex is told to pass
    ``$IKIGAI_DATABASE_URL`` through, ``env_vars``; None: the embedded server, whose
    ``data_dir`` is written when named). The table replaces ours where it stands
    (keys the user added to it kept), else is appended; every other line stays as it was.
    ``InvalidArgument`` (naming ``where``) for a file that is not TOML."""
    import tomllib

    try:
        current = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(
            f"{where} is not valid TOML ({exc}); fix or move it, then install again"
        ) from None
    servers = current.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise InvalidArgument(f"{where}: mcp_servers must be a table")
    ours = servers.get(MCP_SERVER, {})
    if not isinstance(ours, dict):
        raise InvalidArgument(f"{where}: mcp_servers.{MCP_SERVER} must be a table")
    table: dict[str, Any] = {
        "command": program,
        "args": ["mcp", *_identity_args(name, role)],
        **CODEX_APPROVAL,
    }
    env = {k: v for k, v in (ours.get("env") or {}).items() if k not in _DATABASE_VARIABLES}
    ours_forwarded = (DATABASE_VARIABLE, "DATABASE_URL", *SERVICE_VARIABLES)
    forwarded = [v for v in (ours.get("env_vars") or []) if v not in ours_forwarded]
    if database is None:
        env |= database_env(None, data_dir)
    else:
        from ..config import password_of

        if password_of(database):
            forwarded.append(password_variable(database))
        else:
            env[DATABASE_VARIABLE] = database
    forwarded += SERVICE_VARIABLES
    if env:
        table["env"] = env
    if forwarded:
        table["env_vars"] = forwarded
    table |= {k: v for k, v in ours.items() if k not in _CODEX_KEYS}
    block = [f"[mcp_servers.{_toml_key(MCP_SERVER)}]"]
    block += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]

    lines = text.splitlines()
    kept: list[str] = []
    at: int | None = None
    inside = False
    for line in lines:
        match = _TABLE.match(line) if not line.lstrip().startswith("#") else None
        if match:
            path = _table_path(match["name"])
            inside = path is not None and path[:2] == ["mcp_servers", MCP_SERVER]
            if inside and at is None:
                at = len(kept)
        if not inside:
            kept.append(line)
    if at is None:
        while kept and not kept[-1].strip():
            kept.pop()
        merged = [*kept, *([""] if kept else []), *block]
    else:
        rest = kept[at:]
        head = kept[:at]
        merged = [*head, *block, *([""] if rest and rest[0].strip() else []), *rest]
    result = "\n".join(merged) + "\n"
    tomllib.loads(result)  # what we write parses (a bug of ours otherwise)
    return result


def plan_codex(
    program: str,
    *,
    name: str | None = None,
    role: str | None = None,
    database: str | None = None,
    data_dir: str | None = None,
    path: Path | None = None,
) -> list[Change]:
    """What installing the MCP server for Codex would write (reads only): its
    ``config.toml`` (``path``, default ``codex_config_path()``) merged by ``merge_codex``."""
    path = path if path is not None else codex_config_path()
    try:
        before: str | None = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from None
    try:
        after = merge_codex(
            before or "",
            program,
            name=name,
            role=role,
            database=database,
            data_dir=data_dir,
            where=str(path),
        )
    except InvalidArgument as exc:
        raise InvalidArgument(f"{exc}; nothing was written") from None
    return [Change(path, before, after)]
