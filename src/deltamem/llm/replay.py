"""Record LLM calls to a JSONL file and replay them bit for bit.

Contract:

* A request's key is the SHA-256 of the canonical JSON of ``(messages, schema,
  choices, max_tokens, temperature, model, purpose)`` plus an *occurrence
  index*: the n-th identical request made through this wrapper gets index n.
  A run that makes the same calls in the same order therefore replays exactly,
  including repeated identical calls that got different answers.
* The file is append-only JSONL, one record per line::

      {"v": 1, "key": "<sha256>:<n>", "purpose": "act", "model": "local:...",
       "completion": {"text": ..., "prompt_tokens": ..., "completion_tokens": ...,
                      "model": ..., "estimated": ...}}

  Each record is flushed and fsynced before the call returns, so a crash loses
  at most the record being written. A torn (unparsable) last line is ignored
  on load and cut off before the next append (a complete record missing
  only its newline is kept); a bad line elsewhere raises
  :class:`~deltamem.errors.LLMError`. When a key occurs twice, the last record wins.
* Modes: ``record`` always calls ``inner`` and appends; ``replay`` never calls
  ``inner`` and raises :class:`~deltamem.errors.LLMError` (naming the purpose)
  on a miss; ``auto`` replays hits and records misses.
* Replayed completions are equal to the recorded ones (same text, token counts,
  model, ``estimated`` flag), so usage is counted exactly as in the recorded run.
* With ``inner=None`` (replay only), the model name in the key is ``model`` if
  given, else the single model name found in the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from deltamem.errors import ConfigError, LLMError
from deltamem.llm.base import BaseLLM, Completion, LLMClient, Message

log = logging.getLogger(__name__)

Mode = Literal["record", "replay", "auto"]
_MODES = ("record", "replay", "auto")
FORMAT_VERSION = 1


def request_hash(
    messages: Sequence[Message],
    *,
    schema: Mapping[str, Any] | None,
    choices: Sequence[str] | None,
    max_tokens: int,
    temperature: float,
    model: str,
    purpose: str,
) -> str:
    """Stable SHA-256 hex digest of one request (without the occurrence index)."""
    payload = {
        "messages": [[m["role"], m["content"]] for m in messages],
        "schema": schema,
        "choices": list(choices) if choices is not None else None,
        "max_tokens": max_tokens,
        "temperature": float(temperature),
        "model": model,
        "purpose": purpose,
    }
    canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                       allow_nan=False, default=_reject)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _reject(obj: object) -> Any:
    raise ConfigError(f"LLM request is not JSON-serialisable (cannot be cached): {obj!r}")


class RecordReplayLLM(BaseLLM):
    """Wraps an LLM client with a record/replay cache file.

    Args:
        inner: the real client (may be ``None`` only in ``replay`` mode).
        path: the JSONL cache file (created with its parent folder on first record).
        mode: ``"record"``, ``"replay"`` or ``"auto"``.
        model: model name used in keys when ``inner`` is ``None``.
    """

    def __init__(
        self,
        inner: LLMClient | None,
        path: str | os.PathLike[str],
        mode: Mode = "auto",
        *,
        model: str | None = None,
    ) -> None:
        super().__init__()
        if mode not in _MODES:
            raise ConfigError(f"cache mode must be one of {_MODES}, not {mode!r}")
        if inner is None and mode != "replay":
            raise ConfigError(f"mode {mode!r} needs an inner LLM to record from")
        self.inner = inner
        self.path = Path(path)
        self.mode: Mode = mode
        self._model = model
        self._records: dict[str, Completion] = {}
        self._models: set[str] = set()
        self._seen: dict[str, int] = {}
        self._io_lock = threading.Lock()
        self._loaded = False
        self.name = f"replay({inner.name})" if inner is not None else "replay"

    def settings(self) -> dict[str, Any]:
        """The wrapped client's settings (its answers are the ones recorded)."""
        if self.inner is not None and hasattr(self.inner, "settings"):
            return dict(self.inner.settings())
        return {"name": self.model_name}

    @property
    def model_name(self) -> str:
        """The model name keys are made with."""
        if self.inner is not None:
            return self.inner.name
        self._load()
        if self._model is not None:
            return self._model
        if len(self._models) == 1:
            return next(iter(self._models))
        if not self._models:
            raise LLMError(f"replay cache {self.path} is empty or missing")
        raise ConfigError(
            f"replay cache {self.path} holds several models {sorted(self._models)}; "
            "pass model=... to choose one"
        )

    # -- file --------------------------------------------------------------------------------

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.mode == "record" or not self.path.exists():
            if self.mode == "replay":
                raise LLMError(f"replay cache {self.path} does not exist")
            return
        lines = self.path.read_bytes().split(b"\n")
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                comp = Completion(**rec["completion"])
                key, model = rec["key"], rec["model"]
            except (ValueError, KeyError, TypeError) as e:
                if i == len(lines) - 1:
                    log.warning("replay cache %s: ignoring torn last line", self.path)
                    continue
                raise LLMError(f"replay cache {self.path} is corrupt at line {i + 1}: {e}") from e
            self._records[key] = comp
            self._models.add(model)

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab+") as f:
            _cut_torn_tail(f)
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())

    # -- calls -------------------------------------------------------------------------------

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):
        self._load()
        model = self.model_name
        base = request_hash(messages, schema=schema, choices=choices, max_tokens=max_tokens,
                            temperature=temperature, model=model, purpose=purpose)
        with self._io_lock:
            n = self._seen.get(base, 0)
            self._seen[base] = n + 1
        key = f"{base}:{n}"
        if self.mode != "record":
            hit = self._records.get(key)
            if hit is not None:
                return hit
            if self.mode == "replay":
                raise LLMError(
                    f"replay cache {self.path} has no answer for purpose {purpose!r} "
                    f"(request {base[:12]}, occurrence {n}); re-run in record or auto mode"
                )
        assert self.inner is not None
        out = self.inner.complete(messages, purpose=purpose, schema=schema, choices=choices,
                                  max_tokens=max_tokens, temperature=temperature)
        record = {"v": FORMAT_VERSION, "key": key, "purpose": purpose, "model": model,
                  "completion": asdict(out)}
        with self._io_lock:
            self._append(record)
            self._records[key] = out
            self._models.add(model)
        return out


def _cut_torn_tail(f: Any) -> None:
    """Truncate an unterminated last line (left by a crash) before appending."""
    size = f.seek(0, os.SEEK_END)
    if size == 0:
        return
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return
    pos = size - 1
    while pos > 0:
        step = min(4096, pos)
        f.seek(pos - step)
        chunk = f.read(step)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            pos = pos - step + idx + 1
            break
        pos -= step
    f.seek(pos)
    try:
        json.loads(f.read(size - pos))
    except ValueError:
        log.warning("replay cache: cutting torn last line at byte %d", pos)
        f.truncate(pos)
        return
    f.write(b"\n")  # a complete record that only lost its newline: keep it
