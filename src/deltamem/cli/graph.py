"""``deltamem graph show BANK|RUN_DIR``: AriGraph banks (``register(app)`` adds it).

``graph show`` prints, for every graph of an AriGraph bank (one per task in
the default ``task`` scope): its size and its growth per step — triplets added
and replaced, and the totals after the step (the paper's Figure 5).
``--export PATH`` also writes the graph(s) as GraphML (``.graphml``) or JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

__all__ = ["register", "show"]

console = Console()


def show(
    path: Annotated[Path, typer.Argument(help="An AriGraph bank (.db) or a run directory.")],
    key: Annotated[str | None, typer.Option(help="Only the graph of this task id.")] = None,
    steps: Annotated[bool, typer.Option("--steps/--no-steps",
                                        help="Print the growth table per step.")] = True,
    export: Annotated[Path | None, typer.Option(
        help="Write the graph to this .graphml or .json file (with several graphs, the key "
             "is added to the name).")] = None,
) -> None:
    """Graph size and growth per step (triplets added / replaced)."""
    from deltamem.errors import ConfigError
    from deltamem.memories.arigraph.arigraph import load_graphs

    graphs = load_graphs(path)
    if key is not None:
        if key not in graphs:
            raise ConfigError(f"no graph {key!r} in {path}; keys: {', '.join(sorted(graphs))}")
        graphs = {key: graphs[key]}
    if not graphs:
        console.print(f"{path}: no graph stored yet")
    for k, g in sorted(graphs.items()):
        added = sum(r.added for r in g.growth)
        replaced = sum(r.replaced for r in g.growth)
        console.print(f"[bold]{k}[/bold]: {len(g)} triplets, {len(g.vertices)} vertices, "
                      f"{len(g.observations)} observations; {added} added, {replaced} replaced")
        if steps and g.growth:
            t = Table("step", "action", "added", "replaced", "triplets", "vertices")
            for r, obs in zip(g.growth, g.observations, strict=False):
                t.add_row(str(r.step), obs.action or "(start)", str(r.added), str(r.replaced),
                          str(r.triplets), str(r.vertices))
            console.print(t)
        if export is not None:
            out = export if len(graphs) == 1 else export.with_name(
                f"{export.stem}-{k}{export.suffix}")
            if out.suffix == ".graphml":
                g.to_graphml(out)
            elif out.suffix == ".json":
                g.to_json(out)
            else:
                raise ConfigError(f"export to .graphml or .json, got {out.name!r}")
            console.print(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add the ``graph`` command group (``graph show``) to ``app``."""
    graph_app = typer.Typer(help="Look at AriGraph memory graphs.", no_args_is_help=True)
    graph_app.command("show")(show)
    app.add_typer(graph_app, name="graph")
