"""An OpenAI Agents SDK agent with deltamem: plays household games, recalling before each
run and learning after it (``pip install 'deltamem[agents,envs]'``).

    python examples/openai_agents_household.py --episodes 4 --bank household.db
    python examples/openai_agents_household.py --model gpt-4.1-mini   # a real model

Without ``--model`` the agent's model is the SDK's ``ScriptedModel`` following each game's
stored solution (offline; tracing disabled), which shows the mechanics: the second run's
instructions end with what the first one taught. With ``--model`` (needs
``OPENAI_API_KEY``) the same code plays with a real model.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from agents import Agent, RunConfig, function_tool, set_tracing_disabled
from deltamem import DeltaMem
from deltamem.embed import make_embedder
from deltamem.envs.household import HouseholdEnv
from deltamem.integrations.openai_agents import MemoryHooks, run_with_memory

INSTRUCTIONS = "You play household text games. Send one command at a time with the `act` tool."


class Game:
    def __init__(self, env: HouseholdEnv) -> None:
        self.env = env
        self.task: Any = None
        self.plan: list[str] = []
        self.taken = 0
        self.won = self.done = False

    def reset(self, task_id: str) -> None:
        self.task = self.env.reset(task_id)
        self.plan, self.taken, self.won, self.done = self.env.solution() or [], 0, False, False

    def act(self, command: str) -> str:
        if self.done:
            return "The game is over."
        t = self.env.step(command)
        self.taken += 1
        self.won, self.done = t.success, t.done
        return t.observation


def walkthrough_model(game: Game) -> ScriptedModel:
    """The SDK's scripted model, answering every call with the game's next solution step."""

    def respond(call: ModelCall) -> Any:
        if game.done or game.taken >= len(game.plan):
            return [assistant_message("Finished.")]
        return [function_call("act", {"command": game.plan[game.taken]},
                              call_id=f"call_{game.taken}_{len(game.plan)}")]

    return ScriptedModel([ModelStep.respond(respond) for _ in range(10_000)])


async def play(args: argparse.Namespace) -> list[str | None]:
    mem = DeltaMem.open(args.bank, embedder=make_embedder(args.embedder), domain="alfworld")
    instructions_seen: list[str | None] = []
    with HouseholdEnv(cache_dir=args.cache, n=args.episodes) as env:
        game = Game(env)

        @function_tool
        def act(command: str) -> str:
            """Send one text command to the household game; returns what you observe."""
            return game.act(command)

        model: Any = args.model or walkthrough_model(game)
        agent = Agent(name="player", instructions=INSTRUCTIONS, tools=[act], model=model)
        for task_id in task_ids(env, args):
            game.reset(task_id)
            hooks = MemoryHooks(mem, game.task, outcome=lambda _output: (game.won, None))
            before = len(model.calls) if isinstance(model, ScriptedModel) else 0
            result = await run_with_memory(
                agent, game.task.observation, memory=mem, task=game.task, hooks=hooks,
                run_config=RunConfig(tracing_disabled=args.model is None), max_turns=40)
            if isinstance(model, ScriptedModel):  # the first model call of this run
                instructions_seen.append(model.calls[before].system_instructions)
            changes = hooks.recorder.changes or []
            print(f"{task_id}: {'won' if game.won else 'lost'} in {game.taken} steps; "
                  f"recalled {len(hooks.recall.items)} memory nodes; learned: "
                  f"{', '.join(f'{c.source} {c.kind}' for c in changes)}; "
                  f"agent said {str(result.final_output)[:40]!r}")
    print(f"bank: {mem.stats()['nodes']}")
    mem.close()
    return instructions_seen


def task_ids(env: HouseholdEnv, args: argparse.Namespace) -> list[str]:
    """The seen split's stream, or ``--episodes`` games of one ``--task-type``."""
    if args.task_type:
        return [f"seen/{args.task_type}/0-{i}" for i in range(args.episodes)]
    return env.task_ids("seen")[: args.episodes]


def main(argv: list[str] | None = None) -> list[str | None]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--bank", default=":memory:", help="bank file (default: not kept)")
    ap.add_argument("--embedder", default="hashing", help="minilm | hashing | st:MODEL")
    ap.add_argument("--model", default=None, help="an OpenAI model name (default: scripted)")
    ap.add_argument("--cache", default=None, help="where generated games are kept")
    ap.add_argument("--task-type", default=None,
                    help="play only this task type, e.g. pick_clean_then_place_in_recep")
    args = ap.parse_args(argv)
    if args.model is None:
        set_tracing_disabled(True)
    return asyncio.run(play(args))


if __name__ == "__main__":
    main()
