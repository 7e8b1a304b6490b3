"""The package's normal forms and word lists, written once (deltamem.text)."""

from __future__ import annotations

from deltamem import text


def test_normal_forms_collapse_space_and_differ_only_in_case_handling() -> None:
    assert text.squash("  Go  to\n\tCabinet 1 ") == "Go to Cabinet 1"
    assert text.normalise("  Go  to\n\tCabinet 1 ") == "go to cabinet 1"
    assert text.fold("  Go  to\n\tCabinet 1 ") == "go to cabinet 1"
    # casefold is not lower: a reply is matched more loosely than two actions are compared
    assert text.fold("STRASSE") == text.fold("Straße")
    assert text.normalise("Straße") != text.normalise("STRASSE")
    assert text.squash("") == text.normalise("") == text.fold("") == ""


def test_each_filter_keeps_its_own_words() -> None:
    # the lists are not one list: each caller gets exactly the words it always got
    shared = text.FUNCTION_WORDS
    for words in (text.GUIDE_STOP_WORDS, text.SKILL_STOP_WORDS, text.REPORT_STOP_WORDS):
        assert shared <= words
    assert "take" in text.SKILL_STOP_WORDS and "take" not in text.GUIDE_STOP_WORDS
    assert "around" in text.GUIDE_STOP_WORDS and "around" not in text.SKILL_STOP_WORDS
    assert "put" not in text.REPORT_STOP_WORDS and "door" in text.REPORT_STOP_WORDS
    assert "task" in text.MCMA_STOP_WORDS and "task" not in text.GUIDE_STOP_WORDS
    assert text.ENTITY_BOUNDARY_WORDS <= text.NON_ENTITY_WORDS
    assert len({text.GUIDE_STOP_WORDS, text.SKILL_STOP_WORDS, text.REPORT_STOP_WORDS,
                text.MCMA_STOP_WORDS, text.NON_ENTITY_WORDS}) == 5


def test_the_callers_read_the_lists_from_here() -> None:
    from deltamem.analysis import recall_failures
    from deltamem.core import triggers
    from deltamem.extract import structural
    from deltamem.memories.mcma import copilot

    assert structural._STOP is text.SKILL_STOP_WORDS
    assert recall_failures._STOP is text.REPORT_STOP_WORDS
    assert triggers._FUNCTION is text.NON_ENTITY_WORDS
    assert triggers._BOUNDARY is text.ENTITY_BOUNDARY_WORDS
    # MCMA's copilot still spells its copy: it must stay the same words until it imports this
    assert copilot._STOP == text.MCMA_STOP_WORDS
