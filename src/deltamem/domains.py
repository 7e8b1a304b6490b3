"""Domains: the per-benchmark presets of DeltaMem and their memory headers.

``DomainPreset.tau_task`` / ``tau_env`` / ``k_cons`` are the paper's Table 4
(Appendix A). Those thresholds are cosine similarities in the paper's
embedding space (E5-base-v2) over raw goal and scene texts; another embedder,
or another trigger text (:mod:`deltamem.core.triggers`), has another similarity
distribution. So the thresholds DeltaMem uses are looked up by
:func:`thresholds` per domain *and* embedder *and* trigger mode:

* a measured preset (:data:`MEASURED`) when one exists: each records the
  command and figures it came from (``deltamem eval-recall``: labelled recall
  of held-out tasks, τ maximising the F1 of warm-and-relevant matches);
* else the paper's Table 4 value, with a provenance saying that it was chosen
  for E5 similarities of raw texts.

Each domain also names its default trigger modes (what each tree embeds),
again measured with ``deltamem eval-recall``; with E5 the paper's raw texts stay
the default (:func:`default_trigger`).
"""

from __future__ import annotations

from dataclasses import dataclass

from deltamem.errors import ConfigError


@dataclass(frozen=True)
class DomainPreset:
    """τ_task, τ_env, K_cons of one domain (Table 4) and its memory header (Appendix C.3)."""

    name: str
    tau_task: float
    tau_env: float
    k_cons: int
    header: str
    task_trigger: str = "goal"
    env_trigger: str = "scene"
    #: how the structural extractor writes a skill's steps: ``slots`` (the goal's words
    #: become placeholders {A}, {B}, ... the guide binds to the next goal) or ``literal``
    #: (the steps as played, instance numbers dropped); :data:`SKILL_WORDS` says why
    skill_words: str = "slots"
    #: what a residual skill writes: ``exact`` (what turns the steps its chain composes to
    #: into the episode's, so every SUCCESS node's chain composes to its episode's steps:
    #: :func:`deltamem.core.residual.delta`), or the earlier forms ``additions`` and
    #: ``edits`` (:class:`~deltamem.extract.structural.StructuralExtractor`), kept for banks
    #: written with them; :data:`SKILL_DELTAS` says where a domain's came from
    skill_deltas: str = "exact"
    #: D_max of Eq. 5, the depth bound of both trees; :data:`D_MAX` says where a domain's
    #: came from (the paper's 5 where none is listed)
    d_max: int = 5
    #: the Task-Tree's tie rule (:mod:`deltamem.core.tree`, "Tie rule") when it differs
    #: from the Env-Tree's ``deepest``; :data:`TASK_TIE_RULE` says where a domain's came from
    task_tie_rule: str | None = None


@dataclass(frozen=True)
class Threshold:
    """One τ and where it came from (shown in the bank's config as ``tau_source``)."""

    value: float
    source: str


E5 = "intfloat/e5-base-v2"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"

_HH = (
    "measured with benchmarks/recall_matrix.py (deltamem eval-recall): household, bank from 60 "
    "solved train tasks, recall of 30 unseen tasks, seeds 0 and 1"
)

