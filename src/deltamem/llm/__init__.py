"""LLM clients: one protocol, several backends, usage counted per purpose.

``make_llm("local" | "local:/path.gguf" | "openai:MODEL" | "scripted", ...)`` builds one.
Backends import their heavy dependencies (``openai``, ``llama_cpp``) only when used.
"""

from deltamem.llm.base import BaseLLM, Completion, LLMClient, Message
from deltamem.llm.factory import make_llm
from deltamem.llm.local import LocalLLM
from deltamem.llm.openai_compat import OpenAICompatLLM
from deltamem.llm.replay import RecordReplayLLM
from deltamem.llm.scripted import ScriptedLLM

__all__ = [
    "BaseLLM",
    "Completion",
    "LLMClient",
    "LocalLLM",
    "Message",
    "OpenAICompatLLM",
    "RecordReplayLLM",
    "ScriptedLLM",
    "make_llm",
]
