"""Environment adapters behind one contract."""

from deltamem.envs.base import Environment, Transition

__all__ = ["Environment", "Transition"]
