"""Coding-agent faces that are not MCP: the hooks an agent runs (``ikigai-store hook ...``, or
posted to a running ``ikigai-store mcp --http``: ``http``) and the installer that registers
them. ``context`` is shared with the MCP server: both resolve an agent's identity and its
file reservations the same way.
"""
