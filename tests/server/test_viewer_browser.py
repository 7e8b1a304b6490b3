"""Headless Chromium loads the viewer for a test bank, counts nodes, clicks one, runs a query.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package; skipped
otherwise. The screenshot goes to ``$DELTAMEM_ARTIFACT_DIR`` (default
``<tmp>/deltamem-artifacts``) as ``viewer.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from .viewer_cases import make_bank

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("uvicorn")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Debian chromium/chromium-driver absent"),
]


def artifact_dir() -> Path:
    d = Path(os.environ.get("DELTAMEM_ARTIFACT_DIR")
             or Path(tempfile.gettempdir()) / "deltamem-artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture
def browser(tmp_path):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_page_shows_the_trees_details_and_the_matched_chain(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from deltamem.server.background import running
    from deltamem.server.viewer import make_view_app

    stats = make_bank(tmp_path / "bank.db")
    with running(make_view_app(str(tmp_path / "bank.db"))) as url:
        browser.get(f"{url}/viewer/?bank=local")
        wait = WebDriverWait(browser, 30)
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
        nodes = browser.find_elements(By.CSS_SELECTOR, ".tree .node")
        assert len(nodes) == stats["units"]
        assert len(browser.find_elements(By.CSS_SELECTOR, "#tree-task .node")) == stats["nodes"][
            "task"
        ]
        assert browser.find_elements(By.CSS_SELECTOR, ".tree .mark.cons")  # consolidated marks
        target = browser.find_elements(By.CSS_SELECTOR, "#tree-task .node.residual")[0]
        node_id = target.get_attribute("data-id")
        target.click()
        details = wait.until(lambda d: d.find_element(By.ID, "node-details"))
        field = {e.get_attribute("data-field"): e.text
                 for e in details.find_elements(By.TAG_NAME, "dd")}
        assert field["id"] == node_id and field["kind"] == "RESIDUAL"
        assert field["depth"] == target.text.split("d=")[1].split()[0]
        box = browser.find_element(By.ID, "query")
        box.send_keys("put a hot apple in fridge")
        browser.find_element(By.CSS_SELECTOR, "#query-form button[type=submit]").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#tree-task .node.matched"))
        chain = browser.find_elements(By.CSS_SELECTOR, "#tree-task .node.in-chain")
        assert chain and all(c.find_element(By.CLASS_NAME, "score").text for c in chain)
        assert "task: best" in browser.find_element(By.ID, "status").text
        shot = artifact_dir() / "viewer.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def _ready(browser, url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"


def _after_edit(browser, click) -> str:
    """Click, then wait for the page to report the edit's id (and redraw)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    body = browser.find_element(By.TAG_NAME, "body")
    last = body.get_attribute("data-last-edit")
    click()
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-last-edit") != last)
    return body.get_attribute("data-last-edit")


def test_inspector_edits_hides_and_undoes_in_the_page(tmp_path, browser):
    """``deltamem view --edit``: edit a node's procedure, hide it, undo both; the bank's
    audit rows say who and what, and the undone bank equals the original (embeddings too)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from deltamem import DeltaMem
    from deltamem.server.background import running
    from deltamem.server.viewer import make_view_app

    from .viewer_cases import EMB

    path = tmp_path / "bank.db"
    make_bank(path)
    mem = DeltaMem.open(path, embedder=EMB, readonly=True)
    original = {n.id: (n, n.embedding.tobytes()) for n in mem.store.load_nodes()}
    mem.close()
    key = "dmk_one_time_key_for_the_browser_test"
    with running(make_view_app(str(path), edit_key=key)) as url:
        _ready(browser, f"{url}/viewer/?bank=local#key={key}")
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-writable") == "1"
        assert "#key" not in browser.current_url  # the key leaves the address bar
        target = browser.find_elements(By.CSS_SELECTOR, "#tree-task .node.residual")[-1]
        node_id = target.get_attribute("data-id")
        target.click()
        form = WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "editor"))
        box = form.find_element(By.NAME, "procedure")
        box.clear()
        box.send_keys("1. check the fridge first")
        form.find_element(By.NAME, "reason").send_keys("clearer step")
        text_edit = _after_edit(browser, lambda: browser.find_element(By.ID, "save").click())
        dd = browser.find_element(By.CSS_SELECTOR,
                                  '#node-details dd[data-field="what (procedure)"]')
        assert dd.text == "1. check the fridge first"
        assert browser.find_elements(By.CSS_SELECTOR, f'#edit-list li[data-edit="{text_edit}"]')
        browser.execute_script("window.scrollTo(0, 0)")
        shot = artifact_dir() / "viewer-edit.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        hide = _after_edit(browser, lambda: browser.find_element(By.ID, "hide").click())
        el = browser.find_element(By.CSS_SELECTOR, f'.tree .node[data-id="{node_id}"]')
        assert "hidden" in el.get_attribute("class")
        for edit_id in (hide, text_edit):  # undo, newest first
            _after_edit(browser, lambda e=edit_id: browser.find_element(
                By.CSS_SELECTOR, f'#edit-list li[data-edit="{e}"] button.undo').click())
        el = browser.find_element(By.CSS_SELECTOR, f'.tree .node[data-id="{node_id}"]')
        assert "hidden" not in el.get_attribute("class")
    mem = DeltaMem.open(path, embedder=EMB, readonly=True)
    rows = [r for r in mem.store.audit() if r["policy"] == "inspector"]
    now = {n.id: (n, n.embedding.tobytes()) for n in mem.store.load_nodes()}
    mem.close()
    assert [r["action"] for r in rows] == ["edited", "hidden", "undone", "undone"]
    assert rows[0]["reason"] == "clearer step" and rows[0]["node_id"] == node_id
    assert rows[0]["record"]["who"].startswith("tenant local (key ")
    assert rows[0]["record"]["after"][node_id]["payload"]["execution_procedure"] == \
        "1. check the fridge first"
    assert now == original
    (artifact_dir() / "viewer-edit-audit.json").write_text(
        json.dumps(rows[0], indent=2, sort_keys=True))


def test_read_only_view_shows_no_edit_controls(tmp_path, browser):
    from selenium.webdriver.common.by import By

    from deltamem.server.background import running
    from deltamem.server.viewer import make_view_app

    make_bank(tmp_path / "bank.db")
    with running(make_view_app(str(tmp_path / "bank.db"))) as url:
        _ready(browser, f"{url}/viewer/?bank=local")
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-writable") == "0"
        browser.find_elements(By.CSS_SELECTOR, "#tree-task .node")[0].click()
        assert browser.find_element(By.ID, "node-details")
        assert not browser.find_elements(By.ID, "editor")
        assert not browser.find_element(By.ID, "edits").is_displayed()
