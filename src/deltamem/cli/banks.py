"""``deltamem stats``, ``tree show``, ``export``, ``import`` and ``prune``: look at a bank,
copy it, make it forget.

Every command that reads a bank also takes a run directory (its ``bank.db``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from deltamem.cli.options import EMBEDDER, FORMAT, Bank, Json
from deltamem.errors import DeltaMemError

__all__ = ["common_start", "register", "tree_show"]

console = Console()
err_console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add ``tree show``, ``stats``, ``export``, ``import`` and ``prune`` to the app."""
    tree_app = typer.Typer(help="Look at the residual trees of a bank.", no_args_is_help=True)
    tree_app.command("show")(tree_show)
    app.add_typer(tree_app, name="tree")
    app.command()(stats)
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
    app.command()(prune)


def _open_readonly(bank: str):
    """Open a DeltaMem bank for inspection; other systems' banks get a clear error."""
    from deltamem.memories import bank_system
    from deltamem.memories.deltamem import DeltaMem

    system = bank_system(bank)
    if system != "deltamem":
        raise DeltaMemError(
            f"{bank} is a {system!r} bank; trees exist only in DeltaMem banks "
            f"(try `deltamem stats {bank}`)"
        )
    return DeltaMem.open(bank, embedder=None, readonly=True)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def common_start(texts: list[str], *, min_chars: int = 24) -> str:
    """The opening words every text shares (whitespace-normalised), when there are at
    least two texts and they are ``min_chars`` long or more; else ``""``. It ends at a
    word boundary, so what follows it in each text starts with a whole word."""
    norm = [" ".join(t.split()) for t in texts]
    if len(norm) < 2:
        return ""
    first, last = min(norm), max(norm)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    prefix = first[:n]
    if not all(len(t) == n or t[n] == " " for t in norm):
        prefix = prefix[: prefix.rfind(" ") + 1]  # back to the start of the word cut in two
    return prefix if len(prefix.strip()) >= min_chars else ""


def tree_show(
    bank: Bank,
    which: Annotated[str, typer.Option("--tree", help="task, env or both.")] = "both",
    width: Annotated[int, typer.Option(help="Characters of trigger text shown.")] = 70,
    full: Annotated[bool, typer.Option(help="Also print each node's payload.")] = False,
) -> None:
    """Print both trees: kind, label, depth, success hits, consolidated, trigger.

    The opening words that every trigger of a tree shares (a scene's "You are in the
    middle of a room. …") are printed once above it and left out of each node, so the
    part that tells nodes apart fits the width.
    """
    if which not in ("task", "env", "both"):
        raise DeltaMemError(f"--tree must be task, env or both, not {which!r}")
    mem = _open_readonly(bank)
    try:
        for name in ("task", "env") if which == "both" else (which,):
            nodes = mem.nodes(name)  # type: ignore[arg-type]
            title = "Task-Tree (skills)" if name == "task" else "Env-Tree (knowledge)"
            shared = common_start([n.trigger for n in nodes])
            heading = f"[bold]{title}[/bold] — {len(nodes)} nodes"
            if shared:
                heading += f"\n[dim]every trigger starts “{_short(shared, 2 * width)}…”[/dim]"
            root = Tree(heading)
            handles = {}
            for n in nodes:
                colour = "green" if n.label == "SUCCESS" else "red"
                flags = []
                if n.consolidated:
                    flags.append("[magenta]consolidated[/magenta]")
                if n.origin == "consolidated":
                    flags.append(f"[magenta]R* of {n.source[:8] if n.source else '?'}[/magenta]")
                label = (
                    f"[{colour}]{n.kind} {n.label}[/{colour}] d={n.depth} hits={n.success_hits} "
                    f"{' '.join(flags)} [dim]{n.id[:8]}[/dim] "
                    f"“{_trigger(n.trigger, shared, width)}”"
                ).replace("  ", " ")
                parent = handles.get(n.parent, root)
                h = parent.add(label)
                if full:
                    h.add(f"[dim]when:[/dim] {_short(n.payload.activation, 200)}")
                    h.add(f"[dim]what:[/dim] {_short(n.payload.procedure, 400)}")
                handles[n.id] = h
            console.print(root)
    finally:
        mem.close()


def _trigger(trigger: str, shared: str, width: int) -> str:
    text = " ".join(trigger.split())
    if shared and text.startswith(shared) and text[len(shared):].strip():
        return "…" + _short(text[len(shared):], width - 1)
    return _short(text, width)


def stats(
    bank: Bank,
    as_json: Json = False,
) -> None:
    """Node counts by tree, depth, kind and label; average whitespace tokens per ROOT/RESIDUAL."""
    from deltamem.memories import bank_system, open_bank

    if bank_system(bank) != "deltamem":
        other = open_bank(bank)
        try:
            console.print_json(json.dumps({"bank": str(bank), **other.stats()}, default=str))
        finally:
            other.close()
        return
    mem = _open_readonly(bank)
    try:
        s = mem.stats()
        meta = mem.store.meta()
    finally:
        mem.close()
    if as_json:
        console.print_json(json.dumps({"bank": str(bank), "meta": meta, **s}))
        return
    console.print(
        f"[bold]{bank}[/bold]  embedder {meta.get('embedder_name')} (dim "
        f"{meta.get('embedder_dim')}), schema v{meta.get('schema_version')}, "
        f"domain {meta.get('config', {}).get('domain')}, "
        f"{s['episodes_learned']} episodes learned, {s['rejections']} rejected outputs"
    )
    t = Table("tree", "nodes", "ROOT", "RESIDUAL", "SUCCESS", "FAILURE", "consolidated", "by depth")
    for name in ("task", "env"):
        k, lab = s["kind"][name], s["label"][name]
        depth = ", ".join(f"{d}:{c}" for d, c in s["depth_histogram"][name].items()) or "-"
        t.add_row(
            name,
            str(s["nodes"][name]),
            str(k.get("ROOT", 0)),
            str(k.get("RESIDUAL", 0)),
            str(lab.get("SUCCESS", 0)),
            str(lab.get("FAILURE", 0)),
            str(s["consolidated"][name]),
            depth,
        )
    console.print(t)
    tok = s["avg_tokens"]
    console.print(
        f"avg whitespace tokens per node (paper Table 5): ROOT {tok['ROOT']}, "
        f"RESIDUAL {tok['RESIDUAL']}"
    )


