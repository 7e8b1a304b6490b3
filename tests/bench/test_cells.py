"""Cells of a sweep: every cell runs, a cell whose worker dies is run again from its run
directory (nothing recorded is played twice), finished cells are not submitted again; in local
processes and as Ray tasks on a Ray started for the test (skipped without the ``ray`` extra).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from deltamem.bench import RunConfig, read_episodes
from deltamem.bench.cells import Cell, CellFailed, cell_cpus, run_cells
from deltamem.errors import ConfigError
from tests.analysis.analysis_toys import east_llm
from tests.bench.bench_toys import CorridorEnv

EPISODES = 5


class DiesOnce(CorridorEnv):
    """The corridor, but the process dies (``os._exit``) at the start of episode ``at``
    unless ``marker`` exists (it is created first): a worker killed mid-cell, once."""

    def __init__(self, marker: str, at: int = 3) -> None:
        super().__init__()
        self.marker = Path(marker)
        self.at = at

    def reset(self, task_id: str):  # type: ignore[no-untyped-def]
        if self.resets == self.at:
            try:  # created atomically: of two workers reaching here together, one dies
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, b"died")
                os.close(fd)
                os._exit(17)
        return super().reset(task_id)


def _cell(tmp: Path, name: str, seed: int = 0, **kw) -> Cell:
    return Cell(name, RunConfig(run_dir=tmp / name, env="corridor", split="test",
                                episodes=EPISODES, seed=seed, memory="deltamem", llm="scripted",
                                embedder="hashing:64", **kw))


def _check_complete(run_dir: Path) -> list[int]:
    """Every episode recorded once, in order; the start index of each session."""
    recs = read_episodes(run_dir / "episodes.jsonl")
    assert [r["index"] for r in recs] == list(range(EPISODES))
    sessions = json.loads((run_dir / "versions.json").read_text())
    return [s["start_index"] for s in sessions]


def test_cells_run_resume_and_are_skipped_once_finished(tmp_path):
    cells = [_cell(tmp_path, "a"), _cell(tmp_path, "b", seed=1)]
    state = tmp_path / "cells.json"
    seen: list[str] = []
    out = run_cells(cells, engine="local", workers=1, state=state,
                    factories=(CorridorEnv, east_llm, None),
                    on_cell=lambda o: seen.append(o.cell.name))
    assert seen == ["a", "b"] and [o.episodes for o in out] == [EPISODES, EPISODES]
    assert all(not o.skipped and o.start_index == 0 for o in out)
    again = run_cells(cells, engine="local", workers=1, state=state,
                      factories=(CorridorEnv, east_llm, None))
    assert all(o.skipped for o in again)  # not submitted: nothing ran
    assert _check_complete(tmp_path / "a") == [0]
    # without the state file a finished cell is re-read, and plays nothing
    third = run_cells(cells[:1], engine="local", workers=1, factories=(CorridorEnv, east_llm, None))
    assert third[0].start_index == EPISODES and _check_complete(tmp_path / "a") == [0, EPISODES]


def _bad(tmp_path: Path) -> Cell:
    return Cell("bad", RunConfig(run_dir=tmp_path / "bad", env="corridor", split="test",
                                 episodes=2, memory="no-such-memory", llm="scripted"))


def test_a_cell_that_fails_does_not_stop_the_others(tmp_path):
    with pytest.raises(CellFailed) as info:
        run_cells([_bad(tmp_path), _cell(tmp_path, "good")], engine="local", workers=1,
                  factories=(CorridorEnv, east_llm, None))
    assert [c.name for c, _ in info.value.failures] == ["bad"]
    assert isinstance(info.value.failures[0][1], ConfigError)
    assert _check_complete(tmp_path / "good") == [0]


def test_a_killed_local_worker_s_cell_resumes_from_its_run_directory(tmp_path):
    dies = functools.partial(DiesOnce, str(tmp_path / "died"))
    cells = [_cell(tmp_path, "a"), _cell(tmp_path, "b", seed=1)]
    run_cells(cells, engine="local", workers=2, factories=(dies, east_llm, None))
    assert (tmp_path / "died").exists()
    starts = {c.name: _check_complete(tmp_path / c.name) for c in cells}
    # the cell whose worker died resumed where it stopped (the pool's other worker went
    # down with it, and resumed too); no episode was recorded twice
    assert any(s[0] == 0 and len(s) == 2 and 0 < s[1] < EPISODES for s in starts.values()), starts


def test_cell_resources():
    local = RunConfig(run_dir=Path("x"), llm="local", llm_options={"n_threads": 3})
    assert cell_cpus(local) == (3, 3)
    assert cell_cpus(RunConfig(run_dir=Path("x"), llm="local"), llm_threads=2) == (2, 2)
    assert cell_cpus(RunConfig(run_dir=Path("x"), llm="scripted"), cpus=2) == (2, None)
    with pytest.raises(ConfigError):
        run_cells([_cell(Path("x"), "a"), _cell(Path("x"), "a")], engine="local")


@pytest.fixture(scope="module")
def ray_here():
    """A Ray on this machine (loopback) for the module's tests, as ``run_cells`` starts one."""
    ray = pytest.importorskip("ray")
    import sys

    path = os.pathsep.join(os.path.abspath(p or ".") for p in sys.path if os.path.isdir(p or "."))
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


def test_ray_tasks_retry_a_dead_worker_s_cell_from_its_run_directory(tmp_path, ray_here):
    dies = functools.partial(DiesOnce, str(tmp_path / "died"))
    cells = [_cell(tmp_path, "a"), _cell(tmp_path, "b", seed=1)]
    out = run_cells(cells, engine="ray", retries=2, factories=(dies, east_llm, None))
    assert (tmp_path / "died").exists()
    starts = {c.name: _check_complete(tmp_path / c.name) for c in cells}
    assert sorted(map(len, starts.values())) == [1, 2], starts  # one cell ran twice
    retried = next(s for s in starts.values() if len(s) == 2)
    assert retried[0] == 0 and 0 < retried[1] < EPISODES
    assert {o.cell.name: o.start_index for o in out} == {
        n: s[-1] for n, s in starts.items()}


def test_ray_does_not_retry_a_cell_s_own_error(tmp_path, ray_here):
    with pytest.raises(CellFailed) as info:
        run_cells([_bad(tmp_path)], engine="ray", retries=3,
                  factories=(CorridorEnv, east_llm, None))
    assert isinstance(info.value.failures[0][1], ConfigError)
    assert "no-such-memory" in str(info.value.failures[0][1])
    sessions = tmp_path / "bad" / "versions.json"
    assert not sessions.exists() or len(json.loads(sessions.read_text())) == 1
