"""Skills that travel: a bank's Task-Tree written as SKILL.md folders, and read back.

The `Agent Skills <https://agentskills.io/specification>`_ convention: a skill is a folder
holding ``SKILL.md``, YAML front matter (``name``: lowercase letters, digits and hyphens, at
most 64 characters, the folder's name; ``description``: at most 1024 characters; ``metadata``:
a string → string map) and a Markdown body. :func:`export_skills` writes one folder per
SUCCESS node of the Task-Tree:

* ``name``: a slug of the node's trigger and the first 8 characters of its id;
* ``description``: ``Use when the task is: <trigger>.`` and the skill's activation condition;
* the body: the trigger as title, *When to use* (activation), *Procedure* (the steps the
  root → node chain composes to, Eq. 7, numbered), *Done when* (termination), *Known
  failures* (the chain's failure records and the node's failed children, each a
  ``WARNING`` line), *Provenance* (bank, node and chain ids, episodes, c(v), f(v), time);
* ``metadata``: ``deltamem-schema`` (:data:`SKILL_SCHEMA_VERSION`), ``deltamem-trigger``,
  ``deltamem-node``, ``deltamem-chain``, ``deltamem-episode``, ``deltamem-success-hits``,
  ``deltamem-failure-hits``, ``deltamem-tree``;
* ``deltamem.json`` beside it: the same in JSON, with each known failure's trigger (what
  an import needs to place it).

The export folder also holds :data:`MANIFEST_FILE`: format, schema version, counts (skills,
known failures), the skills in the source bank's tie order (deepest, then newest: the order
an import writes them in), the source bank's trigger settings (adopted by an import into a
new bank), the SHA-256 of every file and one checksum over them, so a copy can be checked
(:func:`read_manifest`). The counting and the checksum are the JSONL exports' own
(:class:`deltamem.store.frames.Tally`, :func:`~deltamem.store.frames.compare`): each file is
one record ``{"type": "skill" | "sidecar", "path": …, "sha256": …}``, in path order, and the
manifest keeps their counts by type (``file_counts``) and the tally's SHA-256
(``checksum``). A folder that is not whole (a file missing or altered, a skill folder the
manifest does not list) is refused with :class:`~deltamem.errors.IncompleteExportError`
naming what is missing, as a cut JSONL export is, and nothing is written; with
``partial=True`` (``deltamem import --format skills --partial``) the whole skills are
imported and the others reported as skipped.

:func:`import_skills` reads such folders (a folder of skill folders, or one skill folder)
into a DeltaMem bank: each skill becomes a Task-Tree ROOT labelled SUCCESS whose trigger
is ``deltamem-trigger`` (else the title, else the description) and whose procedure is the
numbered steps, embedded with the bank's embedder; each known failure a FAILURE residual
under it, with its own trigger (else the warning's text). A recall of a task on the
imported bank therefore shows the procedure the original bank's chain composed to (and a
failure's warning under it). Folders written by other tools import too: what the body has
under *Procedure* (numbered or bulleted lines) is the procedure; without one, the whole
body's numbered lines are. A manifest that disagrees with itself (its file list, counts
and checksum) is refused (:class:`~deltamem.errors.InvalidImportError`); a skill without a
procedure is skipped and reported. Every import is written to the bank's audit trail.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem import telemetry
from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.embed.base import Embedder
from deltamem.errors import IncompleteExportError, InvalidImportError, InvalidInputError
from deltamem.extract.residual import chain_steps, numbered
from deltamem.store.frames import Tally, compare, describe_missing
from deltamem.types import new_id

__all__ = [
    "MANIFEST_FILE",
    "SKILL_FILE",
    "SKILL_SCHEMA_VERSION",
    "Skill",
    "SkillImport",
    "export_skills",
    "import_skills",
    "read_manifest",
    "read_skill",
    "render_skill",
    "skills_embedder",
]

SKILL_FILE = "SKILL.md"
SIDECAR_FILE = "deltamem.json"
MANIFEST_FILE = "manifest.json"
SKILL_SCHEMA_VERSION = 1
"""Version of what :func:`export_skills` writes (front matter keys, sidecar, manifest)."""
FORMAT = "deltamem-skills"
_LAYOUT = ("domain", "task_trigger", "env_trigger", "d_max", "skill_words", "skill_deltas",
           "tie_rule", "task_tie_rule", "tau_task")
"""The source bank's settings an import into a new bank adopts (how triggers are made and
matched), kept in the manifest."""
_NAME_MAX, _DESC_MAX = 64, 1024


@dataclass(frozen=True)
class Failure:
    """A known failure of a skill: its warning text and the trigger it was learned under."""

    warning: str
    trigger: str = ""
    node_id: str = ""


@dataclass(frozen=True)
class Skill:
    """One skill, as written to (or read from) a SKILL.md folder."""

    name: str
    trigger: str
    steps: tuple[str, ...]
    activation: str = ""
    termination: str = ""
    failures: tuple[Failure, ...] = ()
    provenance: Mapping[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        text = f"Use when the task is: {self.trigger.rstrip('.')}."
        if self.activation and self.activation.strip() != self.trigger.strip():
            text += f" {self.activation}"
        return _clip(" ".join(text.split()), _DESC_MAX)


@dataclass
class SkillImport:
    """What :func:`import_skills` did."""

    skills: int = 0
    failures: int = 0
    skipped: list[str] = field(default_factory=list)
    node_ids: list[str] = field(default_factory=list)


# -- writing --------------------------------------------------------------------------------

def _slug(text: str, node_id: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    suffix = re.sub(r"[^a-z0-9]", "", node_id.lower())[:8] or "skill"
    head = words[: _NAME_MAX - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}" if head else suffix


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _failure_text(node: Node) -> str:
    p = node.payload
    return " ".join(x for x in (p.activation, p.procedure, p.termination) if x).strip()


def skills_of(mem: Any, *, bank: str = "") -> list[Skill]:
    """The skills of a DeltaMem bank: one per SUCCESS node of its Task-Tree, in insertion
    order (module doc)."""
    nodes = mem.nodes("task")
    children: dict[str, list[Node]] = {}
    for n in nodes:
        if n.parent is not None:
            children.setdefault(n.parent, []).append(n)
    out: list[Skill] = []
    for node in sorted(nodes, key=lambda n: (n.depth, n.seq)):  # Eq. 6 ties: deepest, newest
        if node.label != "SUCCESS":
            continue
        chain = mem.chain(node.id)
        steps = tuple(chain_steps([n.entry() for n in chain]))
        if not steps:
            continue
        failed = [n for n in chain if n.label == "FAILURE"]
        failed += [c for c in children.get(node.id, []) if c.label == "FAILURE"]
        root = chain[0]
        prov = {
            "deltamem-schema": str(SKILL_SCHEMA_VERSION),
            "deltamem-tree": "task",
            "deltamem-trigger": node.trigger,
            "deltamem-node": node.id,
            "deltamem-chain": " ".join(n.id for n in chain),
            "deltamem-episode": node.episode_id or "",
            "deltamem-success-hits": str(node.success_hits),
            "deltamem-failure-hits": str(getattr(node, "failure_hits", 0)),
            "deltamem-created-at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                 time.gmtime(node.created_at or 0)),
        }
        if bank:
            prov["deltamem-bank"] = bank
        out.append(Skill(
            name=_slug(node.trigger, node.id), trigger=node.trigger, steps=steps,
            activation=root.payload.activation if node.kind == "RESIDUAL" and not
            node.payload.activation else node.payload.activation,
            termination=node.payload.termination or root.payload.termination,
            failures=tuple(Failure(_failure_text(f), f.trigger, f.id) for f in failed),
            provenance=prov,
        ))
    return out


def render_skill(skill: Skill) -> str:
    """The text of a skill's ``SKILL.md``."""
    import yaml

    front = {"name": skill.name, "description": skill.description,
             "metadata": {k: str(v) for k, v in skill.provenance.items()}}
    body = [f"# {skill.trigger}", ""]
    if skill.activation:
        body += ["## When to use", "", skill.activation, ""]
    body += ["## Procedure", "", numbered(skill.steps), ""]
    if skill.termination:
        body += ["## Done when", "", skill.termination, ""]
    if skill.failures:
        body += ["## Known failures", ""]
        body += [f"- WARNING: {' '.join(f.warning.split())}" for f in skill.failures]
        body += [""]
    prov = skill.provenance
    if prov:
        body += ["## Provenance", "",
                 f"Exported by deltamem from node `{prov.get('deltamem-node', '')}` of the "
                 f"Task-Tree{' of ' + prov['deltamem-bank'] if 'deltamem-bank' in prov else ''}"
                 f" (chain {prov.get('deltamem-chain', '')}); learned from episode "
                 f"`{prov.get('deltamem-episode', '')}`, followed to success "
                 f"{prov.get('deltamem-success-hits', '0')} times and to failure "
                 f"{prov.get('deltamem-failure-hits', '0')} times.", ""]
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{head}---\n\n" + "\n".join(body).rstrip() + "\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export_skills(bank: str | Path, out_dir: str | Path) -> int:
    """Write the SUCCESS skills of ``bank``'s Task-Tree under ``out_dir`` (created; it must
    not hold a manifest already), one folder each, and the manifest; returns the number of
    skills. ``bank`` may be a run directory."""
    from deltamem.memories.deltamem import DeltaMem
    from deltamem.store.location import resolve_bank

    location = resolve_bank(bank)
    out = Path(out_dir)
    if (out / MANIFEST_FILE).exists():
        raise InvalidInputError(f"{out} already holds a skills export ({MANIFEST_FILE}); "
                                "choose an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    mem = DeltaMem.open(location, embedder=None, readonly=True)
    try:
        skills = skills_of(mem, bank=Path(str(location)).name)
        meta = mem.store.meta()
        embedder = meta.get("embedder_name")
        config = meta.get("config") or {}
    finally:
        mem.close()
    names: set[str] = set()
    order: list[str] = []
    files: dict[str, str] = {}
    for skill in skills:
        name = skill.name
        while name in names:  # the same trigger and id prefix: never in practice
            name = _slug(skill.trigger, new_id())
        names.add(name)
        order.append(name)
        folder = out / name
        folder.mkdir(exist_ok=True)
        md = render_skill(Skill(**{**skill.__dict__, "name": name})).encode("utf-8")
        side = json.dumps({
            "schema": SKILL_SCHEMA_VERSION, "name": name, "trigger": skill.trigger,
            "steps": list(skill.steps), "activation": skill.activation,
            "termination": skill.termination,
            "failures": [f.__dict__ for f in skill.failures],
            "provenance": dict(skill.provenance),
        }, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
        for fname, data in ((SKILL_FILE, md), (SIDECAR_FILE, side)):
            (folder / fname).write_bytes(data)
            files[f"{name}/{fname}"] = _sha(data)
    manifest = {
        "format": FORMAT, "version": SKILL_SCHEMA_VERSION, "source": str(location),
        "embedder": embedder, "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                           time.gmtime()),
        "counts": {"skills": len(skills),
                   "known_failures": sum(len(s.failures) for s in skills)},
        "skills": order,
        "bank_config": {k: config[k] for k in _LAYOUT if k in config},
        "files": dict(sorted(files.items())),
        "file_counts": dict(sorted(_tally(files).counts.items())),
        "checksum": _tally(files).sha256,
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return len(skills)


def _file_record(rel: str, digest: str) -> dict[str, str]:
    """One file of an export as the record its tally counts."""
    kind = "skill" if rel.endswith("/" + SKILL_FILE) or rel == SKILL_FILE else "sidecar"
    return {"type": kind, "path": rel, "sha256": digest}


def _tally(files: Mapping[str, str]) -> Tally:
    """The :class:`~deltamem.store.frames.Tally` of ``files`` (path → SHA-256), in path
    order: counts by type and the checksum the manifest keeps."""
    tally = Tally()
    for rel in sorted(files):
        tally.add(_file_record(rel, files[rel]))
    return tally


# -- reading --------------------------------------------------------------------------------

def read_manifest(folder: str | Path, *, partial: bool = False) -> dict[str, Any] | None:
    """The manifest of an export folder after checking every file against it (``None``
    when there is none).

    A manifest that disagrees with itself is :class:`InvalidImportError`; a folder that is
    not whole (files missing or altered, skill folders not listed) is
    :class:`IncompleteExportError` naming what, unless ``partial``: then the returned
    manifest's ``incomplete`` lists the skill folders to leave out and ``notes`` says why.
    """
    path = Path(folder) / MANIFEST_FILE
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidImportError(f"{path} is not a skills manifest: {e}") from e
    if manifest.get("format") != FORMAT or manifest.get("version") != SKILL_SCHEMA_VERSION:
        raise InvalidImportError(f"{path}: format {manifest.get('format')!r} version "
                                 f"{manifest.get('version')!r} is not {FORMAT} "
                                 f"{SKILL_SCHEMA_VERSION}")
    listed = _tally(files)
    expected = manifest.get("file_counts")
    if listed.sha256 != manifest.get("checksum"):
        raise InvalidImportError(f"{path}: the checksum does not match its file list")
    if not isinstance(expected, dict) or compare(expected, listed.counts):
        raise InvalidImportError(f"{path}: file_counts {expected!r} do not match its file "
                                 f"list ({dict(listed.counts)})")
    counts = manifest.get("counts", {})
    if counts.get("skills") != listed.counts.get("skill", 0):
        raise InvalidImportError(f"{path}: counts.skills {counts.get('skills')} but "
                                 f"{listed.counts.get('skill', 0)} skills listed")
    return {**manifest, **_check_folder(Path(folder), files, expected, partial)}


def _check_folder(folder: Path, files: Mapping[str, str], expected: Mapping[str, int],
                  partial: bool) -> dict[str, Any]:
    """The folder's files against the manifest's, counted and checksummed as the manifest
    was (:func:`_tally`); see :func:`read_manifest`."""
    got = Tally()
    missing: list[str] = []
    altered: list[str] = []
    for rel in sorted(files):
        f = folder / rel
        if not f.is_file():
            missing.append(rel)
        elif _sha(f.read_bytes()) != files[rel]:
            altered.append(rel)
        else:
            got.add(_file_record(rel, files[rel]))
    listed = {rel.split("/")[0] for rel in files}
    extra = sorted(p.name for p in folder.iterdir()
                   if p.is_dir() and (p / SKILL_FILE).exists() and p.name not in listed)
    if got.sha256 == _tally(files).sha256 and not extra:
        return {"incomplete": [], "notes": []}
    problems: list[str] = []
    lost = _kinds(missing)
    gone = compare(expected, {k: n - lost.get(k, 0) for k, n in expected.items()})
    if missing:
        problems.append(f"missing {describe_missing(gone)} ({_some(missing)})")
    if altered:
        problems.append(("1 file differs" if len(altered) == 1 else
                         f"{len(altered)} files differ") + f" from the manifest ({_some(altered)})")
    if extra:
        problems.append(f"{len(extra)} skill folder(s) the manifest does not list "
                        f"({_some(extra)})")
    what = "; ".join(problems)
    if not partial:
        raise IncompleteExportError(
            f"{folder} is not whole: {what}. Nothing was imported; import what is there "
            "with --partial (partial=True)")
    bad = sorted({rel.split("/")[0] for rel in missing + altered} | set(extra))
    return {"incomplete": bad, "notes": [f"{folder} is not whole: {what}"]}


def _kinds(rels: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for rel in rels:
        kind = _file_record(rel, "")["type"]
        out[kind] = out.get(kind, 0) + 1
    return out


def _some(names: Sequence[str], n: int = 3) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.*\S)\s*$")
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.DOTALL)


def _sections(body: str) -> tuple[str, dict[str, str]]:
    title, current, out = "", "", {}
    lines: list[str] = []
    for line in body.splitlines():
        if line.startswith("# ") and not title:
            title = line[2:].strip()
            continue
        if line.startswith("## "):
            out[current] = "\n".join(lines).strip()
            current, lines = line[3:].strip().lower(), []
            continue
        lines.append(line)
    out[current] = "\n".join(lines).strip()
    return title, out


def read_skill(folder: str | Path) -> Skill:
    """Read one skill folder (``SKILL.md`` and, when present, ``deltamem.json``).

    Raises :class:`InvalidImportError` when ``SKILL.md`` is missing, has no front matter,
    or lacks ``name`` / ``description``.
    """
    import yaml

    folder = Path(folder)
    path = folder / SKILL_FILE
    if not path.exists():
        raise InvalidImportError(f"{folder} holds no {SKILL_FILE}")
    m = _FRONT.match(path.read_text(encoding="utf-8"))
    if m is None:
        raise InvalidImportError(f"{path} has no YAML front matter (--- ... ---)")
    try:
        front = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as e:
        raise InvalidImportError(f"{path}: bad front matter: {e}") from e
    if not isinstance(front, dict) or not front.get("name") or not front.get("description"):
        raise InvalidImportError(f"{path}: front matter needs name and description")
    meta = front.get("metadata") or {}
    meta = {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    side: dict[str, Any] = {}
    if (folder / SIDECAR_FILE).exists():
        try:
            side = json.loads((folder / SIDECAR_FILE).read_text(encoding="utf-8"))
        except ValueError as e:
            raise InvalidImportError(f"{folder / SIDECAR_FILE}: {e}") from e
    title, sections = _sections(m.group(2))
    proc = sections.get("procedure")
    steps = [x.group(1) for line in (proc if proc is not None else m.group(2)).splitlines()
             if (x := _STEP.match(line)) and (proc is not None or line.lstrip()[0].isdigit())]
    if side.get("steps"):
        steps = [str(s) for s in side["steps"]]
    warnings = [x.group(1).removeprefix("WARNING:").strip()
                for line in sections.get("known failures", "").splitlines()
                if (x := _STEP.match(line))]
    failures = tuple(Failure(**{k: str(v) for k, v in f.items()
                                if k in ("warning", "trigger", "node_id")})
                     for f in side.get("failures", [])) or tuple(Failure(w) for w in warnings)
    trigger = (side.get("trigger") or meta.get("deltamem-trigger") or title
               or str(front["description"]))
    return Skill(
        name=str(front["name"]), trigger=str(trigger), steps=tuple(steps),
        activation=str(side.get("activation", sections.get("when to use", ""))),
        termination=str(side.get("termination", sections.get("done when", ""))),
        failures=failures, provenance=meta,
    )


def _skill_folders(source: Path, manifest: Mapping[str, Any] | None) -> list[Path]:
    """The skill folders in import order: the manifest's (the source bank's tie order),
    else by name."""
    if (source / SKILL_FILE).exists():
        return [source]
    found = sorted(p for p in source.iterdir() if (p / SKILL_FILE).exists())
    if manifest and isinstance(manifest.get("skills"), list):
        rank = {name: i for i, name in enumerate(manifest["skills"])}
        found.sort(key=lambda p: (rank.get(p.name, len(rank)), p.name))
    return found


def import_skills(source: str | Path, bank: str | Path, *, embedder: Embedder,
                  domain: str | None = None, partial: bool = False) -> SkillImport:
    """Read the skill folders under ``source`` into ``bank`` (a DeltaMem bank, created when
    missing) with ``embedder`` (the bank's); see the module doc. All in one transaction.
    A folder that is not whole is :class:`IncompleteExportError` unless ``partial`` (then
    the whole skills are imported and the others listed in ``skipped``)."""
    from deltamem.memories.deltamem import DeltaMem

    src = Path(source)
    if not src.is_dir():
        raise InvalidInputError(f"{src} is not a folder of skills")
    manifest = read_manifest(src, partial=partial)
    skills: list[Skill] = []
    report = SkillImport()
    incomplete = set((manifest or {}).get("incomplete") or ())
    report.skipped += [f"{name}: not whole (see the manifest)" for name in sorted(incomplete)]
    for folder in _skill_folders(src, manifest):
        if folder.name in incomplete:
            continue
        s = read_skill(folder)
        if not s.steps:
            report.skipped.append(f"{folder.name}: no procedure steps")
            continue
        skills.append(s)
    if not skills and not report.skipped and manifest is None:
        raise InvalidInputError(f"{src} holds no skill folder ({SKILL_FILE})")
    kwargs: dict[str, Any] = dict((manifest or {}).get("bank_config") or {})
    if domain:
        kwargs["domain"] = domain
    is_new = not str(bank).startswith("postgresql") and not Path(bank).exists()
    mem = DeltaMem.open(bank, embedder=embedder, **(kwargs if is_new else {}))
    try:
        with telemetry.memory_span("create_memory", system="deltamem",
                                   store=Path(str(bank)).name,
                                   attributes={"deltamem.import.format": "skills"}) as span:
            _insert(mem, skills, embedder, src, report)
            telemetry.set_attributes(span, {"gen_ai.memory.record.count":
                                            report.skills + report.failures})
    finally:
        mem.close()
    return report


def _insert(mem: Any, skills: Sequence[Skill], embedder: Embedder, src: Path,
            report: SkillImport) -> None:
    """Write ``skills`` into ``mem``'s Task-Tree in one transaction (module doc)."""
    texts = [s.trigger for s in skills] + [f.trigger or f.warning for s in skills
                                           for f in s.failures]
    vecs = np.asarray(embedder.embed_passages(texts), dtype=np.float32) if texts else []
    k = len(skills)
    with mem.store.transaction():
        for i, s in enumerate(skills):
            root = mem.store.insert_node(Node(
                id=new_id(), tree="task", kind="ROOT", label="SUCCESS", parent=None,
                depth=1, trigger=s.trigger, embedding=vecs[i],
                payload=Payload(s.activation or s.trigger, numbered(s.steps), s.termination),
                origin="imported", created_at=time.time(),
                # the record a tie rule reads (core.tree, "record") comes along
                success_hits=_count(s.provenance.get("deltamem-success-hits")),
                failure_hits=_count(s.provenance.get("deltamem-failure-hits")),
            ))
            report.node_ids.append(root.id)
            report.skills += 1
            for f in s.failures:
                mem.store.insert_node(Node(
                    id=new_id(), tree="task", kind="RESIDUAL", label="FAILURE",
                    parent=root.id, depth=2, trigger=f.trigger or f.warning,
                    embedding=vecs[k], payload=Payload(f.warning, "", ""),
                    origin="imported", created_at=time.time(),
                ))
                k += 1
                report.failures += 1
            mem.store.add_audit(**_audit(root, s, src))
    mem.bank.reload(force=True)


def _count(text: str | None) -> int:
    """A hit count from a skill's provenance (0 when absent or not a count)."""
    try:
        return max(0, int(str(text)))
    except ValueError:
        return 0


def _audit(root: Node, skill: Skill, src: Path) -> dict[str, Any]:
    return {"episode_id": "", "node_id": root.id, "tree": "task", "action": "import",
            "policy": "skills", "reason": f"skill {skill.name} from {src}",
            "record": {"trigger": skill.trigger, "steps": list(skill.steps),
                       "failures": len(skill.failures),
                       "source_node": skill.provenance.get("deltamem-node", "")}}


def skills_embedder(source: str | Path, bank: str | Path) -> str:
    """The embedder spec an import should use: the one ``bank`` was built with when it
    exists, else the one the export's manifest names, else ``minilm``."""
    if not str(bank).startswith("postgresql") and Path(bank).exists():
        from deltamem.memories.deltamem import DeltaMem

        mem = DeltaMem.open(bank, embedder=None, readonly=True)
        try:
            name = mem.store.meta().get("embedder_name")
        finally:
            mem.close()
    else:
        path = Path(source) / MANIFEST_FILE
        name = json.loads(path.read_text(encoding="utf-8")).get("embedder") \
            if path.exists() else None
    return _spec_of_name(name) if name else "minilm"


def _spec_of_name(name: str) -> str:
    """The embedder spec whose embedder has ``name`` (hashing-N, MiniLM, st:MODEL)."""
    from deltamem.errors import ConfigError

    if m := re.fullmatch(r"hashing-(\d+)", name):
        return f"hashing:{m.group(1)}"
    if name == "sentence-transformers/all-MiniLM-L6-v2":
        return "minilm"
    if "/" in name:
        return f"st:{name}"
    if name.lower().startswith("wordllama"):
        return "wordllama"
    raise ConfigError(f"cannot tell the embedder spec of {name!r}; give --embedder")


def steps_of(skills: Sequence[Skill]) -> dict[str, tuple[str, ...]]:
    """Trigger → steps (what a round trip must keep)."""
    return {s.trigger: s.steps for s in skills}
