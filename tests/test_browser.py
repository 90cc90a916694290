"""Real-browser tests: every registered page opened by deep link on a freshly started server, with every
request the page makes recorded (all must go to the local server: nothing leaves the machine), the pages
whose charts differ most for Gemma 3 270M by deep link (``model=gemma-3-270m``, one server for all of them),
and a shared link opened in a fresh browser context showing the same chart numbers.

Headless Debian ``chromium`` driven by Playwright (no browser download). A fresh
``streamlit run app.py`` per page matters: only the first request of a new server
takes Streamlit's legacy ``pages/`` path (see ``ui.navigation.redirect_legacy_run``); the next server
starts while a test runs (``_ServerPool``).
Presenter mode is checked as a projector shows it, at 1280×720 and 1920×1080 (one server, one
browser): no label, button text or chart title is cut, Copy link is there, Generation shows only its
primary controls. Screenshots go to ``$BROWSER_SCREENSHOTS`` when it is set; otherwise only a failing page's
is taken (into pytest's temporary folder, named in the failure).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ui.shell.navigation import PAGES, ROOT_TITLE

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STARTUP_S = 120  # server start + model load on 2 shared cores
RENDER_S = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no healthy server at {url} after {timeout:.0f} s")


class _ServerPool:
    """Fresh ``streamlit run app.py`` servers, each serving one test, the next one started while a test runs.

    A server's start (imports, ~3 s of CPU) overlaps the previous test's waits for the page to go quiet;
    one ahead, not more: on two cores a second would slow the test it overlaps. Every server a test takes
    has served no request before (the legacy ``pages/`` path is only taken by a new server's first one).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._started: list[tuple[str, subprocess.Popen, object]] = []
        self._running: dict[str, tuple[subprocess.Popen, object]] = {}
        self._count = itertools.count()  # each server its own log folder

    def _start(self) -> None:
        self._started.append(_start_server(self.folder / f"server-{next(self._count)}"))

    def take(self) -> str:
        if not self._started:
            self._start()
        url, proc, log = self._started.pop(0)
        self._start()
        self._running[url] = (proc, log)
        _wait_healthy(url, proc, STARTUP_S)
        return url

    def done(self, url: str) -> None:
        _stop_server(*self._running.pop(url))

    def close(self) -> None:
        for _, proc, log in self._started:
            _stop_server(proc, log)
        for proc, log in self._running.values():
            _stop_server(proc, log)


@pytest.fixture(scope="module")
def server_pool(tmp_path_factory) -> Iterator[_ServerPool]:
    pool = _ServerPool(tmp_path_factory.mktemp("fresh-servers"))
    yield pool
    pool.close()


@pytest.fixture
def fresh_server(server_pool) -> Iterator[str]:
    """A new ``streamlit run app.py`` on a free localhost port that has served nothing yet; its URL."""
    url = server_pool.take()
    yield url
    server_pool.done(url)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory) -> Iterator[str]:
    """One ``streamlit run app.py`` for a series of tests (the fresh-server deep link is tested above)."""
    yield from _serve(tmp_path_factory.mktemp("shared-server"))


def _start_server(folder: Path, env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen, object]:
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = open(folder / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
    )
    return f"http://127.0.0.1:{port}", proc, log


def _stop_server(proc: subprocess.Popen, log) -> None:
    proc.kill()  # a test server: nothing to save, and a polite stop takes Streamlit ~1.5 s
    proc.wait(timeout=20)
    log.close()


def _serve(folder: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    url, proc, log = _start_server(folder, env)
    try:
        _wait_healthy(url, proc, STARTUP_S)
        yield url
    finally:
        _stop_server(proc, log)


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


def _wait_for_run_to_finish(page) -> None:
    """Until the app's script (stApp's data-test-script-state) has not been running for two seconds."""
    deadline = time.monotonic() + RENDER_S
    quiet_since = None
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stApp"][data-test-script-state="running"]').count() > 0
        if running:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 2.0:
            return
        time.sleep(0.25)
    raise TimeoutError("the page kept running")


def _charts_drawn(page) -> bool:
    """Whether at least one Plotly chart has drawn its SVG."""
    try:
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=RENDER_S * 1000)
    except Exception:  # noqa: BLE001  (Playwright's TimeoutError; reported by the caller's assert)
        return False
    return True


def _screenshot(page, name: str, folder: Path) -> None:
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=stMain]'); return m ? m.scrollHeight : 900; }")
    page.set_viewport_size({"width": 1400, "height": min(max(int(height) + 40, 900), 12000)})
    time.sleep(1.0)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


