"""The guide of one episode: the recall's procedures followed against the actions taken, by
an ordered rule set (:mod:`deltamem.agents.guide.rule`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import fields

from deltamem.agents.guide.actions import INVENTORY, STOP, abstract_action, direct_object, head
from deltamem.agents.guide.actions import words as _words
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.bindings import compounds, examples, fill, goal_bindings
from deltamem.agents.guide.knowledge import (
    alternative_places,
    belongings,
    known_places,
    placements,
)
from deltamem.agents.guide.procedures import procedure_items
from deltamem.agents.guide.registry import resolve_rules
from deltamem.agents.guide.rule import Decision, Position, Review, Rule
from deltamem.agents.guide.steps import recalled_steps
from deltamem.agents.guide.warnings import read_warnings
from deltamem.core.residual import compose, edits
from deltamem.core.triggers import goal_entities
from deltamem.envs.base import GUIDE_RULES
from deltamem.text import normalise
from deltamem.types import Recall


class Guide:
    """The recalled procedures of one episode, followed against the actions taken.

    ``recall``: the memory's :class:`~deltamem.types.Recall` (its items are the
    procedures, best first: :mod:`deltamem.agents.guide.procedures`) or a recall text (one
    procedure). ``rules``: the rule set, by names in the order asked (default
    :data:`deltamem.envs.base.GUIDE_RULES`; the agent passes its environment's
    :attr:`~deltamem.envs.base.Environment.guide_rules`); each rule is made once per guide.

    Raises:
        ConfigError: ``rules`` names an unknown rule, one twice, or a ``recall`` rule after
            a ``procedure`` rule (:func:`~deltamem.agents.guide.resolve_rules`).
    """

    def __init__(self, recall: Recall | str, goal: str,
                 rules: Sequence[str] | None = None) -> None:
        self.recall_text = recall if isinstance(recall, str) else recall.text
        self._items = {"\n".join(parts): parts for parts in procedure_items(recall)}
        self.procedures = list(self._items)
        self.compounds: frozenset[str] = frozenset()
        self.goal = goal
        self.goal_words = frozenset(w for w in _words(goal) if w not in STOP)
        entities = goal_entities(goal)
        self.goal_object = entities[0] if entities else None
        #: the rule names in the order asked
        self.rule_names: tuple[str, ...] = tuple(GUIDE_RULES if rules is None else rules)
        self.rules: tuple[Rule, ...] = tuple(cls() for cls in resolve_rules(self.rule_names))
        self._seen: frozenset[str] = frozenset()  # every action offered so far, abstracted
        self._absent_for: frozenset[str] | None = None  # the _seen that _absent answers for
        self._absent: dict[str, bool] = {}
        self._belongs = belongings(self.recall_text)  # the put-away rule's knowledge lines
        self._known: frozenset[str] | None = None
        self._variants: dict[str, list[str]] = {}  # procedure text -> its items' steps
        #: what the recall's warning items say to avoid (the ``review`` rules read it)
        self.warnings = read_warnings(() if isinstance(recall, str) else
                                      (i.text for i in recall.items if i.role == "warning"))

    def absent(self, step: str) -> bool:
        """Whether the thing ``step`` handles occurs in no action offered so far in this
        episode (then another thing of its kind may stand in for it:
        :func:`~deltamem.agents.guide.substitutes`)."""
        _, rest = head(abstract_action(step).replace(INVENTORY, "").split())
        thing = " ".join(direct_object(["", *rest]))
        if not thing or not self._seen:
            return False
        if self._absent_for is not self._seen:  # answers hold while the offers stay
            self._absent_for, self._absent = self._seen, {}
        if thing not in self._absent:
            pattern = re.compile(rf"(?<![\w-]){re.escape(thing)}(?![\w-])")
            self._absent[thing] = not any(pattern.search(a) for a in self._seen)
        return self._absent[thing]

    def known_places(self) -> frozenset[str]:
        """Kinds of places where the recall says an object of the goal's kind was found
        (the search's first choice): knowledge lines (``- <object>: found in/on <place>``)
        and the observations of recalled trajectories alike
        (:func:`~deltamem.agents.guide.sightings`)."""
        if self._known is None:  # the recall and the goal stay: read them once
            self._known = known_places(self.recall_text, self.goal_words)
        return self._known

    def alternative_places(self, steps: Sequence[str], k: int) -> frozenset[str]:
        """Places where the procedure itself does the blocked step ``steps[k]`` elsewhere
        (:func:`deltamem.agents.guide.knowledge.alternative_places`)."""
        return alternative_places(steps, k, self.goal_words)

    def bindings(self, verbs: Iterable[str], text: str | None = None) -> dict[str, str]:
        """The goal bindings (``verbs``: the action verbs seen so far) read from ``text``
        (default: the best procedure)."""
        if text is None:
            text = self.procedures[0] if self.procedures else ""
        return goal_bindings(text, self.goal, verbs, self.compounds)

    def steps(self, verbs: Iterable[str], text: str | None = None) -> list[str]:
        """The recalled steps of ``text`` (default: the best procedure) with the goal's words
        filled in. Each item of a chain is filled with the bindings of its own goal line
        first (a delta's placeholders need not be the base's: the base's {C} {D} was "living
        room", the delta's {C} "bedroom"), then the chain's."""
        if text is None:
            text = self.procedures[0] if self.procedures else ""
        verbs = set(verbs)
        parts = self._items.get(text, [text])
        raws = [recalled_steps(part, verbs) for part in parts]
        recalled_verbs = verbs | {s.split()[0].lower() for raw in raws for s in raw}
        chain = self.bindings(recalled_verbs, text)
        if len(parts) == 1:
            return [examples(fill(s, chain), text, self._seen) for s in raws[0]]
        groups = [edits(part) if n else None for n, part in enumerate(parts)]
        for g in groups:  # an edits delta's steps are read as any other step line is
            for n, e in enumerate(g or ()):
                g[n] = e._replace(steps=tuple(
                    x for s in e.steps for x in recalled_steps(f"1. {s}", recalled_verbs)))
        own = [goal_bindings(part, self.goal, recalled_verbs, self.compounds) for part in parts]
        composed = compose(list(zip(groups, raws, strict=True)))
        self._variants[text] = [
            examples(fill(s, {**chain, **own[n]}), text, self._seen)
            for n, raw in enumerate(raws) if groups[n] is None for s in raw
        ] + [examples(fill(s, {**chain, **own[n]}), text, self._seen)
             for n, g in enumerate(groups) for e in (g or ()) for s in e.steps]
        return [examples(fill(s, {**chain, **own[n]}), text, self._seen)
                for n, s in composed]

    def variants(self, text: str) -> list[str]:
        """The filled steps of every item of procedure ``text``'s chain (a base's, a delta's),
        as :meth:`steps` last read them; a step the composition kept is among them too
        (:attr:`~deltamem.agents.guide.Position.variants`)."""
        return self._variants.get(text, [])

    def advise(self, admissible: Sequence[str], taken: Sequence[str],
               offered: Iterable[str] = (), refused: Iterable[str] = ()) -> Advice:
        """Advice for the next decision: the first answer of the rule set, the ``recall``
        rules first, then the ``procedure`` rules for each procedure, best first (the
        first with actions wins; the best procedure's advice without actions when none has
        any).

        Args:
            admissible: the actions admissible now.
            taken: the valid actions taken so far in this episode, in order.
            offered: every action the environment has offered in this episode (their
                first words are the verbs that make a recall line a step).
            refused: actions the environment refused in this episode although it listed
                them (ScienceWorld lists some it cannot parse). They are left out of the
                advice unless every advised action was refused: advising one again only
                repeats the refusal to the step cap.
        """
        advice = self._advise(admissible, taken, offered)
        refused = {normalise(a) for a in refused}
        kept = tuple(a for a in advice.actions if normalise(a) not in refused)
        if kept and len(kept) < len(advice.actions):
            return Advice(advice.step, kept, advice.backtrack, advice.blocked)
        return advice

    def _advise(self, admissible: Sequence[str], taken: Sequence[str],
                offered: Iterable[str]) -> Advice:
        verbs = {a.split()[0].lower() for a in (*offered, *admissible) if a.split()}
        self.compounds = compounds((*offered, *admissible), verbs)
        self._seen = frozenset(abstract_action(a) for a in (*offered, *admissible))
        filled = [(text, self.steps(verbs, text)) for text in self.procedures]
        homes = placements(s for _, steps in filled for s in steps)
        homes.update(self._belongs)
        decision = Decision(admissible=admissible, taken=taken,
                            done=frozenset(normalise(a) for a in taken),
                            goal_words=self.goal_words, goal_object=self.goal_object,
                            homes=homes, known_places=self.known_places(), absent=self.absent,
                            warnings=self.warnings)
        return self._review(self._answer(decision, filled), decision)

    def _answer(self, decision: Decision, filled: list[tuple[str, list[str]]]) -> Advice:
        """The first answer of the ``recall`` rules, then of the ``procedure`` rules for
        each procedure (:meth:`advise`)."""
        for rule in self.rules:
            if rule.scope == "recall":
                advice = rule.advise(decision)
                if advice is not None:
                    return advice
        first: Advice | None = None
        for text, steps in filled:
            if not steps:
                continue
            advice = self._follow(steps, decision, self.variants(text))
            if advice.actions:
                return advice
            first = first or advice
        return first or Advice(None)

    def _review(self, advice: Advice, decision: Decision) -> Advice:
        """``advice`` narrowed by every ``review`` rule in turn (an answer that is not a
        non-empty subset of the actions reviewed is ignored)."""
        if not advice.actions:
            return advice
        for rule in self.rules:
            if rule.scope != "review":
                continue
            state = Review(**{f.name: getattr(decision, f.name) for f in fields(Decision)},
                           advice=advice)
            answer = rule.advise(state)
            if answer is not None and answer.actions and set(answer.actions) <= set(
                    advice.actions):
                advice = answer
        return advice

    def _follow(self, steps: list[str], decision: Decision,
                variants: Sequence[str] = ()) -> Advice:
        """The ``procedure`` rules' answer for one procedure's filled ``steps``: ``Advice(None)``
        when every step is done, the pointed step without actions when every rule passes."""
        position = Position.locate(steps, decision, variants)
        if position.k >= len(position.steps):
            return Advice(None)
        for rule in self.rules:
            if rule.scope == "procedure":
                advice = rule.advise(position)
                if advice is not None:
                    return advice
        return Advice(position.step)
