"""Recorded household episodes replay byte for byte (the engine's observation contract).

``fixtures/household_replay.json.gz`` holds 12 generated games (the six task types, ``seen``
and ``unseen``) and the episodes recorded on them with TextWorld's own PDDL engine before the
household engine was made fast: every action with the observation, score, done / success /
valid flags and admissible list it gave, the first observation and admissible list of every
reset, and the planner's plan at a few points. Walkthrough episodes (with look / inventory /
examine / help and an inadmissible command mixed in), random-admissible episodes (fixed seed,
up to the 30-step cap) and the same game reset twice in a row and again after other games.

The games are stored in the fixture (not regenerated), so the replay checks the engine alone.
Re-record (only when the recorded behaviour is *meant* to change) with::

    python tests/envs/test_household_replay.py --record
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.envs

FIXTURE = Path(__file__).parent / "fixtures" / "household_replay.json.gz"
FORMAT = 1
#: commands no game admits: exercise the "Nothing happens." path
_INADMISSIBLE = ("fly to the moon", "take unicorn 1 from sofa 1")
_PROBES = ("look", "inventory", "help", _INADMISSIBLE[0])


def _games_for_recording(root: Path) -> dict[str, dict[str, Any]]:
    """Generate the 12 games (first six ids of ``seen`` and ``unseen``, seed 0)."""
    from deltamem.envs.household import HouseholdEnv

    games: dict[str, dict[str, Any]] = {}
    with HouseholdEnv(cache_dir=root, n=6) as env:
        for split in ("seen", "unseen"):
            for task_id in env.task_ids(split, 0):
                path = env.locate(task_id).path
                game = json.loads(path.read_text(encoding="utf-8"))
                traj = json.loads((path.parent / "traj_data.json").read_text(encoding="utf-8"))
                games[task_id] = {"game": game, "room": traj["scene"]["room"]}
    return games


def _write_games(games: dict[str, dict[str, Any]], root: Path) -> None:
    """Lay the games out as :class:`HouseholdEnv`'s cache (``v<version>/<task id>/``)."""
    from deltamem.envs.household.generator import GENERATOR_VERSION

    for task_id, entry in games.items():
        directory = root / f"v{GENERATOR_VERSION}" / task_id
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "game.tw-pddl").write_text(
            json.dumps(entry["game"], sort_keys=True, indent=1) + "\n", encoding="utf-8")
        (directory / "traj_data.json").write_text(
            json.dumps({"scene": {"room": entry["room"]}}) + "\n", encoding="utf-8")


def _plan(task_id: str, walkthrough: list[str], kind: str, episode: int) -> Any:
    """The action chooser of one recorded episode: a function of the admissible list."""
    rng = random.Random(f"household-replay/{task_id}/{kind}/{episode}")
    if kind == "random":
        def choose(admissible: list[str], _step: int) -> str:
            draw = rng.random()
            if draw < 0.08:
                return rng.choice(_INADMISSIBLE)
            others = [a for a in admissible
                      if not a.startswith("go to ") and a not in _PROBES]
            if others and draw < 0.6:   # most admissible commands are "go to"
                return rng.choice(others)
            return rng.choice(admissible)
        return choose
    script = list(_PROBES)
    for command in walkthrough:
        script.append(command)
        if rng.random() < 0.5:
            script.append(rng.choice(["look", "inventory", "examine"]))

    def scripted(admissible: list[str], step: int) -> str:
        command = script[step]
        if command == "examine":
            options = sorted(a for a in admissible if a.startswith("examine "))
            return rng.choice(options) if options else "look"
        return command
    return scripted


def _schedule(task_ids: list[str]) -> list[tuple[str, str, int]]:
    """(task id, kind, episode number): every game's walkthrough, random episodes on half
    of them, a game reset twice in a row, and games revisited after others."""
    seen, unseen = task_ids[:6], task_ids[6:]
    plan = [(t, "walkthrough", 0) for t in task_ids]
    plan += [(t, "random", 0) for t in seen[::2] + unseen[1::2]]
    plan += [(seen[1], "random", 1), (seen[1], "random", 2)]   # the same game twice in a row
    plan += [(unseen[0], "walkthrough", 1), (seen[0], "random", 3)]   # revisited
    return plan


def _play(env: Any, task_id: str, choose: Any, *, replan_at: tuple[int, ...] = ()) -> dict:
    """One episode; returns everything the agent could see."""
    task = env.reset(task_id)
    record: dict[str, Any] = {
        "task_id": task_id,
        "reset": {"goal": task.goal, "scene": task.scene, "observation": task.observation,
                  "meta": dict(task.meta), "admissible": env.admissible_actions()},
        "steps": [], "replans": {},
    }
    step = 0
    while True:
        if step in replan_at:
            record["replans"][str(step)] = env.replan()
        try:
            action = choose(env.admissible_actions(), step)
        except IndexError:  # a script ran out
            break
        t = env.step(action)
        record["steps"].append({
            "action": action, "observation": t.observation, "score": t.score,
            "done": t.done, "success": t.success, "valid": t.valid,
            "admissible": env.admissible_actions(),
        })
        step += 1
        if t.done:
            break
    return record


