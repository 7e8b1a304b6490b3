"""deltamem inside agents built on other frameworks.

* :class:`EpisodeRecorder` (from :mod:`deltamem.recorder`, beside the memory contract),
  behind ``Memory.episode(task)``: recall at the start, learn at the end (core, no extra);
  the adapters below drive it;
* :mod:`deltamem.integrations.mcp` — the Model Context Protocol server (``deltamem mcp``,
  extra ``deltamem[mcp]``);
* :mod:`deltamem.integrations.langgraph` — recall and learn nodes for a LangGraph graph
  (extra ``deltamem[langgraph]``);
* :mod:`deltamem.integrations.openai_agents` — run hooks for the OpenAI Agents SDK
  (extra ``deltamem[agents]``).

Importing this package imports none of the optional SDKs.
"""

from deltamem.recorder import EpisodeRecorder

__all__ = ["EpisodeRecorder"]
