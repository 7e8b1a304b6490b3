"""A LangGraph agent with deltamem: plays household games, recalling before each and learning
after each (``pip install 'deltamem[langgraph,envs]'``).

    python examples/langgraph_household.py --episodes 4 --bank household.db

The model here is scripted (it follows each game's stored solution), so the example runs
offline and shows the mechanics: the second episode's system prompt starts with what the
first one taught. For a real agent, replace ``WalkthroughModel(...)`` by any LangChain chat
model bound to the tool, e.g. ``ChatOpenAI(model="gpt-4o-mini").bind_tools([act])``; nothing
else changes.
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from deltamem import DeltaMem
from deltamem.embed import make_embedder
from deltamem.envs.household import HouseholdEnv
from deltamem.integrations.langgraph import GraphMemory
from deltamem.recorder import EpisodeRecorder

SYSTEM = "You play household text games. Send one command at a time with the `act` tool."


class Game:
    """The game being played, shared by the tool, the scripted model and the outcome."""

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
        t = self.env.step(command)
        self.taken += 1
        self.won, self.done = t.success, t.done
        return t.observation


class WalkthroughModel(BaseChatModel):
    """Stand-in for a real chat model: calls `act` with the game's next solution step."""

    game: Any
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        g = self.game
        if g.done or g.taken >= len(g.plan):
            reply = AIMessage(content="Finished.")
        else:
            reply = AIMessage(content="", tool_calls=[{"name": "act", "id": f"c{g.taken}",
                                                       "args": {"command": g.plan[g.taken]}}])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "walkthrough"


def build_graph(memory: GraphMemory, model: BaseChatModel, game: Game) -> Any:
    @tool
    def act(command: str) -> str:
        """Send one text command to the household game; returns what you observe."""
        return game.act(command)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([act]))
    memory.wire(builder, entry="agent")  # START → recall → agent
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "learn"})
    builder.add_edge("tools", "agent")
    return builder.compile()


def task_ids(env: HouseholdEnv, args: argparse.Namespace) -> list[str]:
    """The seen split's stream, or ``--episodes`` games of one ``--task-type``."""
    if args.task_type:
        return [f"seen/{args.task_type}/0-{i}" for i in range(args.episodes)]
    return env.task_ids("seen")[: args.episodes]


def main(argv: list[str] | None = None) -> list[list[BaseMessage]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--bank", default=":memory:", help="bank file (default: not kept)")
    ap.add_argument("--embedder", default="hashing", help="minilm | hashing | st:MODEL")
    ap.add_argument("--cache", default=None, help="where generated games are kept")
    ap.add_argument("--task-type", default=None,
                    help="play only this task type, e.g. pick_clean_then_place_in_recep")
    args = ap.parse_args(argv)

    mem = DeltaMem.open(args.bank, embedder=make_embedder(args.embedder), domain="alfworld")
    with HouseholdEnv(cache_dir=args.cache, n=args.episodes) as env:
        game = Game(env)
        learned: list[EpisodeRecorder] = []
        memory = GraphMemory(mem, task=lambda state: game.task,
                             outcome=lambda state: (game.won, None), on_learned=learned.append)
        model = WalkthroughModel(game=game, prompts=[])
        graph = build_graph(memory, model, game)
        firsts = []
        for i, task_id in enumerate(task_ids(env, args)):
            game.reset(task_id)
            before = len(model.prompts)
            memory.invoke(graph, {"messages": [("system", SYSTEM),
                                               ("user", game.task.observation)]},
                          {"configurable": {"thread_id": f"episode-{i}"}})
            firsts.append(model.prompts[before])
            ep = learned[-1]
            print(f"{task_id}: {'won' if game.won else 'lost'} in {game.taken} steps; "
                  f"recalled {len(ep.recall.items)} memory nodes; learned: "
                  f"{', '.join(f'{c.source} {c.kind}' for c in ep.changes or [])}")
    print(f"bank: {mem.stats()['nodes']}")
    mem.close()
    return firsts


if __name__ == "__main__":
    main()
