"""An offline ALFWorld stand-in: generated household games played with ALFWorld's engine.

``HouseholdEnv`` is the adapter; :mod:`.catalog` declares the world and the split
partition, :mod:`.generator` writes solvable ``game.tw-pddl`` files, :mod:`.play` plays
ALFWorld-format games (shared with :class:`deltamem.envs.alfworld.ALFWorldEnv`).
Importing this package does not import ``textworld`` or ``alfworld``.
"""

from deltamem.envs.household.env import HouseholdEnv

__all__ = ["HouseholdEnv"]
