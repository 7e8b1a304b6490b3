"""Run a benchmark: the recall → play → learn loop over a task stream, resumable after a crash.

Protocols (paper §4.1, §4.3):

* ``online``: phase ``online`` plays the first N tasks of ``split`` in the
  order of ``env.task_ids(split, seed)``, learning after each episode (unless
  ``frozen``).
* ``train-to-test``: phase ``build`` learns online on ``train_split`` into
  ``bank.db``; then each of ``eval_modes`` (``frozen``: recall only;
  ``unfrozen``: keeps learning) plays ``split`` from its own copy of the built
  bank, so both start from the same bytes. A frozen phase checks that its bank
  is byte-identical at the end and raises :class:`StoreError` if the memory
  changed it anyway.
* Demonstrations: ``train_agent = "expert"`` (or ``"expert:noise=P"``) has the
  build phase played by the environment's own solution
  (:class:`~deltamem.agents.expert.ExpertAgent`, no LLM call), so the bank is built
  from demonstrations; memory writes still use the configured extractor. Every
  system given the same config gets the same demonstrations in the same order.
  ``agent`` names the policy of the other phases (``react``: the LLM agent). Each
  record of ``episodes.jsonl`` names its policy under ``agent``.

Run directory::

    config.json                    the RunConfig; once an episode is recorded, a restart
                                   must give the same one (only ``episodes`` of an
                                   online run may change)
    versions.json                  python and package versions, one entry per session
    episodes.jsonl                 one line per finished episode (deltamem.bench.results)
    progress.json                  the episode being learned, for crash recovery
    llm-cache.jsonl                the LLM record/replay cache (``cache_path`` of make_llm)
    bank.db                        the bank of the online / build phase
    bank-frozen.db, bank-unfrozen.db   train-to-test evaluation copies of bank.db

Resume and exactly-once learning. A restart with the same run directory
drops a torn last line of ``episodes.jsonl`` and continues at the next index.
For an episode that learns, the runner

1. plays it, then writes ``progress.json`` (atomically, ``os.replace``) with
   state ``learning``: the episode, its recall, the record so far and a
   fingerprint of the bank's content (every table's rows for a SQLite file,
   so WAL checkpoints do not count as changes; the bytes otherwise);
2. calls ``memory.learn`` (atomic by the Memory contract);
3. rewrites ``progress.json`` with state ``learned`` and the finished record;
4. appends the record to ``episodes.jsonl`` (fsync).

On restart, a ``progress.json`` whose index is the next one to record is
finished first, before any new episode: ``learned`` → its record is appended
as saved; ``learning`` → the runner decides whether that learn committed:
by ``memory.stats()["last_episode_id"]`` when the memory reports it (exact;
memories should report the id of the last episode whose learn committed),
else by the fingerprint taken before the memory is reopened (unchanged bank →
not committed). Not committed → the saved episode is learned again (it is not
replayed); committed → the record is written with ``changes: null``. A bank
that changed with no ``last_episode_id`` to confirm is ambiguous and raises
:class:`StoreError` rather than risk learning an episode twice or losing it.
A crash while *playing* loses nothing: the episode is played again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from deltamem.agents.expert import ExpertAgent, parse_expert_spec
from deltamem.agents.react import ReActAgent
from deltamem.bench.config import CONFIG_FILE, RunConfig
from deltamem.bench.results import EPISODES_FILE, EpisodeLog, RunResult, summarize
from deltamem.domains import get_domain
from deltamem.embed.base import Embedder
from deltamem.envs.base import Environment
from deltamem.errors import ConfigError, StoreError
from deltamem.llm.base import LLMClient
from deltamem.memories import make_memory
from deltamem.memory import Memory
from deltamem.types import Episode, Recall, RecallItem, Usage

__all__ = [
    "BANK_FILE",
    "LLM_CACHE_FILE",
    "PROGRESS_FILE",
    "VERSIONS_FILE",
    "package_versions",
    "run",
]

log = logging.getLogger(__name__)

BANK_FILE = "bank.db"
PROGRESS_FILE = "progress.json"
VERSIONS_FILE = "versions.json"
LLM_CACHE_FILE = "llm-cache.jsonl"

_PACKAGES = (
    "deltamem", "numpy", "pydantic", "rich", "typer", "jsonschema", "openai", "tokenizers",
    "safetensors", "llama-cpp-python", "sentence-transformers", "torch", "textworld",
    "alfworld", "scienceworld", "matplotlib",
)


@dataclass(frozen=True)
class _Phase:
    name: str
    split: str
    task_ids: tuple[str, ...]
    start: int
    learn: bool
    bank: Path

    @property
    def end(self) -> int:
        return self.start + len(self.task_ids)


def run(
    config: RunConfig,
    *,
    env: Environment | None = None,
    llm: LLMClient | None = None,
    embedder: Embedder | None = None,
    progress: bool | Literal["lines"] | None = None,
) -> RunResult:
    """Run (or resume) the benchmark described by ``config``; see the module docstring.

    ``env``, ``llm`` and ``embedder`` replace the objects the config's specs
    would build (an ``env`` given here is not closed by the runner).
    ``progress`` (on stderr): ``True`` a live bar with the step within the episode, the
    running success rate and the last action; ``False`` nothing; ``"lines"`` one plain
    line per finished episode; ``None`` (default) the bar on a terminal, else the lines (a
    log file gets them).
    """
    run_dir = Path(config.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    episodes = EpisodeLog(run_dir / EPISODES_FILE)
    started = episodes.next_index > 0 or (run_dir / PROGRESS_FILE).exists()
    _save_config(config, run_dir, check=started)
    resumed_from = episodes.next_index
    if resumed_from or episodes.dropped_torn_line:
        log.info("resuming %s at episode %d%s", run_dir, resumed_from,
                 " (dropped a torn last line)" if episodes.dropped_torn_line else "")
    _record_versions(run_dir, resumed_from)
    own_env = env is None
    if env is None:
        from deltamem.envs.registry import make_env

        env = make_env(config.env, **config.env_options)
    try:
        if llm is None:
            from deltamem.llm.factory import make_llm

            llm = make_llm(config.llm, cache_path=run_dir / LLM_CACHE_FILE,
                           **config.llm_options)
        if embedder is None and config.embedder:
            from deltamem.embed.factory import make_embedder

            embedder = make_embedder(config.embedder)
        session = _Session(config, run_dir, env, llm, embedder, episodes)
        session.run(_display_mode(progress))
    finally:
        if own_env:
            env.close()
    return RunResult(
        run_dir=run_dir,
        episodes_path=episodes.path,
        episodes=episodes.next_index,
        resumed_from=resumed_from,
        phases=summarize(episodes.records),
    )


class _Session:
    """One invocation of :func:`run` on a prepared run directory."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        env: Environment,
        llm: LLMClient,
        embedder: Embedder | None,
        episodes: EpisodeLog,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.env = env
        self.llm = llm
        self.embedder = embedder
        self.log = episodes
        self.domain = config.domain or env.domain
        get_domain(self.domain)
        self.agent = ReActAgent(
            llm, domain=self.domain, constrained=config.constrained,
            max_steps=config.max_steps, history_chars=config.history_chars,
            repeat_limit=config.repeat_limit, max_listed_actions=config.max_listed_actions,
            guide=config.guide,
        )

    def _policy(self, phase: _Phase) -> str:
        """The spec of the policy that plays ``phase`` (recorded with every episode)."""
        c = self.config
        if phase.name == "build" and c.train_agent is not None:
            return c.train_agent.strip()
        return c.agent.strip()

    # -- planning ---------------------------------------------------------------------------

    def _tasks(self, split: str, n: int | None) -> tuple[str, ...]:
        if self.env.splits and split not in self.env.splits:
            raise ConfigError(f"environment {self.env.name!r} has no split {split!r}; "
                              f"splits: {', '.join(self.env.splits)}")
        ids = list(self.env.task_ids(split, self.config.seed))
        if n is not None and n > len(ids):
            raise ConfigError(f"{n} episodes requested but split {split!r} of "
                              f"{self.env.name!r} has {len(ids)} tasks")
        return tuple(ids if n is None else ids[:n])

    def plan(self) -> list[_Phase]:
        c, d = self.config, self.run_dir
        if c.protocol == "online":
            return [_Phase("online", c.split, self._tasks(c.split, c.episodes), 0,
                           not c.frozen, d / BANK_FILE)]
        build = _Phase("build", c.train_split, self._tasks(c.train_split, c.train_episodes), 0,
                       True, d / BANK_FILE)
        phases = [build]
        evals = self._tasks(c.split, c.episodes)
        for mode in c.eval_modes:
            bank = d / f"{Path(BANK_FILE).stem}-{mode}{Path(BANK_FILE).suffix}"
            phases.append(_Phase(mode, c.split, evals, phases[-1].end, mode == "unfrozen", bank))
        return phases

    def _check_log(self, phases: list[_Phase]) -> None:
        planned = [(p.name, t) for p in phases for t in p.task_ids]
        for i, rec in enumerate(self.log.records):
            if i >= len(planned) or (rec.get("phase"), rec.get("task_id")) != planned[i]:
                raise ConfigError(
                    f"{self.log.path} line {i + 1} ({rec.get('phase')}, {rec.get('task_id')!r}) "
                    "does not match this configuration's task plan; use a new run_dir"
                )

    # -- the loop ---------------------------------------------------------------------------

    def run(self, show_progress: str) -> None:
        phases = self.plan()
        self._check_log(phases)
        with _Display(show_progress, label=self.run_dir.name) as display:
            self.display = display
            for phase in phases:
                if self.log.next_index >= phase.end:
                    continue
                done = self.log.records[phase.start : self.log.next_index]
                display.start(phase, len(done), sum(bool(r["success"]) for r in done))
                self._run_phase(phase, display)

    def _run_phase(self, phase: _Phase, display: _Display) -> None:
        self._prepare_bank(phase)
        before = _fingerprint(phase.bank) if not phase.learn else None
        pending = self._pending(phase)
        pre_open = _content_fingerprint(phase.bank) if pending is not None else None
        memory = make_memory(
            self.config.memory, bank=str(phase.bank), embedder=self.embedder, llm=self.llm,
            extractor=self.config.extractor, domain=self.domain,
            options=dict(self.config.memory_options),
        )
        try:
            if pending is not None:
                rec = self._recover(pending, memory, pre_open)
                display.advance(rec)
            while self.log.next_index < phase.end:
                rec = self._episode(phase, memory, self.log.next_index)
                display.advance(rec)
        finally:
            memory.close()
        if before is not None and _fingerprint(phase.bank) != before:
            raise StoreError(
                f"memory {self.config.memory!r} changed the bank {phase.bank} during the "
                f"{phase.name!r} phase although learn was never called (recall must be read-only)"
            )

    def _prepare_bank(self, phase: _Phase) -> None:
        if phase.bank.exists():
            return
        source: Path | None = None
        if phase.name in ("online", "build") and self.config.init_bank is not None:
            source = Path(self.config.init_bank)
            if not source.exists():
                raise ConfigError(f"init_bank {source} does not exist")
        elif phase.name in ("frozen", "unfrozen"):
            built = self.run_dir / BANK_FILE
            source = built if built.exists() else None
        if source is not None:
            _atomic_copy(source, phase.bank)

    def _episode(self, phase: _Phase, memory: Memory, index: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        usage0 = self.llm.usage.snapshot()
        task_id = phase.task_ids[index - phase.start]
        task = self.env.reset(task_id)
        display = getattr(self, "display", None) or _Display("off")
        display.episode(index - phase.start, task_id,
                        self.config.max_steps or self.env.max_steps(task))
        recall = memory.recall(task)
        env: Any = _WatchedEnv(self.env, display)  # reports each step to the progress display
        policy = self._policy(phase)
        noise = parse_expert_spec(policy)
        if noise is not None:  # a demonstration: the environment's solution, no LLM
            episode = ExpertAgent(noise=noise, seed=self.config.seed,
                                  max_steps=self.config.max_steps).play(env, task, recall)
        elif getattr(memory, "agent", "react") == "ariadne":  # step-level memories (AriGraph)
            from deltamem.agents.ariadne import AriadneAgent

            episode = AriadneAgent(self.llm, domain=self.domain,
                                   max_steps=self.config.max_steps,
                                   repeat_limit=self.config.repeat_limit).play(
                env, task, recall, memory=memory)
        else:
            episode = self.agent.play(env, task, recall)
        record = {
            "index": index,
            "phase": phase.name,
            "position": index - phase.start,
            "task_id": task_id,
            "split": phase.split,
            "agent": policy,
            "episode_id": episode.id,
            "success": bool(episode.success),
            "reward": float(episode.reward),
            "steps": len(episode.steps),
            "invalid_actions": sum(not s.valid for s in episode.steps),
            "recall": {
                "chars": len(recall.text),
                "items": [{"source": i.source, "id": i.id, "role": i.role,
                           "score": None if i.score is None else float(i.score)}
                          for i in recall.items],
                "details": dict(recall.details),
            },
        }
        if not phase.learn:
            record.update(learned=False, changes=[])
        else:
            _write_json_atomic(self.run_dir / PROGRESS_FILE, {
                "index": index,
                "state": "learning",
                "episode": episode.to_dict(),
                "recall": recall.to_dict(),
                "record": record,
                "usage": self.llm.usage.since(usage0).to_dict(),
                "wall_s": time.perf_counter() - t0,
                "bank_fingerprint": _content_fingerprint(phase.bank),
            })
            display.status(f"{'success' if episode.success else 'failure'} in "
                           f"{len(episode.steps)} steps; learning")
            changes = memory.learn(episode, recall)
            record.update(learned=True, changes=changes.to_list())
        record.update(
            usage=self.llm.usage.since(usage0).to_dict(),
            bank=memory.stats(),
            wall_s=round(time.perf_counter() - t0, 3),
        )
        if phase.learn:
            _write_json_atomic(self.run_dir / PROGRESS_FILE,
                               {"index": index, "state": "learned", "record": record})
        self.log.append(record)
        return record

    # -- crash recovery ---------------------------------------------------------------------

    def _pending(self, phase: _Phase) -> dict[str, Any] | None:
        """The saved progress of the next episode, if a crash interrupted its learn."""
        path = self.run_dir / PROGRESS_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as e:
            raise StoreError(f"cannot read {path}: {e}") from e
        index = data.get("index")
        if not isinstance(index, int) or index < self.log.next_index:
            return None  # its line was written: nothing pending
        if index > self.log.next_index:
            raise StoreError(f"{path} is at episode {index} but {self.log.path} ends at "
                             f"{self.log.next_index - 1}; the run directory is inconsistent")
        if not phase.start <= index < phase.end:
            return None
        if data.get("state") not in ("learning", "learned"):
            raise StoreError(f"{path}: unknown state {data.get('state')!r}")
        return data

    def _recover(
        self, pending: dict[str, Any], memory: Memory, pre_open: str | None
    ) -> dict[str, Any]:
        index = pending["index"]
        if pending["state"] == "learned":
            record = {**pending["record"], "recovered": "line rewritten from progress.json"}
            log.info("episode %d: learn had committed; writing its saved record", index)
            self.log.append(record)
            return record
        t0 = time.perf_counter()
        episode = Episode.from_dict(pending["episode"])
        recall = _recall_from_dict(pending["recall"])
        stats = memory.stats()
        if "last_episode_id" in stats:
            committed = stats["last_episode_id"] == episode.id
        elif pre_open == pending["bank_fingerprint"]:
            committed = False
        else:
            raise StoreError(
                f"cannot tell whether episode {index} (id {episode.id}) was learned before the "
                f"crash: the bank changed since its learn started and memory "
                f"{self.config.memory!r} does not report 'last_episode_id' in stats(). Restore "
                f"the bank from a backup, or delete {PROGRESS_FILE} to play and learn the "
                "episode again (it may then be learned twice)"
            )
        usage = Usage.from_dict(pending["usage"])
        record = dict(pending["record"])
        if committed:
            record.update(learned=True, changes=None,
                          recovered="learn had committed before the crash; changes unknown")
        else:
            usage0 = self.llm.usage.snapshot()
            changes = memory.learn(episode, recall)
            usage.merge(self.llm.usage.since(usage0))
            record.update(learned=True, changes=changes.to_list(),
                          recovered="learn redone after a crash (episode not replayed)")
        log.info("episode %d: %s", index, record["recovered"])
        record.update(
            usage=usage.to_dict(),
            bank=memory.stats(),
            wall_s=round(float(pending["wall_s"]) + time.perf_counter() - t0, 3),
        )
        _write_json_atomic(self.run_dir / PROGRESS_FILE,
                           {"index": index, "state": "learned", "record": record})
        self.log.append(record)
        return record


# -- helpers ------------------------------------------------------------------------------------


def _recall_from_dict(data: Mapping[str, Any]) -> Recall:
    return Recall(
        text=data.get("text", ""),
        items=tuple(RecallItem(**i) for i in data.get("items", ())),
        details=dict(data.get("details") or {}),
    )


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
    except TypeError as e:
        raise StoreError(f"cannot serialise {path.name}: {e} (task meta and recall details "
                         "must be JSON-serialisable)") from e
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _bank_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    wal = path.with_name(path.name + "-wal")
    return [p for p in (path, wal) if p.is_file() and (p == path or p.stat().st_size)]


def _fingerprint(path: Path) -> str:
    """Size and SHA-256 of a bank's bytes (file plus a non-empty SQLite ``-wal``, or every
    file of a directory); ``"absent"`` when there is none."""
    h = hashlib.sha256()
    files = _bank_files(path)
    if not files:
        return "absent"
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return f"{sum(f.stat().st_size for f in files)}:{h.hexdigest()}"


_SQLITE_MAGIC = b"SQLite format 3\0"


def _content_fingerprint(path: Path) -> str:
    """What a bank holds, insensitive to how it is laid out on disk.

    For a SQLite file: a digest of every table's schema and rows, read through
    SQLite (so a WAL checkpoint or a rolled-back hot journal, which change the
    bytes but not the content, do not change it). Otherwise :func:`_fingerprint`.
    """
    if not path.is_file():
        return _fingerprint(path)
    with open(path, "rb") as fh:
        if fh.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
            return _fingerprint(path)
    h = hashlib.sha256()
    try:
        con = sqlite3.connect(path, timeout=30)
        try:
            tables = con.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
            for name, sql in tables:
                h.update(f"{name}\0{sql}\0".encode())
                quoted = name.replace('"', '""')
                for row in con.execute(f'SELECT * FROM "{quoted}"'):
                    h.update(repr(row).encode())
        finally:
            con.close()
    except sqlite3.Error as e:
        raise StoreError(f"cannot read the bank {path} to fingerprint it: {e}") from e
    return f"sqlite:{h.hexdigest()}"


def _atomic_copy(source: Path, target: Path) -> None:
    """Copy a bank (file with its ``-wal``, or a directory) so ``target`` appears whole or not."""
    tmp = target.with_name(target.name + ".copying")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    if source.is_dir():
        shutil.copytree(source, tmp)
        os.replace(tmp, target)
        return
    wal = source.with_name(source.name + "-wal")
    if wal.is_file():
        shutil.copyfile(wal, target.with_name(target.name + "-wal"))
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _save_config(config: RunConfig, run_dir: Path, *, check: bool) -> None:
    """Save ``config``; with ``check`` (the run has results), refuse a different one."""
    path = run_dir / CONFIG_FILE
    if check and path.exists():
        old = RunConfig.from_json_file(path).model_dump(mode="json")
        new = config.model_dump(mode="json")
        ignored = {"run_dir"} | ({"episodes"} if config.protocol == "online" else set())
        diff = sorted(k for k in new if k not in ignored and old.get(k) != new[k])
        if diff:
            raise ConfigError(
                f"{run_dir} holds a run with another configuration (differs in: "
                f"{', '.join(diff)}); use a new run_dir or the saved config.json"
            )
    _write_text_atomic(path, config.to_json())


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (``None``: not installed)."""
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _record_versions(run_dir: Path, start_index: int) -> None:
    path = run_dir / VERSIONS_FILE
    sessions: list[Any] = []
    if path.exists():
        try:
            sessions = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise StoreError(f"cannot read {path}: {e}") from e
    sessions.append({
        "session": len(sessions),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "start_index": start_index,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "source": source_revision(),
    })
    _write_text_atomic(path, json.dumps(sessions, indent=2) + "\n")


def source_revision() -> dict[str, Any] | None:
    """The git commit of the deltamem source tree in use (and whether it had local edits),
    or ``None`` when it is not a git checkout or git is not installed."""
    import subprocess

    src = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"path": str(src), "commit": head, "modified": bool(dirty.strip())}


def _display_mode(progress: bool | Literal["lines"] | None) -> str:
    """``bar``, ``lines`` or ``off`` for :func:`run`'s ``progress`` argument."""
    if progress == "lines":
        return "lines"
    if progress is None:
        from rich.console import Console

        return "bar" if Console(stderr=True).is_terminal else "lines"
    return "bar" if progress else "off"


class _WatchedEnv:
    """The run's environment as the agent sees it, reporting every step to the display.

    Everything but :meth:`step` is the environment's own (attribute access is delegated).
    """

    def __init__(self, env: Environment, display: _Display) -> None:
        self._env = env
        self._display = display
        self._n = 0

    def step(self, action: str) -> Any:
        transition = self._env.step(action)
        self._n += 1
        self._display.step(self._n, action)
        return transition

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class _Display:
    """Progress of a run on stderr.

    ``bar``: a rich progress bar per phase (episodes done, running success rate, the
    current episode's step, its cap and the last action). ``lines``: one plain line per
    finished episode, for output that is not a terminal. ``off``: nothing.
    """

    def __init__(self, mode: str, label: str = "") -> None:
        self.mode = mode
        self.label = label  # the run's name, so runs side by side (a demo) can be told apart
        self._progress: Any = None
        self._console: Any = None
        self._task: Any = None
        self._phase = ""
        self._total = 0
        self._n = self._wins = 0
        self._max_steps = 0

    def __enter__(self) -> _Display:
        if self.mode == "off":
            return self
        from rich.console import Console

        self._console = Console(stderr=True)
        if self.mode == "bar":
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                TextColumn("success {task.fields[rate]}"), TimeElapsedColumn(),
                TextColumn("{task.fields[now]}"),
                console=self._console,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, phase: _Phase, done: int, wins: int) -> None:
        self._n, self._wins = done, wins
        self._phase = f"{self.label}: " * bool(self.label) + f"{phase.name} ({phase.split})"
        self._total = len(phase.task_ids)
        if self._progress is not None:
            self._task = self._progress.add_task(
                self._phase, total=self._total, completed=done, rate=self._rate(), now="",
            )

    def episode(self, position: int, task_id: str, max_steps: int) -> None:
        """An episode starts (recall, then play)."""
        self._max_steps = max_steps
        if self._progress is not None:
            self._progress.update(self._task, now=f"episode {position + 1}: recall")

    def status(self, text: str) -> None:
        """What the current episode is doing now (e.g. learning)."""
        if self._progress is not None:
            self._progress.update(self._task, now=text)

    def step(self, n: int, action: str) -> None:
        """Step ``n`` of the current episode was taken."""
        if self._progress is not None:
            self._progress.update(
                self._task, now=f"step {n}/{self._max_steps} › {_clip(action, 40)}"
            )

    def advance(self, record: Mapping[str, Any]) -> None:
        """An episode's line was written."""
        self._n += 1
        self._wins += bool(record["success"])
        if self._progress is not None:
            self._progress.update(self._task, advance=1, rate=self._rate(), now="")
        elif self._console is not None:
            self._console.print(
                f"{self._phase} episode {self._n}/{self._total} {record.get('task_id', '')}: "
                f"{'success' if record['success'] else 'failure'}, reward "
                f"{float(record['reward']):.2f}, {record.get('steps', 0)} steps, "
                f"{float(record.get('wall_s') or 0):.0f} s; success so far "
                f"{self._wins}/{self._n} ({self._rate()})",
                markup=False, highlight=False, soft_wrap=True,
            )

    def _rate(self) -> str:
        return f"{self._wins / self._n:.1%}" if self._n else "-"


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
