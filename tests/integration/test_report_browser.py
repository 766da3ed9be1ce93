"""The history page and a report in a real headless Chromium (Debian chromium + chromedriver).

The page loads, the list shows the runs with their verdicts, a report opens from its link and
shows the verdict, the certified matrix, the checks and both plots (rendered, not just present).
Set RACKCERT_REPORT_SCREENSHOT=docs/report-screenshot.png to refresh the docs screenshot.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rackcert.report.build import build_report
from tests.support.plugins.report import start_serve, stop, write_run

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1600",
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    for binary in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(binary), f"{binary} missing: .ci/setup.d/50-report.sh installs it"
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium-manager look for drivers
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    profile = tmp_path_factory.mktemp("chromium-profile")
    opts.add_argument(f"--user-data-dir={profile}")
    log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER, log_output=str(log)))
    driver.set_page_load_timeout(90)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser") / "runs"
    good = write_run(root)
    build_report(good, formats=("json", "html"))
    bad = write_run(
        root, drivers={"mn-node2": "470.57.02"}, fail={"gpu.driver@mn-node2": "470.57.02"}
    )
    build_report(bad, formats=("json", "html"))
    partial = write_run(root, stages=("plan", "provision"))
    proc, base = start_serve(root)
    yield base, {"good": good, "bad": bad, "partial": partial}
    stop(proc)


def _rows(driver):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#runs tr.run")


def test_history_page_lists_runs_with_verdicts(browser, site):
    from selenium.webdriver.common.by import By

    base, runs = site
    browser.get(base)
    assert browser.title == "rackcert runs"
    rows = _rows(browser)
    assert len(rows) == 3
    verdicts = [r.find_element(By.CSS_SELECTOR, ".v").text for r in rows]
    assert verdicts == ["no report", "FAIL", "PASS"]  # newest first
    assert runs["good"].path.name in rows[2].text
    assert (
        rows[2].find_element(By.CSS_SELECTOR, ".v").value_of_css_property("background-color")
        == "rgba(46, 125, 50, 1)"
    )


def test_report_opens_and_shows_verdict_matrix_checks_and_plots(browser, site):
    from selenium.webdriver.common.by import By

    base, runs = site
    browser.get(base)
    fail_row = _rows(browser)[1]
    fail_row.find_element(By.CSS_SELECTOR, "a.report").click()
    assert browser.current_url.endswith(f"{runs['bad'].path.name}/report.html")
    badge = browser.find_element(By.CSS_SELECTOR, "#verdict .badge")
    assert badge.text == "FAIL" and badge.is_displayed()
    assert "check gpu.driver on mn-node2" in browser.find_element(By.ID, "verdict").text

    matrix = browser.find_elements(By.CSS_SELECTOR, "#matrix table.matrix tbody tr")
    assert len(matrix) == 11
    statuses = {
        r.find_element(By.CSS_SELECTOR, "td").text: r.find_element(By.CSS_SELECTOR, ".pill").text
        for r in matrix
    }
    assert statuses["NVIDIA driver (R470 branch)"] == "differs"
    assert statuses["Server model"] == "matches" and statuses["NIC firmware"] == "unknown"
    assert "not NVIDIA's list" in browser.find_element(By.CSS_SELECTOR, "#matrix .disclaimer").text

    nodes = browser.find_elements(By.CSS_SELECTOR, "#checks .node")
    assert nodes[0].get_attribute("data-node") == "mn-node2"
    first = nodes[0].find_element(By.CSS_SELECTOR, "tbody tr")
    assert "gpu.driver" in first.text and "Install the pinned driver" in first.text

    for fig in ("scaling-plot", "allreduce-plot"):
        svg = browser.find_element(By.CSS_SELECTOR, f"#{fig} svg")
        browser.execute_script("arguments[0].scrollIntoView()", svg)
        assert svg.is_displayed()
        assert svg.size["width"] > 300 and svg.size["height"] > 150, (fig, svg.size)
        lines = svg.find_elements(By.CSS_SELECTOR, "path")
        assert len(lines) > 10
    scaling_text = browser.find_element(By.ID, "scaling-plot").text
    assert "linear" in scaling_text and "measured" in scaling_text
    table = browser.find_element(By.ID, "throughput-table").text
    assert "10,675.09" in table and "3.87x" in table

    target = os.environ.get("RACKCERT_REPORT_SCREENSHOT")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(int(height) + 40, 16000))
    shot = Path(target) if target else Path(browser.capabilities["chrome"]["userDataDir"]) / "s.png"
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 50_000
    browser.set_window_size(1280, 1600)


def test_live_view_of_a_run_without_report(browser, site):
    from selenium.webdriver.common.by import By

    base, runs = site
    browser.get(base)
    row = _rows(browser)[0]
    link = row.find_element(By.CSS_SELECTOR, "a.report")
    assert link.text == "live view"
    link.click()
    assert browser.find_element(By.CSS_SELECTOR, "#verdict .badge").text == "INCOMPLETE"
    assert "Stages not recorded in this run: configure, validate, bench." in browser.page_source
    assert not (runs["partial"].path / "report.html").exists()
