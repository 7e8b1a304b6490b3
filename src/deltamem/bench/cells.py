"""Run many benchmark cells at once: in local processes, or as Ray tasks on a cluster.

A *cell* (:class:`Cell`) is one :class:`~deltamem.bench.RunConfig` under a name, with the
cores it needs. Running it is :func:`deltamem.bench.run` on its run directory, which resumes
where the directory stopped and plays nothing when the run is complete. :func:`run_cells`
runs a list of cells with one of two engines:

* ``local``: a pool of ``spawn`` processes on this machine, ``workers`` at a time (``1``: one
  after the other in this process). A worker that dies (killed, out of memory) breaks the
  pool: it is rebuilt and the cells it was running go again, each at most ``retries`` times;
* ``ray``: one Ray task per cell, asking for the cell's cores (``num_cpus``). ``address``
  joins a running cluster (``ray start --head`` on one machine, ``ray start --address`` on
  the others); without it Ray is started on this machine, on 127.0.0.1, for the duration of
  the call. A task whose worker process or node died is retried by Ray (``max_retries``,
  another node if one is free); an exception raised by the cell itself (a bad option, an
  environment that is not installed) is not retried;
* ``auto``: ``ray`` when Ray is installed (``pip install 'deltamem[ray]'``), else ``local``.

Nothing finished is run again. A retried cell resumes from its run directory: the episodes it
recorded are not played again, and the episode whose ``learn`` was under way when the worker
died is completed exactly once (:mod:`deltamem.bench.recovery`); each session of a run
directory is listed in its ``versions.json`` with the index it started at. While a cell runs,
its directory is locked (``fcntl.flock`` on ``.cell.lock``), so a retry never runs beside an
attempt that is still alive. With a ``state`` file (JSON, written atomically after each cell),
cells that finished in an earlier call with the same configuration are not submitted at all.

Run directories must be on a file system every worker sees: one machine, or a mount shared by
the cluster's nodes; deltamem (with the same extras) must be installed on every node.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from deltamem.bench.config import RunConfig, is_local_llm
from deltamem.bench.rundir import write_json_atomic
from deltamem.errors import CellFailed, ConfigError, DeltaMemError

__all__ = ["Cell", "CellFailed", "CellOutcome", "Engine", "cell_cpus", "run_cell", "run_cells"]

log = logging.getLogger(__name__)

Engine = Literal["auto", "local", "ray"]
LOCK_FILE = ".cell.lock"


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: its name (unique in the sweep), its configuration, the cores it
    takes (Ray's ``num_cpus``) and, for a local model, the threads it runs with
    (``DELTAMEM_LLM_THREADS`` in the worker)."""

    name: str
    config: RunConfig
    cpus: int = 1
    threads: int | None = None

    def config_json(self) -> str:
        return self.config.model_dump_json()


def cell_cpus(config: RunConfig, *, cpus: int = 1,
              llm_threads: int | None = None) -> tuple[int, int | None]:
    """``(cores, threads)`` of a cell: a local-model cell takes the cores its model's threads
    use (``llm_options.n_threads``, else ``llm_threads``, else ``cpus``); any other cell
    ``cpus`` (the environment, the embedder, the API calls) and no thread setting."""
    if cpus < 1:
        raise ConfigError(f"cpus per cell must be >= 1, got {cpus}")
    if not is_local_llm(config.llm):
        return cpus, None
    threads = int(config.llm_options.get("n_threads") or llm_threads or cpus)
    if threads < 1:
        raise ConfigError(f"LLM threads must be >= 1, got {threads}")
    return threads, threads