@contextlib.contextmanager
def _screenshot_kept(page, name: str, tmp_path: Path) -> Iterator[None]:
    """The page's whole-length screenshot when ``$BROWSER_SCREENSHOTS`` asks for them, or when a check fails
    (then in pytest's temporary folder, named in the failure); none otherwise (each costs ~2 s)."""
    asked = os.environ.get("BROWSER_SCREENSHOTS")
    folder = Path(asked or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except Exception as error:
        _screenshot(page, name, folder)
        raise AssertionError(f"{error} (screenshot: {folder / name}.png)") from error
    if asked:
        _screenshot(page, name, folder)


def _record_requests(page) -> list[str]:
    """Every URL the page (and its frames, workers) requests, as it happens."""
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    return requested


def _outside(urls: list[str], server: str) -> list[str]:
    """The URLs that would leave the machine (anything but the local server and inline data)."""
    local = urllib.parse.urlsplit(server).netloc
    return [url for url in urls
            if urllib.parse.urlsplit(url).scheme not in ("data", "blob", "about")
            and urllib.parse.urlsplit(url).netloc != local]


def _chart_numbers(page) -> str:
    """Every drawn Plotly chart's data, as JSON (what the user sees, read from the browser)."""
    return page.evaluate("""() => JSON.stringify([...document.querySelectorAll('.js-plotly-plot')]
        .map(el => el.data.map(t => ({x: t.x, y: t.y, z: t.z, text: t.text}))))""")


@pytest.mark.parametrize("spec", PAGES, ids=[spec.url_path for spec in PAGES])
def test_deep_link_on_fresh_server(spec, fresh_server, browser, tmp_path):
    is_default = spec is PAGES[0]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    requested = _record_requests(page)
    page.goto(fresh_server + ("/" if is_default else f"/{spec.url_path}"))
    with _screenshot_kept(page, spec.url_path, tmp_path):
        page.wait_for_selector("h1", timeout=RENDER_S * 1000)
        charts_drawn = not spec.opens_with_chart or _charts_drawn(page)
        _wait_for_run_to_finish(page)

        # the right page, under the app's own navigation (not Streamlit's file-name fallback)
        links = page.locator('[data-testid="stSidebarNav"] a')
        titles = [text.split("\n")[-1].strip() for text in links.all_inner_texts()]
        assert titles == [p.title for p in PAGES], titles
        active = page.locator('[data-testid="stSidebarNav"] a[aria-current="page"]').inner_text()
        assert active.split("\n")[-1].strip() == spec.title
        if not is_default:
            assert urllib.parse.urlsplit(page.url).path.rstrip("/").endswith("/" + spec.url_path)  # query: the state
        heading = page.locator("h1").first.inner_text()
        assert heading.strip() == (ROOT_TITLE if is_default else spec.title) or spec.title.split(" ")[0] in heading

        # the shared sidebar, no exception, no error, charts drawn
        assert page.locator('[data-testid="stSidebar"] textarea').count() == 1
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        assert page.get_by_text("Page not found").count() == 0
        assert charts_drawn, f"no Plotly chart drawn on /{spec.url_path}"

        # offline: every request went to this server (no CDN, web font, icon set or telemetry)
        assert requested and not _outside(requested, fresh_server), _outside(requested, fresh_server)
    page.close()


GEMMA = "gemma-3-270m"
# Gemma in a real browser: the pages whose charts differ in kind or size for it (a SentencePiece vocabulary
# of 262,144 tokens and its embedding map, sliding-window attention maps, the side-by-side page). The link's
# model parameter is read by the same code on every page, and every page opens on Gemma in an AppTest
# (tests/test_app_gemma.py::test_every_page_opens_on_gemma); each page here costs 5-30 s of a CI run.
GEMMA_PAGES = [spec for spec in PAGES if spec.url_path in ("tokenization", "embeddings", "attention", "compare")]


@pytest.mark.parametrize("spec", GEMMA_PAGES, ids=[spec.url_path for spec in GEMMA_PAGES])
def test_pages_render_for_gemma_by_deep_link(spec, shared_server, browser, tmp_path):
    from inference.model.packages import install_hint, is_installed

    if not is_installed(GEMMA):
        pytest.skip(f"{GEMMA} is not installed: {install_hint(GEMMA)}")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    requested = _record_requests(page)
    path = "/" if spec is PAGES[0] else f"/{spec.url_path}"
    page.goto(f"{shared_server}{path}?model={GEMMA}")
    with _screenshot_kept(page, f"gemma_{spec.url_path}", tmp_path):
        page.wait_for_selector("h1", timeout=RENDER_S * 1000)
        charts_drawn = not spec.opens_with_chart or _charts_drawn(page)
        _wait_for_run_to_finish(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        assert page.locator('[data-testid="stAlertContentWarning"]').count() == 0  # the link's model was taken
        assert f"Model: {GEMMA}" in page.locator('[data-testid="stSidebar"]').inner_text()  # the engine that ran
        assert charts_drawn, f"no Plotly chart drawn on /{spec.url_path} for {GEMMA}"
        assert f"model={GEMMA}" in page.url
        assert not _outside(requested, shared_server), _outside(requested, shared_server)
    page.close()


def _slider_right(page, label: str, presses: int) -> str:
    """Move the slider labelled ``label`` right by ``presses`` arrow-key steps, as a user would; its new value."""
    handle = page.locator('[data-testid="stSlider"]').filter(has_text=label).locator('input[type=range]').first
    handle.focus()
    for _ in range(presses):
        handle.press("ArrowRight")
        time.sleep(0.3)
    _wait_for_run_to_finish(page)
    return handle.get_attribute("aria-valuetext")


def test_shared_link_restores_the_same_numbers(fresh_server, browser):
    """Change controls in one browser, copy the address bar, open it in a fresh context: same charts."""
    first = browser.new_context(viewport={"width": 1400, "height": 900})
    page = first.new_page()
    requested = _record_requests(page)
    query = urllib.parse.urlencode({"prompt": "Bank is closed because it is Sunday", "seed": "3"})
    page.goto(f"{fresh_server}/attention?{query}")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=RENDER_S * 1000)
    _wait_for_run_to_finish(page)
    layer = _slider_right(page, "Layer", 4)  # inside the page's fragment: its run must update the URL too
    assert layer not in (None, "0")
    deadline = time.monotonic() + 30
    while f"layer={layer}" not in page.url and time.monotonic() < deadline:
        time.sleep(0.25)
    link = page.url
    assert f"layer={layer}" in link and "seed=3" in link and "prompt=Bank" in link, link
    numbers = _chart_numbers(page)
    assert not _outside(requested, fresh_server)

    second = browser.new_context(viewport={"width": 1400, "height": 900})  # no shared cookies or storage
    fresh = second.new_page()
    fresh.goto(link)
    fresh.wait_for_selector(".js-plotly-plot .main-svg", timeout=RENDER_S * 1000)
    _wait_for_run_to_finish(fresh)
    assert fresh.get_by_text(f"Layer {layer}, head 0").count() > 0
    assert fresh.locator('[data-testid="stAlertContentWarning"]').count() == 0  # nothing was clamped
    assert json.loads(_chart_numbers(fresh)) == json.loads(numbers)
    assert fresh.locator('[data-testid="stSidebar"] textarea').input_value() == "Bank is closed because it is Sunday"
    first.close()
    second.close()


def test_hostile_link_in_a_real_browser(fresh_server, browser):
    """Script tags, a path as the model and a 10,000-character value: notes, no injected HTML, no traceback."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    query = urllib.parse.urlencode({"prompt": "<img src=x onerror=alert(1)><script>alert(2)</script>",
                                    "model": "../../etc/passwd", "<b>x</b>": "1", "top_k": "9" * 10_000})
    page.goto(f"{fresh_server}/logits?{query}")
    page.wait_for_selector('[data-testid="stAlertContentWarning"]', timeout=RENDER_S * 1000)
    _wait_for_run_to_finish(page)
    notes = page.locator('[data-testid="stAlertContentWarning"]').first.inner_text()
    assert "not one of the models" in notes and "unknown link parameter" in notes and "top_k" in notes
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator("main img[src='x'], main b:text('x')").count() == 0
    assert dialogs == []
    page.close()


# Text Streamlit cuts with "…" (an element that hides its overflow and holds more text than it shows),
# and chart titles, axis titles, annotations and legends drawn outside their chart: each as a short line.
CLIPPED_JS = """() => {
  const out = [];
  const name = el => (el.getAttribute('data-testid') || el.tagName) + ': ' + (el.innerText || '').trim().slice(0, 60);
  for (const el of document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *')) {
    if (!el.innerText || el.children.length > 3 || el.offsetParent === null) continue;
    const style = getComputedStyle(el);
    const hides = style.textOverflow === 'ellipsis' || (style.overflowX === 'hidden' && style.whiteSpace === 'nowrap');
    if (hides && el.scrollWidth > el.clientWidth + 1) out.push('cut text ' + name(el));
  }
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const box = plot.getBoundingClientRect();
    for (const t of plot.querySelectorAll('.gtitle, .annotation-text, .g-xtitle text, .g-ytitle text, .legendtext')) {
      const r = t.getBoundingClientRect();
      if (r.width && (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1))
        out.push('chart text outside its chart: ' + (t.textContent || '').slice(0, 60));
    }
  }
  return out;
}"""
PROJECTOR_SIZES = {(1280, 720): PAGES[1:], (1920, 1080): [p for p in PAGES if p.url_path == "generation"]}


def _check_projector_page(page, spec, folder: Path, size: tuple[int, int]) -> list[str]:
    """One presenter page as a projector shows it: Copy link there, Generation's extra controls gone, nothing cut."""
    if spec.url_path == "generation":
        page.get_by_role("button", name="Next token", exact=True).click()
        _wait_for_run_to_finish(page)
        assert page.get_by_label("Force the next token").count() == 0  # secondary controls hidden
        assert page.get_by_role("button", name="Back to the prompt").count() == 1
    copy = page.frame_locator('[data-testid="stSidebar"] iframe').get_by_role("button", name="Copy link to this view")
    assert copy.count() == 1, f"no Copy link on /{spec.url_path} in presenter mode"
    assert page.locator('[data-testid="stException"]').count() == 0
    if os.environ.get("BROWSER_SCREENSHOTS"):
        page.screenshot(path=str(folder / f"presenter_{spec.url_path}_{size[0]}x{size[1]}.png"))
    return [f"{size[0]}×{size[1]} /{spec.url_path}: {p}" for p in page.evaluate(CLIPPED_JS)]


