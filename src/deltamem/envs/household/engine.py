"""TextWorld's PDDL engine for ALFWorld-format games, with its pure work done once.

:class:`CachedPddlEnv` is ``textworld.envs.pddl.PddlEnv`` (textworld 1.7) giving the same
observations, scores, flags and admissible lists, byte for byte (``tests/envs`` replays
recorded episodes), without redoing what cannot change:

* **Text generation.** TextWorld parses every sentence template with its tatsu grammar
  each time it renders one (every admissible command and every feedback, at every step)
  and deep-copies symbols and contexts at every expansion. Here each template text is
  parsed once per process (:func:`symbols`), each rule condition once
  (:func:`conjunctive_query`), each ``{...}`` expression compiled once; :func:`derive`
  expands the parsed symbols without copying them: the derivation is a stack of
  ``(symbol, context)`` pairs, and a context is a new dict only where TextWorld's
  ``query`` binds new variables (the others are never modified, so they are shared).
  Expansion order, rule choice (the first rule whose condition has an assignment), list
  rendering and expression evaluation (same globals, same local names) are those of
  TextWorld's ``ContextSensitiveGrammar.derive``.
* **Compiled games.** A game's grammar document (actions, production rules) and the
  translation of its PDDL problem by Fast Downward (which TextWorld runs twice per
  ``load`` and twice per ``reset``, ~0.2 s each) depend only on the game file's texts.
  :func:`compile_game` makes them once per process and, with ``cache_files``, writes
  them beside the game file as :data:`CACHE_FILE` (gzip JSON, no pickle), under a key
  hashing this module's :data:`CACHE_FORMAT`, the textworld / Fast Downward / TatSu
  versions and the three texts: a file with another key is never read, it is compiled
  again and replaced. Writes go to a temporary name and are renamed.
* **Reset after load.** TextWorld builds the start state on ``load`` and again on
  ``reset``; the first ``reset`` after a ``load`` keeps the state ``load`` built (nothing
  has touched it).

Nothing in ``site-packages`` is modified and no TextWorld module attribute is replaced:
the engine is a subclass, its state is TextWorld's ``PddlState`` (``apply``, ``replan``,
``check_goal`` run unchanged on Fast Downward's library; ``state.task`` is the
:class:`Translation` instead of Fast Downward's task object). One difference outside the
observations: ``fast_downward.pddl2sas`` overwrites ``sys.argv``; here it is restored.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import sys
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import fast_downward
import textworld
from textworld.core import GameState
from textworld.envs.pddl import logic as pddl_logic
from textworld.envs.pddl import pddl as pddl_env
from textworld.envs.pddl import textgen
from textworld.envs.pddl.logic import model as logic_model
from textworld.logic import Proposition, Rule, Variable
from textworld.utils import check_flag

__all__ = [
    "CACHE_FILE",
    "CACHE_FORMAT",
    "CachedPddlEnv",
    "CompiledGame",
    "Translation",
    "compile_game",
    "conjunctive_query",
    "derive",
    "game_key",
    "new_state",
    "symbols",
    "translate",
]

log = logging.getLogger(__name__)

#: bump when the compiled file's content or meaning changes
CACHE_FORMAT = 1
#: the compiled game's file name, beside ``game.tw-pddl``
CACHE_FILE = "game.compiled.json.gz"
#: compiled games a process keeps (the least recently used is dropped)
MEMO_GAMES = 64

_SYMBOLS: dict[str, list[textgen.Symbol]] = {}
_QUERIES: dict[str, Rule] = {}
_CODE: dict[str, Any] = {}
_GAMES: OrderedDict[str, CompiledGame] = OrderedDict()


# --- text generation ------------------------------------------------------------------------


def symbols(text: str) -> list[textgen.Symbol]:
    """The parsed symbols of a template text (TextWorld's ``symbols`` rule), parsed once.

    The returned list and symbols are shared: callers must not modify them (``derive``
    never does; TextWorld's own ``ContextSensitiveGrammar.replace`` deep-copies them).
    """
    parsed = _SYMBOLS.get(text)
    if parsed is None:
        parsed = _SYMBOLS[text] = textgen._parse_and_convert(text, rule_name="symbols")
    return parsed


def conjunctive_query(text: str) -> Rule:
    """``Rule.parse_conjunctive_query(text)``, parsed once (the rule is only read)."""
    rule = _QUERIES.get(text)
    if rule is None:
        rule = _QUERIES[text] = Rule.parse_conjunctive_query(text)
    return rule


def _code(expression: str) -> Any:
    """``expression`` compiled as ``eval`` compiles a string (leading blanks stripped)."""
    code = _CODE.get(expression)
    if code is None:
        code = _CODE[expression] = compile(expression.lstrip(" \t"), "<string>", "eval",
                                           dont_inherit=True)
    return code


def _evaluate(symbol: textgen.EvalSymbol, context: dict) -> Any:
    """``EvalSymbol.derive``: the expression evaluated in ``textgen``'s globals, with the
    context's variables as locals. TextWorld's frame also binds ``self`` and ``context``
    (which win over variables of those names) and hides ``value`` (unbound at that point)."""
    namespace = dict(context["variables"])
    namespace.pop("value", None)
    namespace["self"] = symbol
    namespace["context"] = context
    return eval(_code(symbol.expression), vars(textgen), namespace)


def _assignments(given: str, context: dict) -> list[dict]:
    """``textgen.query``: one context per assignment of the query's placeholders."""
    state, infos = context["state"], context["entity_infos"]
    contexts = []
    for mapping in state.all_assignments(conjunctive_query(given), context["mapping"]):
        variables = dict(context["variables"])
        variables.update({ph.name: infos[var.name] for ph, var in mapping.items()})
        bound = dict(context["mapping"])
        bound.update(mapping)
        contexts.append({"state": state, "facts": context["facts"], "variables": variables,
                         "mapping": bound, "entity_infos": infos})
    return contexts


def _conditional(symbol: textgen.ConditionalSymbol, context: dict) -> list[tuple[Any, dict]]:
    """``ConditionalSymbol.derive``: its expression once per context the query gives."""
    if len(context) == 0:
        raise ValueError("Empty context")
    contexts = _assignments(symbol.given, context) if symbol.given else [context]
    return [(symbol.expression, c) for c in contexts]


def _holds(condition: str, context: dict) -> bool:
    for _ in context["state"].all_assignments(conjunctive_query(condition), context["mapping"]):
        return True
    return False


def _rule_body(rules: dict, symbol: textgen.NonterminalSymbol, context: dict) -> list:
    """``ContextSensitiveGrammar.replace``: the first rule of the symbol whose condition
    holds (TextWorld tests them all and takes the first; conditions have no side effect)."""
    candidates = rules.get(str(symbol))
    if not candidates:
        raise textgen.CSGUnknownSymbolError(symbol)
    for rule in candidates:
        if not rule.condition or _holds(rule.condition, context):
            return rule.rhs
    raise IndexError("list index out of range")  # TextWorld: ``rules[0]`` of no rule


def derive(grammar: textgen.ContextSensitiveGrammar, start: str, context: dict) -> str:
    """``grammar.derive(start, context)``, without re-parsing or copying.

    The stack holds ``(symbol, context)`` pairs where TextWorld sets a copied context on
    a copied symbol; contexts are never modified after they are made.
    """
    rules = grammar._rules
    stack: list[tuple[Any, dict]] = [(s, context) for s in reversed(symbols(start))]
    derived: list[str] = []
    while stack:
        symbol, ctx = stack.pop()
        if isinstance(symbol, textgen.TerminalSymbol):
            derived.append(str(symbol))
        elif isinstance(symbol, textgen.NonterminalSymbol):
            stack.extend((s, ctx) for s in reversed(_rule_body(rules, symbol, ctx)))
        elif isinstance(symbol, textgen.ConditionalSymbol):
            stack.extend(reversed(_conditional(symbol, ctx)))
        elif isinstance(symbol, textgen.EvalSymbol):
            derived.append(str(_evaluate(symbol, ctx)))
        elif isinstance(symbol, textgen.ListSymbol):
            items = _conditional(symbol.symbol, ctx)
            stack.extend(reversed(_display_list(items, ctx)))
        else:
            raise NotImplementedError(f"Unknown symbol: {type(symbol)}")
    return "".join(derived)


def _display_list(items: list[tuple[Any, dict]], context: dict) -> list[tuple[Any, dict]]:
    """``textgen.display_list``: ``a``, ``a, b, and c`` or the ``list_empty`` rule."""
    if not items:
        return [(textgen.NonterminalSymbol("list_empty"), context)]
    if len(items) == 1:
        return items
    separator = (textgen.NonterminalSymbol("list_separator"), context)
    out: list[tuple[Any, dict]] = []
    for item in items[:-1]:
        if out:
            out.append(separator)
        out.append(item)
    out.append((textgen.NonterminalSymbol("list_last_separator"), context))
    out.append(items[-1])
    return out


# --- compiled games -------------------------------------------------------------------------


class _LogicConverter(pddl_logic._ModelConverter):
    """TextWorld's converter of a grammar document, with rule texts parsed by :func:`symbols`."""

    def walk_PddlDocumentNode(self, node: Any) -> tuple[dict, textgen.ContextSensitiveGrammar]:
        actions: dict[str, pddl_logic.Action] = {}
        data: dict[str, Any] = {}
        for part in node.parts:
            if isinstance(part, logic_model.ActionTypeNode):
                action = self.walk(part)
                actions[action.name.lower()] = action
                text = "\n".join(line for line in action.grammar.split("\n")
                                 if not line.lstrip().startswith("#"))
                data.update(json.loads(text))
            elif isinstance(part, logic_model.ActionGrammarNode):
                data.update(json.loads(self._unescape_block(part.code)))
        grammar = textgen.ContextSensitiveGrammar()
        for name, rules in json.loads(json.dumps(data)).items():
            for rule in rules:
                grammar.add_rule(textgen.ProductionRule(
                    lhs=name, rhs=symbols(rule["rhs"]), weight=rule.get("weight", 1),
                    condition=rule.get("condition", "")))
        return actions, grammar


@dataclass(frozen=True)
class _Parameter:
    """What TextWorld reads of a Fast Downward action parameter."""

    name: str
    type_name: str


@dataclass(frozen=True)
class _Schema:
    """What TextWorld reads of a Fast Downward action: its name and parameters."""

    name: str
    parameters: tuple[_Parameter, ...]


@dataclass(frozen=True)
class Translation:
    """What ``PddlState`` takes from Fast Downward's two translations of a problem.

    ``init`` holds the initial facts as TextWorld derives them from the task (``=`` atoms,
    ``total-cost`` and distance assignments dropped), in the task's order.
    """

    sas: str
    sas_replan: str
    actions: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    types: tuple[tuple[str, tuple[str, ...]], ...]
    objects: tuple[tuple[str, str], ...]
    init: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]

    def to_json(self) -> dict:
        return {"sas": self.sas, "sas_replan": self.sas_replan,
                "actions": [[n, [list(p) for p in ps]] for n, ps in self.actions],
                "types": [[n, list(s)] for n, s in self.types],
                "objects": [list(o) for o in self.objects],
                "init": [[n, [list(a) for a in args]] for n, args in self.init]}

    @classmethod
    def from_json(cls, data: dict) -> Translation:
        return cls(sas=data["sas"], sas_replan=data["sas_replan"],
                   actions=tuple((n, tuple((p, t) for p, t in ps)) for n, ps in data["actions"]),
                   types=tuple((n, tuple(s)) for n, s in data["types"]),
                   objects=tuple((n, t) for n, t in data["objects"]),
                   init=tuple((n, tuple((a, t) for a, t in args)) for n, args in data["init"]))


def _pddl2sas(domain: str, problem: str, *, optimize: bool) -> tuple[Any, str]:
    argv = sys.argv
    try:
        return fast_downward.pddl2sas(domain, problem, verbose=check_flag("TW_PDDL_DEBUG"),
                                      optimize=optimize)
    finally:
        sys.argv = argv


def translate(domain: str, problem: str) -> Translation:
    """Fast Downward's two translations (as ``PddlState.__init__`` makes them), reduced to
    what ``PddlState`` reads."""
    from fast_downward.translate.pddl import conditions, f_expression

    task, sas = _pddl2sas(domain, problem, optimize=False)
    _, sas_replan = _pddl2sas(domain, problem, optimize=True)
    name2type = {o.name: o.type_name for o in task.objects}
    init: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for atom in task.init:
        if isinstance(atom, conditions.Atom):
            if atom.predicate == "=":
                continue
            init.append((atom.predicate, tuple((a, name2type[a]) for a in atom.args)))
        elif isinstance(atom, f_expression.Assign):
            if atom.fluent.symbol == "total-cost":
                continue
            name = f"{atom.expression.value}"
            if str.isdigit(name):
                continue
            init.append((name, tuple((a, name2type[a]) for a in atom.fluent.args)))
    return Translation(
        sas=sas, sas_replan=sas_replan,
        actions=tuple((a.name, tuple((p.name, p.type_name) for p in a.parameters))
                      for a in task.actions),
        types=tuple((t.name, tuple(t.supertype_names)) for t in task.types),
        objects=tuple((o.name, o.type_name) for o in task.objects),
        init=tuple(init))


_SYMBOL_TAGS = {textgen.TerminalSymbol: "t", textgen.NonterminalSymbol: "n",
                textgen.EvalSymbol: "e", textgen.ConditionalSymbol: "c",
                textgen.ListSymbol: "l"}


def _encode_symbol(symbol: Any) -> list:
    tag = _SYMBOL_TAGS.get(type(symbol))
    if tag in ("t", "n") and isinstance(symbol.symbol, str):
        return [tag, symbol.symbol]
    if tag == "e" and isinstance(symbol.expression, str):
        return [tag, symbol.expression]
    if tag == "c" and (symbol.given is None or isinstance(symbol.given, str)):
        return [tag, _encode_symbol(symbol.expression), symbol.given]
    if tag == "l":
        return [tag, _encode_symbol(symbol.symbol)]
    raise TypeError(f"cannot store symbol {symbol!r}")


def _decode_symbol(data: list) -> Any:
    tag = data[0]
    if tag == "t":
        return textgen.TerminalSymbol(data[1])
    if tag == "n":
        return textgen.NonterminalSymbol(data[1])
    if tag == "e":
        return textgen.EvalSymbol(data[1])
    if tag == "c":
        return textgen.ConditionalSymbol(_decode_symbol(data[1]), data[2])
    if tag == "l":
        return textgen.ListSymbol(_decode_symbol(data[1]))
    raise ValueError(f"unknown symbol tag {tag!r}")


@dataclass(frozen=True)
class CompiledGame:
    """What a game file gives that does not change while it is played: the actions and
    production rules of its grammar document and the translation of its problem.

    ``actions`` and ``rules`` are shared by every :meth:`logic` made from them (they are
    only read, as in TextWorld, where ``replace`` deep-copies a rule's symbols).
    """

    actions: dict[str, pddl_logic.Action]
    rules: textgen.ContextSensitiveGrammar
    translation: Translation

    def logic(self, domain: str) -> pddl_logic.GameLogic:
        """A new ``GameLogic`` (its own ``types``, as ``GameLogic(domain, grammar)``)."""
        logic = pddl_logic.GameLogic.__new__(pddl_logic.GameLogic)
        logic.domain = domain
        logic.grammar = textgen.ContextSensitiveGrammar()
        logic.actions = {}
        logic.types = textworld.logic.TypeHierarchy()
        logic.actions.update(self.actions)
        logic.grammar.update(self.rules)
        return logic

    def to_json(self) -> dict:
        """The JSON form; ``logic`` is ``None`` when a symbol is of an unexpected kind."""
        try:
            logic: dict | None = {
                "actions": {key: {"name": a.name, "template": a.template, "pddl": a.pddl,
                                  "grammar": a.grammar, "feedback_rule": a.feedback_rule}
                            for key, a in self.actions.items()},
                "rules": {lhs: [{"condition": r.condition, "weight": r.weight,
                                 "rhs": [_encode_symbol(s) for s in r.rhs]} for r in rules]
                          for lhs, rules in self.rules._rules.items()},
            }
        except TypeError as exc:
            log.debug("grammar not stored (%s)", exc)
            logic = None
        return {"logic": logic, "translation": self.translation.to_json()}

    @classmethod
    def from_json(cls, data: dict, parse: Any) -> CompiledGame:
        """Rebuild; ``parse()`` gives ``(actions, rules)`` when ``logic`` was not stored."""
        logic = data["logic"]
        if logic is None:
            actions, rules = parse()
        else:
            actions = {key: pddl_logic.Action(**fields)
                       for key, fields in logic["actions"].items()}
            rules = textgen.ContextSensitiveGrammar()
            for lhs, entries in logic["rules"].items():
                for entry in entries:
                    rules.add_rule(textgen.ProductionRule(
                        lhs=lhs, rhs=[_decode_symbol(s) for s in entry["rhs"]],
                        weight=entry["weight"], condition=entry["condition"]))
        return cls(actions=actions, rules=rules,
                   translation=Translation.from_json(data["translation"]))


def _versions() -> str:
    names = []
    for dist in ("textworld", "fast-downward-textworld", "TatSu"):
        try:
            names.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            names.append(f"{dist}==?")
    return ";".join(names)


def game_key(domain: str, grammar: str, problem: str) -> str:
    """The version key of a compiled game: this module's format, the textworld, Fast
    Downward and TatSu versions, and the domain, grammar and problem texts."""
    digest = hashlib.sha256()
    for part in (f"format={CACHE_FORMAT}", _versions(), domain, grammar, problem):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def _parse_logic(grammar: str) -> tuple[dict, textgen.ContextSensitiveGrammar]:
    return _LogicConverter().walk(pddl_logic._PARSER.parse(grammar, rule_name="pddlStart"))


def _read(path: Path, key: str, grammar: str) -> CompiledGame | None:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT \
                or data.get("key") != key:
            return None
        return CompiledGame.from_json(data, lambda: _parse_logic(grammar))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError) as exc:
        log.debug("unreadable compiled game %s (%s); compiling again", path, exc)
        return None


