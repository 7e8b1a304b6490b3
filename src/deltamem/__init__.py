"""deltamem: experience memory for LLM agents."""

from deltamem.errors import DeltaMemError
from deltamem.memories.deltamem import DeltaMem, DeltaMemConfig
from deltamem.memory import Memory, NoMemory
from deltamem.types import Change, Changes, Episode, Recall, RecallItem, Step, Task, Usage

__version__ = "0.1.0"

__all__ = [
    "Change",
    "Changes",
    "DeltaMem",
    "DeltaMemConfig",
    "DeltaMemError",
    "Episode",
    "Memory",
    "NoMemory",
    "Recall",
    "RecallItem",
    "Step",
    "Task",
    "Usage",
    "__version__",
]
