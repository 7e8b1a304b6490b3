"""What a run cost: LLM tokens in and out per purpose, and the money under a price table.

Every record of ``episodes.jsonl`` carries the usage its episode counted, by purpose
(``act``, ``extract``, ``judge``, ``consolidate``, ...; :class:`~deltamem.types.Usage`).
:func:`run_cost` adds them up per phase and purpose; with a :class:`PriceTable` it prices
them. A price table is a TOML file, one table per model, prices per million tokens::

    version = 1
    currency = "USD"          # optional, default USD; one currency per file

    [models."gpt-4o-mini"]
    input = 0.15              # per 1M prompt tokens
    output = 0.60             # per 1M completion tokens

    [models."deepseek-*"]     # shell-style patterns are allowed; an exact name wins
    input = 0.27
    output = 1.10

A run's model is its ``llm`` spec: ``openai:gpt-4o-mini`` is looked up as
``openai:gpt-4o-mini``, then ``gpt-4o-mini``. A model with no entry has no money figure
(the report says so); a local model can be given ``input = 0`` and ``output = 0``. The
tokens are what the backend reported (or the whitespace estimate where it reports none).
Prices change: the table is the user's, nothing here ships one as fact
(``examples/prices.toml`` is a dated example).

Where the table comes from (:func:`find_price_table`): an explicit path, else
``$DELTAMEM_PRICES``, else ``prices.toml`` in the run directory, else none.
"""

from __future__ import annotations

import fnmatch
import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deltamem.errors import ConfigError

__all__ = [
    "COST_FILE",
    "PRICES_ENV",
    "PRICE_TABLE_VERSION",
    "CostLine",
    "ModelPrice",
    "PriceTable",
    "RunCost",
    "find_price_table",
    "run_cost",
    "write_cost",
]

PRICE_TABLE_VERSION = 1
"""The ``version`` a price table file declares."""
PRICES_ENV = "DELTAMEM_PRICES"
"""Environment variable naming a price table file."""
COST_FILE = "cost.json"
"""What :func:`deltamem.bench.report` writes beside ``report.md`` (:meth:`RunCost.to_dict`)."""


class ModelPrice(BaseModel):
    """Prices of one model, per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int
    currency: str = Field(default="USD", min_length=1)
    models: dict[str, ModelPrice] = Field(default_factory=dict)


@dataclass(frozen=True)
class PriceTable:
    """Model name (or shell pattern) → :class:`ModelPrice`, in one ``currency``."""

    models: Mapping[str, ModelPrice]
    currency: str = "USD"
    source: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PriceTable:
        """Read and validate a TOML price table (module doc).

        Raises:
            ConfigError: unreadable, not TOML, another ``version``, or a bad entry.
        """
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read price table {p}: {e}") from e
        if data.get("version") != PRICE_TABLE_VERSION:
            raise ConfigError(f"price table {p}: version must be {PRICE_TABLE_VERSION}, "
                              f"got {data.get('version')!r}")
        try:
            parsed = _PriceFile.model_validate(data)
        except ValidationError as e:
            raise ConfigError(f"price table {p}: {e.errors()[0]['loc']}: "
                              f"{e.errors()[0]['msg']}") from e
        return cls(dict(parsed.models), parsed.currency, str(p))

    def price(self, model: str) -> tuple[str, ModelPrice] | None:
        """The entry for ``model`` (an ``llm`` spec or a bare name) and the key it matched:
        the spec, then the name after ``kind:``, each exactly, then as a pattern."""
        names = [model]
        kind, _, rest = model.partition(":")
        if rest and kind in ("openai", "local", "copilot"):
            names.append(rest)
        for name in names:
            if name in self.models:
                return name, self.models[name]
        for name in names:
            for key, price in self.models.items():
                if fnmatch.fnmatchcase(name, key):
                    return key, price
        return None


@dataclass(frozen=True)
class CostLine:
    """Calls and tokens of one phase and purpose, and their price (``None``: unpriced)."""

    phase: str
    purpose: str
    calls: int
    input_tokens: int
    output_tokens: int
    money: float | None = None


@dataclass(frozen=True)
class RunCost:
    """A run's tokens per phase and purpose, priced for ``model`` when a table had it."""

    model: str
    lines: tuple[CostLine, ...]
    currency: str | None = None
    price_key: str | None = None
    price: ModelPrice | None = None
    episodes: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def input_tokens(self) -> int:
        return sum(x.input_tokens for x in self.lines)

    @property
    def output_tokens(self) -> int:
        return sum(x.output_tokens for x in self.lines)

    @property
    def money(self) -> float | None:
        if self.price is None:
            return None
        return _money(self.price, self.input_tokens, self.output_tokens)

    def by_purpose(self) -> dict[str, tuple[int, int, int]]:
        """Purpose → (calls, input tokens, output tokens) over every phase."""
        out: dict[str, tuple[int, int, int]] = {}
        for x in self.lines:
            c, i, o = out.get(x.purpose, (0, 0, 0))
            out[x.purpose] = (c + x.calls, i + x.input_tokens, o + x.output_tokens)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``cost.json``; ``version`` 1)."""
        purposes = {}
        for p, (c, i, o) in self.by_purpose().items():
            purposes[p] = {"calls": c, "input_tokens": i, "output_tokens": o,
                           "money": None if self.price is None else
                           round(_money(self.price, i, o), 6)}
        return {
            "version": 1, "model": self.model, "episodes": self.episodes,
            "currency": self.currency, "price_key": self.price_key,
            "price_per_mtok": None if self.price is None else self.price.model_dump(),
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "money": None if self.money is None else round(self.money, 6),
            "by_purpose": purposes,
            "lines": [{"phase": x.phase, "purpose": x.purpose, "calls": x.calls,
                       "input_tokens": x.input_tokens, "output_tokens": x.output_tokens,
                       "money": None if x.money is None else round(x.money, 6)}
                      for x in self.lines],
            "notes": list(self.notes),
        }

    def markdown(self) -> list[str]:
        """The report's "Cost" section."""
        cur = self.currency or ""
        head = ["## Cost", ""]
        if self.price is None:
            head += [f"Tokens for model `{self.model}`; "
                     + (self.notes[0] if self.notes else "no price table.")]
        else:
            head += [f"Model `{self.model}` priced as `{self.price_key}`: "
                     f"{self.price.input:g} {cur} per 1M input tokens, "
                     f"{self.price.output:g} {cur} per 1M output tokens."]
        head += ["", f"| phase | purpose | calls | tokens in | tokens out | cost ({cur or '-'}) |",
                 "|---|---|---|---|---|---|"]
        rows = [f"| {x.phase} | {x.purpose} | {x.calls} | {x.input_tokens} | "
                f"{x.output_tokens} | {_fmt(x.money)} |" for x in self.lines]
        total = (f"| **all** | **all** | {sum(x.calls for x in self.lines)} | "
                 f"{self.input_tokens} | {self.output_tokens} | {_fmt(self.money)} |")
        per = ""
        if self.money is not None and self.episodes:
            per = f"Per episode: {_fmt(self.money / self.episodes)} {cur}."
        return [*head, *rows, total, "", *([per, ""] if per else [])]


