"""The contract of a guide rule: what it reads at one decision and what it answers.

A :class:`~deltamem.agents.guide.Guide` holds an ordered rule set (the environment adapter
declares it by names: :attr:`deltamem.envs.base.Environment.guide_rules`). At each decision
it asks the rules in order, and the first that answers wins:

1. the ``recall`` rules, once, with a :class:`Decision` (the whole recall: what it says of
   places and homes);
2. then, for each recalled procedure in turn (best first:
   :mod:`deltamem.agents.guide.procedures`), the ``procedure`` rules with a :class:`Position`
   (that procedure's filled steps, and the step the actions taken point at). A procedure
   whose rules all pass gives advice without actions, and the next procedure is tried; the
   best procedure's such advice is the answer when none has actions.

A procedure whose steps are all done gives no advice and asks no rule.

3. then the ``review`` rules, in order, with a :class:`Review` (the decision and the advice
   chosen): each may narrow the advice's actions (never widen them), and every one is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import ClassVar, Literal, Protocol

from deltamem.agents.guide.actions import abstract_action
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.knowledge import alternative_places
from deltamem.agents.guide.progress import held, walk
from deltamem.agents.guide.realise import realisations, swap
from deltamem.agents.guide.warnings import Warnings

__all__ = ["SCOPES", "Decision", "Position", "Review", "Rule", "Scope"]

Scope = Literal["recall", "procedure", "review"]
SCOPES: tuple[Scope, ...] = ("recall", "procedure", "review")


@dataclass(eq=False)
class Decision:
    """What every rule reads at one decision of one episode (built by the guide).

    Attributes:
        admissible: the actions admissible now, in the environment's order (advice lists
            actions in this order).
        taken: the valid actions taken so far in this episode, in order.
        done: ``taken`` normalised (:func:`deltamem.text.normalise`): an action "not taken
            yet" is one whose normal form is not in it.
        goal_words: the goal's words, stop words left out
            (:data:`deltamem.text.GUIDE_STOP_WORDS`).
        goal_object: the goal's object (its first entity,
            :func:`deltamem.core.triggers.goal_entities`), or ``None``.
        homes: where things belong, ``{thing kind: place kind}``: the placements of every
            procedure's filled steps, then the recall's knowledge lines saying where a thing
            belongs (:mod:`deltamem.agents.guide.knowledge`), which win where they differ.
        known_places: kinds of places where the recall saw an object of the goal's kind.
        absent: ``absent(step)``, whether the thing ``step`` handles occurs in no action
            offered in this episode (:meth:`deltamem.agents.guide.Guide.absent`).
        warnings: what the recall's warning items say to avoid
            (:mod:`deltamem.agents.guide.warnings`; default: nothing).
    """

    admissible: Sequence[str]
    taken: Sequence[str]
    done: frozenset[str]
    goal_words: frozenset[str]
    goal_object: str | None
    homes: Mapping[str, str]
    known_places: frozenset[str]
    absent: Callable[[str], bool]
    warnings: Warnings = field(default_factory=Warnings, kw_only=True)


@dataclass(eq=False)
class Review(Decision):
    """A :class:`Decision` with the advice the ``recall`` and ``procedure`` rules chose:
    what ``review`` rules read.

    Attributes:
        advice: the advice chosen so far (narrowed by the ``review`` rules asked before).
    """

    advice: Advice


@dataclass(eq=False)
class Position(Decision):
    """A :class:`Decision` seen from one recalled procedure: what ``procedure`` rules read.

    Attributes:
        steps: the procedure's filled steps (recalled steps with the goal's words bound,
            :mod:`deltamem.agents.guide.bindings`); from the pointer on, with the stand-ins
            swapped in (:func:`~deltamem.agents.guide.realise.swap`).
        k: the pointer, ``0 <= k < len(steps)``: the step aimed at, after the actions taken
            (:func:`~deltamem.agents.guide.progress.walk`) and the pick-ups of things already
            held (:func:`~deltamem.agents.guide.progress.held`).
        subs: the stand-ins, ``{recalled word: the word put in its place}``.
        named: the words of the steps done (``steps[:k]`` as walked): they stand in for no
            other recalled word.
        variants: the filled steps of the procedure's chain items that its composition
            replaced (a delta's "instead of" puts its steps in place of its chain's: the
            chain still recorded the replaced ones, e.g. the place the base found the
            object): read for :attr:`other_places`, never followed.
    """

    steps: list[str]
    k: int
    subs: dict[str, str]
    named: frozenset[str]
    variants: tuple[str, ...] = ()

    @classmethod
    def locate(cls, steps: Sequence[str], decision: Decision,
               variants: Sequence[str] = ()) -> Position:
        """Where the actions taken put the procedure of filled ``steps`` (the pointer may
        be ``len(steps)``: every step done); ``variants``: :attr:`variants`."""
        k, _, subs = walk(steps, decision.taken, decision.goal_words, decision.absent)
        moved = [*steps[:k], *(swap(s, subs) for s in steps[k:])]
        named = frozenset(w for s in moved[:k] for w in abstract_action(s).split())
        while k < len(moved) and held(moved[k], decision.admissible, decision.goal_words):
            k += 1  # "pick up X" with X already held: done
        return cls(**{f.name: getattr(decision, f.name) for f in fields(Decision)},
                   steps=moved, k=k, subs=subs, named=named, variants=tuple(variants))

    @property
    def step(self) -> str:
        """The step aimed at, ``steps[k]``."""
        return self.steps[self.k]

    def realisations(self, step: str) -> tuple[list[str], list[str]]:
        """The admissible actions realising ``step``: ``(exact, loose)``, the stand-ins of
        this position kept (:func:`~deltamem.agents.guide.realise.realisations`)."""
        return realisations(step, self.admissible, self.goal_words, self.subs, self.named,
                            self.absent)

    def reached_at(self) -> int:
        """The index in :attr:`taken` of the action after which the pointer reached
        :attr:`k` (``len(taken)`` when it never did), walking :attr:`steps` as they stand.
        The walk's stand-ins replace :attr:`subs` for the rules asked after this one."""
        _, reached, self.subs = walk(self.steps, self.taken, self.goal_words, self.absent)
        return reached.get(self.k, len(self.taken))

    @cached_property
    def other_places(self) -> frozenset[str]:
        """Places where the procedure, or a chain item its composition replaced
        (:attr:`variants`), does the step aimed at elsewhere, the known places left out
        (:func:`~deltamem.agents.guide.knowledge.alternative_places`)."""
        return (alternative_places([*self.steps, *self.variants], self.k, self.goal_words)
                - self.known_places)


