"""Experience extraction: episode (+ retrieved chain) → node payload."""

from deltamem.extract.base import EXTRACTION_ROLES, Extractor, Role, role_for

__all__ = ["EXTRACTION_ROLES", "Extractor", "Role", "role_for"]
