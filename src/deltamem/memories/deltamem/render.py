"""Recall rendering: the Eq. 7 chain of each accepted match under the domain's memory header
(paper §3.3), with the forgetting rules applied to what is shown.

    C = ⟨P_{v0}^{(0)}, ΔP_{v1}, …, ΔP_{v_match}⟩                                   (Eq. 7)

The Task-Tree's chain and the Env-Tree's are concatenated (task first). With ``supersede``,
Env-Tree knowledge lines a deeper (newer) node of the same chain contradicts are left out
(:func:`~deltamem.core.forgetting.supersede`); with ``max_recall_tokens``, chains are cut
to fit (the Env-Tree's from its root side, then the Task-Tree's from its deep side, so the
base skill stays: :func:`~deltamem.core.forgetting.fit_budget`).

:func:`render` turns each tree's :class:`~deltamem.memories.deltamem.search.Found` into the
:class:`~deltamem.types.Recall`; its ``details`` (written to runs' ``episodes.jsonl``, read
by the analysis code and the service) hold per tree the match's ``node_id``, ``score``,
``tau``, ``accepted`` and ``chain`` (plus ``superseded`` when lines were left out), and
``budget`` when a budget applies.

:class:`RecallCache` keeps rendered recalls by the nodes they show, for one generation of
the bank view (:attr:`~deltamem.memories.deltamem.bank.BankView.generation`: any reload that
re-read the store, after a write by this process or another, empties it). A recall that
shows the same chains as one before it then costs the scan and a few dicts: the chain's
text is neither read nor rendered again (at 1k nodes the rendering and text reads were
three times the scan, ``benchmarks/peers.py``). The text shown depends only on the chains'
nodes (their text never changes) and the configuration (fixed per open); scores and the
unaccepted trees' best nodes are filled in per call.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltamem.core.forgetting import fit_budget, supersede
from deltamem.core.payload import ChainEntry, TreeName, render_chain
from deltamem.core.tree import BestNode, Node
from deltamem.domains import get_domain
from deltamem.memories.deltamem.bank import BankView
from deltamem.memories.deltamem.config import DeltaMemConfig
from deltamem.memories.deltamem.search import Found, found
from deltamem.types import Recall, RecallItem

__all__ = ["RECALL_CACHE", "RecallCache", "render"]

RECALL_CACHE = 1024
"""Rendered recalls a :class:`RecallCache` keeps (least recently used first out)."""

_TITLES = {"task": "Task skill memory", "env": "Environment knowledge memory"}


def render(found: Mapping[TreeName, Found], config: DeltaMemConfig) -> Recall:
    """The recall of ``found`` (each enabled tree's match and chain) under ``config``.

    Items are the nodes shown, in prompt order: ``base`` (a ROOT), ``delta`` (a RESIDUAL)
    or ``warning`` (a FAILURE node), the matched node with its score.
    """
    details: dict[str, Any] = {}
    chains: dict[TreeName, tuple[Node, ...]] = {}
    entries: dict[str, list[ChainEntry]] = {}
    for tree, f in found.items():
        details[tree] = f.match.to_detail()
        if not f.chain:
            continue
        chains[tree] = f.chain
        shown = [n.entry() for n in f.chain]
        if tree == "env" and config.supersede:
            shown, gone = supersede(shown)
            if gone:
                details[tree]["superseded"] = [
                    {"node": f.chain[g.index].id, "subject": g.subject, "line": g.line,
                     "by": f.chain[g.by].id} for g in gone]
        entries[tree] = shown
    header = get_domain(config.domain).header

    def text_of(shown: Mapping[str, Sequence[int]]) -> str:
        return _text(header, entries, shown)

    positions: dict[str, list[int]] = {t: list(range(len(e))) for t, e in entries.items()}
    if config.max_recall_tokens is None:
        text = text_of(positions)
    else:
        text, cut = fit_budget(entries, text_of, config.max_recall_tokens)
        for t, dropped in cut.dropped.items():
            positions[t] = [i for i in positions[t] if i not in dropped]
        details["budget"] = {
            "max_tokens": config.max_recall_tokens, "tokens_before": cut.tokens_before,
            "tokens_after": cut.tokens_after, "truncated_tokens": cut.truncated,
            "left_out": {t: [chains[t][i].id for i in d]  # type: ignore[index]
                         for t, d in cut.dropped.items()},
        }
    items: list[RecallItem] = []
    for tree, chain in chains.items():
        m = found[tree].match
        for i in positions[tree]:
            n = chain[i]
            role = "warning" if n.label == "FAILURE" else "base" if n.kind == "ROOT" else "delta"
            items.append(RecallItem(source=tree, id=n.id,
                                    text=render_chain(tree, [entries[tree][i]]),
                                    score=m.score if n.id == m.node_id else None, role=role))
    return Recall(text=text, items=tuple(items), details=details)


def _text(header: str, entries: Mapping[str, Sequence[ChainEntry]],
          shown: Mapping[str, Sequence[int]]) -> str:
    """The recall text showing, per tree, the chain entries at positions ``shown`` (a cut
    chain says how many entries it left out on each side)."""
    sections = []
    for tree, idx in shown.items():
        if not idx:
            continue
        ents = entries[tree]
        before = sum(1 for e in ents[: idx[0]] if e.kind == "RESIDUAL" and e.label == "SUCCESS")
        left = (f"[{idx[0]} earlier {'entry' if idx[0] == 1 else 'entries'} of this "
                "chain left out: recall budget]\n" if idx[0] else "")
        body = render_chain(tree, [ents[i] for i in idx],  # type: ignore[arg-type]
                            deltas_before=before)
        later = len(ents) - 1 - idx[-1]
        right = (f"\n[{later} later {'entry' if later == 1 else 'entries'} of this "
                 "chain left out: recall budget]" if later else "")
        sections.append(f"## {_TITLES[tree]}\n{left}{body}{right}")
    return header + "\n\n" + "\n\n".join(sections) if sections else ""


@dataclass(frozen=True)
class _Rendered:
    """A rendered recall without what varies between recalls of the same chains: per tree
    the details' fixed keys (``chain``, ``superseded``), the items (the matched node's score
    left out: ``matched`` holds the positions of the items that carry it) and the top-level
    ``budget``. ``nested``: a detail holds more than the chain (copied deeply per recall)."""

    text: str
    items: tuple[RecallItem, ...]
    matched: tuple[int, ...]
    fixed: Mapping[str, Mapping[str, Any]]
    budget: Mapping[str, Any] | None
    nested: bool

    @classmethod
    def of(cls, rec: Recall) -> _Rendered:
        fixed = {t: {k: v for k, v in d.items()
                     if k not in ("node_id", "score", "tau", "accepted")}
                 for t, d in rec.details.items() if t != "budget"}
        matched = tuple(i for i, it in enumerate(rec.items) if it.score is not None)
        items = tuple(RecallItem(it.source, it.id, it.text, None, it.role) for it in rec.items)
        budget = rec.details.get("budget")
        nested = any(k != "chain" for d in fixed.values() for k in d)
        return cls(rec.text, items, matched, fixed, budget, nested)

    def recall(self, best: Mapping[TreeName, BestNode]) -> Recall:
        details: dict[str, Any] = {}
        fixed = self.fixed
        for t, b in best.items():
            details[t] = {"node_id": b.node_id, "score": b.score, "tau": b.tau,
                          "accepted": b.accepted, "chain": list(fixed[t]["chain"])}
            if self.nested:
                details[t].update({k: copy.deepcopy(v) for k, v in fixed[t].items()
                                   if k != "chain"})
        if self.budget is not None:
            details["budget"] = copy.deepcopy(self.budget)
        items = self.items
        if self.matched:
            out = list(items)
            for i in self.matched:
                it = items[i]
                out[i] = _item(it.source, it.id, it.text, best[it.source].score, it.role)
            items = tuple(out)
        return _recall(self.text, items, details)


def _item(source: str, id: str, text: str, score: float | None, role: str) -> RecallItem:
    """``RecallItem(source, id, text, score, role)`` without the frozen dataclass's checked
    assignments (a served recall makes one per matched node)."""
    it = object.__new__(RecallItem)
    it.__dict__.update(source=source, id=id, text=text, score=score, role=role)
    return it


def _recall(text: str, items: tuple[RecallItem, ...], details: dict[str, Any]) -> Recall:
    """``Recall(text=text, items=items, details=details)`` likewise (one per served recall)."""
    rec = object.__new__(Recall)
    rec.__dict__.update(text=text, items=items, details=details)
    return rec


class RecallCache:
    """Rendered recalls of one bank view by the node each tree accepted (module doc)."""

    def __init__(self, bank: BankView, config: DeltaMemConfig, size: int = RECALL_CACHE) -> None:
        self.bank = bank
        self.config = config
        self.size = size
        self._generation = -1
        self._entries: OrderedDict[tuple[tuple[str, str | None], ...], _Rendered] = OrderedDict()

    def recall(self, best: Mapping[TreeName, BestNode]) -> Recall:
        """The recall of ``best`` (each enabled tree's match on the bank view, as
        :func:`~deltamem.memories.deltamem.search.match` returns it): :func:`render` of
        its chains, or the same recall from the cache."""
        generation = self.bank.generation
        if generation != self._generation:
            self._entries.clear()
            self._generation = generation
        key = tuple([(t, b.node_id if b.accepted else None) for t, b in best.items()])
        entries = self._entries
        hit = entries.get(key)
        if hit is not None:
            entries.move_to_end(key)
            return hit.recall(best)
        made = self._plain(best) if self.config.max_recall_tokens is None else None
        if made is None:
            rec = render(found(self.bank, best), self.config)
            made = rec, _Rendered.of(rec)
        self._entries[key] = made[1]
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return made[0]

    def _plain(self, best: Mapping[TreeName, BestNode]) -> tuple[Recall, _Rendered] | None:
        """:func:`render` and :meth:`_Rendered.of` in one pass, for a recall without a token
        budget (every chain shown whole) whose Env-Tree chain, if any, supersedes no line:
        the same recall, without the :class:`Node` objects, the budget's bookkeeping and a
        second pass over the result (a first recall of a chain at 1k nodes cost as much as
        the scan). ``None``: a line is superseded; :func:`render` shows which."""
        details: dict[str, Any] = {}
        fixed: dict[str, dict[str, Any]] = {}
        sections: list[str] = []
        items: list[RecallItem] = []
        bare: list[RecallItem] = []
        matched: list[int] = []
        for t, b in best.items():
            if not (b.accepted and b.node_id):
                details[t] = {"node_id": b.node_id, "score": b.score, "tau": b.tau,
                              "accepted": b.accepted, "chain": []}
                fixed[t] = {"chain": []}
                continue
            ids, entries = self.bank.trees[t].chain_entries(b.node_id)
            if t == "env" and self.config.supersede:
                entries, gone = supersede(entries)
                if gone:
                    return None
            details[t] = {"node_id": b.node_id, "score": b.score, "tau": b.tau,
                          "accepted": b.accepted, "chain": list(ids)}
            fixed[t] = {"chain": ids}
            sections.append(f"## {_TITLES[t]}\n{render_chain(t, entries)}")
            for nid, e in zip(ids, entries, strict=True):
                role = ("warning" if e.label == "FAILURE" else "base" if e.kind == "ROOT"
                        else "delta")
                it = _item(t, nid, render_chain(t, [e]), None, role)
                bare.append(it)
                if nid == b.node_id:
                    matched.append(len(items))
                    it = _item(t, nid, it.text, b.score, role)
                items.append(it)
        header = get_domain(self.config.domain).header
        text = header + "\n\n" + "\n\n".join(sections) if sections else ""
        return (_recall(text, tuple(items), details),
                _Rendered(text, tuple(bare), tuple(matched), fixed, None, False))
