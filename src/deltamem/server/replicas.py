"""Service replicas on one database: start them, load them, kill one, audit the bank.

Several ``deltamem serve`` processes on one PostgreSQL database serve the same banks; a
learn's write decision is serialised across them by the bank's advisory lock (see
:meth:`deltamem.memories.deltamem.DeltaMem.learn`). This module is the harness that shows
it, on loopback only and bounded in time:

* :func:`start_replicas` starts N ``deltamem serve`` processes on free ports of 127.0.0.1
  (:class:`Replica`: its URL, its process, :meth:`Replica.kill`);
* :func:`run_load` sends ``clients`` × ``learns`` (recall, then learn) over HTTP, each client
  spreading its requests over the replicas and retrying a request on the next replica when
  one does not answer (a killed replica), and can SIGKILL a replica once half the requests
  are done;
* :func:`audit` reads the bank back and checks it: ROOTs of the same trigger written twice,
  chains consolidated twice, episodes lost or learned twice, and the trees against a
  one-process replay of the same episodes in the order the database committed them
  (:func:`replay`), node for node: kind, label, parent, depth, success hits, flag.

``benchmarks/replicas.py`` runs it for 1, 2 and 4 replicas and prints the table;
``scripts/replicas.sh`` starts PostgreSQL and N replicas for a user to try.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.errors import DeltaMemError
from deltamem.seeding import check_random_state

__all__ = [
    "GOALS",
    "Audit",
    "LoadResult",
    "Replica",
    "audit",
    "episode_body",
    "replay",
    "run_load",
    "start_replicas",
    "stop_replicas",
    "write_key_file",
]

GOALS = (
    "put a clean apple in fridge", "put a hot mug in cabinet", "examine the book with the desklamp",
    "put two cellphone in sofa", "heat some egg and put it in garbagecan",
    "cool some potato and put it in countertop", "put a clean knife in drawer",
    "find two pillow and put them in armchair", "look at the vase under the floorlamp",
    "put some keychain on dresser", "clean some plate and put it in shelf",
    "put a cool tomato in microwave",
)  # fmt: skip
"""The twelve goals the clients draw from (so every goal is learned many times at once)."""

SCENES = (
    "You are in a kitchen. You see a fridge 1, a countertop 1, a sinkbasin 1 and a cabinet 1.",
    "You are in a bedroom. You see a bed 1, a desk 1, a dresser 1 and a drawer 1.",
    "You are in a living room. You see a sofa 1, an armchair 1, a shelf 1 and a floorlamp 1.",
    "You are in a bathroom. You see a sinkbasin 1, a garbagecan 1 and a towelholder 1.",
)


def episode_body(client: int, i: int, rng: random.Random) -> dict[str, Any]:
    """The JSON body of episode ``i`` of ``client``: a goal of :data:`GOALS`, a scene of
    :data:`SCENES`, two or three steps of a few variants (where the goal's object lay), success
    three times in four; ids are unique."""
    g = rng.randrange(len(GOALS))
    words = GOALS[g].split()
    obj = next((w for w in words[1:] if w not in ("a", "some", "two", "the", "clean", "hot",
                                                  "cool", "at")), "thing")
    place = rng.choice(["countertop", "shelf", "desk", "cabinet"])
    steps = [
        {"action": f"go to {place} 1", "observation": f"On the {place} 1, you see a {obj} 1."},
        {"action": f"take {obj} 1 from {place} 1",
         "observation": f"You pick up the {obj} 1 from the {place} 1."},
    ]
    success = rng.random() < 0.75
    if rng.random() < 0.5:
        steps.append({"action": "look", "observation": "Nothing happens."})
    steps[-1]["done"] = True
    return {"id": f"c{client}-e{i}",
            "task": {"id": f"goal-{g}", "goal": GOALS[g], "scene": rng.choice(SCENES),
                     "domain": "alfworld"},
            "steps": steps, "success": success, "reward": 1.0 if success else 0.0}


# -- replicas ----------------------------------------------------------------------------------

@dataclass
class Replica:
    """One ``deltamem serve`` process on 127.0.0.1."""

    index: int
    port: int
    process: subprocess.Popen[bytes]
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL: no shutdown, connections cut) and reap it."""
        if self.alive():
            self.process.send_signal(sig)
        self.process.wait(timeout=30)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the replica gets SIGTERM when the process that started it dies (a harness
    killed by a timeout leaves no server behind)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_replicas(
    storage: str,
    n: int,
    *,
    keys: str | Path,
    embedder: str = "hashing:256",
    domain: str = "alfworld",
    log_dir: str | Path | None = None,
    timeout: float = 120.0,
) -> list[Replica]:
    """Start ``n`` ``deltamem serve STORAGE`` processes on free loopback ports; return them
    once each answers ``/healthz`` (:class:`DeltaMemError` after ``timeout`` seconds, with
    every one started stopped again)."""
    import httpx

    if n < 1:
        raise DeltaMemError(f"replicas must be >= 1, got {n}")
    out: list[Replica] = []
    try:
        for i in range(n):
            port = _free_port()
            log = Path(log_dir) / f"replica-{i}.log" if log_dir is not None else None
            sink: Any = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
            cmd = [sys.executable, "-m", "deltamem", "serve", storage, "--keys", str(keys),
                   "--host", "127.0.0.1", "--port", str(port), "--embedder", embedder,
                   "--domain", domain]
            proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True,
                                    preexec_fn=_die_with_parent if sys.platform == "linux"
                                    else None)
            if log is not None:
                sink.close()
            out.append(Replica(i, port, proc, log))
        deadline = time.monotonic() + timeout
        for r in out:
            while True:
                if not r.alive():
                    raise DeltaMemError(f"replica {r.index} exited with {r.process.returncode}"
                                        + (f" (log: {r.log})" if r.log else ""))
                try:
                    if httpx.get(f"{r.url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise DeltaMemError(f"replica {r.index} did not answer within {timeout:g} s")
                time.sleep(0.2)
    except BaseException:
        stop_replicas(out)
        raise
    return out


def stop_replicas(replicas: Sequence[Replica]) -> None:
    """Stop every replica still running (SIGTERM, then SIGKILL after 10 s)."""
    for r in replicas:
        if r.alive():
            r.process.terminate()
    for r in replicas:
        try:
            r.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            r.kill()


# -- load ---------------------------------------------------------------------------------------

@dataclass
class LoadResult:
    """What the clients saw.

    ``statuses`` counts the final answer of every request by status code; ``server_errors``
    every 5xx answer, including ones retried; ``retries`` the attempts that failed and were
    sent again to another replica (no answer, or a 5xx), ``failures`` them by kind (the
    exception's class, or the status code); ``killed`` the replica killed mid-load (``None``:
    none);
    ``episodes`` the bodies sent, by id; ``unfinished`` requests given up at the deadline.
    """

    replicas: int
    clients: int
    learns: int
    wall_s: float
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: int = 0
    retries: int = 0
    unfinished: int = 0
    killed: int | None = None
    episodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def throughput(self) -> float:
        """Answered requests (recalls and learns) per second."""
        return self.requests / self.wall_s if self.wall_s > 0 else 0.0


def run_load(
    replicas: Sequence[Replica],
    *,
    key: str,
    bank: str,
    clients: int = 8,
    learns: int = 200,
    seed: int = 0,
    kill: int | None = None,
    deadline_s: float = 600.0,
    request_timeout: float = 60.0,
    attempts: int = 3,
) -> LoadResult:
    """``clients`` threads, each ``learns`` times: recall the episode's task, then learn the
    episode (without the recall: the service decides the write, under the bank's lock).

    Client ``c`` sends its ``i``-th pair to replica ``(c + i) mod n``; a request that gets no
    answer (connection refused or cut) or a 5xx goes to the next replica, after a short
    pause, at most ``attempts`` × n times and until the deadline (then it counts as
    unfinished). ``kill``: the index of a replica to SIGKILL once half the requests are done.
    """
    import httpx

    n = len(replicas)
    total = clients * learns * 2
    result = LoadResult(n, clients, learns, 0.0)
    bodies = {c: [episode_body(c, i, rng) for i in range(learns)]
              for c, rng in ((c, check_random_state(seed * 1000 + c)) for c in range(clients))}
    for c in range(clients):
        for b in bodies[c]:
            result.episodes[b["id"]] = b
    lock = threading.Lock()
    done = 0
    stop_at = time.monotonic() + deadline_s
    headers = {"X-API-Key": key}

    def count(status: int | None, retried: bool, changes: Sequence[str] = (),
              why: str = "") -> None:
        nonlocal done
        with lock:
            if retried:
                result.retries += 1
                result.failures[why] += 1
            if status is None:
                return
            if status >= 500:
                result.server_errors += 1
                return
            result.statuses[status] += 1
            result.changes.update(changes)
            done += 1
            crossed = kill is not None and result.killed is None and done >= total // 2
            if crossed:
                result.killed = kill
        if crossed:
            replicas[kill].kill()  # type: ignore[index]

    def send(http: Any, start: int, path: str, body: dict[str, Any]) -> None:
        r = start
        for attempt in range(attempts * n):
            if time.monotonic() >= stop_at:
                break
            if attempt:
                time.sleep(min(1.0, 0.05 * attempt))
            try:
                resp = http.post(f"{replicas[r].url}/v1/banks/{bank}/{path}", json=body,
                                 headers=headers)
            except httpx.TransportError as e:
                count(None, retried=True, why=type(e).__name__)
                r = (r + 1) % n
                continue
            changes = ([c["kind"] for c in resp.json().get("changes", [])]
                       if path == "learn" and resp.status_code == 200 else [])
            count(resp.status_code, retried=False, changes=changes)
            if resp.status_code < 500:
                return
            count(None, retried=True, why=str(resp.status_code))
            r = (r + 1) % n
        with lock:
            result.unfinished += 1

    def client(c: int) -> None:
        with httpx.Client(timeout=request_timeout) as http:
            for i, body in enumerate(bodies[c]):
                start = (c + i) % n
                send(http, start, "recall", {"task": body["task"]})
                send(http, start, "learn", {"episode": body})

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, stop_at - time.monotonic()) + request_timeout)
    result.wall_s = time.perf_counter() - t0
    return result


