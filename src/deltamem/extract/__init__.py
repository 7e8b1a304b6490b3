"""Experience extraction: episode (+ retrieved chain) → node payload.

What a custom extractor needs is here: the :class:`Extractor` protocol, the
:class:`Payload` it returns and the :class:`ChainEntry` items of the chain it is
given, the roles (:data:`EXTRACTION_ROLES`, :data:`CONSOLIDATION_ROLES`) and
:data:`SKIPPABLE`, the roles whose ``extract`` may answer ``None`` (*skip*: the
retrieved chain already covers the episode; any other role must return a payload).
"""

from deltamem.core.payload import ChainEntry, Payload
from deltamem.extract.base import (
    CONSOLIDATION_ROLES,
    EXTRACTION_ROLES,
    SKIPPABLE,
    ConsolidationRole,
    Extractor,
    Role,
    role_for,
)
from deltamem.extract.llm import LLMExtractor, Rejection
from deltamem.extract.structural import StructuralExtractor

__all__ = [
    "CONSOLIDATION_ROLES",
    "EXTRACTION_ROLES",
    "SKIPPABLE",
    "ChainEntry",
    "ConsolidationRole",
    "Extractor",
    "LLMExtractor",
    "Payload",
    "Rejection",
    "Role",
    "StructuralExtractor",
    "role_for",
]