def export_cmd(
    bank: Bank,
    out: Annotated[Path, typer.Argument(help="JSONL file to write (a folder with --format "
                                        "skills).")],
    format: Annotated[str, FORMAT()] = "jsonl",
) -> None:
    """Write a bank's records to a JSONL file, or its skills as SKILL.md folders."""
    if format == "skills":
        from deltamem.skills import export_skills

        n = export_skills(bank, out)
        console.print(f"wrote {n} skills to {out}", markup=False, highlight=False)
        return
    if format != "jsonl":
        raise typer.BadParameter(f"format must be jsonl or skills, not {format!r}")
    from deltamem.portable import export_bank

    n = export_bank(bank, out)
    console.print(f"wrote {n} records to {out} (between a header and a trailer that "
                  "`deltamem import` checks)")


def import_cmd(
    source: Annotated[Path, typer.Argument(help="JSONL file made by `deltamem export` (a "
                                           "folder of SKILL.md folders with --format skills).")],
    bank: Annotated[str, typer.Argument(help="New bank to create (must not hold nodes; with "
                                        "--format skills it may).")],
    format: Annotated[str, FORMAT()] = "jsonl",
    embedder: Annotated[str | None, EMBEDDER(
        "with --format skills, the one the export's manifest names, else the bank's, else "
        "minilm")] = None,
    partial: Annotated[bool, typer.Option(
        "--partial", help="Import what a cut export holds (its trailer missing or "
        "disagreeing; with --format skills, the skills whose files agree with the manifest) "
        "and say what was skipped; without it such an export is refused.")] = False,
) -> None:
    """Load a JSONL export into a new bank, or SKILL.md folders into a bank.

    A JSONL export must be whole: its trailer's record counts and checksum must agree with
    the records (a file cut by a full disk or a dropped connection is refused, naming what
    is missing). Exports written before exports had a trailer import with a warning. A
    skills folder must agree with its manifest (counted and checksummed the same way).
    """
    if format == "skills":
        from deltamem.embed.factory import make_embedder
        from deltamem.skills import import_skills, skills_embedder

        emb = make_embedder(embedder or skills_embedder(source, bank))
        r = import_skills(source, bank, embedder=emb, partial=partial)
        console.print(f"imported {r.skills} skills and {r.failures} known failures into "
                      f"{bank}" + (f"; skipped {len(r.skipped)}: " + "; ".join(r.skipped)
                                  if r.skipped else ""), markup=False, highlight=False)
        return
    if format != "jsonl":
        raise typer.BadParameter(f"format must be jsonl or skills, not {format!r}")
    from deltamem.portable import import_bank

    n = import_bank(source, bank, partial=partial,
                    on_note=lambda note: err_console.print(
                        f"warning: {note}", markup=False, highlight=False, soft_wrap=True))
    console.print(f"imported {n} nodes into {bank}")


def prune(
    bank: Bank,
    policy: Annotated[list[str], typer.Option(
        "--policy", "-p", help="unused:N (no learn used it in the last N episodes) or "
        "harmful[:K] (failed episodes followed it K more times than successful ones; "
        "K=2); repeatable.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be "
                                          "removed.")] = False,
    as_json: Json = False,
) -> None:
    """Remove the nodes a forgetting policy names, each with its subtree.

    Every removal is kept in the bank's audit trail (policy, reason, the node's payload).
    """
    from deltamem.memories import bank_system
    from deltamem.memories.deltamem import DeltaMem

    if bank_system(bank) != "deltamem":
        raise DeltaMemError(f"{bank} is not a DeltaMem bank; prune works on DeltaMem banks")
    mem = DeltaMem.open(bank, embedder=None, readonly=dry_run)
    try:
        entries = mem.prune(policy, dry_run=dry_run)
        learned = mem.store.learned_count()
    finally:
        mem.close()
    if as_json:
        console.print_json(json.dumps({"bank": str(bank), "dry_run": dry_run,
                                       "episodes_learned": learned,
                                       "nodes": [e.to_dict() for e in entries]}))
        return
    t = Table("tree", "node", "kind", "d", "c(v)", "f(v)", "last used", "policy", "reason",
              "content")
    for e in entries:
        t.add_row(e.tree, e.node_id[:8], f"{e.kind} {e.label}", str(e.depth),
                  str(e.success_hits), str(e.failure_hits), str(e.last_used), e.policy,
                  e.reason, _short(e.text, 50))
    if entries:
        console.print(t)
    counts = {tree: sum(e.tree == tree for e in entries) for tree in ("task", "env")}
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(entries)} nodes (task {counts['task']}, env {counts['env']}) "
                  f"of {bank} ({learned} episodes learned)"
                  + ("" if dry_run or not entries else "; each is in the bank's audit trail"))
