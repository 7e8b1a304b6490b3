"""LLM clients: one protocol, several backends, usage counted per purpose.

``make_llm("local" | "local:/path.gguf" | "openai:MODEL" | "scripted", ...)`` builds one.
Backends import their heavy dependencies (``openai``, ``llama_cpp``) only when used.
:func:`~deltamem.llm.structured.ask_json` gets a validated JSON object (one repair call);
:class:`LogProbSampler` is the optional capability of sampling with log-probabilities
(:meth:`LocalLLM.sample`).
"""

from deltamem.llm.base import BaseLLM, Completion, LLMClient, LogProbSampler, Message, ScoredSample
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
    "LogProbSampler",
    "Message",
    "OpenAICompatLLM",
    "RecordReplayLLM",
    "ScoredSample",
    "ScriptedLLM",
    "make_llm",
]
