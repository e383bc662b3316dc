"""The warm local service: one process per (OS user, database) that keeps the store open, so
short-lived clients (hook commands, the MCP stdio server) answer in milliseconds.

``client`` (standard library only) finds, starts and talks to it; ``proxy`` (standard library
only) is the MCP stdio server that answers ``initialize`` and ``tools/list`` itself and hands the
rest to the service; ``server`` is the service process. See ``client`` for the protocol and the
invariants. Importing this package imports nothing else.
"""
