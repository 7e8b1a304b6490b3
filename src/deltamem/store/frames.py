"""Exports that prove they are whole: a header and a trailer around the records.

An export (``deltamem export``, ``GET /v1/banks/{bank}/export``) is framed::

    {"type": "header", "format": "deltamem-export", "format_version": 1,
     "counts": {"meta": 1, "node": 80, "learned": 8}, "records": 89}
    ... the 89 records ...
    {"type": "trailer", "format": "deltamem-export", "format_version": 1,
     "counts": {...}, "records": 89, "sha256": "<hex>"}

The counts are per record ``type``; the checksum is SHA-256 over the records' canonical
lines (``json.dumps(record, sort_keys=True, ensure_ascii=False)`` + ``"\\n"``), which are the
very lines an export writes, so a file's checksum can be checked with standard tools too and
records sent as a JSON list (the service's import) check the same way.

The rule an import follows (:class:`Unframe`, applied by every store's ``import_records``):

- a header and a trailer that agree with the records: imported;
- a header without a trailer (the file was cut), a trailer without a header, counts or a
  checksum that disagree: refused with :class:`~deltamem.errors.IncompleteExportError`,
  naming what is missing (``71 of 80 nodes, 8 of 8 learned episode ids``), unless
  ``partial=True``: then what is there is imported and :attr:`Unframe.result` says what
  was skipped;
- neither (an export written before frames existed): imported, and the result carries a
  warning that completeness could not be checked.

The rule is the format's, not the file's: a directory format (SKILL.md with a manifest)
can hold the same :class:`Tally` and compare it with :func:`compare`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from deltamem.errors import IncompleteExportError, InvalidImportError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Completeness",
    "Tally",
    "Unframe",
    "canonical_line",
    "compare",
    "describe_counts",
    "describe_missing",
    "frame",
    "header",
    "trailer",
]

FORMAT = "deltamem-export"
#: version of the framing (header/trailer); the records carry their own schema version
FORMAT_VERSION = 1

#: how a message names the records of each type (plural)
KIND_NAMES = {
    "meta": "meta records",
    "node": "nodes",
    "item": "items",
    "learned": "learned episode ids",
    "rejection": "rejected extractor outputs",
    "audit": "audit entries",
    "skill": "SKILL.md files",
    "sidecar": "deltamem.json sidecars",
}


def canonical_line(rec: Mapping[str, Any]) -> str:
    """The record's line in an export (what the checksum covers)."""
    return json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass
class Tally:
    """Counts by record type and a running SHA-256 over the records' canonical lines."""

    counts: dict[str, int] = field(default_factory=dict)
    records: int = 0
    _hash: Any = field(default_factory=hashlib.sha256, repr=False)

    def add(self, rec: Mapping[str, Any], line: str | None = None) -> None:
        """Count ``rec``; ``line`` is its canonical line when the caller already has it."""
        kind = rec.get("type")
        key = kind if isinstance(kind, str) else "?"
        self.counts[key] = self.counts.get(key, 0) + 1
        self.records += 1
        self._hash.update((line if line is not None else canonical_line(rec)).encode("utf-8"))

    @property
    def sha256(self) -> str:
        return str(self._hash.hexdigest())


def header(tally: Tally) -> dict[str, Any]:
    """The header record of an export whose records are counted in ``tally``."""
    return {"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
            "counts": dict(sorted(tally.counts.items())), "records": tally.records}


def trailer(tally: Tally) -> dict[str, Any]:
    """The trailer record: the header's counts and the checksum over the records."""
    return {**header(tally), "type": "trailer", "sha256": tally.sha256}


