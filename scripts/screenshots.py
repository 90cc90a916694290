"""Refresh the README's screenshots: start the app, open pages in headless Chromium, save PNGs in assets/.

    .venv/bin/python scripts/screenshots.py [page ...]      # default: every page in SHOTS
    SCREENSHOTS_DIR=/tmp/shots .venv/bin/python scripts/screenshots.py   # look first, elsewhere than assets/

Uses Debian's chromium through Playwright (no browser download). Each shot may click
buttons first (by their label) so the picture shows the page in use; a shot's path may
carry a query string (a shared link), and a projector shot keeps a fixed window size.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
PORT = int(os.environ.get("SCREENSHOTS_PORT", "8765"))  # override when another server holds it
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class Shot:
    path: str  # url path, with a query string for a shared link
    clicks: list[str] = field(default_factory=list)  # labels of buttons to click, in order
    window: tuple[int, int] | None = None  # a fixed window (what a projector shows) instead of the full page
    scroll_to: str | None = None  # in a fixed window: scroll so that this text (a heading) is at the top
    settle_s: float = 300  # how long a click's run may take (the speculative page's seeds run a request each)


SHARED_LINK = "logits?" + urllib.parse.urlencode(
    {
        "prompt": "Bank is closed on Sunday, so the",
        "temperature": "1.3",
        "top_p": "0.9",
        "seed": "7",
        "model": "/etc/passwd",  # refused (not an offered model), with a note on the page
    }
)
EXPERIMENT_LINK = "experiments?" + urllib.parse.urlencode(
    {
        "prompt": "The cat sat on the mat because it was tired, so the",
        "off": "3.8,13.8",
        "cut": "12-1",  # two heads that send "it" to "cat", and the last "the" cut off from "cat"
        "sweep": "1",
        "patching": "1",
    }
)
LONG_PROMPT = " ".join(["The cat sat on the mat because it was tired."] * 59)  # 650 Gemma tokens, past its window
# shot name (assets/<name>.png) -> what to open and do
COPY_PROMPT = "The cat sat on the mat because it was tired. Say it again: The cat sat"  # prompt lookup drafts
TWO_NOUNS = "The trophy did not fit in the suitcase because it was too big."  # "it": trophy or suitcase?
SHOTS: dict[str, Shot] = {
    "overview": Shot(
        "?present=1",
        window=(1280, 720),  # the first page a newcomer sees, on a projector's 720p
        scroll_to="LLM inference explorer",
    ),
    "tokenization": Shot("tokenization"),
    "embeddings": Shot("embeddings"),
    "attention": Shot("attention?" + urllib.parse.urlencode({"prompt": TWO_NOUNS})),
    "logit_lens": Shot("logit_lens"),
    "experiments": Shot(EXPERIMENT_LINK),
    "logits": Shot("logits"),
    "sampling": Shot("sampling", ["Draw again", "Draw 1,000 times"]),
    "generation": Shot("generation", ["Run N", "Measure"]),
    "speculative": Shot(
        "speculative?" + urllib.parse.urlencode({"prompt": COPY_PROMPT}),
        ["Measure the sweep", "Compare many seeds"],
        settle_s=900,
    ),
    "quantization": Shot("quantization", ["Run my prompt in every weights mode", "Measure decode speed in every mode"]),
    "quantization_gemma": Shot(
        "quantization?model=gemma-3-270m",
        window=(1400, 1150),  # Gemma's own Q5_0 block
        scroll_to="One block, as the file stores it",
    ),
    "batching": Shot("batching", ["Run static and continuous", "Measure throughput vs batch size"]),
    "presenter": Shot(
        "sampling?present=1",
        ["Draw again"],
        window=(1280, 720),  # a projector's 720p
        scroll_to="1 · One draw, by cumulative ranges",
    ),
    "paged_kv": Shot(
        "paged_kv?" + urllib.parse.urlencode({"scenario": "samples", "block_size": "4", "paged_step": "1"}),
        window=(1366, 768),  # a laptop's screen: the step's events, the pool and the start of the tables
        scroll_to="The scheduler, step by step",
    ),
    "shared_link": Shot(SHARED_LINK, window=(1400, 1300)),
    # Gemma 3 270M: the sliding window on a prompt past 512 tokens, and the two models side by side
    "gemma_window": Shot(
        "attention?" + urllib.parse.urlencode({"model": "gemma-3-270m", "prompt": LONG_PROMPT}),
        window=(1400, 1250),
        scroll_to="Local and global layers: the sliding window",
    ),
    "compare": Shot("compare"),
    "lesson": Shot("lesson?" + urllib.parse.urlencode({"lesson": "text-to-next-token", "at": "5"})),
}
# The class scene (``class_scene``): a teacher and four students on one server started with a teacher key.
CLASS_SHOTS = ("class_view", "class_follow")
CLASS_KEY = "screenshot-key"  # the server's teacher key for this run only
CLASS_PROMPT = "The cat sat on the"
GUESSES = ["mat", "floor", "mat", "sofa"]


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
        "() => { const m = document.querySelector('[data-testid=stMain]'); return m ? m.scrollHeight : 1000; }"
    )
    page.set_viewport_size({"width": 1400, "height": min(max(int(height) + 40, 1000), 12000)})
    page.wait_for_timeout(1500)


def wait_text(page, text: str, timeout_s: float = 120) -> None:
    """Until ``text`` is on the page (the class pages rerun their live views on a timer, so they never settle)."""
    page.get_by_text(text).first.wait_for(timeout=timeout_s * 1000)
    page.wait_for_timeout(1500)


def class_scene(browser, url: str, folder: Path) -> None:
    """The teacher starts a draw round and a guess round; four students (own browsers, so own cookies) follow,
    draw and guess; the teacher reveals. Shots: the teacher's class view (full height) and a following
    student's page with its sidebar."""

    def tab():
        return browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()

    teacher = tab()
    teacher.goto(f"{url}/logits?teacher={CLASS_KEY}")  # the teacher-only link
    wait_text(teacher, "You are the teacher")
    teacher.goto(f"{url}/class?" + urllib.parse.urlencode({"prompt": CLASS_PROMPT}))  # the cookie keeps teacher mode
    wait_text(teacher, "You are the teacher")
    print("teacher on the class page", flush=True)
    for label in ("New draw round on my prompt and settings", "New guess round on my prompt"):
        teacher.get_by_role("button", name=label, exact=True).click()
        teacher.wait_for_timeout(2000)
    students = []
    for guess in GUESSES:
        page = tab()
        print("student", guess, flush=True)
        page.goto(f"{url}/", timeout=120_000)
        wait_text(page, "Following the teacher")
        wait_text(page, "Draw 10 for the class")  # the follower is taken to the teacher's page
        for press in range(1, 4):
            page.get_by_role("button", name="Draw 10 for the class", exact=True).click()
            wait_text(page, f"Your draws in this round: {10 * press} ")
        box = page.get_by_role("textbox", name="Your guess (one word; Enter sends it)")
        box.fill(guess)
        box.press("Enter")  # the guess box is a form: Enter sends it
        page.wait_for_timeout(1500)
        if students:  # Chromium holds at most 6 connections per host: keep one student's tab open, not all
            page.context.close()
        else:
            students.append(page)
    teacher.get_by_role("button", name="Reveal the model's answer", exact=True).click()
    wait_text(teacher, "The model's most probable next token")
    wait_text(teacher, f"{3 * 10 * len(GUESSES)} draws by ")
    full_height(teacher)
    teacher.screenshot(path=str(folder / "class_view.png"), full_page=True)
    print("wrote", folder / "class_view.png")
    students[0].wait_for_timeout(2500)  # the class panel is at the top of the sidebar: no scrolling
    students[0].screenshot(path=str(folder / "class_follow.png"))
    print("wrote", folder / "class_follow.png")


