"""Reading warning items: commands that had no effect, places searched in vain."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deltamem.agents.guide.warnings import read_warnings

RECORD = """[FAILED]:
- take {A} from fridge 1 -> Nothing happens.
- go to cabinet 3 -> You arrive at cabinet 3. On the cabinet 3, you see nothing.
- searched in vain for apple: cabinet, drawer
[UNEXPLORED]:
- open fridge"""


def test_a_failure_record_is_read_as_commands_and_places_to_avoid() -> None:
    w = read_warnings([RECORD])
    assert w.failed("take egg 2 from fridge 1") and w.failed("Take  apple 1 from fridge 2")
    assert not w.failed("take egg 2 from countertop 1")
    assert not w.failed("go to cabinet 3") and not w.failed("open fridge 1")
    assert w.searched("apple") == {"cabinet", "drawer"} and w.searched("egg") == frozenset()
    assert w.searched(None) == frozenset()


def test_reasoningbank_no_effect_warnings_are_read_alike() -> None:
    text = ("[Warning] Commands with no effect in: put a clean {A} in {B}\n...\n"
            "- clean {A} with fridge -> Nothing happens.")
    assert read_warnings([text]).failed("clean mug 1 with fridge 1")


@given(st.text())
def test_any_text_reads_without_error(text: str) -> None:
    w = read_warnings([text])
    assert isinstance(bool(w), bool)
