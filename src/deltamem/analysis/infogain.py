"""Information gain of a context (paper §4, Proposition 4.1), estimated by Monte Carlo.

For a query x and a context c, the agent's output Y has entropy H(Y | x, c). With
samples y_1..y_n drawn from the model's own distribution (temperature 1, no
top-k / top-p truncation) and their log-probabilities::

    Ĥ(Y | x, c) = −(1/n) Σ_j log p(y_j | x, c)            (nats)
    Î(Y; C = c | x) = Ĥ(Y | x) − Ĥ(Y | x, c)

Î > 0: the context reduces the uncertainty of the output (an effective context);
Î ≤ 0: it does not (noisy or misleading). :func:`compare_contexts` estimates Î
for the context a memory recalls and for a random context of the same size
(random entries of the same memory), per task, as in the paper's Figure 5b.

Any LLM with the optional :class:`~deltamem.llm.base.LogProbSampler` capability can be
used: :meth:`deltamem.llm.local.LocalLLM.sample` samples with llama.cpp and reads exact
token log-probabilities from the logits. A sample cut at
``max_tokens`` before the end-of-generation token estimates the entropy of the
truncated output; :attr:`EntropyEstimate.finished_rate` reports how often that
did not happen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deltamem.errors import ConfigError, InvalidInputError, LLMError
from deltamem.llm.base import LogProbSampler, Message
from deltamem.seeding import check_generator
from deltamem.types import Task

__all__ = [
    "ContextComparison",
    "EntropyEstimate",
    "InfoGainReport",
    "compare_contexts",
    "default_task_prompt",
    "estimate_entropy",
]

SYSTEM = "You are an agent solving a household task. Answer with the actions you would take."


@dataclass(frozen=True)
class EntropyEstimate:
    """Monte-Carlo entropy (nats) of the reply: mean, its standard error, sample count,
    mean reply length in tokens and the share of samples that ended on their own."""

    mean: float
    stderr: float
    n: int
    mean_tokens: float
    finished_rate: float

    def to_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "stderr": self.stderr, "n": self.n,
                "mean_tokens": self.mean_tokens, "finished_rate": self.finished_rate}


def estimate_entropy(sampler: LogProbSampler, messages: Sequence[Message], *, n: int = 8,
                     max_tokens: int = 128, seed: int = 0) -> EntropyEstimate:
    """Ĥ = −mean log p(y_j) over ``n`` samples (``n`` ≥ 2, so the standard error exists).

    Raises :class:`ConfigError` for ``n`` < 2 or ``max_tokens`` < 1 and
    :class:`LLMError` when the sampler returns the wrong number of samples or a
    non-finite or positive log-probability.
    """
    if n < 2:
        raise ConfigError(f"the entropy estimate needs n >= 2 samples, got {n}")
    if max_tokens < 1:
        raise ConfigError(f"max_tokens must be >= 1, got {max_tokens}")
    samples = sampler.sample(messages, n=n, max_tokens=max_tokens, seed=seed)
    if len(samples) != n:
        raise LLMError(f"{sampler.name} returned {len(samples)} samples, expected {n}")
    lps = np.array([s.logprob for s in samples], dtype=np.float64)
    if not np.all(np.isfinite(lps)) or np.any(lps > 1e-9):
        raise LLMError(f"{sampler.name} returned invalid log-probabilities: {lps.tolist()}")
    nll = -lps
    return EntropyEstimate(
        mean=float(nll.mean()),
        stderr=float(nll.std(ddof=1) / math.sqrt(n)),
        n=n,
        mean_tokens=float(np.mean([s.tokens for s in samples])),
        finished_rate=float(np.mean([s.finished for s in samples])),
    )


def default_task_prompt(task: Task) -> str:
    """The query x: the task's first observation (or scene) and goal, asking for a plan."""
    scene = task.observation.strip() or task.scene_text.strip()
    head = f"{scene}\n\n" if scene and task.goal not in scene else (f"{scene}\n" if scene else "")
    if task.goal not in scene:
        head += f"Your task is to: {task.goal}\n"
    return head + "\nList the actions you will take, one per line."


def _messages(prompt: str, context: str) -> list[Message]:
    user = f"{context.strip()}\n\n{prompt}" if context.strip() else prompt
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class ContextComparison:
    """Entropies and information gains of one task: no context, recalled, random."""

    task_id: str
    base: EntropyEstimate
    recalled: EntropyEstimate
    random: EntropyEstimate
    recalled_entries: int

    @property
    def gain_recalled(self) -> float:
        return self.base.mean - self.recalled.mean

    @property
    def gain_random(self) -> float:
        return self.base.mean - self.random.mean

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "h_base": self.base.to_dict(),
                "h_recalled": self.recalled.to_dict(), "h_random": self.random.to_dict(),
                "gain_recalled": self.gain_recalled, "gain_random": self.gain_random,
                "recalled_entries": self.recalled_entries}


@dataclass(frozen=True)
class InfoGainReport:
    """Per-task comparisons plus the means and the share where recalled beats random."""

    rows: tuple[ContextComparison, ...]

    @property
    def mean_gain_recalled(self) -> float:
        return float(np.mean([r.gain_recalled for r in self.rows]))

    @property
    def mean_gain_random(self) -> float:
        return float(np.mean([r.gain_random for r in self.rows]))

    @property
    def recalled_wins(self) -> float:
        return float(np.mean([r.gain_recalled > r.gain_random for r in self.rows]))

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": len(self.rows), "mean_gain_recalled": self.mean_gain_recalled,
                "mean_gain_random": self.mean_gain_random, "recalled_wins": self.recalled_wins,
                "rows": [r.to_dict() for r in self.rows]}


def compare_contexts(
    sampler: LogProbSampler,
    memory: Any,
    tasks: Sequence[Task],
    *,
    n: int = 8,
    max_tokens: int = 128,
    seed: int = 0,
    task_prompt: Callable[[Task], str] = default_task_prompt,
) -> InfoGainReport:
    """Î for the recalled context and for a random context, per task.

    ``memory`` is one of this package's lesson memories (it needs ``recall``,
    ``header`` and ``entries``). The random context holds as many entries as the
    recall returned, drawn uniformly (seeded) from the entries the memory searches,
    under the same header. Tasks whose recall is empty are skipped; raises
    :class:`InvalidInputError` when every recall is empty. The same ``seed`` is used
    for the three estimates of a task (common random numbers).
    """
    rng = check_generator(seed)
    rows = []
    for task in tasks:
        recall = memory.recall(task)
        if recall.empty:
            continue
        entries = memory.entries()
        k = len(recall.items)
        picks = rng.choice(len(entries), size=min(k, len(entries)), replace=False)
        random_text = memory.header + "\n\n" + "\n\n".join(entries[int(i)].text for i in picks)
        prompt = task_prompt(task)
        kw: dict[str, Any] = {"n": n, "max_tokens": max_tokens, "seed": seed}
        rows.append(ContextComparison(
            task_id=task.id,
            base=estimate_entropy(sampler, _messages(prompt, ""), **kw),
            recalled=estimate_entropy(sampler, _messages(prompt, recall.text), **kw),
            random=estimate_entropy(sampler, _messages(prompt, random_text), **kw),
            recalled_entries=k,
        ))
    if not rows:
        raise InvalidInputError("every recall was empty: learn some episodes first")
    return InfoGainReport(tuple(rows))
