"""report.html in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`) through Selenium opens the pages of two of the examples' builds —
digits on a Cortex-M4 and on a MAX78000 — and checks that they load without console errors, that
every figure renders, and that the headline shows report.json's numbers.

Skipped, saying why, without selenium, chromium or chromedriver (CI installs all three:
.ci/run, the `test` extra).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild.report import headline as figures

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(pip install '.[test]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="no chromium or chromedriver (apt-get install chromium "
                              "chromium-driver)")]

BUILDS = ("digits", "digits_max78000")


@pytest.fixture(scope="module")
def built(examples_build: Path) -> Path:
    """The examples' own build (conftest.examples_build): the pages are only read."""
    return examples_build


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def _open(browser: Any, page: Path) -> None:
    browser.get_log("browser")  # drop what an earlier page logged
    browser.get(page.as_uri())
    browser.execute_script("return document.readyState")


def _path(document: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        document = document[part]
    return document


@pytest.mark.parametrize("name", BUILDS)
def test_the_page_loads_without_console_errors_and_every_figure_renders(built, browser, name):
    _open(browser, built / name / "report.html")
    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, severe
    images = browser.execute_script(
        "return Array.from(document.images, i => [i.alt, i.complete, i.naturalWidth])")
    assert len(images) >= 4, images  # curves x2, confusion, layers (+ memory maps)
    assert all(complete and width > 0 for _, complete, width in images), images
    if name == "digits_max78000":
        assert {"processor map", "data memory", "kernel memory"} <= {alt for alt, _, _ in images}


@pytest.mark.parametrize("name", BUILDS)
def test_the_headline_shows_report_json_numbers(built, browser, name):
    from selenium.webdriver.common.by import By

    headline = json.loads((built / name / "report.json").read_text())["headline"]
    _open(browser, built / name / "report.html")
    cards = browser.find_elements(By.CSS_SELECTOR, "#headline [data-key]")
    assert len(cards) >= 7
    for card in cards:
        key = card.get_attribute("data-key")
        assert json.loads(card.get_attribute("data-value")) == _path(headline, key), key
        verdict = card.get_attribute("data-verdict")
        if verdict:
            assert _path(headline, key.rsplit(".", 1)[0])["verdict"] == verdict, key
            assert f"verdict-{verdict}" in card.get_attribute("class").split()
    value = {card.get_attribute("id"): card.find_element(By.CLASS_NAME, "value").text
             for card in cards}
    assert value["hl-device"] == headline["device"] == \
        ("cortex-m4" if name == "digits" else "max78000")
    assert value["hl-float-accuracy"] == figures.percent(headline["accuracy"]["float"])
    assert value["hl-int8-accuracy"] == figures.percent(headline["accuracy"]["int8"])
    assert value["hl-ram"] == figures.size(headline["ram"]["used"])
    assert value["hl-flash"] == figures.size(headline["flash"]["used"])
    assert value["hl-kat"] == "pass" and headline["kat"]["verdict"] == "pass"
    count = headline["instructions"]["count"]
    assert value["hl-instructions"] == figures.count(count)
    if count is not None:  # the ARM toolchain and QEMU are installed
        # both run on a Cortex-M4: digits_max78000 emulates the device's number format there
        assert headline["instructions"]["kernels"] == "optimized"
        assert "optimized kernels" in browser.find_element(By.ID, "hl-instructions").text
    if name == "digits_max78000":
        assert value["hl-processors"] == f"{headline['accelerator']['processors']['used']} " \
            "processors"
