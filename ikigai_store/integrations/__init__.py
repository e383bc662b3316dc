"""Integrations with agent frameworks: each a module of its own, imported only by its users.

Owns nothing by itself. Each integration (``openai_agents``: the OpenAI Agents SDK's sessions;
``langgraph``: LangGraph's checkpoint savers; ``claude_agent``: the Claude Agent SDK's session
store) is a face over the store's operations like the CLI or the MCP server: it adds no SQL and no
validation, and imports its framework lazily (an optional extra), so ``import ikigai_store``
never imports one.
"""
