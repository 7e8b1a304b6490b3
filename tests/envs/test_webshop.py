"""WebShop adapter against recorded page fixtures served by httpx.MockTransport."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote

import pytest

from deltamem.envs.base import Environment
from deltamem.envs.webshop import (
    PAPER_TEST_GOALS,
    SEARCH_ACTION,
    WebShopEnv,
    parse_page,
)
from deltamem.errors import ConfigError
from deltamem.types import Task

httpx = pytest.importorskip("httpx")

FIXTURES = Path(__file__).parent / "fixtures" / "webshop"
BASE = "http://webshop.test:3000"


def _html(name: str) -> str:
    return (FIXTURES / f"{name}.html").read_text(encoding="utf-8")


class FakeServer:
    """Routes like web_agent_site/app.py, answering with the fixture pages."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.searches: list[str] = []

    def __call__(self, request):
        path = unquote(request.url.raw_path.decode("ascii"))
        self.log.append((request.method, request.url.raw_path.decode("ascii")))
        if path == "/fixed_7":
            form = parse_qs(request.content.decode()) if request.method == "POST" else {}
            if "search_query" in form:
                query = form["search_query"][0]
                self.searches.append(query)
                words = str(query.lower().split(" "))
                return httpx.Response(302, headers={"location": f"/search_results/fixed_7/"
                                                    f"{words}/1"})
            return httpx.Response(200, text=_html("search"))
        if path.startswith("/search_results/fixed_7/"):
            return httpx.Response(200, text=_html("results"))
        if path.startswith("/item_page/fixed_7/B0TESTMUG1/"):
            return httpx.Response(200, text=_html("item"))
        if path.startswith("/item_sub_page/fixed_7/B0TESTMUG1/") and "/Description/" in path:
            return httpx.Response(200, text=_html("description"))
        if path.startswith("/done/fixed_7/B0TESTMUG1/"):
            return httpx.Response(200, text=_html("done"))
        if path == "/broken":
            return httpx.Response(500, text="boom")
        return httpx.Response(404, text="not found")


@pytest.fixture
def server():
    return FakeServer()


@pytest.fixture
def env(server):
    e = WebShopEnv(base_url=BASE, transport=httpx.MockTransport(server))
    yield e
    e.close()


# -- page parsing ------------------------------------------------------------------------------


def test_search_page_parses_instruction_and_search_box():
    page = parse_page(_html("search"))
    assert page.instruction.startswith("i want a blue ceramic coffee mug")
    assert page.actions() == [SEARCH_ACTION]  # its own "Search" submit is not a click
    assert page.text.split(" [SEP] ")[:2] == ["WebShop", "Instruction:"]
    assert page.reward is None


def test_results_page_lists_buttons_and_products_in_order():
    page = parse_page(_html("results"))
    assert page.actions() == ["click[Back to Search]", "click[Next >]",
                              "click[B0TESTMUG1]", "click[B0TESTMUG2]"]
    assert "old commented-out layout" not in page.text
    assert "$14.99" in page.text.split(" [SEP] ")


def test_item_page_lists_options_and_hides_scripts():
    page = parse_page(_html("item"))
    actions = page.actions()
    for label in ("cobalt blue", "Sand", "12 oz", "16 oz", "Description", "Buy Now", "< Prev"):
        assert f"click[{label}]" in actions
    assert SEARCH_ACTION not in actions
    assert "scripts are not observations" not in page.text
    assert page.find("BUY NOW") is not None and page.find("buy  now") is not None


def test_done_page_reads_reward_and_drops_hidden_target():
    page = parse_page(_html("done"))
    assert page.reward == 0.75
    assert "SECRETGOALASIN" not in page.text
    assert "secret goal attribute" not in page.text
    assert "hidden details" not in page.text
    assert "Thank you for shopping with us!" in page.text


# -- episodes ----------------------------------------------------------------------------------