def _write(path: Path, key: str, game: CompiledGame) -> None:
    """Write atomically (temporary name with the pid, then rename); failures only log."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        payload = {"format": CACHE_FORMAT, "key": key, **game.to_json()}
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb",
                                                   mtime=0, compresslevel=1) as fh:
            fh.write(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
        tmp.replace(path)
    except OSError as exc:
        log.debug("could not write compiled game %s (%s)", path, exc)
        tmp.unlink(missing_ok=True)


def compile_game(domain: str, grammar: str, problem: str,
                 cache_file: Path | None = None) -> CompiledGame:
    """The compiled game of these texts: from this process's memo, else from
    ``cache_file`` when its key matches, else parsed and translated (and written to
    ``cache_file`` when given)."""
    key = game_key(domain, grammar, problem)
    game = _GAMES.get(key)
    if game is None and cache_file is not None:
        game = _read(cache_file, key, grammar)
    if game is None:
        actions, rules = _parse_logic(grammar)
        game = CompiledGame(actions=actions, rules=rules,
                            translation=translate(domain, problem))
        if cache_file is not None:
            _write(cache_file, key, game)
    _GAMES[key] = game
    _GAMES.move_to_end(key)
    while len(_GAMES) > MEMO_GAMES:
        _GAMES.popitem(last=False)
    return game


def new_state(lib: Any, problem: str, logic: pddl_logic.GameLogic,
              plan: Translation) -> pddl_logic.PddlState:
    """``PddlState(lib, problem, logic)`` built from a :class:`Translation` (the body of
    TextWorld's ``PddlState.__init__`` with Fast Downward's translation step replaced;
    ``state.task`` is the :class:`Translation`, not Fast Downward's task object)."""
    state = pddl_logic.PddlState.__new__(pddl_logic.PddlState)
    state._facts = defaultdict(set)
    state._vars_by_name = {}
    state._vars_by_type = defaultdict(set)
    state._var_counts = Counter()
    state._logic = logic
    state.downward_lib = lib
    state.pddl_problem = problem
    state.task = plan
    state.sas, state.sas_replan = plan.sas, plan.sas_replan
    state._actions = {name: _Schema(name, tuple(_Parameter(n, t) for n, t in params))
                      for name, params in plan.actions}
    for name, supertypes in plan.types:
        with contextlib.suppress(ValueError):   # already known
            logic.types.add(textworld.logic.Type(name, list(supertypes)))
    lib.load_sas(plan.sas.encode("utf-8"))
    lib.load_sas_replan(plan.sas_replan.encode("utf-8"))
    state.name2type = dict(plan.objects)
    state.add_facts([Proposition(name, [Variable(a, t) for a, t in args])
                     for name, args in plan.init])
    atoms = (pddl_logic.Atom * lib.get_state_size())()
    lib.get_state(atoms)
    facts = [atom.get_fact(state.name2type) for atom in atoms]
    state.add_facts([fact for fact in facts if not fact.is_negation])
    return state


# --- the environment ------------------------------------------------------------------------


class CachedPddlEnv(pddl_env.PddlEnv):
    """``PddlEnv`` with grammars, templates and translations reused (same observations).

    Args:
        infos: what the game state reports (as for ``PddlEnv``).
        cache_files: read / write each game's :data:`CACHE_FILE` beside its game file.
    """

    def __init__(self, infos: textworld.EnvInfos | None = None, *,
                 cache_files: bool = False) -> None:
        super().__init__(infos)
        self.cache_files = cache_files
        self._compiled: CompiledGame | None = None
        self._unplayed = False

    def load(self, filename_or_data: Any) -> None:
        if isinstance(filename_or_data, str | os.PathLike):
            with open(filename_or_data, encoding="utf-8") as fh:
                data = json.load(fh)
            self._game_file = filename_or_data
            cache_file = (Path(filename_or_data).with_name(CACHE_FILE)
                          if self.cache_files else None)
        else:
            data = filename_or_data
            self._game_file = None
            cache_file = None
        self._game_data = data
        self.walkthrough = data.get("walkthrough", None)
        self._compiled = compile_game(data["pddl_domain"], data["grammar"],
                                      data["pddl_problem"], cache_file)
        self._logic = self._compiled.logic(data["pddl_domain"])
        self._pddl_state = self._new_state()
        self._entity_infos = self._get_entity_infos()
        # TextWorld builds the state again on reset; until then this one is the same
        self._unplayed = True

    def _new_state(self) -> pddl_logic.PddlState:
        assert self._compiled is not None
        return new_state(self.downward_lib, self._game_data["pddl_problem"], self._logic,
                         self._compiled.translation)

    def _context(self, facts: list, action: Any = None) -> dict:
        if action is None:
            variables: dict = {}
            mapping: dict = {}
        else:
            variables = {ph.name: self._entity_infos[var.name]
                         for ph, var in action.mapping.items()}
            mapping = action.mapping
        return {"state": self._pddl_state, "facts": facts, "variables": variables,
                "mapping": mapping, "entity_infos": self._entity_infos}

    def _gather_infos(self) -> None:
        state = self.state
        state["command_templates"] = sorted({a.template for a in self._logic.actions.values()})
        state["won"] = self._pddl_state.check_goal()
        state["lost"] = False
        state["_entity_infos"] = dict(self._entity_infos)
        facts = list(self._pddl_state.facts)
        state["_facts"] = facts
        if self.request_infos.facts:
            state["facts"] = list(map(self._get_human_readable_fact, facts))
        state["last_action"] = None
        state["_last_action"] = self._last_action
        state["_valid_actions"] = list(self._pddl_state.all_applicable_actions())
        mapping = {k: info.name for k, info in self._entity_infos.items()}
        grammar = self._logic.grammar
        commands = []
        for action in state["_valid_actions"]:
            # TextWorld passes a fresh list of the same facts to every derivation
            action.command_template = derive(grammar, action.command_template,
                                             self._context(list(facts), action))
            commands.append(action.format_command(mapping))
        state["_valid_commands"] = commands
        state["admissible_commands"] = sorted(set(commands))
        if self.request_infos.moves:
            state["moves"] = self._moves
        if self.request_infos.policy_commands:
            state["policy_commands"] = self._pddl_state.replan(self._entity_infos)

    def reset(self) -> GameState:
        if not self._unplayed:
            self._pddl_state = self._new_state()
        self._unplayed = False
        self.prev_state = None
        self.state = GameState()
        self._last_action = None
        self._moves = 0
        context = self._context(list(self._pddl_state.facts))
        self.state.feedback = derive(self._logic.grammar, "#intro#", context)
        self.state.raw = self.state.feedback
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = (self.walkthrough
                                               or self._pddl_state.replan(self._entity_infos))
        return self.state

    def step(self, command: str) -> tuple[GameState, int, bool]:
        self._unplayed = False
        command = command.strip()
        self.prev_state = self.state
        self.state = GameState()
        self.state.last_command = command
        self._last_action = None
        try:
            idx = self.prev_state["_valid_commands"].index(command)
            self._last_action = self.prev_state["_valid_actions"][idx]
            self._pddl_state.apply(self._last_action)
            context = self._context(list(self._pddl_state.facts), self._last_action)
            self.state.feedback = derive(self._logic.grammar, self._last_action.feedback_rule,
                                         context)
            self._moves += 1
        except ValueError:
            self.state.feedback = "Nothing happens."
        self.state.raw = self.state.feedback
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = self.prev_state["extra.walkthrough"]
        self.state["score"] = 1 if self.state["won"] else 0
        self.state["done"] = self.state["won"] or self.state["lost"]
        return self.state, self.state["score"], self.state["done"]
