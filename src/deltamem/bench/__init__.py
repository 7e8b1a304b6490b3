"""Benchmark harness: run the recall → play → learn loop over a task stream, then report.

The whole surface the CLI needs::

    from deltamem.bench import load_config, report, run

    result = run(load_config("run.toml", episodes=20))
    report(result.run_dir)
"""

from deltamem.bench.config import RunConfig, load_config, parse_option, parse_options
from deltamem.bench.report import report
from deltamem.bench.results import PhaseSummary, RunResult, read_episodes
from deltamem.bench.runner import run

__all__ = [
    "PhaseSummary",
    "RunConfig",
    "RunResult",
    "load_config",
    "parse_option",
    "parse_options",
    "read_episodes",
    "report",
    "run",
]