def test_reset_returns_the_instruction_as_goal_and_scene(env, server):
    task = env.reset("fixed_7")
    assert isinstance(env, Environment) and isinstance(task, Task)
    assert task.id == "fixed_7" and task.domain == "webshop"
    assert task.goal.startswith("i want a blue ceramic coffee mug")
    assert task.scene == task.goal
    assert "[SEP]" in task.observation
    assert task.max_steps == 10
    assert env.admissible_actions() == [SEARCH_ACTION]
    assert server.log == [("GET", "/fixed_7")]


def test_full_purchase_episode(env, server):
    env.reset("fixed_7")
    t = env.step("search[Blue Ceramic Mug]")
    assert t.valid and not t.done and t.score == 0.0
    assert server.searches == ["Blue Ceramic Mug"]
    assert "click[B0TESTMUG1]" in env.admissible_actions()

    t = env.step("click[b0testmug1]")  # case-insensitive, like WebShop's text env
    assert t.valid and "Stoneware Coffee Mug" in t.observation

    t = env.step("click[Cobalt Blue]")
    assert t.valid
    method, raw = server.log[-1]
    assert method == "GET" and "cobalt%20blue" in raw  # the option's own URL, not re-encoded

    t = env.step("click[Description]")
    assert t.valid and "dishwasher-safe" in t.observation
    t = env.step("click[< Prev]")
    assert t.valid and server.log[-1][0] == "POST"

    t = env.step("click[Buy Now]")
    assert t.done and not t.success and t.score == 0.75
    assert "SECRETGOALASIN" not in t.observation
    with pytest.raises(RuntimeError, match="over"):
        env.step("click[Back to Search]")


def test_invalid_actions_leave_the_page(env, server):
    env.reset("fixed_7")
    before = len(server.log)
    for bad in ("click[Buy Now]", "search[]", "buy the mug", "click[search]"):
        t = env.step(bad)
        assert not t.valid and not t.done
        assert t.observation.startswith("WebShop [SEP] Instruction:")
    assert len(server.log) == before
    env.step("search[mug]")
    t = env.step("search[another mug]")  # no search box on the results page
    assert not t.valid


def test_step_cap_ends_the_episode(server):
    env = WebShopEnv(base_url=BASE, transport=httpx.MockTransport(server), max_steps=2)
    env.reset("fixed_7")
    assert not env.step("click[nothing]").done
    t = env.step("click[nothing]")
    assert t.done and not t.success and t.score == 0.0
    env.close()


def test_server_errors_raise(server):
    env = WebShopEnv(base_url=BASE, transport=httpx.MockTransport(server))
    with pytest.raises(RuntimeError, match="HTTP 404"):
        env.reset("fixed_999")
    with pytest.raises(RuntimeError, match="HTTP 500"):
        env.reset("broken")

    def down(request):
        raise httpx.ConnectError("connection refused", request=request)

    env2 = WebShopEnv(base_url=BASE, transport=httpx.MockTransport(down))
    with pytest.raises(RuntimeError, match="failed"):
        env2.reset("fixed_7")
    with pytest.raises(ConfigError):
        env2.reset("has space")


def test_splits():
    env = WebShopEnv(n_train=50)
    test_ids = env.task_ids("test")
    assert len(test_ids) == 200 == len(set(test_ids))
    assert test_ids[0] == "fixed_2853" and test_ids[-1] == "fixed_818"
    assert env.task_ids("test", seed=4) != test_ids
    assert sorted(env.task_ids("test", seed=4)) == sorted(test_ids)
    train = env.task_ids("train")
    assert len(train) == 50 and train[0] == "fixed_1500"
    assert not set(train) & set(test_ids)
    assert len(PAPER_TEST_GOALS) == 200
    with pytest.raises(ConfigError):
        env.task_ids("dev")


def test_calls_before_reset_raise():
    env = WebShopEnv()
    with pytest.raises(RuntimeError, match="reset"):
        env.admissible_actions()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("search[x]")