def test_presenter_mode_fits_a_projector(fresh_server, browser, tmp_path):
    """Every story page at 1280×720, walked with the presenter bar's Next links in one session, and the
    Generation page at 1920×1080: no cut label, button text or chart title, Copy link available."""
    folder = Path(os.environ.get("BROWSER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    problems = []
    for (width, height), specs in PROJECTOR_SIZES.items():
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{fresh_server}/{specs[0].url_path}?present=1")
        for index, spec in enumerate(specs):
            if index:  # the presenter bar's own link: the same session walks the story
                page.get_by_role("link", name=f"Next: {spec.title}").click()
            page.wait_for_selector("h1", timeout=RENDER_S * 1000)
            _wait_for_run_to_finish(page)
            assert page.locator("h1").first.inner_text().split(" ")[0] in spec.title
            problems += _check_projector_page(page, spec, folder, (width, height))
        page.close()
    assert not problems, problems


CLASS_KEY = "browser-test-key"


@pytest.fixture
def class_server(tmp_path) -> Iterator[str]:
    """A fresh server started with a teacher key (a class server)."""
    yield from _serve(tmp_path, env={"LLM_EXPLORER_TEACHER_KEY": CLASS_KEY})


def _wait_text(page, text: str) -> None:
    page.get_by_text(text).first.wait_for(timeout=RENDER_S * 1000)


def test_class_view_on_a_fresh_server(class_server, browser, tmp_path):
    """A teacher (by the teacher-only link) starts a class draw; a student in another browser follows onto the
    Class page, draws, reloads (the same student: its cookie) and draws again; the teacher's class view pools
    exactly the student's 20 draws. The class pages rerun their live views on a timer, so this test waits for
    texts rather than for the script to go quiet."""
    teacher = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    requested = _record_requests(teacher)
    teacher.goto(f"{class_server}/class?teacher={CLASS_KEY}")
    _wait_text(teacher, "You are the teacher")
    assert CLASS_KEY not in teacher.url  # the key is dropped from the address bar
    teacher.get_by_role("button", name="New draw round on my prompt and settings", exact=True).click()
    _wait_text(teacher, "Draw 10 for the class")

    student = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    student.goto(f"{class_server}/")
    _wait_text(student, "Following the teacher")
    _wait_text(student, "Draw 10 for the class")  # the follower was taken to the teacher's page
    assert urllib.parse.urlsplit(student.url).path.endswith("/class")
    student.get_by_role("button", name="Draw 10 for the class", exact=True).click()
    _wait_text(student, "Your draws in this round: 10 ")
    student.reload()
    _wait_text(student, "Your draws in this round: 10 ")  # the same student after the reload: nothing lost or doubled
    student.get_by_role("button", name="Draw 10 for the class", exact=True).click()
    _wait_text(student, "Your draws in this round: 20 ")

    _wait_text(teacher, "20 draws by 1 student")
    assert teacher.locator(".js-plotly-plot .main-svg").count() > 0
    title = teacher.locator(".js-plotly-plot .gtitle").first.text_content()
    assert title.startswith("The class (1 student): 20 draws"), title
    for page in (teacher, student):
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    assert not _outside(requested, class_server), _outside(requested, class_server)
    if os.environ.get("BROWSER_SCREENSHOTS"):
        teacher.screenshot(path=str(Path(os.environ["BROWSER_SCREENSHOTS"]) / "class_view.png"), full_page=True)
    teacher.context.close()
    student.context.close()