def _money(price: ModelPrice, tokens_in: int, tokens_out: int) -> float:
    return (tokens_in * price.input + tokens_out * price.output) / 1e6


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}" if x >= 100 else f"{x:.4g}"


def run_cost(records: Iterable[Mapping[str, Any]], model: str,
             prices: PriceTable | None = None) -> RunCost:
    """Add up the usage of ``records`` (lines of ``episodes.jsonl``) per phase and purpose,
    priced with ``prices`` when it has ``model`` (an ``llm`` spec)."""
    sums: dict[tuple[str, str], list[int]] = {}
    n = 0
    for r in records:
        n += 1
        for purpose, c in (r.get("usage") or {}).items():
            s = sums.setdefault((str(r.get("phase", "")), str(purpose)), [0, 0, 0])
            s[0] += int(c.get("calls", 0))
            s[1] += int(c.get("prompt_tokens", 0))
            s[2] += int(c.get("completion_tokens", 0))
    hit = prices.price(model) if prices is not None else None
    price = hit[1] if hit else None
    lines = tuple(CostLine(phase, purpose, c, i, o,
                           None if price is None else _money(price, i, o))
                  for (phase, purpose), (c, i, o) in sums.items())
    notes: tuple[str, ...] = ()
    if prices is None:
        notes = (f"no price table (give one with --prices or ${PRICES_ENV}).",)
    elif hit is None:
        notes = (f"the price table {prices.source} has no entry for it.",)
    return RunCost(model=model, lines=lines, currency=prices.currency if hit and prices
                   else None, price_key=hit[0] if hit else None, price=price, episodes=n,
                   notes=notes)


def find_price_table(run_dir: str | Path | None = None,
                     path: str | Path | None = None) -> PriceTable | None:
    """The price table to use: ``path``, else ``$DELTAMEM_PRICES``, else ``prices.toml`` in
    ``run_dir``, else ``None``."""
    if path is not None:
        return PriceTable.load(path)
    env = os.environ.get(PRICES_ENV)
    if env:
        return PriceTable.load(env)
    if run_dir is not None and (Path(run_dir) / "prices.toml").exists():
        return PriceTable.load(Path(run_dir) / "prices.toml")
    return None


def write_cost(run_dir: str | Path, cost: RunCost) -> Path:
    """Write ``cost.json`` into ``run_dir``."""
    path = Path(run_dir) / COST_FILE
    path.write_text(json.dumps(cost.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path