#: measured thresholds: (domain, tree, embedder name, trigger mode) → Threshold
MEASURED: dict[tuple[str, str, str, str], Threshold] = {
    ("alfworld", "task", MINILM, "abstract"): Threshold(
        0.95,
        f"{_HH}: a same-type query scores 1.0 (same goal template), the best other-type node "
        "at most 0.90 (medians 1.0 vs 0.82); τ in the middle of that gap; warm rate 1.0, "
        "precision@1 1.0 on both seeds",
    ),
    ("alfworld", "env", MINILM, "places"): Threshold(
        0.93,
        f"{_HH}: best same-room-kind node ≥ 0.978, best other-room-kind node ≤ 0.895 "
        "(medians 0.981 vs 0.828); τ in the middle of that gap; warm rate 1.0, precision@1 "
        "(room kind) 1.0 on both seeds",
    ),
    ("scienceworld", "task", MINILM, "goal"): Threshold(
        0.82,
        "measured with benchmarks/recall_matrix.py: ScienceWorld, bank from 40 solved train "
        "variations, recall of 20 unseen (test) variations, seeds 1 and 2: at 0.82 warm rate "
        "0.50 / 0.30 with precision@1 (task name) 1.00 / 1.00; the F1-optimal cut moves between "
        "seeds (0.78, 0.65) and lower cuts admit other tasks' skills, so Table 4's value stays. "
        "Abstracted goals raised the top-1 relevance (0.70 / 0.60 vs 0.55 / 0.55) but not the "
        "precision at a stable cut, so raw goals stay the default",
    ),
    ("scienceworld", "task", MINILM, "abstract"): Threshold(
        0.77,
        "measured with benchmarks/recall_matrix.py (issue 29): ScienceWorld, eight task "
        "families (boil, melt, freeze, use-thermometer, power-component, find-living-thing, "
        "grow-plant, chemistry-mix-paint-secondary-color), bank from 40 expert demonstrations on "
        "train (seed 0), recall of 54 seen (dev) variations: abstracted goals put a node of the "
        "query's family first for every query (precision@1 1.00), median best same-family score "
        "0.973 (raw goals 0.850, lowest 0.577); F1-optimal cut 0.765. Raw goals at 0.82 left 41 % "
        "of the queries cold (grow-plant 0.58-0.69). Model-free dev runs (54 seen variations): "
        "abstract at 0.77 3 won, reward 26.8 %; raw goals at 0.82 1 won, 16.4 %; at 0.55 2 won, "
        "23.6 %",
    ),
    ("alfworld", "env", MINILM, "scene"): Threshold(
        0.93,
        f"{_HH}: best same-room-kind node ≥ 0.967, best other-room-kind node ≤ 0.907 "
        "(medians 0.983 vs 0.844)",
    ),
}


#: why a domain's skills keep the goal's words literally (``DomainPreset.skill_words``);
#: a domain not listed uses placeholders, as the paper's extraction prompt asks (§3.4)
SKILL_WORDS: dict[str, str] = {
    "textworld": (
        "measured (issue 29) on the development stream, split seen, 10 games, seed 0, 20 expert "
        "demonstrations, model-free policy with the prior guide: TextWorld paraphrases every "
        "goal, so a placeholder is never bound back (docs/design-notes.md, 'TextWorld coin "
        "collector'); coin level 5 won with slots / literal: DeltaMem 4 / 5, AWM 4 / 5, "
        "ReasoningBank 1 / 5 of 10; cooking 1 / 1 for each"
    ),
}


#: where a domain's residual form (``DomainPreset.skill_deltas``) came from, when a domain
#: differs from the default: the household and generic domains write exact deltas since
#: issue 47 (the composition contract of :mod:`deltamem.core.residual`); ScienceWorld and
#: TextWorld keep additions, which their development streams chose (docs/design-notes.md,
#: "Residuals that compose").
SKILL_DELTAS: dict[str, str] = {
    "textworld": (
        "measured (issue 47) on the development stream, Cleaning difficulty 1, seed 1, 20 "
        "expert demonstrations, 30 unseen houses frozen, model-free policy with the prior "
        "guide: additions scored 42.2, exact deltas 5.6: each house puts other things away, "
        "and an exact chain keeps only the last house's placements where additions keep "
        "every house's"
    ),
    "scienceworld": (
        "measured (issue 29) on the development stream, split seen, 54 variations, seed 0, "
        "40 expert demonstrations, model-free policy with the prior guide: additions won 11 "
        "(score 59.8), edits 5 (50.1); an edited chain keeps only the last demonstration's "
        "thing and route (find-living-thing 7 -> 0 of 7), where additions keep every "
        "demonstration's as alternatives. Additions are written against the chain's SUCCESS "
        "entries only (issue 47), so no step of the episode is lost to a failure's text"
    ),
}