def _record(games: dict[str, dict[str, Any]], root: Path) -> list[dict]:
    from deltamem.envs.household import HouseholdEnv

    _write_games(games, root)
    episodes = []
    with HouseholdEnv(cache_dir=root) as env:
        for number, (task_id, kind, episode) in enumerate(_schedule(list(games))):
            walk = games[task_id]["game"]["walkthrough"]
            replan_at = (0, 5) if number % 4 == 0 else ()
            record = _play(env, task_id, _plan(task_id, walk, kind, episode),
                           replan_at=replan_at)
            record["kind"] = kind
            episodes.append(record)
    return episodes


def _pack(games: dict[str, dict[str, Any]], episodes: list[dict]) -> dict:
    """The fixture: ALFWorld's domain stored once, each game's other fields as they are."""
    domains = sorted({g["game"]["pddl_domain"] for g in games.values()})
    packed = {}
    for task_id, entry in games.items():
        game = dict(entry["game"])
        game["pddl_domain"] = domains.index(game.pop("pddl_domain"))
        packed[task_id] = {"game": game, "room": entry["room"]}
    return {"format": FORMAT, "domains": domains, "games": packed, "episodes": episodes}


def _unpack(data: dict) -> dict[str, dict[str, Any]]:
    games = {}
    for task_id, entry in data["games"].items():
        game = dict(entry["game"])
        game["pddl_domain"] = data["domains"][game["pddl_domain"]]
        games[task_id] = {"game": game, "room": entry["room"]}
    return games


def _replay(env: Any, recorded: dict) -> dict:
    """Play ``recorded``'s actions again (not re-chosen) and return the same structure."""
    actions = [s["action"] for s in recorded["steps"]]
    replan_at = tuple(int(k) for k in recorded["replans"])

    def scripted(_admissible: list[str], step: int) -> str:
        return actions[step]
    record = _play(env, recorded["task_id"], scripted, replan_at=replan_at)
    record["kind"] = recorded["kind"]
    return record


def _first_difference(got: dict, want: dict) -> str:
    if got["reset"] != want["reset"]:
        return f"reset of {want['task_id']}: {got['reset']!r} != {want['reset']!r}"
    for i, (a, b) in enumerate(zip(got["steps"], want["steps"], strict=False)):
        if a != b:
            return f"{want['task_id']} step {i} ({b['action']!r}): {a!r} != {b!r}"
    if got["replans"] != want["replans"]:
        return f"{want['task_id']} replans: {got['replans']!r} != {want['replans']!r}"
    return f"{want['task_id']}: {len(got['steps'])} steps != {len(want['steps'])}"


def load_recorded() -> dict:
    """The fixture (skips the test when ``textworld`` / ``alfworld`` are missing)."""
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    assert data["format"] == FORMAT
    return data


@pytest.fixture(scope="module")
def recorded() -> dict:
    return load_recorded()


def test_fixture_covers_every_task_type_both_splits_and_repeated_resets(recorded) -> None:
    from deltamem.envs.household import catalog

    ids = list(recorded["games"])
    assert {i.split("/")[0] for i in ids} == {"seen", "unseen"}
    for split in ("seen", "unseen"):
        assert {i.split("/")[1] for i in ids if i.startswith(split)} == set(catalog.TASK_TYPES)
    played = [e["task_id"] for e in recorded["episodes"]]
    assert any(a == b for a, b in itertools.pairwise(played))   # twice in a row
    assert any(e["kind"] == "random" for e in recorded["episodes"])
    steps = [s for e in recorded["episodes"] for s in e["steps"]]
    assert any(s["success"] for s in steps) and any(not s["valid"] for s in steps)
    assert any(e["replans"] for e in recorded["episodes"])


def test_recorded_episodes_replay_byte_identical(recorded, tmp_path: Path) -> None:
    from deltamem.envs.household import HouseholdEnv

    _write_games(_unpack(recorded), tmp_path)
    with HouseholdEnv(cache_dir=tmp_path) as env:
        for want in recorded["episodes"]:
            got = _replay(env, want)
            assert got == want, _first_difference(got, want)


def test_replay_detects_a_changed_observation(recorded, tmp_path: Path) -> None:
    """The comparison can fail: one altered character in the fixture is reported."""
    from deltamem.envs.household import HouseholdEnv

    want = json.loads(json.dumps(recorded["episodes"][0]))
    want["steps"][1]["observation"] += " "
    _write_games({want["task_id"]: _unpack(recorded)[want["task_id"]]}, tmp_path)
    with HouseholdEnv(cache_dir=tmp_path) as env:
        got = _replay(env, want)
    assert got != want and "step 1" in _first_difference(got, want)


def main(argv: list[str]) -> int:
    """``--record``: generate the games, play the schedule, write the fixture."""
    import tempfile

    if argv != ["--record"]:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        games = _games_for_recording(Path(tmp) / "gen")
        episodes = _record(games, Path(tmp) / "play")
    data = _pack(games, episodes)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")
    with open(FIXTURE, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0,
                                                  compresslevel=9) as gz:
        gz.write(raw)
    steps = sum(len(e["steps"]) for e in episodes)
    print(f"{FIXTURE}: {len(games)} games, {len(episodes)} episodes, {steps} steps, "
          f"{FIXTURE.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
