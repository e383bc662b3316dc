"""``python -m ikigai_store``: the ``ikigai-store`` command line (see ``ikigai_store.cli``)."""

from __future__ import annotations

from ._entry import main

if __name__ == "__main__":
    main()
