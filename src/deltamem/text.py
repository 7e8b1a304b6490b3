"""Plain-text helpers every layer shares: one spelling of each normal form, and the package's
word lists, on the ground floor so any layer may use them.

Normal forms (each the one expression the package used to write again wherever it compared
two texts):

>>> squash("  go to\\n  cabinet 1 ")
'go to cabinet 1'
>>> normalise("Go  to Cabinet 1")
'go to cabinet 1'
>>> fold("Straße  1") == "strasse 1"
True

Word lists. Each filter of the package drops its own words, and they are *not* one list:
merging them would change what each filter keeps (the agent's guide must see "take" and
"this" as content, a skill's placeholders must not). So each list is a named constant here,
built from the shared parts where those are exactly equal:

* :data:`FUNCTION_WORDS`: articles, prepositions, conjunctions and pronouns of an
  instruction, dropped by every word filter below;
* :data:`INSTRUCTION_WORDS`: the verbs and quantities an instruction starts with ("find two
  ...", "put a ...");
* :data:`GUIDE_STOP_WORDS` (the agent's guide: goal words, bindings, stand-ins),
  :data:`SKILL_STOP_WORDS` (the structural extractor's placeholders),
  :data:`REPORT_STOP_WORDS` (the recall-failure analysis),
  :data:`MCMA_STOP_WORDS` (MCMA's copilot), :data:`NON_ENTITY_WORDS` and
  :data:`ENTITY_BOUNDARY_WORDS` (the goal abstraction of :mod:`deltamem.core.triggers`);
* :data:`ARTICLES`: the words that open a listed thing ("a cup 2", "some water").
"""

from __future__ import annotations

__all__ = [
    "ARTICLES",
    "ENTITY_BOUNDARY_WORDS",
    "FUNCTION_WORDS",
    "GUIDE_STOP_WORDS",
    "INSTRUCTION_WORDS",
    "MCMA_STOP_WORDS",
    "NON_ENTITY_WORDS",
    "NO_EFFECT_PHRASES",
    "REPORT_STOP_WORDS",
    "SKILL_STOP_WORDS",
    "fold",
    "no_effect",
    "normalise",
    "squash",
]


def squash(text: str) -> str:
    """``text`` with every run of white space one space, none at the ends."""
    return " ".join(text.split())


#: how an environment's answer to an action that had no effect begins (lower case): a
#: failure record's ``- action -> answer`` line with such an answer is a command to avoid
NO_EFFECT_PHRASES: tuple[str, ...] = (
    "nothing happened", "nothing happens", "no known action", "can't", "cannot",
    "not possible", "you don't", "i don't understand", "doesn't",
)


def no_effect(observation: str) -> bool:
    """Whether ``observation`` is an environment's answer to an action that had no effect
    (it begins with one of :data:`NO_EFFECT_PHRASES`)."""
    obs = observation.strip().lower()
    return any(obs.startswith(p) for p in NO_EFFECT_PHRASES)


def normalise(text: str) -> str:
    """:func:`squash` in lower case: how two actions are compared ("Go  to Cabinet 1" is
    "go to cabinet 1")."""
    return " ".join(text.lower().split())


def fold(text: str) -> str:
    """:func:`squash`, case-folded (``str.casefold``: "Straße" is "strasse"): how a model's
    reply is matched to a listed choice."""
    return " ".join(text.split()).casefold()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: the words that open a listed thing ("a cup 2", "an apple 1", "the fridge", "some water")
ARTICLES = _words("a an the some")

#: articles, prepositions, conjunctions and pronouns every word filter below drops
FUNCTION_WORDS = _words(
    "a an the to in on at of for from with and or into onto some it your you is are be then")

#: what an instruction starts with: its verbs and quantities ("find two ...", "put a ...")
INSTRUCTION_WORDS = _words("put place find look get go two one any all")

#: the agent's guide (:mod:`deltamem.agents.guide`): words that are never a goal word, never
#: bound to a placeholder and never stand in for another word
GUIDE_STOP_WORDS = FUNCTION_WORDS | INSTRUCTION_WORDS | _words("under by around")

#: the structural extractor (:mod:`deltamem.extract.structural`): words of a goal that never
#: become a placeholder
SKILL_STOP_WORDS = FUNCTION_WORDS | INSTRUCTION_WORDS | _words(
    "its that this these those take use")

#: the recall-failure analysis (:mod:`deltamem.analysis.recall_failures`): words that say
#: nothing of which step a recall was about
REPORT_STOP_WORDS = FUNCTION_WORDS | _words("its this that there here door inventory")

#: MCMA's copilot (:mod:`deltamem.memories.mcma.copilot`): words left out of a sub-goal's
#: key words
MCMA_STOP_WORDS = _words(
    "a an the in on to of with and put place find your task is look at under then it them "
    "two some")

#: the goal abstraction (:mod:`deltamem.core.triggers`): words that end a noun phrase when they
#: follow it (prepositions, conjunctions)
ENTITY_BOUNDARY_WORDS = _words(
    "in on at of for from with and or into onto under over to by near inside then but so that "
    "which where when")

#: the goal abstraction (:mod:`deltamem.core.triggers`): words that are never an entity
#: (articles, pronouns, auxiliaries, quantities), the boundary words included
NON_ENTITY_WORDS = _words(
    "a an the some any all two three one your you it its them they this that these those is "
    "are be was were been being do does did has have had can will would should must there "
    "here what which who whom whose not no yes also very more most less than as first then "
    "next finally please task") | ENTITY_BOUNDARY_WORDS
