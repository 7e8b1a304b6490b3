"""Resume and exactly-once learning: ``progress.json``, the episode being learned.

A restart with the same run directory drops a torn last line of ``episodes.jsonl``
and continues at the next index. For an episode that learns, the runner

1. plays it, then writes ``progress.json`` (atomically, ``os.replace``) with
   state ``learning``: the episode, its recall, the record so far and a
   fingerprint of the bank's content (every table's rows for a SQLite file,
   so WAL checkpoints do not count as changes; the bytes otherwise)
   (:meth:`Progress.learning`);
2. calls ``memory.learn`` (atomic by the Memory contract);
3. rewrites ``progress.json`` with state ``learned`` and the finished record
   (:meth:`Progress.learned`);
4. appends the record to ``episodes.jsonl`` (fsync).

On restart, a ``progress.json`` whose index is the next one to record is
finished first, before any new episode (:meth:`Progress.pending`,
:meth:`Progress.recover`): ``learned`` → its record is appended as saved;
``learning`` → the runner decides whether that learn committed: by
``memory.stats()["last_episode_id"]`` when the memory reports it (exact; memories
should report the id of the last episode whose learn committed), else by the
fingerprint taken before the memory is reopened (unchanged bank → not committed).
Not committed → the saved episode is learned again (it is not replayed); committed →
the record is written with ``changes: null``. A bank that changed with no
``last_episode_id`` to confirm is ambiguous and raises :class:`StoreError` rather
than risk learning an episode twice or losing it. A crash while *playing* loses
nothing: the episode is played again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deltamem.bench.results import EpisodeLog
from deltamem.bench.rundir import PROGRESS_FILE, content_fingerprint, write_json_atomic
from deltamem.errors import StoreError
from deltamem.llm.base import LLMClient
from deltamem.memory import Memory
from deltamem.types import Episode, Recall, RecallItem, Usage

__all__ = ["Progress"]

logger = logging.getLogger(__name__)


class Progress:
    """``progress.json`` of a run directory (see the module docstring)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / PROGRESS_FILE

    def learning(self, index: int, *, episode: Episode, recall: Recall,
                 record: Mapping[str, Any], usage: Usage, wall_s: float, bank: Path) -> None:
        """Episode ``index`` was played and is about to be learned into ``bank``."""
        write_json_atomic(self.path, {
            "index": index,
            "state": "learning",
            "episode": episode.to_dict(),
            "recall": recall.to_dict(),
            "record": record,
            "usage": usage.to_dict(),
            "wall_s": wall_s,
            "bank_fingerprint": content_fingerprint(bank),
        })

    def learned(self, index: int, record: Mapping[str, Any]) -> None:
        """Episode ``index`` was learned; ``record`` is its finished line."""
        write_json_atomic(self.path, {"index": index, "state": "learned", "record": record})

    def pending(self, episodes: EpisodeLog, start: int, end: int) -> dict[str, Any] | None:
        """The saved progress of the next episode of the phase ``[start, end)``, if a crash
        interrupted its learn."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as e:
            raise StoreError(f"cannot read {self.path}: {e}") from e
        index = data.get("index")
        if not isinstance(index, int) or index < episodes.next_index:
            return None  # its line was written: nothing pending
        if index > episodes.next_index:
            raise StoreError(f"{self.path} is at episode {index} but {episodes.path} ends at "
                             f"{episodes.next_index - 1}; the run directory is inconsistent")
        if not start <= index < end:
            return None
        if data.get("state") not in ("learning", "learned"):
            raise StoreError(f"{self.path}: unknown state {data.get('state')!r}")
        return data

    def recover(self, pending: Mapping[str, Any], memory: Memory, *, pre_open: str | None,
                llm: LLMClient, episodes: EpisodeLog, memory_name: str) -> dict[str, Any]:
        """Finish the interrupted episode ``pending`` exactly once; append and return its line.

        ``pre_open`` is the bank's :func:`~deltamem.bench.rundir.content_fingerprint` taken
        before ``memory`` (named ``memory_name`` in errors) was opened.
        """
        index = pending["index"]
        if pending["state"] == "learned":
            record = {**pending["record"], "recovered": "line rewritten from progress.json"}
            logger.info("episode %d: learn had committed; writing its saved record", index)
            episodes.append(record)
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
                f"{memory_name!r} does not report 'last_episode_id' in stats(). Restore "
                f"the bank from a backup, or delete {PROGRESS_FILE} to play and learn the "
                "episode again (it may then be learned twice)"
            )
        usage = Usage.from_dict(pending["usage"])
        record = dict(pending["record"])
        if committed:
            record.update(learned=True, changes=None,
                          recovered="learn had committed before the crash; changes unknown")
        else:
            usage0 = llm.usage.snapshot()
            changes = memory.learn(episode, recall)
            usage.merge(llm.usage.since(usage0))
            record.update(learned=True, changes=changes.to_list(),
                          recovered="learn redone after a crash (episode not replayed)")
        logger.info("episode %d: %s", index, record["recovered"])
        record.update(
            usage=usage.to_dict(),
            bank=memory.stats(),
            wall_s=round(float(pending["wall_s"]) + time.perf_counter() - t0, 3),
        )
        self.learned(index, record)
        episodes.append(record)
        return record


def _recall_from_dict(data: Mapping[str, Any]) -> Recall:
    return Recall(
        text=data.get("text", ""),
        items=tuple(RecallItem(**i) for i in data.get("items", ())),
        details=dict(data.get("details") or {}),
    )
