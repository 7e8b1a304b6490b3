"""Decocted experience (Shen et al., 2025): lessons, k-means consolidation, context quality,
and a concept tree with re-ranking (the paper's information-gain estimate is
:mod:`deltamem.analysis.infogain`).

Memory systems (registered in :mod:`deltamem.memories`):

==================  ===========================================================
``lessons``         (task, distilled lesson), top-K by task similarity (§3.1)
``lessons-raw``     (task, trajectory), same retrieval (§2.1 raw experience)
``lessons-kmeans``  lessons, recall over a k-means-consolidated view (§3.2)
``concept-tree``    lessons under a concept tree, leaf-level recall + re-rank (§5)
==================  ===========================================================

Every recall logs Rel, Div and Q (§4) under ``Recall.details["quality"]``;
:func:`deltamem.analysis.context_quality.correlation_report` correlates Q with the
improvement over no memory.
"""

from deltamem.memories.decocted.concept_tree import ConceptTreeMemory, build_tree
from deltamem.memories.decocted.kmeans import consolidate
from deltamem.memories.decocted.lessons import (
    KMeansLessonMemory,
    LessonMemory,
    RawExperienceMemory,
)
from deltamem.memories.decocted.quality import context_quality

__all__ = [
    "ConceptTreeMemory",
    "KMeansLessonMemory",
    "LessonMemory",
    "RawExperienceMemory",
    "build_tree",
    "consolidate",
    "context_quality",
]
