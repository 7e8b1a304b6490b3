"""Making recalled experience reach a small model's choice: recalled steps → concrete actions.

A 135M model shown a whole procedure in its memory block does not follow it; shown the
*next* step right before the action list, it often does (measured in ``docs/results.md``).
This package turns any memory system's recall text into that next step, for the ReAct
agent's ``guide`` option (pure text processing, no I/O, no model). It never reads the current
game's solution: only the recall text, the goal, the admissible actions and the steps taken
so far.

The shared machinery, in the order a decision uses it:

* :mod:`~deltamem.agents.guide.procedures`: the recall's items, best first (a DeltaMem chain
  is one procedure; warnings are never followed);
* :mod:`~deltamem.agents.guide.steps`: the recalled steps of a procedure (:func:`recalled_steps`);
* :mod:`~deltamem.agents.guide.bindings`: placeholders and recalled entities filled from the
  goal (:func:`goal_bindings`), unbound placeholders from their example values;
* :mod:`~deltamem.agents.guide.progress`: the pointer the actions taken move along the steps;
* :mod:`~deltamem.agents.guide.realise`: which admissible actions realise a step, exactly or
  loosely (:func:`realises`), stand-ins for absent things (:func:`substitutes`) and stand-ins
  that keep their role (ScienceWorld's circuits);
* :mod:`~deltamem.agents.guide.knowledge`: where the recall saw things (:func:`sightings`)
  and where they belong (:func:`placements`, :func:`belongings`);
* :mod:`~deltamem.agents.guide.actions`: reading an action (:func:`abstract_action`).

The advice itself comes from an ordered rule set (:class:`Rule`, :mod:`.rule`; the first
rule that answers wins), declared per domain by each environment adapter as rule names
(:attr:`deltamem.envs.base.Environment.guide_rules`) and resolved here
(:mod:`~deltamem.agents.guide.registry`). Every built-in domain runs the same set, in this
order (:data:`deltamem.envs.base.GUIDE_RULES`):

1. ``put-away``: things that belong somewhere are put there (a tidying recall);
2. ``follow``: the pointed step, realised here;
3. ``look-ahead``: a later goal step realisable here;
4. ``return-to-place``: back to where the procedure does the blocked step;
5. ``open-closed``: look inside what is closed here;
6. ``backtrack``: an earlier step retried elsewhere, where the recall saw the object first;
7. ``search-unvisited``: any place not visited yet;
8. ``heed-warnings`` (a ``review`` rule, asked once the advice is chosen): what the recall's
   warning items name — commands that had no effect, places searched in vain — is left out
   of the advice while other actions remain (:mod:`~deltamem.agents.guide.warnings`).

Each rule's module (:mod:`deltamem.agents.guide.rules`) says what it does, the failure it
answers and where it applies. :class:`Advice` carries the hint line (for ``guide=hint``) and
the admissible actions that realise the step (for ``guide=prior``).
"""

from deltamem.agents.guide.actions import abstract_action
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.bindings import goal_bindings
from deltamem.agents.guide.knowledge import belongings, placements, sightings
from deltamem.agents.guide.procedures import procedures
from deltamem.agents.guide.progress import LOOKAHEAD
from deltamem.agents.guide.realise import part_names, realises, substitutes
from deltamem.agents.guide.registry import (
    list_rules,
    register_rule,
    resolve_rules,
    unregister_rule,
)
from deltamem.agents.guide.rule import Decision, Position, Review, Rule
from deltamem.agents.guide.rules.put_away import TIDYING
from deltamem.agents.guide.runner import Guide
from deltamem.agents.guide.steps import recalled_steps

__all__ = [
    "LOOKAHEAD",
    "TIDYING",
    "Advice",
    "Decision",
    "Guide",
    "Position",
    "Review",
    "Rule",
    "abstract_action",
    "belongings",
    "goal_bindings",
    "list_rules",
    "part_names",
    "placements",
    "procedures",
    "realises",
    "recalled_steps",
    "register_rule",
    "resolve_rules",
    "sightings",
    "substitutes",
    "unregister_rule",
]
