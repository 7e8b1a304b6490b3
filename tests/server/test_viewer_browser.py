"""Headless Chromium loads the viewer for a test bank, counts nodes, clicks one, runs a query.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package; skipped
otherwise. The screenshot goes to ``$DELTAMEM_ARTIFACT_DIR`` (default
``<tmp>/deltamem-artifacts``) as ``viewer.png``.
"""

from __future__ import annotations

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
