"""Experience extraction: episode (+ retrieved chain) → node payload."""

from deltamem.extract.base import EXTRACTION_ROLES, Extractor, Role, role_for
from deltamem.extract.llm import LLMExtractor, Rejection
from deltamem.extract.structural import StructuralExtractor

__all__ = [
    "EXTRACTION_ROLES",
    "Extractor",
    "LLMExtractor",
    "Rejection",
    "Role",
    "StructuralExtractor",
    "role_for",
]
