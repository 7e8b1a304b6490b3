"""The seed helper builds exactly the streams ``random.Random`` / ``default_rng`` build."""

from __future__ import annotations

import random

import numpy as np
import pytest

from deltamem.errors import ConfigError
from deltamem.seeding import check_generator, check_random_state, sub_seed


@pytest.mark.parametrize("seed", [0, 7, 2**40, "household/seen/0", "0/train/a-1"])
def test_check_random_state_is_random_random(seed):
    ours, theirs = check_random_state(seed), random.Random(seed)
    assert type(ours) is random.Random
    assert [ours.random() for _ in range(5)] == [theirs.random() for _ in range(5)]
    items = list(range(20))
    a, b = items[:], items[:]
    check_random_state(seed).shuffle(a)
    random.Random(seed).shuffle(b)
    assert a == b


def test_check_random_state_shares_a_given_stream_and_none_is_fresh():
    rng = random.Random(3)
    assert check_random_state(rng) is rng
    assert isinstance(check_random_state(None), random.Random)
    assert check_random_state(None).random() != check_random_state(None).random()


@pytest.mark.parametrize("bad", [1.0, True, b"x", [1], object()])
def test_check_random_state_refuses_what_is_not_a_seed(bad):
    with pytest.raises(ConfigError, match="a seed is"):
        check_random_state(bad)


@pytest.mark.parametrize("seed", [0, 11, [5, 2], (5, 2)])
def test_check_generator_is_default_rng(seed):
    ours, theirs = check_generator(seed), np.random.default_rng(seed)
    assert ours.integers(0, 1000, size=8).tolist() == theirs.integers(0, 1000, size=8).tolist()


def test_check_generator_shares_a_given_generator_and_refuses_bad_seeds():
    gen = np.random.default_rng(1)
    assert check_generator(gen) is gen
    assert isinstance(check_generator(None), np.random.Generator)
    for bad in (True, -1, "x"):
        with pytest.raises(ConfigError):
            check_generator(bad)


def test_sub_seed_names_a_stream_of_a_seed():
    assert sub_seed(0, "train/t-1") == "0/train/t-1" == f"{0}/{'train/t-1'}"
    assert sub_seed("household", "seen", 3) == "household/seen/3"
    assert sub_seed(3, "seen", "boil", sep=":") == "3:seen:boil"
    one, other = (check_random_state(sub_seed(0, name)).random() for name in ("a", "b"))
    assert one != other
    assert check_random_state(sub_seed(0, "a")).random() == one  # fixed by seed and name
    with pytest.raises(ConfigError):
        sub_seed()


def test_the_library_builds_no_random_source_of_its_own():
    """Every random source of ``src/deltamem`` is built by :mod:`deltamem.seeding`."""
    import re
    from pathlib import Path

    src = Path(__file__).parents[1] / "src" / "deltamem"
    pattern = re.compile(r"random\.Random\(|default_rng\(|np\.random\.seed\(|RandomState\(")
    found = []
    for path in src.rglob("*.py"):
        if path.name == "seeding.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if pattern.search(re.sub(r"``[^`]*``", "", code)):
                found.append(f"{path.relative_to(src)}:{n}: {line.strip()}")
    assert not found, "build random sources with deltamem.seeding:\n" + "\n".join(found)
