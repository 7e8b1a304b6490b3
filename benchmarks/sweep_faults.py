"""A sweep run sequentially, then on a two-node Ray cluster on this machine with one node killed.

    python benchmarks/sweep_faults.py SPEC.toml [--out DIR] [--no-kill] [--port 6399]

1. ``deltamem sweep SPEC --engine local --workers 1``: every cell one after the other (wall time);
2. ``ray start --head`` (1 CPU) plus a second node (``ray start --address``, 1 CPU), both on
   127.0.0.1, a fresh random token shared by the three commands only; ``deltamem sweep SPEC
   --address …`` (wall time). Unless ``--no-kill``, once a cell on the second node has recorded
   an episode, that node (its ``raylet`` and every worker under it) is SIGKILLed: Ray runs the
   lost cell again on the head node, from its run directory;
3. the checks: both results pages equal but for the wall-time column; in every cell each
   episode recorded once, in order; the killed cell resumed at the episode after the last one
   it recorded, and no other cell ran twice (``versions.json`` lists each session of a run
   directory with the episode it started at).

Everything the script starts is stopped at the end, by process id. Ray's own servers listen on
every interface whatever ``--node-ip-address`` says (Ray 2.60): run this where that is fine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = ("| engine | nodes | cells | wall s | cells run twice | killed cell (episodes it had "
          "recorded) | resumed at | episodes recorded twice | table equal to sequential |")


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(d.name))
    return out


def descendants(pid: int) -> list[int]:
    kids, todo, out = _children(), [pid], []
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def stop(procs: list[subprocess.Popen], grace: float = 10.0) -> None:
    """SIGTERM each process and everything under it, then SIGKILL what is left."""
    pids = [p.pid for p in procs] + [d for p in procs for d in descendants(p.pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def recorded(run_dir: Path) -> list[int]:
    path = run_dir / "episodes.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError, KeyError):  # a torn last line
            out.append(json.loads(line)["index"])
    return out


def sessions(run_dir: Path) -> list[int]:
    path = run_dir / "versions.json"
    return [s["start_index"] for s in json.loads(path.read_text())] if path.exists() else []


def table(page: Path, out: Path) -> list[str]:
    """The results page without the wall-time column and with the cells' folder as OUT."""
    lines = []
    wall = None
    for line in page.read_text(encoding="utf-8").splitlines():
        line = line.replace(str(out.resolve()), "OUT").replace(str(out), "OUT")
        line = re.sub(r"`deltamem sweep [^`]*`", "`deltamem sweep`", line)
        if line.startswith("|"):
            cells = line.split("|")
            if "wall s/ep" in line:
                wall = cells.index(" wall s/ep ")
            if wall is not None and len(cells) > wall:
                cells[wall] = " "
            line = "|".join(cells)
        else:
            wall = None if not line.strip() else wall
        lines.append(line)
    return lines


def sweep_cmd(spec: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "deltamem", "sweep", str(spec), "--out", str(out), "--no-plots",
            *extra]


