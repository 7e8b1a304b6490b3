"""Information gain (paper §4, Prop. 4.1): Monte-Carlo entropy with a fake log-prob sampler,
and an opt-in run with the local llama.cpp model."""

from __future__ import annotations

import pytest

from deltamem.analysis.infogain import compare_contexts, default_task_prompt, estimate_entropy
from deltamem.errors import ConfigError, InvalidInputError, LLMError
from deltamem.llm.base import LogProbSampler, ScoredSample
from deltamem.memories.decocted.lessons import LessonMemory
from deltamem.testing import make_episode
from tests.memories.decocted.decocted_helpers import grouped_episodes, structured_embedder


class FakeSampler:
    """Samples j = 0..n-1 with log p = -(base - 2·[occurrences of `relevant` in the prompt] + j)."""

    name = "fake"

    def __init__(self, relevant: str = "g0 s0", base: float = 20.0) -> None:
        self.relevant = relevant
        self.base = base
        self.prompts: list[str] = []

    def sample(self, messages, *, n, max_tokens, seed):
        text = messages[-1]["content"]
        self.prompts.append(text)
        hits = text.count(self.relevant)
        return [ScoredSample(f"y{j}", -(self.base - 2 * hits + j), 3 + j, j % 2 == 0)
                for j in range(n)]


def test_fake_is_a_sampler():
    assert isinstance(FakeSampler(), LogProbSampler)


def test_entropy_is_the_mean_negative_log_probability():
    est = estimate_entropy(FakeSampler(), [{"role": "user", "content": "x"}], n=4)
    # -log p = 20, 21, 22, 23
    assert est.mean == pytest.approx(21.5)
    assert est.stderr == pytest.approx(((2.25 + 0.25 + 0.25 + 2.25) / 3) ** 0.5 / 2)
    assert est.mean_tokens == pytest.approx(4.5) and est.finished_rate == 0.5


def test_entropy_rejects_bad_samplers_and_args():
    class Broken(FakeSampler):
        def sample(self, messages, *, n, max_tokens, seed):
            return [ScoredSample("y", 0.5, 1, True)] * n

    with pytest.raises(LLMError):
        estimate_entropy(Broken(), [{"role": "user", "content": "x"}], n=2)
    with pytest.raises(ConfigError):
        estimate_entropy(FakeSampler(), [{"role": "user", "content": "x"}], n=1)


def test_recalled_context_gains_more_than_random_context():
    mem = LessonMemory.open(embedder=structured_embedder(), mode="deterministic", k=3)
    for ep in grouped_episodes():
        mem.learn(ep)
    sampler = FakeSampler()
    tasks = [make_episode(goal="solve g0 s0", task_id="q0").task]
    rep = compare_contexts(sampler, mem, tasks, n=3, seed=1)
    row = rep.rows[0]
    # no context: the goal itself holds "g0 s0" once -> -log p = 18, 19, 20
    assert row.base.mean == pytest.approx(19.0)
    # recalled: the 3 lessons of subgroup g0 s0 add 3 x "Past task: solve g0 s0" (6 hits less)
    assert row.gain_recalled > row.gain_random
    assert row.gain_recalled == pytest.approx(2 * (
        sampler.prompts[1].count("g0 s0") - sampler.prompts[0].count("g0 s0")))
    assert row.recalled_entries == 3
    assert rep.recalled_wins == 1.0 and rep.to_dict()["tasks"] == 1


def test_compare_needs_a_non_empty_recall():
    mem = LessonMemory.open(embedder=structured_embedder(), mode="deterministic")
    with pytest.raises(InvalidInputError):
        compare_contexts(FakeSampler(), mem, [make_episode().task], n=2)


def test_default_task_prompt_states_the_goal_once():
    task = make_episode().task
    p = default_task_prompt(task)
    assert p.count(task.goal) == 1 and p.endswith("one per line.")


@pytest.mark.model
@pytest.mark.slow
def test_local_model_samples_reproducibly_with_valid_logprobs():
    pytest.importorskip("llama_cpp_py_sync")
    from deltamem.errors import LLMUnavailableError
    from deltamem.llm.local import LocalLLM

    llm = LocalLLM(n_ctx=512)
    msgs = [{"role": "user", "content": "Name a fruit."}]
    try:
        first = llm.sample(msgs, n=2, max_tokens=6, seed=3)
    except LLMUnavailableError as e:
        pytest.skip(str(e))
    assert isinstance(llm, LogProbSampler)
    assert llm.sample(msgs, n=2, max_tokens=6, seed=3) == first
    assert all(s.logprob < 0 and s.tokens <= 6 for s in first)
    est = estimate_entropy(llm, msgs, n=2, max_tokens=6, seed=3)
    assert est.mean == pytest.approx(-sum(s.logprob for s in first) / 2)
    assert llm.usage.by_purpose["sample"].calls == 6