class Rule(Protocol):
    """One way the guide turns the recall into the next action. Implement :meth:`advise`
    and the two class attributes; register the class by name
    (:func:`deltamem.agents.guide.register_rule`) and name it in a rule set.

    A rule class is instantiated once per :class:`~deltamem.agents.guide.Guide`, that is,
    once per episode: whatever it keeps between decisions on ``self`` (rooms seen, ...) is
    that episode's.
    """

    #: the rule's name in rule sets: lower case, words joined by ``-`` ("open-closed")
    name: ClassVar[str]
    #: ``"recall"``: asked once per decision with a :class:`Decision`, before any
    #: procedure is followed; ``"procedure"``: asked for each procedure in turn with a
    #: :class:`Position`; ``"review"``: asked with a :class:`Review` once the advice is
    #: chosen, to narrow its actions. In a rule set the ``recall`` rules come first, the
    #: ``review`` rules last.
    scope: ClassVar[Scope]

    def advise(self, state: Decision) -> Advice | None:
        """The advice for this decision, or ``None`` to pass (the next rule is asked).

        Args:
            state: the decision; a :class:`Position` for a ``procedure`` rule, a
                :class:`Review` for a ``review`` rule. A rule reads it and changes it only
                through its methods (:meth:`Position.reached_at`).

        Returns:
            An :class:`~deltamem.agents.guide.Advice` whose ``actions`` are admissible
            actions (a subset of ``state.admissible``, in its order) and non-empty: the
            first ``recall`` or ``procedure`` rule to answer wins; a ``review`` rule's
            answer (a subset of the reviewed advice's actions) replaces the advice. ``None``
            to pass.
        """
        ...
