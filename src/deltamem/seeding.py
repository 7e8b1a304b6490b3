"""Random sources from seeds, built in one place (scikit-learn's ``check_random_state``).

Every random draw in deltamem comes from a source built here, on the ground floor so any
layer may use it:

* :func:`check_random_state`: a ``random.Random`` from an int, a str, ``None`` (fresh
  entropy from the OS) or a ``random.Random`` (returned as it is, so a caller can share
  one stream);
* :func:`check_generator`: the same for a NumPy ``Generator``; a sequence of ints is
  NumPy's way to name an independent stream of a seed (``[seed, j]``: the ``j``-th);
* :func:`sub_seed`: the seed of one named stream of a seed, its parts joined by ``/``
  (``sub_seed(seed, task.id)``). ``random.Random`` hashes a str seed with SHA-512, so
  every name gets its own stream, the same one in every process and Python version
  (``hash()`` would differ between processes) and whatever was drawn before it.

A seed passes through unchanged: ``check_random_state(seed)`` *is*
``random.Random(seed)`` and ``check_generator(seed)`` *is* ``np.random.default_rng(seed)``,
so the streams every recorded result was drawn from do not depend on this module.

The derived seeds in use, each a stream of its own:

=================================  =============================================
``sub_seed(seed, task.id)``        the expert's noise, MCMA's scripted follower
``sub_seed("household", split,     the order of a household stream's task types
seed)``
``sub_seed(split, task_type,       one household game (attempt ``a``)
f"{key}#{a}")``
``sub_seed(seed, split, task,      ScienceWorld's variations (``:``: these streams
sep=":")``                         were drawn with it before this module existed)
``[seed, j]`` (NumPy)              the ``j``-th sample of the local model's ``sample``
``seed * 1000 + c`` (an int)       client ``c`` of the replica load test
=================================  =============================================

>>> check_random_state(3).random() == random.Random(3).random()
True
>>> sub_seed(0, "train/pick_and_place_simple/0-1")
'0/train/pick_and_place_simple/0-1'
>>> rng = check_random_state(None); check_random_state(rng) is rng
True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deltamem.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Seed", "check_generator", "check_random_state", "sub_seed"]

Seed = int | str | None
"""What :func:`check_random_state` builds a stream from (besides a ``random.Random``)."""


def check_random_state(seed: Seed | random.Random) -> random.Random:
    """``random.Random(seed)``; a ``random.Random`` is returned as it is.

    Args:
        seed: an int, a str (see :func:`sub_seed`), ``None`` (seeded from the OS: a
            different stream every time) or a ``random.Random`` to share.

    Raises:
        ConfigError: any other type (a float or a bool, which ``random.Random`` would
            take as another seed than the one meant).
    """
    if isinstance(seed, random.Random):
        return seed
    if seed is None or (isinstance(seed, int | str) and not isinstance(seed, bool)):
        return random.Random(seed)
    raise ConfigError(f"a seed is an int, a str or None, not {type(seed).__name__} {seed!r}")


def check_generator(seed: int | Sequence[int] | np.random.Generator | None
                    ) -> np.random.Generator:
    """``np.random.default_rng(seed)``; a ``Generator`` is returned as it is.

    Args:
        seed: an int, a sequence of ints (``[seed, j]``: the ``j``-th independent stream
            of ``seed``, by NumPy's ``SeedSequence``), ``None`` (seeded from the OS) or a
            ``Generator`` to share.

    Raises:
        ConfigError: a bool, or anything NumPy does not take as a seed.
    """
    import numpy as np

    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool):
        raise ConfigError(f"a seed is an int, a sequence of ints or None, not {seed!r}")
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"not a seed: {seed!r} ({e})") from e


def sub_seed(*parts: object, sep: str = "/") -> str:
    """The seed of one named stream: ``parts`` (a seed and names) as text, joined by
    ``sep``.

    ``check_random_state(sub_seed(seed, name))`` is a stream of its own for every name,
    fixed by ``seed`` and the name alone. Keep ``sep`` at ``/``; ``":"`` is there for the
    ScienceWorld streams drawn with it before.

    Raises:
        ConfigError: no parts.
    """
    if not parts:
        raise ConfigError("sub_seed needs at least one part")
    return sep.join(str(p) for p in parts)
