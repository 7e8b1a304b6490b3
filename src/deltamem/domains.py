"""Domains: the per-benchmark presets of DeltaMem (paper Appendix A, Table 4) and memory headers.

The thresholds are cosine similarities in the paper's embedding space
(E5-base-v2). Another embedder has another similarity distribution: check it
with a calibration sample before trusting these numbers.
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
        "Memory recalled from earlier household episodes:\n"
        "* Task skills: HOW this kind of household task was solved (a base skill, then deltas "
        "that patch it).\n"
        "* Environment knowledge: WHERE kinds of objects tend to be and HOW receptacles and "
        "appliances behave.\n"
        "Entries marked [Failure Record / WARN] describe what went wrong: avoid, do not repeat.\n"
        "Triggers describe past episodes; your own task comes at the end.",
    ),
    "scienceworld": DomainPreset(
        "scienceworld", 0.82, 0.82, 3,
        "Memory recalled from earlier science experiments:\n"
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
    "textworld": DomainPreset("textworld", 0.80, 0.85, 3, _GENERIC_HEADER),
    "generic": DomainPreset("generic", 0.80, 0.85, 3, _GENERIC_HEADER),
}


def get_domain(name: str) -> DomainPreset:
    """The preset named ``name``; :class:`ConfigError` listing the known ones otherwise."""
    try:
        return DOMAINS[name]
    except KeyError:
        known = ", ".join(sorted(DOMAINS))
        raise ConfigError(f"unknown domain {name!r}; known domains: {known}") from None
