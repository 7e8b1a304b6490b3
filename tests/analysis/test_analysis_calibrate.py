"""τ calibration: the documented rule on constructed embeddings, and the env-driven wrapper."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from deltamem.analysis.calibrate import (
    calibrate,
    calibrate_tasks,
    calibrate_tree,
    sample_tasks,
    suggested,
    write_calibration,
)
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.testing import TableEmbedder
from tests.bench.bench_toys import CorridorEnv


def _unit(*degrees: float) -> np.ndarray:
    r = np.radians(degrees)
    return np.stack([np.cos(r), np.sin(r)], axis=1)


def test_rule_is_the_nn_quantile_rounded_down() -> None:
    # nearest neighbours: 0°→20°, 20°→0°, 50°→20°, 90°↔100°
    x = _unit(0, 20, 50, 90, 100)
    c10, c20, c30 = (math.cos(math.radians(d)) for d in (10, 20, 30))
    cal = calibrate_tree(x)
    assert cal.nearest[0.5] == pytest.approx(c20)
    assert cal.tau_exact == pytest.approx(c10)  # sorted NN [c30, c20, c20, c10, c10]: p75 = c10
    assert cal.tau == 0.98  # cos 10° = 0.9848, rounded down
    assert cal.warm_share == pytest.approx(2 / 5)
    half = calibrate_tree(x, quantile=0.5)
    assert half.tau == 0.93 and half.warm_share == pytest.approx(4 / 5)
    low = calibrate_tree(x, quantile=0.1)
    # linear interpolation between the two lowest NN scores, 40 % of the way
    assert low.tau_exact == pytest.approx(c30 + 0.4 * (c20 - c30))
    assert sum(c for _, _, c in cal.histogram) == 5 * 4


def test_queries_are_compared_with_passages() -> None:
    q = _unit(0, 90)
    p = _unit(0, 60)  # query 0 vs passage 1: cos 60°; query 1 vs passage 0: cos 90°
    cal = calibrate_tree(q, p, quantile=0.5)
    assert cal.tau_exact == pytest.approx(0.25)  # the median of NN scores [0.5, 0.0]
    assert calibrate_tree(q, quantile=0.5).tau_exact == pytest.approx(0.0, abs=1e-9)


def test_labels_select_the_f1_rule() -> None:
    x = _unit(0, 5, 40, 90, 95)
    labels = ["a", "a", "a", "b", "b"]
    with_labels = calibrate_tree(x, labels=labels)
    without = calibrate_tree(x)
    assert with_labels.rule == "f1" and without.rule == "quantile"
    # every nearest neighbour is of the same kind: accept them all (cos 35° is the lowest)
    assert with_labels.tau < math.cos(math.radians(35)) < without.tau
    assert calibrate_tree(x, labels=labels, rule="quantile").tau == without.tau
    with pytest.raises(InvalidInputError, match="needs labels"):
        calibrate_tree(x, rule="f1")
    # every task's NN is of the same kind here
    assert with_labels.warm_different == 0.0 and with_labels.warm_same == 1.0
    assert with_labels.warm_same == pytest.approx(with_labels.warm_share)
    assert with_labels.different_kind[0.99] < with_labels.same_kind[0.99]


def test_warning_when_tau_sits_in_the_background() -> None:
    clusters = calibrate_tree(_unit(0, 1, 2, 90, 91, 92))
    assert clusters.warning is None
    # mostly copies of one task: the typical pair is a copy, τ from a low q lies below it
    copies = calibrate_tree(_unit(0, 0, 0, 0, 90), quantile=0.1)
    assert copies.tau == pytest.approx(0.4)
    assert copies.warning is not None and "median" in copies.warning


def test_bad_inputs() -> None:
    with pytest.raises(InvalidInputError):
        calibrate_tree(np.ones((1, 3)))
    with pytest.raises(InvalidInputError):
        calibrate_tree(np.ones((3, 2)), np.ones((2, 2)))
    with pytest.raises(InvalidInputError):
        calibrate_tree(np.ones((3, 2)), quantile=1.0)
    with pytest.raises(InvalidInputError):
        calibrate_tree(np.ones((3, 2)), labels=["a"])


@given(arrays(np.float64, st.tuples(st.integers(2, 12), st.integers(2, 5)),
              elements=st.floats(-1, 1)),
       st.floats(0.05, 0.95))
def test_rule_properties(x: np.ndarray, q: float) -> None:
    x = x[np.linalg.norm(x, axis=1) > 1e-3]
    if len(x) < 2:
        return
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    cal = calibrate_tree(x, quantile=q)
    nn = np.where(~np.eye(len(x), dtype=bool), x @ x.T, -np.inf).max(axis=1)
    assert cal.tau_exact == pytest.approx(float(np.quantile(nn, q)))
    assert cal.tau <= cal.tau_exact + 1e-9 and cal.tau_exact - cal.tau < 0.01 + 1e-9
    # rounding down never lowers the warm-start share below 1 - q
    assert cal.warm_share >= np.mean(nn >= cal.tau_exact) - 1e-12


def test_env_wrapper_embeds_goals_and_scenes(tmp_path) -> None:
    env = CorridorEnv(n_tasks=6)
    tasks = sample_tasks(env, "test", 5, seed=2)
    assert [t.id for t in tasks] == env.task_ids("test", 2)[:5]
    seen: list[str] = []

    def vec(text: str) -> list[float]:
        seen.append(text)
        return HashingEmbedder(dim=32).embed_queries([text])[0].tolist()

    cal = calibrate_tasks(tasks, TableEmbedder({}, default=vec), source="corridor/test")
    assert {t.goal for t in tasks} <= set(seen) and {t.scene for t in tasks} <= set(seen)
    assert set(cal.trees) == {"task", "env"}
    assert cal.trees["task"].n == 5
    assert suggested(cal) == {"tau_task": cal.trees["task"].tau, "tau_env": cal.trees["env"].tau}
    text = write_calibration(cal, tmp_path).read_text()
    assert f"suggested τ_task = {cal.trees['task'].tau:.3f}" in text
    assert "All-pairs histogram" in text


def test_calibrate_takes_objects_and_checks_the_split() -> None:
    cal = calibrate(CorridorEnv(), "test", n=4, embedder=HashingEmbedder(dim=32))
    assert cal.source == "corridor/test" and cal.embedder == "hashing-32"
    with pytest.raises(ConfigError, match="no split"):
        calibrate(CorridorEnv(), "nope", n=4, embedder=HashingEmbedder(dim=32))
    with pytest.raises(ConfigError, match="n >= 2"):
        calibrate(CorridorEnv(), "test", n=1, embedder=HashingEmbedder(dim=32))
