"""Screenshots of the pages for the README, from a running demo (`make demo`):

    .venv/bin/python scripts/screenshots.py [http://127.0.0.1:8000]

Drives Debian's chromium through Playwright, as the browser tests do.
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

DOCS = Path(__file__).resolve().parent.parent / "docs"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
SHOTS = [  # login, password, page, file
    ("vision-lead", "gpuloans-demo", "/en/tenants/vision/", "tenant.png"),
    ("operator", "gpuloans-operator", "/en/fleet/", "fleet.png"),
]


def main(base: str) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        for username, password, path, name in SHOTS:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{base}/en/accounts/login/?next={path}")
            page.fill("#id_username", username)
            page.fill("#id_password", password)
            page.click("main button[type=submit]")
            page.wait_for_url(f"{base}{path}")
            page.wait_for_load_state("networkidle")
            page.screenshot(path=DOCS / name, full_page=True)
            print(f"{DOCS / name}")
            page.close()
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