def main(names: list[str]) -> None:
    url = f"http://127.0.0.1:{PORT}"
    env = {**os.environ, "LLM_EXPLORER_TEACHER_KEY": CLASS_KEY} if set(names) & set(CLASS_SHOTS) else None
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(PORT),
            "--server.address",
            "127.0.0.1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        wait_healthy(url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            if set(names) & set(CLASS_SHOTS):
                class_scene(browser, url, Path(os.environ.get("SCREENSHOTS_DIR") or ROOT / "assets"))
            for name in [n for n in names or list(SHOTS) if n not in CLASS_SHOTS]:
                shot = SHOTS[name]
                width, height = shot.window or (1400, 1000)
                page = browser.new_page(viewport={"width": width, "height": height})  # a fresh session per shot
                page.goto(f"{url}/{shot.path}")
                settle(page)
                for label in shot.clicks:
                    page.get_by_role("button", name=label, exact=True).first.click()
                    settle(page, shot.settle_s)
                if shot.window is None:
                    full_height(page)
                elif shot.scroll_to:
                    page.get_by_text(shot.scroll_to, exact=True).first.evaluate("el => el.scrollIntoView()")
                    page.wait_for_timeout(1000)
                file = Path(os.environ.get("SCREENSHOTS_DIR") or ROOT / "assets") / f"{name}.png"
                page.screenshot(path=str(file), full_page=shot.window is None)
                page.close()
                print("wrote", file)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main(sys.argv[1:])
