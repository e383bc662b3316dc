"""The MCP face: ``ikigai-store mcp`` serves the store's operations as MCP tools (``tools``)
over stdio or streamable HTTP (``server``). Needs the ``mcp`` extra (``pip install
'.[mcp]'`` in a checkout); nothing else in the package imports it.
"""
