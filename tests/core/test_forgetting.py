"""Supersession of contradicted knowledge and the recall budget (pure functions)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.forgetting import count_tokens, fit_budget, knowledge_subject, supersede
from deltamem.core.payload import ChainEntry, Payload, render_chain


def _k(kind: str, *lines: str) -> ChainEntry:
    return ChainEntry(kind, "SUCCESS", Payload("a kitchen", "\n".join(lines)))  # type: ignore[arg-type]


def test_the_newest_observation_of_a_subject_wins() -> None:
    chain = [
        _k("ROOT", "- places here: fridge, sinkbasin", "- egg: found in/on sinkbasin",
           "- fridge: starts closed; open it before taking or putting things"),
        _k("RESIDUAL", "- egg: found in/on garbagecan", "- mug: found in/on sinkbasin"),
        _k("RESIDUAL", "- egg: found in/on fridge", "- egg: found in/on sinkbasin",
           "- fridge: starts closed; open it before taking or putting things"),
    ]
    kept, gone = supersede(chain)
    # the root's egg line is repeated by the newest node: kept; the middle one is not
    assert [(g.index, g.subject, g.by) for g in gone] == [(1, "egg", 2)]
    assert kept[0] == chain[0] and kept[2] == chain[2]
    assert kept[1].payload.procedure == "- mug: found in/on sinkbasin"


def test_an_entry_left_without_lines_keeps_its_place() -> None:
    chain = [_k("ROOT", "- egg: found in/on sinkbasin"),
             _k("RESIDUAL", "- egg: found in/on fridge")]
    kept, gone = supersede(chain)
    assert len(kept) == 2 and kept[0].payload.procedure == "(superseded by newer knowledge)"
    assert gone[0].line == "- egg: found in/on sinkbasin"


def test_free_text_and_single_entries_are_never_superseded() -> None:
    chain = [_k("ROOT", "Eggs are usually near the sink."),
             _k("RESIDUAL", "Eggs were in the fridge.")]
    assert supersede(chain) == (chain, [])
    assert supersede(chain[:1]) == (chain[:1], [])
    assert knowledge_subject("* Mug :  found in/on  Desk ") == ("mug", "found in/on desk")
    assert knowledge_subject("1. go to fridge") is None


def _render(chains):
    def render(shown):
        parts = [render_chain(t, [chains[t][i] for i in idx]) for t, idx in shown.items() if idx]
        return "HEADER\n\n" + "\n\n".join(parts) if parts else ""
    return render


def _task(n: int, words: int = 20, prefix: str = "w") -> list[ChainEntry]:
    return [ChainEntry("ROOT" if i == 0 else "RESIDUAL", "SUCCESS",
                       Payload(f"step {i}", " ".join(f"{prefix}{i}x{j}" for j in range(words))))
            for i in range(n)]


def test_the_budget_cuts_env_from_its_root_then_task_from_its_deep_side() -> None:
    chains = {"task": _task(3), "env": _task(3, prefix="e")}
    render = _render(chains)
    full = render({"task": [0, 1, 2], "env": [0, 1, 2]})
    text, cut = fit_budget(chains, render, count_tokens(full))
    assert text == full and not cut.cut and cut.dropped == {}
    # the Env-Tree's older observations go first, down to its deepest entry
    text, cut = fit_budget(chains, render, count_tokens(full) - 1)
    assert cut.dropped == {"env": (0,)} and "e0x0" not in text and "e2x0" in text
    one = count_tokens(render({"task": [0, 1, 2], "env": [2]}))
    text, cut = fit_budget(chains, render, one - 1)
    assert cut.dropped == {"env": (0, 1, 2)} and "e2x0" not in text  # then the section
    # then the Task-Tree from its deep side: the base skill (root) stays longest
    two = count_tokens(render({"task": [0, 1, 2]}))
    text, cut = fit_budget(chains, render, two - 1)
    assert cut.dropped == {"task": (2,), "env": (0, 1, 2)}
    assert "w0x0" in text and "w1x0" in text and "w2x0" not in text
    text, cut = fit_budget(chains, render, 25)
    assert cut.dropped == {"task": (1, 2), "env": (0, 1, 2)} and cut.truncated > 0
    assert "w0x0" in text and count_tokens(text) <= 25 and "recall budget" in text


@given(n_task=st.integers(1, 5), n_env=st.integers(0, 5), words=st.integers(1, 40),
       budget=st.integers(20, 400))
def test_a_budgeted_recall_never_exceeds_it_and_keeps_the_task_root(
        n_task: int, n_env: int, words: int, budget: int) -> None:
    chains = {"task": _task(n_task, words), "env": _task(n_env, words, "e")}
    text, cut = fit_budget(chains, _render(chains), budget)
    assert count_tokens(text) <= budget and cut.tokens_after == count_tokens(text)
    assert 0 not in cut.dropped.get("task", ())
    if cut.dropped.get("task"):  # the task chain is cut only once the env section is gone
        assert cut.dropped.get("env", ()) == tuple(range(n_env))
    if not cut.truncated:  # nothing cut from the text itself: the root is whole
        assert f"w0x{words - 1}" in text


def test_deltas_keep_their_numbers_when_the_root_is_cut() -> None:
    chain = _task(3)
    assert "[Skill Delta 2]" in render_chain("task", chain[2:], deltas_before=1)
