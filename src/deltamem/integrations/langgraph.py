"""LangGraph: a recall node before the agent, a learn node after it (extra ``deltamem[langgraph]``).

::

    memory = GraphMemory(mem, task=lambda state: my_task, outcome=lambda state: (won, 1.0))
    builder = StateGraph(MessagesState)
    builder.add_node("agent", call_model)
    builder.add_node("tools", ToolNode(tools))
    memory.wire(builder, entry="agent")              # START → recall → agent
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "learn"})
    builder.add_edge("tools", "agent")
    graph = builder.compile()
    memory.invoke(graph, {"messages": [("user", goal)]})

The **recall node** starts an :class:`~deltamem.recorder.EpisodeRecorder`
(one per ``thread_id``; one shared slot when the config names none) and puts the recall
text into the conversation before the first model call: merged into the leading system
message when there is one (same message id, so ``add_messages`` replaces it), otherwise as
a new system message in front. An empty recall changes nothing.

The **learn node** turns the run's tool calls into steps (each ``AIMessage`` tool call is
an action, the ``ToolMessage`` answering it is the observation; messages that were already
in the thread at recall time are not this episode's), asks ``outcome`` how the episode
ended, and closes the recorder, which learns. ``outcome`` defaults to the state's
``success``/``reward`` keys when present; otherwise whatever code called
:meth:`GraphMemory.episode` ``(config).finish(...)`` (a tool that sees the game end) decides,
and with no verdict at all the episode is learned as a failure.

An exception inside the graph never reaches the learn node: run the graph with
:meth:`GraphMemory.invoke` / :meth:`GraphMemory.ainvoke` (they stream its states, return the
final one, and on an exception learn the started episode as a failure with the steps taken
so far, then re-raise), or call :meth:`GraphMemory.abort` yourself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from deltamem.errors import InvalidInputError
from deltamem.judge import Judge
from deltamem.memory import Memory
from deltamem.recorder import EpisodeRecorder, tool_action
from deltamem.types import Task

log = logging.getLogger("deltamem.langgraph")

__all__ = ["GraphMemory", "tool_action"]

MEMORY_MESSAGE_ID = "deltamem-recall"
_DEFAULT_SLOT = "__default__"


def _text(content: Any) -> str:
    """Message content as plain text (string content, or the text parts of a list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") for p in content
                 if isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text")]
        return "\n".join(parts)
    return str(content)


def task_from_state(state: Mapping[str, Any]) -> Task:
    """Default ``task``: ``state["task"]`` (a :class:`Task` or its fields), else the first
    human message as the goal (domain ``generic``)."""
    given = state.get("task")
    if isinstance(given, Task):
        return given
    if isinstance(given, Mapping):
        return Task.from_dict({"id": "task", **given})
    for msg in state.get("messages", []):
        if isinstance(msg, HumanMessage) and _text(msg.content).strip():
            return Task(id="task", goal=_text(msg.content).strip())
    raise InvalidInputError("no task: put one in state['task'] or start with a human message")


def outcome_from_state(state: Mapping[str, Any]) -> tuple[bool, float | None] | None:
    """Default ``outcome``: the state's ``success`` (and ``reward``) keys, if present."""
    if "success" not in state or state["success"] is None:
        return None
    reward = state.get("reward")
    return bool(state["success"]), None if reward is None else float(reward)


class GraphMemory:
    """Recall and learn nodes for a LangGraph graph, backed by a deltamem memory.

    Args:
        memory: any :class:`~deltamem.memory.Memory` (a :class:`~deltamem.DeltaMem` bank,
            a :class:`~deltamem.Client` of the HTTP service, ...).
        task: state → the :class:`Task` being played (default :func:`task_from_state`).
        outcome: state → ``(success, reward)`` or ``None`` for "already decided"
            (default :func:`outcome_from_state`).
        format_action: tool name and arguments → action text (default :func:`tool_action`).
        messages_key: the state key of the conversation (``add_messages`` reducer).
        from_messages: take the steps from the conversation's tool calls; set False when
            your nodes record steps themselves with ``episode(config).step(...)``.
        max_steps: recorded in the episode, if the graph runs under a step cap.
        on_learned: called with each episode's recorder once it has learned (its
            ``recall``, ``episode`` and ``changes``), e.g. to log what memory changed.
        judge: decides success from the trajectory when ``outcome`` gives none
            (:mod:`deltamem.judge`; an uncertain or refused verdict learns nothing). Without
            a judge such an episode is learned as a failure.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        task: Callable[[Mapping[str, Any]], Task] = task_from_state,
        outcome: Callable[[Mapping[str, Any]], tuple[bool, float | None] | None] = (
            outcome_from_state),
        format_action: Callable[[str, Mapping[str, Any]], str] = tool_action,
        messages_key: str = "messages",
        from_messages: bool = True,
        max_steps: int | None = None,
        on_learned: Callable[[EpisodeRecorder], None] | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.memory = memory
        self.judge = judge
        self.on_learned = on_learned
        self.task = task
        self.outcome = outcome
        self.format_action = format_action
        self.messages_key = messages_key
        self.from_messages = from_messages
        self.max_steps = max_steps
        self._running: dict[str, tuple[EpisodeRecorder, frozenset[str]]] = {}
        self._lock = threading.Lock()

    # -- recorders per thread ---------------------------------------------------------------
    @staticmethod
    def _slot(config: RunnableConfig | None) -> str:
        conf = (config or {}).get("configurable") or {}
        tid = conf.get("thread_id")
        return _DEFAULT_SLOT if tid is None else str(tid)

    def episode(self, config: RunnableConfig | None = None) -> EpisodeRecorder | None:
        """The episode running in this config's thread (``None`` when none is)."""
        with self._lock:
            entry = self._running.get(self._slot(config))
        return entry[0] if entry else None

    def abort(self, config: RunnableConfig | None, error: BaseException,
              state: Mapping[str, Any] | None = None) -> None:
        """Learn this thread's started episode as a failure (the graph raised ``error``),
        with the steps found in ``state`` (the last state the graph reached), if given."""
        with self._lock:
            entry = self._running.pop(self._slot(config), None)
        if entry is None:
            return
        rec, seen = entry
        try:
            if state is not None and self.from_messages and isinstance(error, Exception):
                for action, observation in self._tool_steps(
                        state.get(self.messages_key) or [], seen):
                    rec.step(action, observation)
            rec.close(error)
            self._learned(rec)
        except Exception:
            log.exception("learning the failed episode of task %r failed too", rec.task.id)

    # -- the nodes ------------------------------------------------------------------------------
    def recall(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: start the episode and put what memory recalls before the first model call."""
        rec = EpisodeRecorder(self.memory, self.task(state), max_steps=self.max_steps,
                              judge=self.judge)
        rec.start()
        messages: list[AnyMessage] = list(state.get(self.messages_key) or [])
        seen = frozenset(m.id for m in messages if m.id)
        slot = self._slot(config)
        with self._lock:
            old = self._running.pop(slot, None)
            self._running[slot] = (rec, seen)
        if old is not None:
            log.warning("thread %s started a new episode before the last one was learned; "
                        "the unfinished one is dropped", slot)
        if rec.recall.empty:
            return {}
        return {self.messages_key: self._with_memory(messages, rec.recall.text)}

    @staticmethod
    def _with_memory(messages: list[AnyMessage], text: str) -> list[BaseMessage]:
        first = messages[0] if messages else None
        if isinstance(first, SystemMessage) and first.id:
            merged = _text(first.content).rstrip() + "\n\n" + text
            return [SystemMessage(content=merged, id=first.id)]  # replaces it in place
        memory = SystemMessage(content=text, id=MEMORY_MESSAGE_ID)
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), memory, *messages]

    def learn(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Node: record the run's tool calls as steps, take the outcome, learn."""
        with self._lock:
            entry = self._running.pop(self._slot(config), None)
        if entry is None:
            raise InvalidInputError("the learn node ran without the recall node before it "
                                    "(wire the graph with GraphMemory.wire)")
        rec, seen = entry
        try:
            if self.from_messages:
                for action, observation in self._tool_steps(state.get(self.messages_key) or [],
                                                            seen):
                    rec.step(action, observation)
            verdict = self.outcome(state)
            if verdict is not None:
                rec.finish(verdict[0], verdict[1])
        except Exception as e:
            rec.close(e)
            self._learned(rec)
            raise
        rec.close()
        self._learned(rec)
        return {}

    def _learned(self, rec: EpisodeRecorder) -> None:
        if self.on_learned is not None and rec.changes is not None:
            self.on_learned(rec)

    def _tool_steps(self, messages: list[AnyMessage],
                    seen: frozenset[str]) -> list[tuple[str, str]]:
        answers = {m.tool_call_id: _text(m.content) for m in messages
                   if isinstance(m, ToolMessage) and m.id not in seen}
        steps = []
        for m in messages:
            if not isinstance(m, AIMessage) or (m.id and m.id in seen):
                continue
            for call in m.tool_calls:
                steps.append((self.format_action(call["name"], call.get("args") or {}),
                              answers.get(call.get("id") or "", "")))
        return steps

    # -- wiring and running -------------------------------------------------------------------
    def wire(self, builder: Any, *, entry: str, exit: str | None = None,
             recall_node: str = "recall", learn_node: str = "learn") -> None:
        """Add the two nodes: ``START → recall → entry`` and, with ``exit``,
        ``exit → learn → END`` (else route to ``learn`` yourself; it always goes to END)."""
        builder.add_node(recall_node, self.recall)
        builder.add_node(learn_node, self.learn)
        builder.add_edge(START, recall_node)
        builder.add_edge(recall_node, entry)
        if exit is not None:
            builder.add_edge(exit, learn_node)
        builder.add_edge(learn_node, END)

    def invoke(self, graph: Any, input: Any, config: RunnableConfig | None = None,
               **kwargs: Any) -> Any:
        """Run the graph to its final state (``graph.stream`` in ``values`` mode, so the last
        state reached is known); if it raises, the started episode is learned as a failure
        with the steps taken so far, and the error propagates."""
        last: Any = None
        try:
            for last in graph.stream(input, config, stream_mode="values", **kwargs):  # noqa: B007
                pass
        except BaseException as e:
            self.abort(config, e, last if isinstance(last, Mapping) else None)
            raise
        return last

    async def ainvoke(self, graph: Any, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> Any:
        """The async :meth:`invoke` (``graph.astream``)."""
        import asyncio

        last: Any = None
        try:
            async for last in graph.astream(input, config, stream_mode="values", **kwargs):  # noqa: B007
                pass
        except Exception as e:
            await asyncio.to_thread(self.abort, config, e,
                                    last if isinstance(last, Mapping) else None)
            raise
        except BaseException as e:  # cancelled: drop the episode, nothing to learn or await
            self.abort(config, e)
            raise
        return last
