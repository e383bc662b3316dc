"""Where the packaged SQL lives.

Owns the lookup of the ``queries/`` and ``migrations/`` directories. Invariant: an installed wheel
carries both inside the package (``ikigai_store/queries``, ``ikigai_store/migrations``, loaded with
importlib.resources); a source checkout or editable install uses the top-level directories.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["migrations_dir", "queries_dir"]


def _find(name: str) -> Path:
    packaged = files("ikigai_store").joinpath(name)
    if packaged.is_dir():
        # Wheels are installed as plain files, so the resource is a real directory.
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parent.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"ikigai_store is installed without its {name}/ directory")


def queries_dir() -> Path:
    """Directory of the aiosql ``*.sql`` query files."""
    return _find("queries")


def migrations_dir() -> Path:
    """Directory of the yoyo ``NNNN-description.sql`` migrations."""
    return _find("migrations")