# -- audit --------------------------------------------------------------------------------------

def _shape(nodes: Sequence[Any]) -> set[tuple[Any, ...]]:
    """The trees with node ids replaced by what identifies a node across two builds: its
    tree, the episode that wrote it and its origin (one extracted node and at most one
    consolidated ROOT per tree and episode)."""
    key = {n.id: (n.tree, n.episode_id, n.origin) for n in nodes}
    return {(key[n.id], key.get(n.parent) if n.parent else None, n.kind, n.label, n.depth,
             n.success_hits, bool(n.consolidated),
             key.get(n.source) if n.source else None) for n in nodes}


def replay(
    episodes: Sequence[Mapping[str, Any]],
    *,
    embedder: str,
    config: Mapping[str, Any],
) -> list[Any]:
    """Learn ``episodes`` (service JSON bodies) one after the other in one process into a new
    in-memory bank with ``config`` (a bank's stored configuration); every node, both trees."""
    from deltamem.embed.factory import make_embedder
    from deltamem.memories.deltamem import DeltaMem
    from deltamem.service.models import EpisodeIn

    mem = DeltaMem.open(":memory:", embedder=make_embedder(embedder), config=dict(config))
    try:
        for body in episodes:
            mem.learn(EpisodeIn.model_validate(body).to_episode())
        return [*mem.nodes("task"), *mem.nodes("env")]
    finally:
        mem.close()