def wait_cpus(env: dict[str, str], address: str, cpus: int, timeout: float = 120) -> None:
    probe = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False, "
             "logging_level='ERROR'); print(int(ray.cluster_resources().get('CPU', 0)))")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = subprocess.run([sys.executable, "-c", probe, address], env=env, capture_output=True,
                           text=True, timeout=timeout, check=False)
        if p.returncode == 0 and p.stdout.strip().isdigit() and int(p.stdout.strip()) >= cpus:
            return
        time.sleep(1)
    raise SystemExit(f"the Ray cluster at {address} did not reach {cpus} CPUs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    ap.add_argument("--port", type=int, default=6399)
    ap.add_argument("--no-kill", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per sweep at most")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="deltamem-sweep-faults-"))
    seq_out, ray_out = out / "sequential", out / "ray"
    for d in (seq_out, ray_out):
        shutil.rmtree(d, ignore_errors=True)

    t = time.perf_counter()
    subprocess.run(sweep_cmd(args.spec, seq_out, "--engine", "local", "--workers", "1"),
                   check=True, timeout=args.timeout, stdout=subprocess.DEVNULL)
    seq_s = time.perf_counter() - t

    if shutil.which("ray") is None:
        raise SystemExit("no `ray` command: pip install 'deltamem[ray]'")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}
    address = f"127.0.0.1:{args.port}"
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
              "--block"]
    log = open(out / "ray-nodes.log", "wb")  # noqa: SIM115 - closed below
    head = subprocess.Popen(["ray", "start", "--head", "--port", str(args.port),
                             "--include-dashboard=false", *common], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    started = [head]
    killed: tuple[str, int] | None = None
    try:
        time.sleep(3)
        wait_cpus(env, address, 1)
        worker = subprocess.Popen(["ray", "start", "--address", address, *common], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(worker)
        wait_cpus(env, address, 2)
        t = time.perf_counter()
        sweep = subprocess.Popen(sweep_cmd(args.spec, ray_out, "--address", address), env=env,
                                 stdout=subprocess.DEVNULL)
        started.append(sweep)
        while sweep.poll() is None:
            if time.perf_counter() - t > args.timeout:
                raise SystemExit("the Ray sweep did not finish in time")
            if not args.no_kill and killed is None:
                for pid in descendants(worker.pid):
                    title = cmdline(pid)
                    m = re.match(r"ray::deltamem cell (\S+)", title)
                    if m and recorded(ray_out / m.group(1)):
                        victims = [worker.pid, *descendants(worker.pid)]
                        killed = (m.group(1), len(recorded(ray_out / m.group(1))))
                        for v in victims:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(v, signal.SIGKILL)
                        break
            time.sleep(0.2)
        ray_s = time.perf_counter() - t
        if sweep.returncode != 0:
            raise SystemExit(f"the Ray sweep failed (exit {sweep.returncode})")
    finally:
        stop(started)
        log.close()

    cells = [c["name"] for c in json.loads((ray_out / "sweep.json").read_text())["cells"]]
    twice = [c for c in cells if len(sessions(ray_out / c)) > 1]
    doubled = {d: sum(len(recorded(d / c)) - len(set(recorded(d / c))) for c in cells)
               for d in (seq_out, ray_out)}
    equal = (table(seq_out / "results.md", seq_out) == table(ray_out / "results.md", ray_out))
    resumed = "-"
    finished_first = False
    if killed is not None:
        s = sessions(ray_out / killed[0])
        # a short cell may record its last episode before the kill lands: then it is
        # complete, Ray's retry finds nothing left to play, and it is run once (nothing
        # recorded after the kill)
        finished_first = len(s) == 1 and len(recorded(ray_out / killed[0])) == killed[1]
        resumed = (str(s[1]) if len(s) > 1 else
                   "finished before the kill" if finished_first else "not rerun")
    print(f"sweep {args.spec}: {len(cells)} cells; folders {seq_out} and {ray_out}\n")
    print(HEADER)
    print("|" + "---|" * (HEADER.count(" | ") + 1))
    print(f"| local, one after the other | 1 | {len(cells)} | {seq_s:.1f} | - | - | - | "
          f"{doubled[seq_out]} | - |")
    print(f"| Ray tasks | 2 (1 CPU each) | {len(cells)} | {ray_s:.1f} | "
          f"{', '.join(twice) or 0} | "
          f"{f'{killed[0]} ({killed[1]})' if killed else 'none killed'} | {resumed} | "
          f"{doubled[ray_out]} | {'yes' if equal else 'NO'} |")
    ok = equal and not any(doubled.values()) and (
        killed is None or twice == [killed[0]] or (finished_first and not twice))
    if not equal:
        import difflib

        print("\n".join(difflib.unified_diff(table(seq_out / "results.md", seq_out),
                                             table(ray_out / "results.md", ray_out),
                                             "sequential", "ray", lineterm="")))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
