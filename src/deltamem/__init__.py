"""deltamem: experience memory for LLM agents.

The public names are listed in ``__all__`` and documented in ``docs/api.md``.
"""

from deltamem.core.payload import Payload
from deltamem.errors import DeltaMemError
from deltamem.memories.deltamem import DeltaMem, DeltaMemConfig
from deltamem.memory import Memory, NoMemory
from deltamem.portable import export_bank, import_bank
from deltamem.types import (
    Change,
    Changes,
    Episode,
    Match,
    Recall,
    RecallItem,
    Step,
    Task,
    Usage,
)
from deltamem.version import __version__


def __getattr__(name: str):  # lazy: the client needs httpx, an optional dependency
    if name == "Client":
        from deltamem.client import Client

        return Client
    raise AttributeError(f"module 'deltamem' has no attribute {name!r}")


__all__ = [
    "Change",
    "Changes",
    "Client",
    "DeltaMem",
    "DeltaMemConfig",
    "DeltaMemError",
    "Episode",
    "Match",
    "Memory",
    "NoMemory",
    "Payload",
    "Recall",
    "RecallItem",
    "Step",
    "Task",
    "Usage",
    "__version__",
    "export_bank",
    "import_bank",
]
