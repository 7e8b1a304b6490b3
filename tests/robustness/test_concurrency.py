"""4 processes × 50 ``learn()`` calls into one bank: exact counts, no lock errors.

Each worker learns its own goals and scenes (embeddings on disjoint coordinates,
see :mod:`bank_checks`), so its trees never interact with the others' and the
final bank must equal — node for node, hit for hit — the bank obtained by
learning each worker's 50 episodes sequentially in one process. All workers
open the (new) bank at the same time and start learning together.
"""

from __future__ import annotations

import os
import sys
import traceback

import pytest

from .bank_checks import WORKERS, check_invariants, episode_for, open_bank, replay, snapshot

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

PER_WORKER = 50


def _worker(path: str, worker: int, go_fd: int, out_fd: int) -> None:
    """Open the bank, wait for the start signal, learn, report errors; never returns."""
    code = 0
    try:
        mem = open_bank(path)
        os.read(go_fd, 1)
        for i in range(PER_WORKER):
            mem.learn(episode_for(f"w{worker}-0-{i}"))
        mem.close()
    except BaseException:
        os.write(out_fd, traceback.format_exc().encode())
        code = 1
    finally:
        os._exit(code)


@pytest.mark.slow
def test_four_processes_learning_into_one_bank(tmp_path):
    path = str(tmp_path / "shared.db")
    go_r, go_w = os.pipe()
    pids, outs = [], []
    for w in range(WORKERS):
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(go_w)
            os.close(out_r)
            _worker(path, w, go_r, out_w)
        os.close(out_w)
        pids.append(pid)
        outs.append(out_r)
    os.write(go_w, b"g" * WORKERS)
    os.close(go_w)
    os.close(go_r)
    errors = []
    for pid, fd in zip(pids, outs, strict=True):
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        if chunks or status != 0:
            errors.append(b"".join(chunks).decode() or f"status {status}")
    assert errors == [], "\n".join(errors)  # e.g. "database is locked" reaching the caller

    reference = open_bank(":memory:")
    for w in range(WORKERS):
        replay(reference, [f"w{w}-0-{i}" for i in range(PER_WORKER)])
    counts = check_invariants(path)
    ref_nodes = snapshot(reference.store)
    assert counts["learned"] == WORKERS * PER_WORKER
    assert counts["nodes"] == len(ref_nodes)
    assert counts["hits"] == sum(n[4] for n in ref_nodes)
    assert counts["hits"] > 0 and any(n[5] for n in ref_nodes), "design must hit and consolidate"
    mem = open_bank(path)
    try:
        assert snapshot(mem.store) == ref_nodes
    finally:
        mem.close()
        reference.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
