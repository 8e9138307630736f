"""What the pages cost a browser: bytes over the wire and time to the load event, in chromium,
cold (empty cache) and on a warm reload, for the tenant page, the fleet page, the buy page and
the API docs.

    .venv/bin/python bench/pages.py [--rounds 5]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
gpuloans_pages_bench; dropped and created afresh) and Debian's chromium. Seeds the demo (four
tenants, 90 days of hourly usage), then serves it with gunicorn twice: with production
settings (DEBUG off, static files collected, compressed and cached for good under hashed
names, pages compressed), and, as the baseline measured in the same run, with the development
settings' static files (DEBUG on: uncompressed, revalidated on every load). Bytes are what
chromium received (headers and compressed bodies, Network.loadingFinished); time is
loadEventEnd of the navigation, the median of --rounds. Targets, production settings: the
tenant page cold at most 600 KB and 600 ms, its warm reload at most 150 KB.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (  # noqa: E402
    QUIET_STATIC,
    ROOT,
    SECRET,
    database_url,
    recreate_database,
    served_static,
)

DATABASE_URL = database_url("gpuloans_pages_bench")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
PAGES = {
    "tenant page": "/en/tenants/vision/",
    "fleet page": "/en/fleet/",
    "buy page": "/en/tenants/vision/buy-vs-loan/",
    "API docs": "/api/docs/",
}
TARGETS = {("tenant page", "cold", "bytes"): 600_000, ("tenant page", "cold", "ms"): 600,
           ("tenant page", "warm", "bytes"): 150_000}
OPERATOR = ("operator", "gpuloans-operator")  # as seed_demo makes it


def environment(production: bool) -> dict[str, str]:
    env = {**os.environ, **QUIET_STATIC, "DATABASE_URL": DATABASE_URL, "SECRET_KEY": SECRET,
           "ALLOWED_HOSTS": "127.0.0.1", "BEHIND_TLS_PROXY": "0", "SECURE_COOKIES": "0",
           "LOG_LEVEL": "WARNING", "DEBUG": "0" if production else "1"}
    if production:
        env.update(served_static())
    return env


def manage(*args: str) -> None:
    started = time.perf_counter()
    print(f"  manage.py {' '.join(args)} ...", end="", flush=True)
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, check=True,
                   env=environment(production=False), stdout=subprocess.DEVNULL)
    print(f" {time.perf_counter() - started:.1f} s", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    def __init__(self, production: bool):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi", "--config", "config/gunicorn.py",
             "--workers", "2", "--threads", "4", "--bind", f"127.0.0.1:{self.port}",
             "--log-level", "warning"],
            cwd=ROOT, env=environment(production), start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=5)  # noqa: S310 - loopback
                return
            except OSError:
                time.sleep(0.3)
        raise SystemExit("gunicorn did not answer /healthz within 60 s")

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        self.process.wait(timeout=30)


def load(page, cdp, url: str, reload: bool) -> tuple[int, float]:
    """Bytes chromium received and ms to the load event, for one navigation."""
    received = []
    listener = lambda event: received.append(event["encodedDataLength"])  # noqa: E731
    cdp.on("Network.loadingFinished", listener)
    if reload:
        page.reload(wait_until="load")
    else:
        page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")  # what the page fetches after it (the heatmap)
    ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    cdp.remove_listener("Network.loadingFinished", listener)
    return sum(received), ms


def measure(browser, server: Server, rounds: int) -> dict:
    figures = {}
    for name, path in PAGES.items():
        cold, warm = [], []
        for _ in range(rounds):
            context = browser.new_context(locale="en-US")
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{server.url}/en/accounts/login/?next=/en/")
            page.fill("#id_username", OPERATOR[0])
            page.fill("#id_password", OPERATOR[1])
            page.click("main button[type=submit]")
            page.wait_for_load_state("networkidle")
            cdp = context.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.send("Network.clearBrowserCache")
            cold.append(load(page, cdp, server.url + path, reload=False))
            warm.append(load(page, cdp, server.url + path, reload=True))
            context.close()
        figures[name] = {
            "cold": (statistics.median(b for b, _ in cold), statistics.median(m for _, m in cold)),
            "warm": (statistics.median(b for b, _ in warm), statistics.median(m for _, m in warm)),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"database {DATABASE_URL}; {args.rounds} rounds a page", flush=True)
    recreate_database(DATABASE_URL)
    manage("migrate", "--no-input")
    manage("seed_demo")
    manage("close_periods")
    manage("recommend")
    served_static()

    results = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for label, production in (("development static (baseline)", False),
                                  ("production settings", True)):
            server = Server(production)
            try:
                measure(browser, server, 1)  # the workers' first requests warm them
                results[label] = measure(browser, server, args.rounds)
            finally:
                server.stop()
        browser.close()

    baseline, product = results["development static (baseline)"], results["production settings"]
    print(f"\n{'page':<12} {'load':<5} {'baseline KB':>12} {'ms':>7}   {'production KB':>14} "
          f"{'ms':>7}   {'bytes':>6} {'time':>6}")
    failed = []
    for name in PAGES:
        for kind in ("cold", "warm"):
            (b0, m0), (b1, m1) = baseline[name][kind], product[name][kind]
            print(f"{name:<12} {kind:<5} {b0 / 1000:>12,.1f} {m0:>7.0f}   {b1 / 1000:>14,.1f} "
                  f"{m1:>7.0f}   {b1 / b0:>6.2f} {m1 / m0:>6.2f}")
            for unit, value in (("bytes", b1), ("ms", m1)):
                limit = TARGETS.get((name, kind, unit))
                if limit is not None and value > limit:
                    failed.append(f"{name} {kind} {value:,.0f} {unit} > {limit:,}")
    print("\nratios: production / baseline, same run, same machine")
    for (name, kind, unit), limit in TARGETS.items():
        value = product[name][kind][0 if unit == "bytes" else 1]
        verdict = "ok" if value <= limit else "MISSED"
        print(f"target {name} {kind} {unit} <= {limit:,}: {value:,.0f} {verdict}")
    if failed:
        raise SystemExit("missed: " + "; ".join(failed))


if __name__ == "__main__":
    main()
