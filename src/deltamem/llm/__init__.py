"""LLM clients: one protocol, several backends, usage counted per purpose."""

from deltamem.llm.base import BaseLLM, Completion, LLMClient, Message
from deltamem.llm.scripted import ScriptedLLM

__all__ = ["BaseLLM", "Completion", "LLMClient", "Message", "ScriptedLLM"]
