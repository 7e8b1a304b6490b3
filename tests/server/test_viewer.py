"""The viewer's page and its read-only local service (no browser needed)."""

from __future__ import annotations

import pytest

from .viewer_cases import EMB, make_bank

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient

from deltamem.errors import EmbedderMismatchError
from deltamem.server.app import STATIC
from deltamem.server.viewer import make_view_app
from deltamem.testing import make_episode


def test_page_and_bank_are_served_read_only(tmp_path):
    stats = make_bank(tmp_path / "bank.db")
    with TestClient(make_view_app(str(tmp_path / "bank.db"))) as http:
        page = http.get("/viewer/")
        assert page.status_code == 200 and "viewer.js" in page.text
        assert http.get("/viewer/viewer.js").status_code == 200
        assert http.get("/", follow_redirects=False).headers["location"] == "/viewer/"
        tree = http.get("/v1/banks/local/tree").json()  # no key needed locally
        assert len(tree["nodes"]) == stats["units"] and tree["embedder"] == EMB.name
        assert any(n["consolidated"] for n in tree["nodes"])
        ex = http.post("/v1/banks/local/explain", json={"query": "put a hot apple in fridge"})
        assert ex.status_code == 200 and ex.json()["trees"]["task"]["match"]["accepted"]
        r = http.post("/v1/banks/local/learn", json={"episode": {}})
        assert r.status_code == 422  # validated first
        ep = make_episode(episode_id="v1").to_dict()
        ep.pop("usage")
        ep["task"].pop("meta")
        r = http.post("/v1/banks/local/learn", json={"episode": ep})
        assert r.status_code == 403 and "read-only" in r.json()["detail"]

        r = http.post("/v1/banks/local/import", json={"records": [{"type": "meta"}]})
        assert r.status_code == 403 and "read-only" in r.json()["detail"]


def test_only_the_name_local_is_the_viewed_bank(tmp_path):
    """``/v1/banks/nosuch/tree`` is 404, not the local bank under another name (issue 51)."""
    make_bank(tmp_path / "bank.db")
    with TestClient(make_view_app(str(tmp_path / "bank.db"))) as http:
        for path in ("/v1/banks/nosuch/tree", "/v1/banks/nosuch/stats",
                     "/v1/banks/nosuch/export"):
            r = http.get(path)
            assert r.status_code == 404 and "'nosuch'" in r.json()["detail"], path
        assert http.get("/v1/banks/local/tree").status_code == 200
        assert [b["name"] for b in http.get("/v1/banks").json()["banks"]] == ["local"]


def test_another_embedder_is_refused(tmp_path):
    make_bank(tmp_path / "bank.db")
    with TestClient(make_view_app(str(tmp_path / "bank.db"), embedder="hashing:32")) as http:
        r = http.get("/v1/banks/local/tree")
        assert r.status_code == 409 and "embedder" in r.json()["detail"]
    with pytest.raises(EmbedderMismatchError):
        make_view_app(str(tmp_path / "bank.db"), embedder="hashing:32").state.service.banks._load(
            str(tmp_path / "bank.db")
        )


def test_static_files_need_no_build_step():
    names = sorted(p.name for p in STATIC.iterdir())
    assert names == ["index.html", "viewer.css", "viewer.js"]
    assert "import " not in (STATIC / "viewer.js").read_text()  # plain script, no bundler


def test_cli_commands_are_registered(tmp_path):
    import typer
    from typer.testing import CliRunner

    from deltamem.cli.serve import register

    app = typer.Typer()
    register(app)
    runner = CliRunner()
    for cmd in ("serve", "view", "api-key"):
        assert runner.invoke(app, [cmd, "--help"]).exit_code == 0
    out = runner.invoke(app, ["api-key", "team-a", "--keys", str(tmp_path / "k.json")])
    assert out.exit_code == 0 and out.stdout.strip().startswith("dmk_")
    assert out.stdout.strip() not in (tmp_path / "k.json").read_text()