@dataclass(frozen=True)
class CellOutcome:
    """A finished cell: where and how it ran (``start_index``: the episode it resumed at in
    its last session; ``episodes``: recorded in all; ``skipped``: finished before this call)."""

    cell: Cell
    host: str = ""
    pid: int = 0
    start_index: int = 0
    episodes: int = 0
    seconds: float = 0.0
    skipped: bool = False


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``run_dir`` (waits for another holder to finish or die)."""
    import fcntl

    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _llm_threads(threads: int | None) -> Iterator[None]:
    from deltamem.llm.local import THREADS_ENV

    if threads is None:
        yield
        return
    old = os.environ.get(THREADS_ENV)
    os.environ[THREADS_ENV] = str(threads)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = old


def run_cell(
    config_json: str,
    threads: int | None = None,
    env_factory: Callable[[], Any] | None = None,
    llm_factory: Callable[[], Any] | None = None,
    embedder_factory: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Worker: run (or resume) one cell under its directory's lock; where and how it ran.

    The factories replace what the config's specs build (they must be picklable); an
    environment a factory made is closed here.
    """
    from deltamem.bench.runner import run

    config = RunConfig.model_validate_json(config_json)
    run_dir = Path(config.run_dir)
    t0 = time.perf_counter()
    with _locked(run_dir), _llm_threads(threads):
        env = env_factory() if env_factory is not None else None
        try:
            result = run(config, env=env, llm=llm_factory() if llm_factory else None,
                         embedder=embedder_factory() if embedder_factory else None,
                         progress=False, env_factory=env_factory)
        finally:
            if env is not None:
                env.close()
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "start_index": result.resumed_from, "episodes": result.episodes,
            "seconds": time.perf_counter() - t0}


# -- the engines ---------------------------------------------------------------------------------

