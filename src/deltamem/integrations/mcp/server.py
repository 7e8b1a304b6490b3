"""The Model Context Protocol server (official ``mcp`` SDK): banks as tools and resources.

Tools (arguments are the HTTP service's request fields, validated by the service's models
in :mod:`deltamem.service.models`; results are its response bodies):

* ``recall`` (goal, scene, domain, bank) → the recall text for the prompt, the matched
  chain of each tree (node ids, Eq. 6 scores, τ, accepted) and a ``recall_id``;
* ``learn`` (goal, scene, domain, steps of action/observation, success, reward,
  recall_id, bank) → every change made or skipped, with reasons; ``success`` may be left
  out when the server has a judge (``deltamem mcp --judge SPEC``), which then decides it
  and returns its verdict;
* ``stats`` (bank) → node counts by tree, depth, kind, label;
* ``tree`` (bank, tree) → every node of one or both trees;
* ``banks`` → the caller's banks.

Resources: ``deltamem://banks/{bank}`` (a bank's stats, JSON) and
``deltamem://banks/{bank}/tree`` (its nodes, JSON); ``resources/list`` lists the caller's
banks.

Transports: stdio (one local agent, tenant ``local`` or ``--tenant``) and streamable HTTP
(shared): every HTTP request needs an API key from the same key file as ``deltamem serve``
(``Authorization: Bearer <key>`` or ``X-API-Key``), refused with 401 before MCP sees it;
each tool call resolves its tenant from its own request's key, so a tenant only ever
reaches its own banks, whatever session id it sends.

Bad arguments, a missing bank, an embedder mismatch come back as tool errors
(``isError``) naming the problem; an unexpected failure is a generic tool error, logged
on the server; neither stops the server.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import Resource as MCPResource
from mcp_types import ToolAnnotations
from pydantic import Field

from deltamem.errors import ConfigError, DeltaMemError
from deltamem.integrations.mcp.tools import BankService, LearnResult, RecallResult, check_tenant
from deltamem.service import models as m
from deltamem.service.banks import BankNotFound
from deltamem.service.keys import KeyRing
from deltamem.service.tenants import LOCAL_TENANT

log = logging.getLogger("deltamem.mcp")

BANK_URI = "deltamem://banks/{bank}"
TREE_URI = "deltamem://banks/{bank}/tree"

INSTRUCTIONS = (
    "Experience memory. Before a task, call `recall` with its goal (and the scene: what the "
    "environment looks like) and put the returned text in your context. After the task, "
    "call `learn` with the steps you took (action and what you observed), whether you "
    "succeeded, and the recall_id you got, so the next similar task starts from what worked "
    "and avoids what failed."
)

BankArg = Annotated[
    str | None,
    Field(description="Bank name (letters, digits, _ . -); omit for the server's default bank."),
]
GoalArg = Annotated[m.Text, Field(min_length=1, description="The task goal, e.g. 'put a clean "
                                  "apple in the fridge'.")]
SceneArg = Annotated[m.Text, Field(description="What the environment looks like at the start "
                                   "(room, objects, page); empty: the goal is used.")]
DomainArg = Annotated[
    m.Domain | None,  # type: ignore[valid-type]
    Field(description="Domain preset of the memory header; omit for the bank's own."),
]


def _api_key(headers: Mapping[str, str] | None) -> str | None:
    """The API key of a request: ``Authorization: Bearer`` first, then ``X-API-Key``."""
    if not headers:
        return None
    auth = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key") or headers.get("X-API-Key") or None


def build_server(
    service: BankService, *, keys: KeyRing | None = None, tenant: str = LOCAL_TENANT
) -> MCPServer:
    """The MCP server over ``service``.

    Args:
        service: the banks (see :class:`~deltamem.integrations.mcp.tools.BankService`).
        keys: API keys → tenants; required for HTTP (each call's tenant comes from its
            request's key). ``None``: every call is ``tenant`` (stdio, one local user).
        tenant: the tenant of every call when ``keys`` is ``None``.
    """
    check_tenant(tenant)
    if keys is not None and service.single:
        raise ConfigError("one bank cannot be split between tenants: serve a storage (a folder "
                          "or a postgresql:// URL without bank=) to API-key clients")
    server: MCPServer = MCPServer(
        "deltamem",
        title="deltamem experience memory",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
    )
    calls = _Calls(service, keys, tenant)
    _add_memory_tools(server, calls)
    _add_bank_tools(server, calls)
    _add_resources(server, calls)
    server.middleware.append(calls.list_banks_as_resources)
    return server


class _Calls:
    """How a call reaches the service: its tenant (from its request's API key, or the one
    fixed tenant), strict arguments, and library errors as tool or resource errors."""

    def __init__(self, service: BankService, keys: KeyRing | None, tenant: str) -> None:
        self.service = service
        self.keys = keys
        self.fixed_tenant = tenant

    def tenant(self, headers: Mapping[str, str] | None) -> str:
        if self.keys is None:
            return self.fixed_tenant
        name = self.keys.tenant(_api_key(headers))
        if name is None:
            raise ToolError("missing or unknown API key")
        return name

    @staticmethod
    def strict(ctx: Context, tool: Callable[..., Any]) -> None:
        """Unknown argument names are an error (the service's bodies forbid extra fields):
        a misspelt ``recallId`` must not be dropped silently."""
        allowed = set(inspect.signature(tool).parameters) - {"ctx"}
        params = ctx.request_context.params or {}
        given = params.get("arguments") or {}
        extra = sorted(set(given) - allowed) if isinstance(given, Mapping) else []
        if extra:
            raise ToolError(f"unknown argument(s) {', '.join(map(repr, extra))}; expected "
                            f"some of {', '.join(sorted(allowed))}")

    def tool(self, ctx: Context, tool: Callable[..., Any],
             call: Callable[[BankService, str], Any], *, writes: bool = False) -> Any:
        """``call(service, tenant)`` for a tool call: arguments checked, library errors (bad
        input, missing bank, embedder mismatch, store, LLM) as tool errors; a tool that
        ``writes`` refuses a read-only API key."""
        self.strict(ctx, tool)
        tenant = self.tenant(ctx.headers)
        if writes and self.keys is not None and not self.keys.writable(_api_key(ctx.headers)):
            raise ToolError("this API key is read-only")
        try:
            return call(self.service, tenant)
        except ToolError:
            raise
        except DeltaMemError as e:
            raise ToolError(str(e)) from e

    def resource(self, ctx: Context, make: Callable[[BankService, str], Any]) -> str:
        """A resource's JSON: ``make(service, tenant)``'s body; a missing bank is
        :class:`ResourceNotFoundError`, other errors :class:`ResourceError`."""
        try:
            tenant = self.tenant(ctx.headers)
        except ToolError as e:
            raise ResourceError(str(e)) from e
        try:
            return json.dumps(make(self.service, tenant).model_dump(mode="json"),
                              ensure_ascii=False)
        except BankNotFound as e:
            raise ResourceNotFoundError(str(e)) from e
        except DeltaMemError as e:
            raise ResourceError(str(e)) from e

    async def list_banks_as_resources(
        self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """Middleware: ``resources/list`` also lists the caller's banks."""
        result = await call_next(ctx)
        if ctx.method != "resources/list" or not isinstance(result, dict):
            return result
        try:
            t = self.tenant(getattr(ctx.request, "headers", None))
            found = await anyio.to_thread.run_sync(self.service.list_banks, t)
        except (ToolError, DeltaMemError) as e:
            log.info("resources/list: banks not listed: %s", e)
            return result
        extra = [
            MCPResource(
                uri=BANK_URI.format(bank=b.name), name=b.name, mime_type="application/json",
                description=f"deltamem bank {b.name!r}"
                + (f": {b.nodes['task']} skills, {b.nodes['env']} knowledge nodes"
                   if b.nodes else ""),
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
            for b in found.banks
        ]
        return {**result, "resources": [*result.get("resources", []), *extra]}


_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)


def _add_memory_tools(server: MCPServer, calls: _Calls) -> None:
    """``recall`` before a task, ``learn`` after it."""

    @server.tool(annotations=_READ_ONLY)
    def recall(
        goal: GoalArg,
        ctx: Context,
        scene: SceneArg = "",
        domain: DomainArg = None,
        bank: BankArg = None,
    ) -> RecallResult:
        """Recall experience for a task before acting on it (read-only).

        Returns `text` to put in your context (empty when the bank knows nothing similar),
        the matched chain of each tree (`details`: node id, score, threshold, accepted,
        chain of node ids; `items`: each recalled node) and `recall_id` for `learn`.
        """
        return calls.tool(ctx, recall, lambda s, t: s.recall(
            t, goal=goal, scene=scene, domain=domain, bank=bank))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                             idempotent_hint=False))
    def learn(
        goal: GoalArg,
        steps: Annotated[list[m.StepIn], Field(min_length=1, max_length=m.MAX_STEPS,
                                               description="The steps taken, in order: action "
                                               "and the observation it produced.")],
        ctx: Context,
        success: Annotated[bool | None, Field(description="Whether the task was accomplished; "
                                              "leave out to let the server's judge decide "
                                              "from the steps (when it has one).")] = None,
        reward: Annotated[float | None, Field(description="Final reward; default 1 on success, "
                                              "0 on failure.")] = None,
        scene: SceneArg = "",
        domain: DomainArg = None,
        recall_id: Annotated[str | None, Field(max_length=200, description="The recall_id "
                                               "`recall` returned for this task.")] = None,
        bank: BankArg = None,
        episode_id: Annotated[str | None, Field(min_length=1, max_length=200, description=
                                                "Id of the episode; learning the same id "
                                                "twice changes nothing.")] = None,
    ) -> LearnResult:
        """Learn from a finished episode (creates the bank on first use).

        Pass the same goal and scene as the recall, and its recall_id. Successes become
        skills and knowledge; failures become warnings for the next similar task. Without
        `success`, the server's judge decides from the steps (`verdict`); an uncertain
        verdict learns nothing.
        """
        return calls.tool(ctx, learn, lambda s, t: s.learn(
            t, goal=goal, steps=steps, success=success, reward=reward, scene=scene,
            domain=domain, recall_id=recall_id, bank=bank, episode_id=episode_id),
            writes=True)