@dataclass
class Audit:
    """What :func:`audit` found. ``ok`` when nothing is wrong."""

    nodes: dict[str, int]
    learned: int
    sent: int
    duplicate_roots: dict[str, int]
    duplicate_consolidations: int
    lost: int
    replay_equal: bool
    replay_nodes: dict[str, int]
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not any(self.duplicate_roots.values()) and not self.duplicate_consolidations
                and not self.lost and self.learned == self.sent and self.replay_equal)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "learned": self.learned, "sent": self.sent,
                "duplicate_roots": self.duplicate_roots,
                "duplicate_consolidations": self.duplicate_consolidations, "lost": self.lost,
                "replay_equal": self.replay_equal, "replay_nodes": self.replay_nodes,
                "differences": self.differences[:10], "ok": self.ok}


def audit(
    location: str,
    episodes: Mapping[str, Mapping[str, Any]],
    *,
    embedder: str,
    replay_fn: Callable[..., list[Any]] = replay,
) -> Audit:
    """Check the bank at ``location`` after a load that sent ``episodes`` (by id).

    * duplicated ROOT triggers: extracted ROOTs of one tree with the same trigger text
      beyond the first (a second cold start on a goal or scene already stored);
    * duplicate consolidations: nodes that are the source of more than one consolidated
      ROOT, plus flagged nodes without one or with several;
    * lost: episodes sent that the bank's learned ledger does not hold (an episode learned
      twice cannot be in it twice: its id is the key);
    * the replay: :func:`replay` of the learned episodes in ledger order (the order their
      learns committed) must give the same trees (:func:`_shape`).
    """
    from deltamem.memories.deltamem import DeltaMem

    mem = DeltaMem.open(location, embedder=None, readonly=True)
    try:
        nodes = [*mem.nodes("task"), *mem.nodes("env")]
        order = [r["episode_id"] for r in mem.store.iter_export() if r["type"] == "learned"]
        config = mem.store.meta()["config"]
    finally:
        mem.close()
    counts = Counter(n.tree for n in nodes)
    roots = Counter((n.tree, n.trigger) for n in nodes
                    if n.kind == "ROOT" and n.origin != "consolidated")
    dup_roots = {t: sum(c - 1 for (tree, _), c in roots.items() if tree == t and c > 1)
                 for t in ("task", "env")}
    sources = Counter(n.source for n in nodes if n.origin == "consolidated")
    flagged = {n.id for n in nodes if n.consolidated}
    dup_cons = sum(c - 1 for c in sources.values() if c > 1) + len(flagged ^ set(sources))
    lost = len(set(episodes) - set(order))
    replayed = replay_fn([episodes[e] for e in order if e in episodes], embedder=embedder,
                         config=config)
    mine, theirs = _shape(nodes), _shape(replayed)
    diff = [f"bank only: {x}" for x in sorted(mine - theirs, key=str)][:5] + \
           [f"replay only: {x}" for x in sorted(theirs - mine, key=str)][:5]
    return Audit(nodes={"task": counts["task"], "env": counts["env"]}, learned=len(order),
                 sent=len(episodes), duplicate_roots=dup_roots,
                 duplicate_consolidations=dup_cons, lost=lost, replay_equal=mine == theirs,
                 replay_nodes=dict(Counter(n.tree for n in replayed)), differences=diff)


def write_key_file(path: str | Path, tenant: str) -> str:
    """A new key file at ``path`` holding one key for ``tenant``; returns the key."""
    from deltamem.service.keys import add_key

    Path(path).unlink(missing_ok=True)
    return add_key(path, tenant, "replica harness")
