"""A second local OS user, for the tests of what another user can and cannot do."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SYSTEM_PYTHON = Path("/usr/bin/python3")


def os_user(name: str) -> str:
    """A local system user ``name`` (created once), or skip when that is not possible here."""
    import pwd

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to act as another local user")
    if not (shutil.which("runuser") and shutil.which("useradd") and SYSTEM_PYTHON.exists()):
        pytest.skip("needs runuser, useradd and /usr/bin/python3")
    for _ in range(50):  # another pytest-xdist worker may be creating it right now
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            capture_output=True,
            text=True,
        )
        if made.returncode == 0:
            return name
        if made.returncode not in (9, 10):  # 9: the name is taken; 10: /etc/passwd is locked
            raise RuntimeError(f"useradd {name} failed: {made.stderr.strip()}")
        time.sleep(0.1)
    raise RuntimeError(f"useradd {name}: the user never appeared")
