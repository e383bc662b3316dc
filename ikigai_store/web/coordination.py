"""The coordination pages: identities and their mail, topics and queues, reviews, plans, task
lists, leases, the activity feed, search. Owns ``routes``."""

from __future__ import annotations

from starlette.routing import BaseRoute

__all__ = ["routes"]

routes: list[BaseRoute] = []
