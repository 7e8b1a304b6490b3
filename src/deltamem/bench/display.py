"""What a run shows on stderr while it plays: a live bar, one line per episode, or nothing.

:func:`display_mode` picks the mode from :func:`deltamem.bench.run`'s ``progress``
argument; :class:`Display` draws it; :class:`WatchedEnv` is the environment as the
agent sees it, reporting each step to the display.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from deltamem.envs.base import Environment

__all__ = ["Display", "WatchedEnv", "display_mode"]


def display_mode(progress: bool | Literal["lines"] | None) -> str:
    """``bar``, ``lines`` or ``off`` for :func:`run`'s ``progress`` argument."""
    if progress == "lines":
        return "lines"
    if progress is None:
        from rich.console import Console

        return "bar" if Console(stderr=True).is_terminal else "lines"
    return "bar" if progress else "off"


class WatchedEnv:
    """The run's environment as the agent sees it, reporting every step to the display.

    Everything but :meth:`step` is the environment's own (attribute access is delegated).
    """

    def __init__(self, env: Environment, display: Display) -> None:
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


class Display:
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

    def __enter__(self) -> Display:
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

    def start(self, phase: str, split: str, total: int, done: int, wins: int) -> None:
        """A phase starts (or resumes after ``done`` episodes, ``wins`` of them successes)."""
        self._n, self._wins = done, wins
        self._phase = f"{self.label}: " * bool(self.label) + f"{phase} ({split})"
        self._total = total
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