#: where a domain's D_max (``DomainPreset.d_max``) came from, when it is not the paper's 5
#: (§4.1, "D_max = 5"); filled from development streams (docs/design-notes.md, "D_max per
#: domain")
D_MAX: dict[str, str] = {
    "alfworld": (
        "measured (issue 47) on the development stream, household own play seed 1 (30 expert "
        "demonstrations on train, then 120 unseen games frozen and unfrozen, model-free policy "
        "with the prior guide): unfrozen D_max 20 won 99 of 120 in 12.4 steps, D_max 5 97 in "
        "13.3 (+1.7 [-1.7, +5.0]); frozen the same 97; the Env-Tree's chains keep growing "
        "while learning, so a recall carries more places"
    ),
}


#: where a domain's Task-Tree tie rule (``DomainPreset.task_tie_rule``) came from, when it
#: is not the Env-Tree's ``deepest`` (docs/design-notes.md, "Which variant of a skill")
TASK_TIE_RULE: dict[str, str] = {
    "alfworld": (
        "chosen (issue 47) on the development stream, household own play seed 1 (30 expert "
        "demonstrations on train, then 120 unseen games frozen and unfrozen, model-free policy "
        "with the prior guide): record against deepest won 95 vs 97 frozen (-1.7 [-5.0, "
        "+1.7]) and 100 vs 99 unfrozen (+0.8 [-3.3, +5.0]), steps -0.3 [-0.9, +0.2]: no "
        "difference in outcome; chosen for what it does to the tree: hits gather on the "
        "variants that win (c(v) up to 14 against 2), so consolidation distils them (4 "
        "Task-Tree consolidations against none), and a variant learned in one odd scene is "
        "not recalled for every goal of its kind just because it is the newest"
    ),
}


def task_tie_rule_source(domain: str, value: str, tie_rule_given: bool) -> str:
    """Where ``value`` (the Task-Tree's tie rule of a new bank) came from."""
    preset = get_domain(domain).task_tie_rule
    if tie_rule_given and value != preset:
        return "tie_rule, set by the user for both trees"
    if preset is None or value != preset:
        return "set by the user" if value != "deepest" else "the Env-Tree's rule (deepest)"
    return TASK_TIE_RULE.get(domain, "the domain's preset")


def d_max_source(domain: str, value: int) -> str:
    """Where ``value`` (a domain's ``d_max``) came from, for the bank's config."""
    if value != get_domain(domain).d_max:
        return "set by the user"
    return D_MAX.get(domain, "the paper's D_max = 5 (§4.1)")


def skill_deltas_source(domain: str, value: str) -> str:
    """Where ``value`` (a domain's ``skill_deltas``) came from, for the bank's config."""
    if value != get_domain(domain).skill_deltas:
        return "set by the user"
    return SKILL_DELTAS.get(domain, "the composition contract (Eq. 7, issue 47): a SUCCESS "
                            "node's chain composes to its episode's steps")


def skill_words_source(domain: str, value: str) -> str:
    """Where ``value`` (a domain's ``skill_words``) came from, for the bank's config."""
    if value != get_domain(domain).skill_words:
        return "set by the user"
    return SKILL_WORDS.get(domain, "the paper's extraction rules (§3.4): goal entities "
                           "become placeholders")


def thresholds(domain: str, tree: str, embedder: str | None, trigger: str) -> Threshold:
    """τ of ``tree`` for ``domain`` with ``embedder`` and ``trigger`` mode (module doc).

    E5 with the paper's raw-text triggers gets Table 4 labelled as such; a
    measured preset wins; anything else gets Table 4 with a provenance that
    says it was not measured for this embedder/trigger.
    """
    p = get_domain(domain)
    key = (domain, tree, embedder or "", trigger)
    if key in MEASURED:
        return MEASURED[key]
    paper = p.tau_task if tree == "task" else p.tau_env
    raw = "goal" if tree == "task" else "scene"
    if embedder == E5 and trigger == raw:
        return Threshold(paper, f"paper Table 4 ({domain}, E5-base-v2, raw {raw} text)")
    return Threshold(
        paper,
        f"paper Table 4 value for E5-base-v2 on raw {raw} text; not measured for embedder "
        f"{embedder or '?'} with {trigger!r} triggers (check with `deltamem eval-recall`)",
    )


