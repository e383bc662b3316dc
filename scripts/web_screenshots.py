"""Screenshots of the web view for the documentation (docs/images), made from the demo's data.

Usage: ``python scripts/web_screenshots.py [--database URL] [--out DIR]``

Runs ``ikigai-store demo`` in a scratch database (``ikigai_bench_<pid>_screens_demo`` on the
server of ``--database``, default the embedded server; dropped at the end, even on failure),
starts ``ikigai-store web`` on it and saves 1280-pixel-wide PNGs of whole pages with headless
Chromium into ``--out`` (default ``docs/images``):

- ``web-timeline.png``: the demo session's timeline (a fork, a rewind, a clear);
- ``web-inbox.png``: the inbox of the demo's main identity;
- ``web-review.png``: the demo's code review;
- ``web-tasks.png``: the demo's task list and its dependency graph.

A page that answers other than 200, or logs a console error, fails the run.
"""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path

from benchkit import Scratch, arguments, run, server_url
from playwright.sync_api import ConsoleMessage, Page
from webtools import chromium, find_demo, run_demo, web_server

import ikigai_store as ik

WIDTH = 1280
#: The tallest screenshot, in pixels: a long page is cut there (the pages show the top).
MAX_HEIGHT = 2400
#: Pixels kept below the page's content.
MARGIN = 24
#: Where the page's content ends (not the viewport: a short page is not padded to it).
_CONTENT_BOTTOM = """Math.ceil(Math.max(
  ...Array.from(document.body.querySelectorAll("*"), e => e.getBoundingClientRect().bottom)
) + window.scrollY)"""


def shoot(page: Page, url: str, out: Path) -> None:
    """Open ``url``, let its scripts settle, save the page down to its content (at most
    MAX_HEIGHT tall)."""
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(str(error)))
    response = page.goto(url, wait_until="load")
    if response is None or response.status != 200:
        raise RuntimeError(f"{url} answered {response.status if response else 'nothing'}")
    page.wait_for_timeout(500)
    if errors:
        raise RuntimeError(f"{url} logged errors: {errors}")
    height = min(MAX_HEIGHT, int(page.evaluate(_CONTENT_BOTTOM)) + MARGIN)
    page.screenshot(
        path=out, full_page=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": height}
    )
    print(f"  {out} ({WIDTH} x {height})")


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "docs" / "images",
        help="where the PNGs go (default: %(default)s)",
    )
    options = parser.parse_args()
    started = time.perf_counter()
    options.out.mkdir(parents=True, exist_ok=True)
    scratch = Scratch(server_url(options.database), "screens")
    try:
        url = scratch.create("demo")
        print("running the demo ...")
        run_demo(url)
        with ik.Store(url, pool_size=1) as store:
            demo = find_demo(store)
        shots = {
            "web-timeline.png": f"/sessions/{demo.session_id}",
            "web-inbox.png": f"/identities/{urllib.parse.quote(demo.identities[0], safe='')}",
            "web-review.png": f"/reviews/{urllib.parse.quote(demo.review_id, safe='')}",
            "web-tasks.png": f"/tasks/{urllib.parse.quote(demo.list_id, safe='')}",
        }
        with web_server(url) as server, chromium() as browser:
            print(f"serving {server.url}; screenshots:")
            for name, path in shots.items():
                context = browser.new_context(viewport={"width": WIDTH, "height": 900})
                try:
                    shoot(context.new_page(), server.url + path, options.out / name)
                finally:
                    context.close()
    finally:
        scratch.drop_all()
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    run(main)
