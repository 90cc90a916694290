"""Refresh the README's screenshots: start the app, open pages in headless Chromium, save PNGs in assets/.

    .venv/bin/python scripts/screenshots.py [page ...]      # default: every page in SHOTS

Uses Debian's chromium through Playwright (no browser download). Each shot may click
buttons first (by their label) so the picture shows the page in use.
"""
from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
PORT = 8765
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# url path -> (output file, labels of buttons to click in order)
SHOTS: dict[str, tuple[str, list[str]]] = {
    "logit_lens": ("logit_lens.png", []),
    "logits": ("logits.png", []),
    "sampling": ("sampling.png", ["Draw again", "Draw 1,000 times"]),
    "generation": ("generation.png", ["Run N", "Measure"]),
    "batching": ("batching.png", ["Run static and continuous"]),
}


def wait_healthy(url: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(url)


def settle(page, timeout_s: float = 300) -> None:
    """Wait until the app's script has not been running for two seconds (stApp's script state)."""
    deadline, quiet_since = time.monotonic() + timeout_s, None
    page.wait_for_timeout(500)
    while time.monotonic() < deadline:
        if page.locator('[data-testid="stApp"][data-test-script-state="running"]').count() > 0:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 2.0:
            return
        page.wait_for_timeout(250)
    raise TimeoutError("the page kept running")


def full_height(page) -> None:
    """Streamlit scrolls inside its main section: grow the viewport to show all of it."""
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=stMain]'); return m ? m.scrollHeight : 1000; }")
    page.set_viewport_size({"width": 1400, "height": min(max(int(height) + 40, 1000), 12000)})
    page.wait_for_timeout(1500)


def main(names: list[str]) -> None:
    url = f"http://127.0.0.1:{PORT}"
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(PORT),
                               "--server.address", "127.0.0.1"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        wait_healthy(url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for name in names or list(SHOTS):
                file, clicks = SHOTS[name]
                page.goto(f"{url}/{name}")
                settle(page)
                for label in clicks:
                    page.get_by_role("button", name=label, exact=True).first.click()
                    settle(page)
                full_height(page)
                page.screenshot(path=str(ROOT / "assets" / file), full_page=True)
                page.set_viewport_size({"width": 1400, "height": 1000})
                print("wrote", ROOT / "assets" / file)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main(sys.argv[1:])
