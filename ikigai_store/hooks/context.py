"""Who an agent is and what its file reservations are called, shared by the hooks and the MCP
server so that both faces of one agent agree.

Owns: the project key (the realpath of ``CLAUDE_PROJECT_DIR``, else the given working directory,
else the process's), the agent's role (``IKIGAI_ROLE``, default ``main``) and optional explicit
name (``IKIGAI_AS``), and the lease resource naming a file reservation (``file:`` + an absolute
path or glob). Invariants: the same project directory and role always give the same key, so
``store.identities.resolve`` gives the same identity to an agent's MCP server and its hooks;
a reservation's resource never depends on the current directory.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase
from pathlib import Path

__all__ = [
    "FILE_PREFIX",
    "agent_name",
    "agent_role",
    "covers",
    "file_pattern",
    "file_resource",
    "project_key",
]

#: Lease resources that are file reservations start with this.
FILE_PREFIX = "file:"


def project_key(cwd: str | os.PathLike[str] | None = None) -> str:
    """The project an agent works in: ``CLAUDE_PROJECT_DIR`` when set (Claude Code's project
    root, stable while the agent changes directory), else ``cwd``, else the current directory;
    resolved to a real absolute path."""
    chosen = os.environ.get("CLAUDE_PROJECT_DIR") or cwd or os.getcwd()
    return os.path.realpath(chosen)


def agent_role(role: str | None = None) -> str:
    """The agent's role in its project: ``role``, else ``IKIGAI_ROLE``, else ``main``."""
    return role or os.environ.get("IKIGAI_ROLE") or "main"


def agent_name(name: str | None = None) -> str | None:
    """An explicit identity name: ``name``, else ``IKIGAI_AS``, else None (resolve by role)."""
    return name or os.environ.get("IKIGAI_AS") or None


def file_resource(project: str, path: str) -> str:
    """The lease resource reserving ``path`` (a file or a glob such as ``src/*.py``), relative
    paths taken from the project directory: ``file:/abs/path``."""
    joined = path if os.path.isabs(path) else os.path.join(project, path)
    return FILE_PREFIX + os.path.normpath(joined)


def file_pattern(resource: str) -> str | None:
    """The path or glob a file reservation's resource names (None for other resources)."""
    return resource[len(FILE_PREFIX) :] if resource.startswith(FILE_PREFIX) else None


def covers(resource: str, path: str | Path) -> bool:
    """Whether the reservation ``resource`` covers the absolute ``path``: the same path, a
    directory above it, or a glob matching it (fnmatch rules: ``*`` also matches across
    ``/``, so reserving ``src/*`` covers everything under ``src``)."""
    pattern = file_pattern(resource)
    if pattern is None:
        return False
    target = os.path.normpath(os.fspath(path))
    if target == pattern or target.startswith(pattern.rstrip("/") + "/"):
        return True
    return fnmatchcase(target, pattern)
