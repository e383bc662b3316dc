"""The web view: ``ikigai-store web``, a live, server-rendered view of a store for people.

Sessions and their timelines (marks, rewinds, clears, and "as the model sees it": the
library's own replay), the agents' fork tree, identities and their mail, topics and queues,
reviews, plans, task lists, leases, the activity feed and search, refreshed as the database
notifies (Server-Sent Events fed by LISTEN/NOTIFY, one listening connection per server).
Read-only unless started with ``--allow-writes``; loopback-only unless given a token.

Needs the ``web`` extra (``pip install '.[web]'`` in a checkout: Starlette, uvicorn, Jinja2); the
JavaScript it serves is in the package (``static/``), with no build step.
"""

from __future__ import annotations

from .app import create_app, serve

__all__ = ["create_app", "serve"]
