"""Screenshots of report.html pages, whole page, as headless Chromium renders them (the
images in docs/ that show what a report looks like).

    python -m edgebuild build manifests/digits.yaml manifests/digits_max78000.yaml
    python benchmarks/report_screenshot.py                 # docs/report.png, docs/report-max78000.png
    python benchmarks/report_screenshot.py PAGE.html OUT.png [PAGE.html OUT.png ...]

The window is as wide as `--width` and as tall as the page (its scroll height), so the PNG
is the whole page. Needs selenium, chromium and chromedriver (Debian: apt-get install
chromium chromium-driver), as tests/test_report_browser.py does.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = [(REPO / "build" / "digits" / "report.html", REPO / "docs" / "report.png"),
           (REPO / "build" / "digits_max78000" / "report.html",
            REPO / "docs" / "report-max78000.png")]


def browser(width: int):  # -> selenium WebDriver (selenium is imported only here)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        sys.exit("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--hide-scrollbars", f"--window-size={width},1000"):
        options.add_argument(argument)
    options.binary_location = chromium
    return webdriver.Chrome(options=options, service=Service(driver))


def screenshot(driver, page: Path, out: Path, width: int) -> None:
    """The whole page: the window grown to the page's height first."""
    driver.set_window_size(width, 1000)
    driver.get(page.resolve().as_uri())
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, height)
    out.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out))
    print(f"{out}: {width} x {height}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="*", type=Path, metavar="PAGE OUT",
                        help="report.html and the PNG to write, in pairs")
    parser.add_argument("--width", type=int, default=1200)
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give pages and output files in pairs")
    pairs = list(zip(args.pairs[::2], args.pairs[1::2], strict=True)) or DEFAULT
    missing = [str(page) for page, _ in pairs if not page.is_file()]
    if missing:
        sys.exit(f"no such page: {', '.join(missing)} (build the manifests first)")
    driver = browser(args.width)
    try:
        for page, out in pairs:
            screenshot(driver, page, out, args.width)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
