"""A learner killed with SIGKILL at random moments never leaves a broken bank.

The child process (``os.fork``) opens the bank, says it is ready and learns
episodes in a loop until the parent kills it after a random delay. After each
of the 50 kills the bank must open, pass ``PRAGMA integrity_check`` and the
structural invariants (:func:`bank_checks.check_invariants`), and — the
"wholly there or wholly absent" rule — equal exactly the bank obtained by
learning the committed episodes, in commit order, in a fresh process-local
bank: every learn's writes (nodes, hits, consolidation, ``learned`` row)
are one transaction, so a killed learn leaves no trace at all.

It runs with both durability modes: ``synchronous=full`` (default) and
``normal`` (no fsync per commit), which must be just as safe against a killed
process — only a power loss may cost it the last commits.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time

import pytest

from .bank_checks import (
    check_invariants,
    episode_for,
    learned_ids,
    open_bank,
    replay,
    snapshot,
)

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork and SIGKILL"
)

KILLS = 50


def _child(path: str, cycle: int, ready_fd: int, synchronous: str) -> None:
    """Learn episodes ``w0-{cycle}-0, 1, ...`` forever (never returns)."""
    try:
        mem = open_bank(path, synchronous=synchronous)
        if mem.store.synchronous() != synchronous:
            os._exit(4)  # not ready: the parent's read fails and names it
        os.write(ready_fd, b"r")
        i = 0
        while True:
            mem.learn(episode_for(f"w0-{cycle}-{i}"))
            i += 1
    finally:
        os._exit(3)


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_sigkill_during_learn_never_breaks_the_bank(tmp_path, synchronous):
    path = str(tmp_path / "bank.db")
    open_bank(path).close()
    reference = open_bank(":memory:")
    committed: list[str] = []
    rng = random.Random(1234)
    progressed = 0
    for cycle in range(KILLS):
        r_fd, w_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r_fd)
            _child(path, cycle, w_fd, synchronous)
        os.close(w_fd)
        try:
            assert os.read(r_fd, 1) == b"r", "the learner died before it was ready"
            time.sleep(rng.uniform(0.0, 0.12))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(r_fd)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
            f"the learner exited on its own (status {status}): it failed"
        )

        check_invariants(path)
        mem = open_bank(path)  # opens (WAL recovery) and loads both trees
        try:
            mem.stats()
            ids = learned_ids(path)
            assert ids[: len(committed)] == committed, "a committed learn disappeared"
            new = ids[len(committed) :]
            assert new == [f"w0-{cycle}-{i}" for i in range(len(new))], (
                "learns must commit in order, each wholly or not at all"
            )
            replay(reference, new)
            committed.extend(new)
            progressed += bool(new)
            assert snapshot(mem.store) == snapshot(reference.store), (
                f"after kill {cycle + 1} the bank differs from its committed learns"
            )
        finally:
            mem.close()
    reference.close()
    assert progressed >= KILLS // 4, "too few cycles committed anything: the test is not probing"
    assert check_invariants(path)["learned"] == len(committed)
