"""The LLM extractor: prompt templates → LLM → validated payload (paper §3.4–3.5).

Templates are plain-text files ``<prompt_dir>/<template domain>/<role>.txt``
(default: ``deltamem/prompts/extract``), one per template domain
(``alfworld``, ``scienceworld``, ``webshop``, ``generic``; domain ``textworld``
uses ``generic``) and per role (the six extraction roles plus
``consolidate_skill`` and ``consolidate_knowledge``). They are
:class:`string.Template` texts; a literal ``$`` is written ``$$``. Variables:

=====================  ==================================================================
``$env_description``   ``task.scene_text`` (scene, else first observation), middle-truncated
``$task_description``  ``task.goal``
``$result``            ``SUCCESS`` or ``FAILURE``
``$steps``             number of steps taken
``$max_steps``         the episode's (else the task's) step cap, ``unknown`` if neither
``$reward``            the episode reward (``1`` is the full score)
``$trajectory``        ``"> action\\nobservation"`` per step, preceded by the first
                       observation when it is not already the env description; kept
                       within ``max_trajectory_chars`` by cutting out the middle
``$retrieved_memory``  the retrieved chain, :func:`~deltamem.core.payload.render_chain`
                       (residual and consolidation roles only)
=====================  ==================================================================

Consolidation templates use only ``$retrieved_memory``. Every answer is
validated with :func:`deltamem.extract.schema.parse_output`; an invalid answer
gets exactly one repair call, after which the extractor gives up with
:class:`~deltamem.errors.ExtractionError`.

**Residual successes compose** (:mod:`deltamem.extract.residual`). The model writes the
episode's whole procedure as numbered steps (the ``task_residual_success`` template asks for
it, copying the memory's wording where the episode did the same; under a chain of failure
records only, the ``task_root_success`` template is used), and the residual stored is what
turns the chain's composed steps into those steps, worked out by
:func:`~deltamem.extract.residual.residual_skill`: so the chain of every SUCCESS node
composes to the steps the model wrote for its episode, and a failure record's text is never
what a delta is taken against. An answer without numbered steps is invalid (repaired once,
then rejected). A consolidated skill (Eq. 8) holds the chain's composed steps with the
model's activation, termination and notes. WebShop's skills are worked example dialogs, not
step lists: there a residual under a successful base is the paper's patch, and one under
failure records only is a whole example.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from deltamem.core.payload import ChainEntry, Payload, TreeName, render_chain
from deltamem.domains import get_domain
from deltamem.errors import ConfigError, ExtractionError, InvalidInputError
from deltamem.extract.base import EXTRACTION_ROLES, SKIPPABLE, Role
from deltamem.extract.residual import (
    PROCEDURE_MAX,
    chain_steps,
    fit_lines,
    numbered,
    procedure_steps,
    residual_skill,
)
from deltamem.extract.schema import ALL_ROLES, parse_output, schema_for
from deltamem.llm.base import LLMClient, Message
from deltamem.llm.structured import RAW_IN_LOG, complete_with_repair, truncate_middle
from deltamem.templates import read_template
from deltamem.types import Episode, Step

__all__ = [
    "PROMPT_VARIABLES",
    "TEMPLATE_DOMAINS",
    "LLMExtractor",
    "Rejection",
    "load_template",
    "render_trajectory",
    "template_domain",
]

logger = logging.getLogger("deltamem.extract")

PROMPT_VARIABLES: frozenset[str] = frozenset({
    "env_description", "task_description", "result", "steps", "max_steps", "reward",
    "trajectory", "retrieved_memory",
})
"""The only ``$names`` a template may use."""
TEMPLATE_DOMAINS: tuple[str, ...] = ("alfworld", "scienceworld", "webshop", "generic")
"""Domains with their own template folder."""

_SCENE_CHARS = 1500
_MIN_TRAJECTORY_CHARS = 200
_SYSTEM = ("You turn an agent's episodes into entries of its long-term memory. "
           "Answer with one JSON object and nothing else.")


@dataclass(frozen=True)
class Rejection:
    """An LLM answer that stayed invalid after the repair call (nothing was stored).

    ``reason`` is the validator's message for the last answer, ``raw`` that answer.
    """

    role: str
    domain: str
    reason: str
    raw: str


def template_domain(domain: str) -> str:
    """The template folder for ``domain``; :class:`ConfigError` for an unknown domain."""
    get_domain(domain)
    return domain if domain in TEMPLATE_DOMAINS else "generic"


def _root(prompt_dir: Path | None) -> Traversable:
    if prompt_dir is not None:
        return Path(prompt_dir)
    return resources.files("deltamem").joinpath("prompts", "extract")


def load_template(domain: str, role: str, prompt_dir: Path | None = None) -> string.Template:
    """Read and check the template of ``role`` for ``domain``.

    Raises :class:`ConfigError` for an unknown domain or role, a missing file,
    a malformed ``$`` placeholder or a variable outside :data:`PROMPT_VARIABLES`.
    """
    if role not in ALL_ROLES:
        raise ConfigError(f"unknown extraction role {role!r}; known roles: {', '.join(ALL_ROLES)}")
    folder = template_domain(domain)
    path = _root(prompt_dir).joinpath(folder, f"{role}.txt")
    return read_template(path, PROMPT_VARIABLES, "extraction prompt")


def render_trajectory(steps: Sequence[Step], first_observation: str = "") -> str:
    """Steps as ``"> action"`` lines each followed by the observation (no truncation)."""
    lines = [first_observation.strip()] if first_observation.strip() else []
    for step in steps:
        lines.append(f"> {step.action}")
        if step.observation.strip():
            lines.append(step.observation.strip())
    return "\n".join(lines)


class LLMExtractor:
    """Extractor backed by an LLM and the per-domain prompt templates.

    Args:
        llm: any :class:`~deltamem.llm.base.LLMClient`; calls are made with purpose
            ``extract`` (``consolidate`` for consolidation) and the role's JSON schema.
        max_trajectory_chars: character budget of the rendered trajectory; longer
            ones keep their beginning and end
            (:func:`~deltamem.llm.structured.truncate_middle`).
        max_tokens: completion cap of each call.
        on_reject: called with a :class:`Rejection` each time an answer stays
            invalid after the repair call (before the error is raised).
        prompt_dir: a folder laid out like ``deltamem/prompts/extract`` to use instead.

    LLM backend errors (:class:`~deltamem.errors.LLMError`) propagate unchanged.
    """

    name = "llm"

    def __init__(
        self,
        llm: LLMClient,
        *,
        max_trajectory_chars: int = 6000,
        max_tokens: int = 600,
        on_reject: Callable[[Rejection], None] | None = None,
        prompt_dir: Path | None = None,
    ) -> None:
        if max_trajectory_chars < _MIN_TRAJECTORY_CHARS:
            raise ConfigError(f"max_trajectory_chars must be >= {_MIN_TRAJECTORY_CHARS}, "
                              f"got {max_trajectory_chars}")
        if max_tokens < 1:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
        self.llm = llm
        self.max_trajectory_chars = max_trajectory_chars
        self.max_tokens = max_tokens
        self.on_reject = on_reject
        self.prompt_dir = prompt_dir
        self._templates: dict[tuple[str, str], string.Template] = {}

    # -- prompts ---------------------------------------------------------------------------

    def _template(self, domain: str, role: str) -> string.Template:
        key = (template_domain(domain), role)
        if key not in self._templates:
            self._templates[key] = load_template(domain, role, self.prompt_dir)
        return self._templates[key]

    def render_prompt(
        self, role: Role, episode: Episode, chain: Sequence[ChainEntry], domain: str
    ) -> str:
        """The user prompt :meth:`extract` sends (for inspection and tests).

        Raises :class:`ConfigError` for an unknown role or domain and
        :class:`InvalidInputError` for a malformed episode or a residual role
        without a chain.
        """
        if role not in EXTRACTION_ROLES:
            raise ConfigError(f"unknown extraction role {role!r}; "
                              f"known roles: {', '.join(EXTRACTION_ROLES)}")
        template = self._template(domain, role)
        episode.validate()
        residual = role in SKIPPABLE
        if residual and not chain:
            raise InvalidInputError(f"role {role} needs the retrieved chain, got an empty one")
        task = episode.task
        scene = task.scene_text.strip()
        first = task.observation if task.observation.strip() != scene else ""
        tree: TreeName = "env" if role.startswith("env_") else "task"
        max_steps = episode.max_steps or task.max_steps
        return template.substitute(
            env_description=truncate_middle(scene or "(not described)", _SCENE_CHARS),
            task_description=task.goal.strip(),
            result="SUCCESS" if episode.success else "FAILURE",
            steps=str(len(episode.steps)),
            max_steps=str(max_steps) if max_steps else "unknown",
            reward=f"{episode.reward:g}",
            trajectory=truncate_middle(render_trajectory(episode.steps, first),
                                       self.max_trajectory_chars),
            retrieved_memory=render_chain(tree, chain) if residual else "",
        )

    def render_consolidation_prompt(
        self, tree: TreeName, chain: Sequence[ChainEntry], domain: str
    ) -> str:
        """The user prompt :meth:`consolidate` sends."""
        role = self._consolidation_role(tree)
        template = self._template(domain, role)
        if not chain:
            raise InvalidInputError("consolidation needs a non-empty chain")
        values = dict.fromkeys(PROMPT_VARIABLES, "")
        values["retrieved_memory"] = render_chain(tree, chain)
        return template.substitute(values)

    @staticmethod
    def _consolidation_role(tree: str) -> str:
        if tree == "task":
            return "consolidate_skill"
        if tree == "env":
            return "consolidate_knowledge"
        raise ConfigError(f"unknown tree {tree!r}; expected 'task' or 'env'")

    # -- Extractor protocol ----------------------------------------------------------------

    def extract(
        self, role: Role, episode: Episode, chain: Sequence[ChainEntry], domain: str
    ) -> Payload | None:
        """Distil ``episode`` into a payload for ``role`` (``None``: the model chose skip).

        ``chain`` is shown to residual roles only. Raises :class:`ExtractionError`
        when the answer is still invalid after one repair call (``on_reject`` has
        been called and a warning logged), :class:`ConfigError` for an unknown
        role or domain, :class:`InvalidInputError` for a bad episode or a residual
        role with an empty chain.
        """
        if role == "task_residual_success":
            return self._residual_success(episode, chain, domain)
        prompt = self.render_prompt(role, episode, chain, domain)
        return self._run(role, domain, prompt, purpose="extract")

    def _residual_success(self, episode: Episode, chain: Sequence[ChainEntry], domain: str
                          ) -> Payload | None:
        """A residual success that composes (module doc)."""
        if not chain:
            raise InvalidInputError("role task_residual_success needs the retrieved chain, "
                                    "got an empty one")
        based = any(e.label == "SUCCESS" for e in chain)
        examples = template_domain(domain) == "webshop"
        if examples and based:  # a patch on a worked example (the paper's form)
            prompt = self.render_prompt("task_residual_success", episode, chain, domain)
            return self._run("task_residual_success", domain, prompt, purpose="extract")
        role: Role = "task_residual_success" if based else "task_root_success"
        prompt = self.render_prompt(role, episode, chain if based else (), domain)
        full = self._run(role, domain, prompt, purpose="extract", steps=not examples)
        if full is None or examples:
            return full  # the model's skip; or a whole example under failure records only
        steps = procedure_steps(full.procedure)
        notes = "\n".join(line for line in full.procedure.splitlines()
                          if line.strip() and not procedure_steps(line))
        return residual_skill(chain, steps, activation=full.activation,
                              variant=full.activation, termination=full.termination,
                              notes=notes)

    def consolidate(self, tree: TreeName, chain: Sequence[ChainEntry], domain: str) -> Payload:
        """Fuse a root→v chain into one self-contained payload (Eq. 8).

        A skill keeps the chain's composed steps (Eq. 7) with the model's activation,
        termination and notes (module doc). Errors as :meth:`extract`; ``ConfigError`` for
        a tree other than task/env.
        """
        prompt = self.render_consolidation_prompt(tree, chain, domain)
        role = self._consolidation_role(tree)
        payload = self._run(role, domain, prompt, purpose="consolidate")
        if payload is None:  # unreachable: the schema of consolidation roles has no skip
            raise ExtractionError(f"{role} answered skip", role=role)
        steps = chain_steps(chain) if tree == "task" else []
        if not steps or template_domain(domain) == "webshop":
            return payload
        body = numbered(steps)
        notes = "\n".join(line for line in payload.procedure.splitlines()
                          if line.strip() and not procedure_steps(line))
        more = fit_lines(notes, PROCEDURE_MAX - len(body) - 1)
        return Payload(payload.activation, "\n".join(x for x in (body, more) if x),
                       payload.termination)

    # -- calling and repairing -------------------------------------------------------------

    def _run(self, role: str, domain: str, prompt: str, *, purpose: str,
             steps: bool = False) -> Payload | None:
        """Ask, validate (``steps``: the procedure must hold numbered steps), repair once,
        then reject (logged, :attr:`on_reject`, :class:`ExtractionError`)."""
        messages: list[Message] = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": prompt},
        ]

        def parse(raw: str) -> Payload | None:
            payload = parse_output(role, raw, domain=domain)
            if steps and payload is not None and not procedure_steps(payload.procedure):
                raise ExtractionError(
                    "execution_procedure must list the steps as numbered lines "
                    '("1. ...\\n2. ...")', role=role, raw=raw)
            return payload

        try:
            return complete_with_repair(
                self.llm, messages, parse=parse,
                repair_request=lambda reason: _repair_request(role, reason), purpose=purpose,
                schema=schema_for(role, domain), max_tokens=self.max_tokens)
        except ExtractionError as e:
            reason, raw = str(e), e.raw
        logger.warning("rejected %s output (domain %s) after repair: %s; raw output: %r",
                       role, domain, reason, raw[:RAW_IN_LOG])
        if self.on_reject is not None:
            self.on_reject(Rejection(role=role, domain=domain, reason=reason, raw=raw))
        raise ExtractionError(f"{role} output rejected after one repair: {reason}",
                              role=role, raw=raw)


def _repair_request(role: str, reason: str) -> str:
    keys = '"activation_condition", "execution_procedure" and "termination_condition"'
    if role in SKIPPABLE:
        shape = f'either {{"skip": true}} or an object with exactly the keys {keys}'
    else:
        shape = f'an object with exactly the keys {keys} ("skip" is not allowed here)'
    return (f"Your answer was rejected: {reason}\n"
            f"Reply again with ONLY the corrected JSON object: {shape}, all string values, "
            f"within the length limits. No text before or after it.")