def default_trigger(domain: str, tree: str, embedder: str | None) -> str:
    """The trigger mode a tree uses by default: the paper's raw text (goal, scene) with
    E5-base-v2, whose Table 4 thresholds were chosen for it; the domain's measured
    choice (:class:`DomainPreset`) with any other embedder."""
    if embedder == E5:
        return "goal" if tree == "task" else "scene"
    p = get_domain(domain)
    return p.task_trigger if tree == "task" else p.env_trigger


_GENERIC_HEADER = (
    "Memory recalled from earlier episodes:\n"
    "* Task skills: how tasks like this one were solved before (a base skill, then deltas "
    "that patch it).\n"
    "* Environment knowledge: facts about places, objects and how things respond.\n"
    "Entries marked [Failure Record / WARN] describe what went wrong: avoid, do not repeat.\n"
    "Triggers describe past episodes; your own task comes at the end."
)

DOMAINS: dict[str, DomainPreset] = {
    "alfworld": DomainPreset(
        "alfworld", 0.75, 0.85, 5,
        d_max=20,
        task_tie_rule="record",
        task_trigger="abstract",
        env_trigger="places",
        header="Memory recalled from earlier household episodes:\n"
        "* Task skills: HOW this kind of household task was solved (a base skill, then deltas "
        "that patch it).\n"
        "* Environment knowledge: WHERE kinds of objects tend to be and HOW receptacles and "
        "appliances behave.\n"
        "Entries marked [Failure Record / WARN] describe what went wrong: avoid, do not repeat.\n"
        "Triggers describe past episodes; your own task comes at the end.",
    ),
    "scienceworld": DomainPreset(
        "scienceworld", 0.82, 0.82, 3,
        skill_deltas="additions",
        task_trigger="abstract",
        header="Memory recalled from earlier science experiments:\n"
        "* Task skills: HOW this kind of experiment was done (action sequence, where each item "
        "was found, device syntax such as use/activate/connect, what to watch for).\n"
        "* Environment knowledge: WHERE items are across the rooms and HOW devices respond.\n"
        "Entries marked [Failure Record / WARN] describe what went wrong: avoid, do not repeat.\n"
        "Triggers describe past episodes; your own task comes at the end.",
    ),
    "webshop": DomainPreset(
        "webshop", 0.85, 0.85, 3,
        "Memory recalled from earlier shopping episodes:\n"
        "* [Base Skill] is a worked example of a successful purchase: imitate its pattern "
        "(how it built the search keywords, picked a result, chose options in order, bought) "
        "with YOUR product, attributes and price, never its literal values.\n"
        "* [Skill Delta N] adds advice on top of the base: apply it only if its trigger "
        "matches your task.\n"
        "* [Failure Record / WARN] describes a trap: never run its procedure, only avoid it.\n"
        "Before your first action, say in one thought how you adapt the base example.",
    ),
    "textworld": DomainPreset("textworld", 0.80, 0.85, 3, _GENERIC_HEADER,
                              skill_words="literal", skill_deltas="additions"),
    "generic": DomainPreset("generic", 0.80, 0.85, 3, _GENERIC_HEADER),
}


def get_domain(name: str) -> DomainPreset:
    """The preset named ``name``; :class:`ConfigError` listing the known ones otherwise."""
    try:
        return DOMAINS[name]
    except KeyError:
        known = ", ".join(sorted(DOMAINS))
        raise ConfigError(f"unknown domain {name!r}; known domains: {known}") from None
