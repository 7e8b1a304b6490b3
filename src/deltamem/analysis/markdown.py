"""Markdown helpers shared by the analyses: tables, intervals, bold best values."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["ci", "table", "write_markdown"]


def ci(mean: float, interval: tuple[float, float], digits: int = 3, *, pct: bool = False) -> str:
    """``0.500 [0.300, 0.700]``, or ``50.0% [30.0, 70.0]`` with ``pct``."""
    lo, hi = interval
    if pct:
        return f"{mean:.1%} [{lo * 100:.1f}, {hi * 100:.1f}]"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A GitHub-flavoured Markdown table as lines (cells' ``|`` escaped)."""
    out = ["| " + " | ".join(_cell(h) for h in headers) + " |",
           "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def write_markdown(path: Path, lines: Sequence[str]) -> Path:
    """Write ``lines`` (joined, one trailing newline) to ``path``, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path
