"""Pages in a real browser: Debian's chromium driven by Playwright (no downloaded browser).

A missing chromium fails these tests; it is never a reason to skip them.
"""

import os

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API keeps an event loop running in this thread, and Django then refuses
    # ORM calls from it; the tests' own ORM calls are synchronous and safe. Scoped to the browser
    # modules so that no other test (or the subprocesses they start) inherits the switch.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            yield browser
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()

from tests.story import frozen, metered  # noqa: F401,E402