def frame(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with a header before and a trailer after (held in memory)."""
    body = [dict(r) for r in records]
    tally = Tally()
    for r in body:
        tally.add(r)
    return [header(tally), *body, trailer(tally)]


def describe_counts(counts: Mapping[str, int]) -> str:
    """``80 nodes, 8 learned episode ids`` (types in a fixed order)."""
    return ", ".join(f"{counts[k]} {KIND_NAMES.get(k, k + ' records')}"
                     for k in _order(counts))


def compare(expected: Mapping[str, int], got: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Types whose count differs: ``{type: (got, expected)}``."""
    return {k: (got.get(k, 0), expected.get(k, 0))
            for k in sorted(set(expected) | set(got)) if got.get(k, 0) != expected.get(k, 0)}


def _order(keys: Iterable[str]) -> list[str]:
    keys = set(keys)
    return [k for k in KIND_NAMES if k in keys] + sorted(keys - set(KIND_NAMES))


def describe_missing(diff: Mapping[str, tuple[int, int]]) -> str:
    """``36 of 44 nodes, 2 learned episode ids more than the 8 announced``: a
    :func:`compare` result in words."""
    parts = []
    for k in _order(diff):
        got, want = diff[k]
        name = KIND_NAMES.get(k, k + " records")
        if got < want:
            parts.append(f"{want - got} of {want} {name}")
        else:
            parts.append(f"{got - want} {name} more than the {want} announced")
    return ", ".join(parts)


@dataclass
class Completeness:
    """What an import of a (possibly framed) export found.

    ``framed``: the export had a header or a trailer; ``whole``: header, trailer, counts and
    checksum all agree; ``expected`` / ``got``: counts by record type (``expected`` is empty
    for an unframed export); ``notes``: what a user must be told (skipped records, a cut last
    line, an unframed export).
    """

    framed: bool = False
    whole: bool = False
    expected: dict[str, int] = field(default_factory=dict)
    got: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> dict[str, int]:
        """Records announced by the header but absent, by type."""
        return {k: want - got for k, (got, want) in compare(self.expected, self.got).items()
                if got < want}


class Unframe:
    """Iterate an export's records without its header and trailer, checking wholeness.

    When the stream ends, the framing is checked (see the module docstring): a refusal raises
    :class:`~deltamem.errors.IncompleteExportError` from inside the iteration, so an import
    that consumes the stream inside its transaction writes nothing. With ``partial=True`` the
    records present are yielded and :attr:`result` lists what was skipped. ``cut_line``: the
    line number of a final line the reader found cut off (it is reported, not imported).
    """

    def __init__(self, records: Iterable[Any], *, partial: bool = False,
                 source: str = "the export",
                 partial_hint: str = "--partial (partial=True)") -> None:
        self._records = records
        self.partial = partial
        self.source = source
        self.partial_hint = partial_hint
        self.cut_line: int | None = None
        self.result = Completeness()

    def __iter__(self) -> Iterator[Any]:
        res = self.result
        tally = Tally()
        head: Mapping[str, Any] | None = None
        tail: Mapping[str, Any] | None = None
        first = True
        for rec in self._records:
            kind = rec.get("type") if isinstance(rec, Mapping) else None
            if tail is not None:
                raise InvalidImportError(f"{self.source}: a record follows the trailer")
            if kind == "header":
                if not first:
                    raise InvalidImportError(f"{self.source}: a header after the first record")
                head = self._check_frame(rec)
                res.framed = True
                res.expected = dict(head["counts"])
                first = False
                continue
            first = False
            if kind == "trailer":
                tail = self._check_frame(rec)
                res.framed = True
                continue
            if isinstance(rec, Mapping):
                tally.add(rec)
            yield rec
        res.got = dict(tally.counts)
        self._finish(head, tail, tally)

    def _check_frame(self, rec: Mapping[str, Any]) -> Mapping[str, Any]:
        kind = rec.get("type")
        if rec.get("format") != FORMAT:
            raise InvalidImportError(f"{self.source}: {kind} of another format: "
                                     f"{rec.get('format')!r}")
        v = rec.get("format_version")
        if not isinstance(v, int) or isinstance(v, bool) or v > FORMAT_VERSION:
            raise InvalidImportError(f"{self.source}: export format version {v!r}; this "
                                     f"deltamem reads {FORMAT_VERSION}")
        counts = rec.get("counts")
        if not isinstance(counts, dict) or not all(
                isinstance(k, str) and isinstance(c, int) and not isinstance(c, bool) and c >= 0
                for k, c in counts.items()):
            raise InvalidImportError(f"{self.source}: the {kind} has no valid counts")
        if kind == "trailer" and not isinstance(rec.get("sha256"), str):
            raise InvalidImportError(f"{self.source}: the trailer has no checksum")
        return rec

    def _finish(self, head: Mapping[str, Any] | None, tail: Mapping[str, Any] | None,
                tally: Tally) -> None:
        res = self.result
        cut = (f"; its last line ({self.cut_line}) is cut off" if self.cut_line is not None
               else "")
        if head is None and tail is None:
            if self.cut_line is not None and not self.partial:
                raise IncompleteExportError(
                    f"{self.source} is not whole: its last line ({self.cut_line}) is cut off "
                    "mid-record (the export was cut short). Nothing was imported; import what "
                    f"is there with {self.partial_hint}")
            res.notes.append(
                f"{self.source} has no header or trailer (written before deltamem exports "
                "carried them): whether it is complete cannot be checked" + cut)
            return
        problems: list[str] = []
        expected = dict((tail or head or {})["counts"])
        res.expected = expected
        if head is not None and tail is not None and dict(head["counts"]) != dict(tail["counts"]):
            problems.append("its header and trailer announce different counts")
        if tail is None:
            problems.append("it has no trailer (the export was cut short)" + cut)
        else:
            if head is None:
                problems.append("it has no header (its start is missing)")
            if self.cut_line is not None:
                problems.append(f"a cut-off line ({self.cut_line}) follows its trailer")
        diff = compare(expected, tally.counts)
        if diff:
            problems.append(f"missing {describe_missing(diff)}")
        elif tail is not None and tail["sha256"] != tally.sha256:
            problems.append("its records do not match the trailer's checksum (altered or "
                            "damaged)")
        if not problems:
            res.whole = True
            return
        what = "; ".join(problems)
        if not self.partial:
            raise IncompleteExportError(
                f"{self.source} is not whole: {what}. Nothing was imported; import what is "
                f"there with {self.partial_hint}")
        skipped = res.skipped
        res.notes.append(f"{self.source} is not whole: {what}")
        if skipped:
            res.notes.append(f"skipped (not in the file): {describe_counts(skipped)}")
            if skipped.get("learned"):
                res.notes.append(
                    f"{skipped['learned']} learned episode ids are missing: learning those "
                    "episodes again would write them again")