def _add_bank_tools(server: MCPServer, calls: _Calls) -> None:
    """``stats``, ``tree`` and ``banks``: looking at the caller's banks (read-only)."""

    @server.tool(annotations=_READ_ONLY)
    def stats(ctx: Context, bank: BankArg = None) -> m.StatsResponse:
        """Node counts of a bank by tree, depth, kind and label; episodes learned."""
        return calls.tool(ctx, stats, lambda s, t: s.stats(t, bank=bank))

    @server.tool(name="tree", annotations=_READ_ONLY)
    def tree_tool(
        ctx: Context,
        bank: BankArg = None,
        tree: Annotated[Literal["task", "env", "both"], Field(
            description="task (skills), env (knowledge) or both")] = "both",
    ) -> m.TreeResponse:
        """Every node of the bank's Task-Tree, Env-Tree or both, with payloads."""
        return calls.tool(ctx, tree_tool, lambda s, t: s.tree(t, bank=bank, which=tree))

    @server.tool(annotations=_READ_ONLY)
    def banks(ctx: Context) -> m.BankListResponse:
        """Your banks: names and node counts."""
        return calls.tool(ctx, banks, lambda s, t: s.list_banks(t))


def _add_resources(server: MCPServer, calls: _Calls) -> None:
    """A bank's statistics and its trees as JSON resources."""

    @server.resource(BANK_URI, name="bank", mime_type="application/json",
                     description="A bank's statistics (node counts by tree, depth, kind, label).")
    def bank_resource(bank: str, ctx: Context) -> str:
        return calls.resource(ctx, lambda s, t: s.stats(t, bank=bank))

    @server.resource(TREE_URI, name="bank-tree", mime_type="application/json",
                     description="Every node of a bank's two trees.")
    def tree_resource(bank: str, ctx: Context) -> str:
        return calls.resource(ctx, lambda s, t: s.tree(t, bank=bank))


def http_app(
    server: MCPServer, keys: KeyRing, *, host: str = "127.0.0.1", path: str = "/mcp"
) -> Any:
    """The streamable-HTTP ASGI app, behind an API-key gate (401 without a valid key)."""
    inner = server.streamable_http_app(streamable_http_path=path, host=host)
    return KeyGate(inner, keys)


class KeyGate:
    """ASGI middleware: HTTP requests without a known API key get 401 (JSON ``detail``)."""

    def __init__(self, app: Any, keys: KeyRing) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        key = _api_key(headers)
        if self.keys.tenant(key) is None:
            body = json.dumps({"detail": "missing API key" if not key else "unknown API key"})
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)


def _version() -> str:
    from deltamem.version import __version__

    return __version__
