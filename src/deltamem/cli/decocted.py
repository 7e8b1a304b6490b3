"""CLI commands of the decocted-experience memories: ``deltamem decocted ...``.

``register(app)`` adds a ``decocted`` command group with:

* ``consolidate BANK OUT --size N``: k-means consolidation of a lesson bank into a
  new bank of N entries, printing what was kept (§3.2);
* ``quality RUN_DIR BASELINE_DIR``: Pearson r between the logged context quality Q
  and the per-task improvement over a no-memory run, and r as a function of λ (§4).

Library errors propagate; the main CLI turns them into one-line messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from deltamem.cli import options as opts

__all__ = ["register"]

console = Console()


def register(app: typer.Typer) -> None:
    """Add the ``decocted`` command group to ``app``."""
    group = typer.Typer(help="Decocted-experience memories: consolidation and context quality.",
                        no_args_is_help=True)

    @group.command("consolidate")
    def consolidate_cmd(
        bank: Annotated[Path, typer.Argument(help="A lessons / lessons-kmeans / concept-tree "
                                                  "bank (.db), or the run directory holding it.")],
        out: Annotated[Path, typer.Argument(help="The consolidated bank to create.")],
        size: Annotated[int, typer.Option("--size", "-n", help="Entries to keep (N').")],
        embedder: Annotated[str, opts.EMBEDDER()] = "minilm",
        alpha: Annotated[float, typer.Option(help="Weight of the lesson embedding.")] = 0.5,
        seed: Annotated[int, opts.KMEANS_SEED()] = 0,
    ) -> None:
        """Keep the entry nearest each of N' k-means centroids; write them to a new bank."""
        from deltamem.embed.factory import make_embedder
        from deltamem.memories.decocted.kmeans import consolidate_bank
        from deltamem.store.location import resolve_bank

        bank = Path(resolve_bank(bank))
        result = consolidate_bank(bank, out, embedder=make_embedder(embedder), size=size,
                                  alpha=alpha, seed=seed)
        t = Table("cluster", "members", "distance", "kept entry", "task",
                  title=f"kept {len(result.kept)} of {result.total} entries → {result.out}")
        for k in result.kept:
            t.add_row(str(k.cluster), str(k.cluster_size), f"{k.distance:.3f}", k.id[:8],
                      k.task[:70])
        console.print(t)

    @group.command("quality")
    def quality_cmd(
        run_dir: Annotated[Path, typer.Argument(help="Run directory of a decocted memory.")],
        baseline_dir: Annotated[Path, typer.Argument(help="Run directory of memory 'none' on "
                                                          "the same tasks.")],
        lam: Annotated[float, typer.Option("--lambda", help="λ of Q = Rel + λ·Div.")] = 0.6,
        phase: Annotated[str | None, typer.Option(help="Only this phase of both runs.")] = None,
        out: Annotated[Path | None, typer.Option(help="Also write the Markdown here.")] = None,
        as_json: opts.Json = False,
    ) -> None:
        """Correlate Q with the improvement over no memory (Pearson r, and r over λ)."""
        from deltamem.analysis.context_quality import correlation_report

        rep = correlation_report(run_dir, baseline_dir, lam=lam, phase=phase)
        md = rep.markdown()
        if out is not None:
            out.write_text(md, encoding="utf-8")
        if as_json:
            console.print_json(json.dumps(rep.to_dict()))
        else:
            console.print(md)

    app.add_typer(group, name="decocted")
