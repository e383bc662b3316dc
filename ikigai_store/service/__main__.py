"""``python -m ikigai_store.service --ready-fd N``: how a client starts the service detached.

This process forks at once (standard library only, before anything heavy is imported) and
exits, so the client that started it can reap it and go on; the child (not a child of the
client, never a zombie of it) runs ``server.main``, which says ``ready`` (or why not) on
descriptor N.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    if os.fork() != 0:
        os._exit(0)
    from .server import main

    sys.exit(main(sys.argv[1:]))
