"""A thin HTTP client with the library's recall / learn / stats, so an agent switches with one line.

    mem = DeltaMem.open("bank.db", embedder=emb)                     # local
    mem = Client("http://memory:8000", bank="bank", api_key=KEY)     # remote, same calls

:meth:`Client.recall` returns a :class:`~deltamem.types.Recall`, :meth:`Client.learn`
:class:`~deltamem.types.Changes`; :meth:`Client.list_banks` and :meth:`Client.delete_bank`
manage the tenant's banks; the token usage the service reports for the last
call is in :attr:`Client.last_usage`. Service errors become the library's errors
(:class:`~deltamem.errors.InvalidInputError` for 422, ``StoreError`` otherwise), with
the service's reason.
"""

from __future__ import annotations

from typing import Any

from deltamem.errors import (
    ConfigError,
    DeltaMemError,
    EmbedderMismatchError,
    InvalidInputError,
    StoreError,
)
from deltamem.memory import Memory
from deltamem.types import Change, Changes, Episode, Recall, RecallItem, Task, Usage

__all__ = ["Client"]

_RAISE = object()  # sentinel: a missing bank raises


class Client(Memory):
    """A bank on a deltamem service.

    Args:
        url: base URL of the service, e.g. ``http://127.0.0.1:8000``.
        bank: bank name (per tenant; created by the first learn).
        api_key: the tenant's key.
        timeout: seconds per request.
        transport: an ``httpx`` transport (tests pass the app's in-process transport).
    """

    name = "deltamem-remote"

    def __init__(
        self,
        url: str,
        *,
        bank: str,
        api_key: str,
        timeout: float = 60.0,
        transport: Any = None,
    ) -> None:
        try:
            import httpx
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ConfigError("deltamem.Client needs httpx: pip install 'deltamem[server]'") from e
        self.url = url.rstrip("/")
        self.bank = bank
        self.last_usage = Usage()
        self._http = httpx.Client(
            base_url=f"{self.url}/v1",
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        bank: str | None = None,
        missing: Any = _RAISE,
    ) -> Any:
        """``method`` on ``path`` of ``bank`` (default: this client's bank), e.g. ``/recall``.

        ``missing``, when given, is returned instead of raising when the service answers
        that the tenant has no such bank.
        """
        return self._send(method, f"/banks/{bank or self.bank}{path}", body,
                          where=f"on bank {bank or self.bank!r}", missing=missing)

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, *, where: str,
        missing: Any = _RAISE,
    ) -> Any:
        import httpx

        try:
            res = self._http.request(method, path, json=body)
        except httpx.HTTPError as e:
            raise StoreError(f"cannot reach deltamem service at {self.url}: {e}") from e
        if res.status_code >= 400:
            try:
                detail = res.json().get("detail")
            except (ValueError, AttributeError):
                detail = res.text
            msg = f"{method} {path} {where}: {res.status_code} {detail}"
            if res.status_code == 404 and missing is not _RAISE and "no bank named" in str(detail):
                return missing
            if res.status_code == 422:
                raise InvalidInputError(msg)
            if res.status_code == 409:
                raise EmbedderMismatchError(msg) if "embedder" in str(detail) else StoreError(msg)
            raise StoreError(msg) if res.status_code != 401 else DeltaMemError(msg)
        if res.headers.get("content-type", "").startswith("application/x-ndjson"):
            return res.text
        data = res.json()
        if isinstance(data, dict) and "usage" in data:
            self.last_usage = Usage.from_dict(
                {p: c for p, c in data["usage"].get("by_purpose", {}).items()}
            )
        return data

    def recall(self, task: Task) -> Recall:
        """Same as :meth:`DeltaMem.recall`; an unknown bank recalls nothing."""
        data = self._call("POST", "/recall", {"task": _task_body(task)})
        return Recall(
            data["text"], tuple(RecallItem(**i) for i in data["items"]), data["details"]
        )

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Same as :meth:`DeltaMem.learn`, run by the service in one transaction."""
        episode.validate()
        body: dict[str, Any] = {
            "episode": {
                "id": episode.id,
                "task": _task_body(episode.task),
                "steps": [s.to_dict() for s in episode.steps],
                "success": episode.success,
                "reward": episode.reward,
                "max_steps": episode.max_steps,
            }
        }
        if recall is not None:
            body["recall"] = recall.to_dict()
        data = self._call("POST", "/learn", body)
        return Changes(tuple(Change(**c) for c in data["changes"]))

    def stats(self) -> dict[str, Any]:
        """Same figures as :meth:`DeltaMem.stats` (plus ``bank`` and ``meta``)."""
        return self._call("GET", "/stats")

    def export(self) -> str:
        """The bank as JSON lines (what ``deltamem export`` writes)."""
        return self._call("GET", "/export")

    def list_banks(self) -> dict[str, dict[str, int] | None]:
        """The tenant's banks: name → node count per tree (``None``: unreadable right now)."""
        data = self._send("GET", "/banks", None, where="on the service")
        return {b["name"]: b["nodes"] for b in data["banks"]}

    def delete_bank(self, bank: str | None = None) -> bool:
        """Delete ``bank`` (default: this client's) with everything in it.

        Returns False when the tenant has no bank of that name (the service's 404);
        any other failure raises. The client stays usable: a later :meth:`learn`
        creates the bank anew.
        """
        return self._call("DELETE", "", bank=bank, missing=False) is not False

    def close(self) -> None:
        self._http.close()


def _task_body(task: Task) -> dict[str, Any]:
    d = task.to_dict()
    d.pop("meta", None)  # never sent: may hold oracle labels
    return d
