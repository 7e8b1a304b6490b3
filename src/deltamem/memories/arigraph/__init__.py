"""AriGraph (Anokhin et al., 2024): a knowledge-graph world model with episodic memory,
plus the step-level baselines the paper compares it with.

Modules: :mod:`.triplets` (the fact unit), :mod:`.graph` (semantic + episodic
graph, Algorithms 1-2, Eq. 1), :mod:`.extract` (triplet extraction and
outdated-triplet detection, LLM and rules), :mod:`.navigation` (locations,
shortest routes, Algorithm 3), :mod:`.base` (the step-level memory protocol on
an item bank), :mod:`.arigraph` (the memory system) and :mod:`.baselines`.
``deltamem graph show`` is :mod:`deltamem.cli.graph`; the Ariadne agent is
:mod:`deltamem.agents.ariadne`.
"""

from deltamem.memories.arigraph.graph import AriGraph, Growth, Observation, episodic_score
from deltamem.memories.arigraph.triplets import Triplet

__all__ = ["AriGraph", "Growth", "Observation", "Triplet", "episodic_score"]
