"""OpenAI Agents SDK: run hooks that recall before the agent and learn when the run ends
(extra ``deltamem[agents]``).

::

    from deltamem.integrations.openai_agents import run_with_memory

    result = await run_with_memory(agent, task.goal, memory=mem, task=task,
                                   outcome=lambda output: (game.won, None))

:class:`MemoryHooks` is a :class:`agents.RunHooks` driving one
:class:`~deltamem.recorder.EpisodeRecorder`:

* ``on_agent_start`` (the first one of the run) recalls for the task;
* the recall text reaches the model through :meth:`MemoryHooks.model_input_filter`
  (a ``RunConfig.call_model_input_filter``: the text is appended to the agent's
  instructions on every model call of the run), or, for an agent you build yourself,
  through :meth:`MemoryHooks.instructions` (dynamic instructions);
* ``on_tool_end`` records each local tool call as a step (the tool's arguments as the
  action, its result as the observation);
* ``on_agent_end`` (the final output) takes ``outcome(output)`` and learns.

A run that raises never reaches ``on_agent_end``: :func:`run_with_memory` wraps
``Runner.run`` and learns the episode as a failure (with the steps taken) before re-raising;
with bare hooks, call :meth:`MemoryHooks.aclose` ``(error)`` yourself.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from agents.run_config import CallModelData, ModelInputData

from agents import Agent, RunConfig, RunContextWrapper, RunHooks, Runner, RunResult, Tool
from deltamem.judge import Judge
from deltamem.memory import Memory
from deltamem.recorder import EpisodeRecorder, tool_action
from deltamem.types import Recall, Task

log = logging.getLogger("deltamem.openai_agents")

__all__ = ["MemoryHooks", "run_with_memory"]

Outcome = Callable[[Any], "tuple[bool, float | None] | None"]


def _arguments(context: Any) -> Mapping[str, Any]:
    raw = getattr(context, "tool_arguments", None)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        return {"input": str(raw)}
    return parsed if isinstance(parsed, dict) else {"input": parsed}


class MemoryHooks(RunHooks[Any]):
    """Run hooks recording one episode of ``task`` into ``memory`` (see the module doc).

    Args:
        memory: any :class:`~deltamem.memory.Memory`.
        task: the task the run plays.
        outcome: final output → ``(success, reward)``, or ``None`` when something else
            already called ``hooks.recorder.finish(...)`` (e.g. a tool that saw the game
            end). Without any verdict the episode goes to ``judge``, or, with no judge, is
            learned as a failure.
        format_action: tool name and arguments → action text.
        max_steps: recorded in the episode, if the run is capped.
        judge: decides success from the trajectory when no outcome is given
            (:mod:`deltamem.judge`; an uncertain or refused verdict learns nothing).
    """

    def __init__(
        self,
        memory: Memory,
        task: Task,
        *,
        outcome: Outcome | None = None,
        format_action: Callable[[str, Mapping[str, Any]], str] = tool_action,
        max_steps: int | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.recorder = EpisodeRecorder(memory, task, max_steps=max_steps, judge=judge)
        self.outcome = outcome
        self.format_action = format_action

    @property
    def recall(self) -> Recall:
        """What memory recalled for the task (empty before the run starts)."""
        return self.recorder.recall

    # -- hooks ------------------------------------------------------------------------------
    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if not self.recorder.started and not self.recorder.closed:
            await self.recorder.astart()  # the memory's arecall: the loop keeps running

    async def on_tool_end(self, context: Any, agent: Any, tool: Tool, result: object) -> None:
        if self.recorder.closed:
            return
        name = getattr(context, "tool_name", None) or getattr(tool, "name", "tool")
        self.recorder.step(self.format_action(name, _arguments(context)), str(result))

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if self.recorder.closed:
            return
        try:
            verdict = self.outcome(output) if self.outcome is not None else None
            if verdict is not None:
                self.recorder.finish(verdict[0], verdict[1])
        except Exception as e:
            await self.aclose(e)
            raise
        await self.aclose()

    async def aclose(self, error: BaseException | None = None) -> None:
        """Learn (once): with the outcome, or as a failure when ``error`` ended the run."""
        if self.recorder.closed:
            return
        if error is not None and not isinstance(error, Exception):
            self.recorder.close(error)  # interrupted: nothing learned, nothing awaited
            return
        await self.recorder.aclose(error)  # the judge and the memory's alearn off the loop

    # -- getting the recall into the prompt ---------------------------------------------------
    def _with_recall(self, instructions: str | None) -> str | None:
        text = self.recorder.recall.text
        if not text:
            return instructions
        return f"{instructions.rstrip()}\n\n{text}" if instructions else text

    def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the recall appended to the instructions."""
        model = data.model_data
        return ModelInputData(input=model.input, instructions=self._with_recall(
            model.instructions))

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a default :class:`RunConfig`) with :meth:`model_input_filter` added
        after any filter ``base`` already has."""
        base = base or RunConfig()
        previous = base.call_model_input_filter
        if previous is None:
            return dataclasses.replace(base, call_model_input_filter=self.model_input_filter)

        async def chained(data: CallModelData[Any]) -> ModelInputData:
            out = previous(data)
            first = await out if inspect.isawaitable(out) else out
            return self.model_input_filter(dataclasses.replace(data, model_data=first))

        return dataclasses.replace(base, call_model_input_filter=chained)

    def instructions(self, base: str = "") -> Callable[[RunContextWrapper[Any], Agent[Any]], str]:
        """Dynamic ``Agent(instructions=...)``: ``base`` followed by the recall text."""

        def make(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
            return self._with_recall(base) or ""

        return make


async def run_with_memory(
    agent: Agent[Any],
    input: Any,
    *,
    memory: Memory,
    task: Task,
    outcome: Outcome | None = None,
    run_config: RunConfig | None = None,
    hooks: MemoryHooks | None = None,
    judge: Judge | None = None,
    **runner_kwargs: Any,
) -> RunResult:
    """``Runner.run`` inside one recorded episode: recall before the first model call (in the
    instructions), each tool call a step, learn at the end; a run that raises is learned as
    a failure and the error propagates. ``hooks``: a :class:`MemoryHooks` you built (to
    reach ``hooks.recorder`` from tools); else one is made from ``memory``/``task``/``outcome``/
    ``judge``.
    """
    mh = hooks or MemoryHooks(memory, task, outcome=outcome, judge=judge)
    try:
        result = await Runner.run(agent, input, hooks=mh, run_config=mh.run_config(run_config),
                                  **runner_kwargs)
    except BaseException as e:
        await mh.aclose(e)
        raise
    await mh.aclose()
    return result
