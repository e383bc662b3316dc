"""Type-check the documentation's Python: every ```python block of README.md and docs/**/*.md,
each a module of its own, under ``mypy --strict`` (what a user's type checker says of the code
they copy). CI runs it after the package's own ``mypy --strict`` (.ci/run).

Usage: ``python scripts/check_doc_types.py`` (needs mypy). Exit status: mypy's (0: clean); each
error names the page and the block's first line in it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, int, str]]:
    """(page, line of the block's first line, code) of every ```python block, in page order."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start(1)) + 1
            found.append((str(page.relative_to(ROOT)), line, match.group(1)))
    return found


def main() -> int:
    found = blocks()
    with tempfile.TemporaryDirectory() as tmp:
        names = {}
        for n, (page, line, code) in enumerate(found):
            module = Path(tmp, f"block{n:03d}.py")
            module.write_text(code)
            names[module.name] = f"{page}:{line}"
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
    out = done.stdout + done.stderr
    for name, where in names.items():  # block007.py:3: -> docs/x.md:41 block line 3:
        out = re.sub(rf"\S*{re.escape(name)}:(\d+):", rf"{where} (block line \1):", out)
    print(out, end="")
    print(f"check_doc_types: {len(found)} blocks of README.md and docs/")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