def ray_available() -> bool:
    """Whether Ray can be imported (the ``deltamem[ray]`` extra)."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def run_cells(
    cells: Sequence[Cell],
    *,
    engine: Engine = "auto",
    address: str | None = None,
    workers: int | None = None,
    retries: int = 3,
    state: str | Path | None = None,
    factories: tuple[Callable[[], Any] | None, ...] = (None, None, None),
    on_cell: Callable[[CellOutcome], None] | None = None,
) -> list[CellOutcome]:
    """Run (or resume) every cell; outcomes in the order of ``cells``.

    ``workers``: cells at once with the local engine (default: the machine's cores divided
    by the largest cell's cores). ``retries``: times a cell is run again after its worker
    died. ``state``: the JSON file of finished cells (see the module doc). ``on_cell`` is
    called as each cell finishes. When cells fail, the others still run; then
    :class:`CellFailed` lists the failures.
    """
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"cell names must be unique: {twice}")
    if retries < 0:
        raise ConfigError(f"retries must be >= 0, got {retries}")
    if engine not in ("auto", "local", "ray"):
        raise ConfigError(f"engine must be auto, local or ray, got {engine!r}")
    if engine == "auto":
        engine = "ray" if (address or ray_available()) else "local"
    if engine == "local" and address:
        raise ConfigError("--address joins a Ray cluster: it needs the ray engine")
    # absolute run directories: a worker's current directory is not the caller's
    cells = [Cell(c.name, c.config.model_copy(update={"run_dir": Path(c.config.run_dir).resolve()}),
                  c.cpus, c.threads) for c in cells]
    book = _State(Path(state)) if state is not None else None
    outcomes: dict[str, CellOutcome] = {}
    failures: list[tuple[Cell, BaseException]] = []

    def finish(cell: Cell, info: dict[str, Any], *, skipped: bool = False) -> None:
        out = CellOutcome(cell, skipped=skipped, **info)
        outcomes[cell.name] = out
        if book is not None and not skipped:
            book.finished(cell)
        if on_cell is not None:
            on_cell(out)

    def fail(cell: Cell, error: BaseException) -> None:
        log.error("cell %s failed: %s", cell.name, error)
        failures.append((cell, error))

    todo = []
    for c in cells:
        if book is not None and book.is_finished(c):
            finish(c, {}, skipped=True)
        else:
            todo.append(c)
    if todo:
        if engine == "ray":
            _run_ray(todo, address, retries, factories, finish, fail)
        else:
            if workers is None:
                workers = max(1, (os.cpu_count() or 1) // max(c.cpus for c in todo))
            if workers < 1:
                raise ConfigError(f"workers must be >= 1, got {workers}")
            _run_local(todo, workers, retries, factories, finish, fail)
    if failures:
        raise CellFailed(failures, len(cells))
    return [outcomes[c.name] for c in cells]


def _run_local(cells: Sequence[Cell], workers: int, retries: int,
               factories: tuple[Callable[[], Any] | None, ...],
               finish: Callable[..., None], fail: Callable[[Cell, BaseException], None]) -> None:
    if workers == 1:
        for c in cells:
            try:
                info = run_cell(c.config_json(), c.threads, *factories)
            except Exception as e:  # collected; the caller raises CellFailed
                fail(c, e)
            else:
                finish(c, info)
        return
    ctx = multiprocessing.get_context("spawn")
    pending = list(cells)
    tries: dict[str, int] = {}
    while pending:
        broken: list[Cell] = []
        with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=ctx) as pool:
            futures = {pool.submit(run_cell, c.config_json(), c.threads, *factories): c
                       for c in pending}
            for fut in as_completed(futures):
                c = futures[fut]
                try:
                    info = fut.result()
                except BrokenProcessPool:
                    broken.append(c)
                except Exception as e:  # collected; the caller raises CellFailed
                    fail(c, e)
                else:
                    finish(c, info)
        pending = []
        for c in broken:
            tries[c.name] = tries.get(c.name, 0) + 1
            if tries[c.name] > retries:
                fail(c, DeltaMemError(f"its worker process died {tries[c.name]} times"))
            else:
                log.warning("cell %s: a worker process died; running it again (try %d)",
                            c.name, tries[c.name] + 1)
                pending.append(c)


def _run_ray(cells: Sequence[Cell], address: str | None, retries: int,
             factories: tuple[Callable[[], Any] | None, ...],
             finish: Callable[..., None], fail: Callable[[Cell, BaseException], None]) -> None:
    try:
        import ray
    except ImportError as e:
        raise ConfigError("the ray engine needs Ray: pip install 'deltamem[ray]'") from e
    own = not ray.is_initialized()
    if own:
        kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        if address:
            ray.init(address=address, **kwargs)
        else:  # a new instance on this machine only (never a `ray start` cluster found in
            # /tmp/ray), on loopback; its workers import what this process can
            path = os.pathsep.join(p for p in (os.path.abspath(p or ".") for p in sys.path)
                                   if os.path.isdir(p))
            ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
                     runtime_env={"env_vars": {"PYTHONPATH": path}}, **kwargs)
    try:
        have = float(ray.cluster_resources().get("CPU", 0))
        need = max(c.cpus for c in cells)
        if need > have:
            raise ConfigError(f"a cell needs {need} CPUs; the Ray cluster has {have:g}")
        task = ray.remote(run_cell)
        refs = {task.options(num_cpus=c.cpus, max_retries=retries, retry_exceptions=False,
                             name=f"deltamem cell {c.name}")
                .remote(c.config_json(), c.threads, *factories): c for c in cells}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                c = refs[ref]
                try:
                    info = ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the cell's own error
                    fail(c, e.cause if isinstance(e.cause, BaseException) else e)
                except ray.exceptions.RayError as e:  # worker or node lost, retries spent
                    fail(c, DeltaMemError(f"Ray could not finish the cell: {e}"))
                else:
                    finish(c, info)
    finally:
        if own:
            ray.shutdown()


class _State:
    """The JSON file of cells finished in earlier calls: ``{name: config}``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, Any] = {}
        if path.exists():
            try:
                self.done = json.loads(path.read_text(encoding="utf-8")).get("finished", {})
            except (OSError, ValueError, AttributeError) as e:
                raise ConfigError(f"cannot read {path}: {e}") from e

    def is_finished(self, cell: Cell) -> bool:
        return self.done.get(cell.name) == json.loads(cell.config_json())

    def finished(self, cell: Cell) -> None:
        self.done[cell.name] = json.loads(cell.config_json())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, {"finished": self.done})
