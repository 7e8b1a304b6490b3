"""deltamem.client.Client mirrors the library: the same calls give the same results remotely."""

from __future__ import annotations

import pytest

from deltamem import DeltaMem
from deltamem.errors import InvalidInputError, StoreError
from deltamem.testing import make_episode

from .server_cases import GOALS, KEY_A

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
from deltamem.client import Client
from deltamem.server.background import running


def test_client_and_library_agree(service, tmp_path):
    local = DeltaMem.open(tmp_path / "local.db", embedder=service.embedder, domain="alfworld")
    with running(service.app) as url:
        remote = Client(url, bank="agent", api_key=KEY_A)
        for i, goal in enumerate(GOALS * 2):
            ep = make_episode(goal, success=i % 3 != 1, episode_id=f"e{i}")
            r_local, r_remote = local.recall(ep.task), remote.recall(ep.task)
            assert r_remote.text == r_local.text
            assert len(r_remote.items) == len(r_local.items)
            c_local, c_remote = local.learn(ep, r_local), remote.learn(ep, r_remote)
            assert [c.kind for c in c_remote] == [c.kind for c in c_local]
        s_remote, s_local = remote.stats(), local.stats()
        for key in ("nodes", "kind", "label", "depth_histogram", "episodes_learned"):
            assert s_remote[key] == s_local[key]
        assert remote.last_usage.total_tokens == 0
        lines = remote.export().splitlines()
        assert '"type": "header"' in lines[0] and lines[1].startswith('{"config"')
        assert '"type": "trailer"' in lines[-1]
        with pytest.raises(InvalidInputError, match="422"):
            remote._call("POST", "/recall", {"task": {"goal": ""}})
        bad = Client(url, bank="agent", api_key="nope")
        with pytest.raises(Exception, match="401"):
            bad.stats()
        remote.close()
    local.close()


def test_unreachable_service_is_a_store_error():
    c = Client("http://127.0.0.1:9", bank="b", api_key="k", timeout=2)
    with pytest.raises(StoreError, match="cannot reach"):
        c.stats()


def test_client_lists_and_deletes_banks(service):
    with running(service.app) as url:
        one = Client(url, bank="one", api_key=KEY_A)
        two = Client(url, bank="two", api_key=KEY_A)
        assert one.list_banks() == {}
        one.learn(make_episode(GOALS[0], episode_id="e0"))
        two.learn(make_episode(GOALS[1], episode_id="e1"))
        assert one.list_banks() == {"one": {"task": 1, "env": 1}, "two": {"task": 1, "env": 1}}
        assert one.delete_bank() is True
        assert one.list_banks() == {"two": {"task": 1, "env": 1}}
        assert one.delete_bank() is False  # no such bank any more
        with pytest.raises(StoreError, match="404"):
            one.stats()
        assert two.delete_bank("two") is True and two.list_banks() == {}
        with pytest.raises(InvalidInputError, match="422"):
            one.delete_bank("not a name")
        other = Client(url, bank="two", api_key="nope")
        with pytest.raises(Exception, match="401"):
            other.list_banks()
        one.learn(make_episode(GOALS[0], episode_id="e0"))  # the client can recreate its bank
        assert one.stats()["episodes_learned"] == 1
        for c in (one, two, other):
            c.close()
