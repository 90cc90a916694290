"""The same link shows the same numbers: links to every page, their tables against a fixture written from a known version.

Each link (a page, a model, a prompt and settings, as a shared link carries them) is opened in a
fresh AppTest session, and every chart's table (the CSV its "Download CSV" button hands out,
``ui.common.chart.ChartCall.csv``) is read and compared with ``tests/fixtures/same_numbers.json``.
The Overview draws no chart: its numbers are in its picture (an SVG, ``ui.common.picture``), read
as a table of the picture's texts and hover values, one row each, by the part they sit in.
The fixture was written by this test (``SAME_NUMBERS_WRITE=1``) from the code as it was before
a rebuild of the UI wing: the first links before it moved behind one engine API (issue 23), the
Overview, Speculative, chat, code/emoji, MLP-edit/edge-cut and Gemma generation/sampling links
before it moved into chapter folders (issue 40, commit f00c00e). A refactor that moves code around
cannot change a number on screen without this test saying which link, chart, row and column.

Every page of ``ui.common.navigation.PAGES`` that shows numbers has a link here. The class page
has none: without a teacher it shows no number (without a teacher key it stops at its notice;
with one, no round is open until the teacher starts it), and its rounds' pooled draws are
recounted from each student's seed by ``tests/test_classroom.py``.

Numbers are compared within a bound derived from float32 rounding, not fitted to a machine:
``eps`` is ``tests.tolerances.model_tolerance`` for the page's model at its logit scale (the
largest |Δlogit| two correctly rounded evaluations may differ by), and a value ``a`` may move by
``2 · eps · max(1, |a|)``: softmax outputs move by at most twice the logits' change, and larger
values (logits, norms, scores) by at most that share of themselves. Text (tokens, labels) and
counts compare exactly; a number written inside a text (a hover's "p 0.42", the picture's "15.8%") may
move by that bound plus one unit of its last shown digit (a value at a rounding boundary), its text
around it not at all, and a whole number in a text not at all. Charts of timings measured live are
left out (``TIMED``), as are the Speculative page's speed metrics (not charts: they are not read).

The Sampling page's continuations (``GENERATED``) come from the shared server, whose forwards batch whatever requests
are in flight, so their logits move within that bound from run to run. A draw whose u lies closer to its range's edge
than the edges can move, or a greedy step whose top two logits are that close, may then go either way, and every token
after it with it. Such a strip is compared up to that step: the first such step is found on the model's own solo run
(``Engine.generate``), and a strip that parts from the fixture before it still fails.
"""

from __future__ import annotations

import copy
import csv
import functools
import io
import json
import math
import os
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import open_link
from tests.tolerances import logit_tolerance

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "same_numbers.json"
WRITE = os.environ.get("SAME_NUMBERS_WRITE") == "1"
TIMEOUT = 300
GEMMA = "gemma-3-270m"
KEPT_ROWS = 400  # a longer table keeps every k-th row (and its last), and every numeric column's sum
TIMED = {"gen_timeline", "gen_timing_chart", "quant_bytes", "quant_speed", "batch_curve"}  # measured live
GENERATED = {"greedy_vs_sampled", "two_settings"}  # the Sampling page's continuations: rows of (setting, step, token)
SETTING_T = re.compile(r"T = ([0-9.]+)")  # a continuation's temperature, as its setting's label shows it
REPEATING = "one two three four, one two three four, one two three four, one two"  # prompt lookup finds drafts
CODE_EMOJI = 'def greet(name):\n    # say hi 👋🏽\n    return f"Hello, {name}'

# (name, page url path, link parameters): several pages, both models, non-default prompts and settings.
LINKS = [
    ("tokenization", "tokenization", {}),
    ("tokenization-emoji", "tokenization", {"prompt": "I love pizza 🍕 and naïve café"}),
    ("embeddings-bank", "embeddings", {"prompt": "Bank is closed"}),
    ("attention-layer-head", "attention", {"layer": "3", "head": "2"}),
    ("logit-lens-paris", "logit_lens", {"prompt": "The capital of France is", "block": "5"}),
    ("experiments-heads-off", "experiments", {"off": "3.8,13.8"}),
    ("logits-settings", "logits", {"prompt": "Bank is closed", "temperature": "1.3", "top_p": "0.9", "seed": "7"}),
    ("sampling-seed", "sampling", {"temperature": "0.8", "seed": "3"}),
    ("generation-walk", "generation", {"step": "4", "temperature": "0"}),
    ("batching", "batching", {}),
    ("quantization", "quantization", {}),
    ("gemma-attention", "attention", {"model": GEMMA, "query": "7"}),
    ("gemma-logits", "logits", {"model": GEMMA, "prompt": "The cat sat", "temperature": "0.7"}),
    ("gemma-embeddings", "embeddings", {"model": GEMMA}),
    ("compare", "compare", {"prompt": "The cat sat"}),
    # issue 40: every page that shows numbers, and the link parameters the first links did not use
    ("overview", "overview", {}),
    ("speculative-lookup", "speculative", {"prompt": REPEATING, "temperature": "0.8", "seed": "1"}),
    ("experiments-mlp-cut", "experiments", {"mlp_off": "2", "mlp_scale": "0.5", "cut": "10-1,9-3"}),
    ("logit-lens-chat", "logit_lens", {"prompt": "What is the capital of France?", "chat": "1", "block": "20"}),
    ("logits-code-emoji", "logits", {"prompt": CODE_EMOJI, "temperature": "0.9", "top_k": "40"}),
    ("gemma-generation", "generation", {"model": GEMMA, "step": "3", "temperature": "0"}),
    ("gemma-sampling", "sampling", {"model": GEMMA, "temperature": "1.2", "top_p": "0.95", "seed": "11"}),
]
NEEDS_GEMMA = {"gemma-attention", "gemma-logits", "gemma-embeddings", "compare", "gemma-generation", "gemma-sampling"}
PICTURE = "overview_picture"  # the Overview's picture (``ui.common.picture.KEY``), read as a table


def _script(url_path: str) -> str:
    from ui.common.navigation import PAGES

    return next(spec.script for spec in PAGES if spec.url_path == url_path)


@pytest.fixture
def deferred_downloads(monkeypatch) -> dict[str, object]:
    """Each chart's deferred CSV download (its callable), by the download button's element id."""
    recorded: dict[str, object] = {}
    original = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, *, element_id=""):
        recorded[element_id] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name, element_id=element_id)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return recorded


def chart_tables(at: AppTest, deferred: dict[str, object]) -> dict[str, str]:
    """{chart key: its CSV table} for every chart the page drew."""
    buttons = {b.proto.id.rsplit("-", 1)[-1]: b for b in at.get("download_button")}
    tables = {}
    for element in at.get("plotly_chart"):
        key = element.proto.id.rsplit("-", 1)[-1]
        if key in TIMED or key not in {k.removesuffix("_csv") for k in buttons}:
            continue
        tables[key] = deferred[buttons[f"{key}_csv"].proto.id]()
    for element in at.get("bidi_component"):
        if element.proto.component_name == PICTURE:
            tables[PICTURE] = picture_csv(json.loads(element.proto.json)["svg"])
    return tables


def picture_csv(svg: str) -> str:
    """The Overview picture's numbers as a table: every text and hover value (``<title>``) in drawing order, with
    the part of the picture it sits in (``data-part``) and its class ("hover" for a hover value)."""
    rows = [("part", "kind", "text")]

    def walk(element: ElementTree.Element, part: str) -> None:
        part = element.get("data-part", part)
        tag = element.tag.rsplit("}", 1)[-1]
        if tag in ("text", "title") and element.text and element.text.strip():
            rows.append((part, "hover" if tag == "title" else element.get("class", ""), element.text.strip()))
        for child in element:
            walk(child, part)

    walk(ElementTree.fromstring(svg), "")
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def summarise(text: str) -> dict:
    """A table as the fixture keeps it: header, row count, the rows (of a long table every k-th and the last, by
    index), and a long table's numeric columns' sums."""
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    stored = {"header": header, "n_rows": len(body)}
    if len(body) <= KEPT_ROWS:
        stored["rows"] = body
        return stored
    stride = math.ceil(len(body) / KEPT_ROWS)
    kept = sorted({*range(0, len(body), stride), len(body) - 1})
    stored["kept"] = {str(index): body[index] for index in kept}
    sums = {}
    for column, name in enumerate(header):
        values = [_number(row[column]) for row in body]
        if all(v is not None for v in values):
            sums[name] = [math.fsum(values), math.fsum(abs(v) for v in values)]
    stored["sums"] = sums
    return stored


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def model_eps(facts: dict) -> float:
    """The derived |Δlogit| bound of a model (``inference/model/tolerances.py``), from the facts the fixture keeps of it."""
    reduction = max(facts["d_model"], facts["d_ff"], facts["n_heads"] * facts["head_dim"])
    return logit_tolerance(facts["logit_scale"], reduction, facts["n_layers"], compared=10**6)


def _close(expected: str, actual: str, eps: float) -> bool:
    a, b = _number(expected), _number(actual)
    if a is None or b is None or expected.isdigit() and actual.isdigit():
        return expected == actual or _close_text(expected, actual, eps)  # text, counts and ids: exactly
    return abs(a - b) <= 2 * eps * max(1.0, abs(a))


SHOWN_NUMBER = re.compile(r"[-−]?\d[\d,]*(?:\.\d+)?")  # a number as a text shows it: "−0.132", "1,234", "15.8"


def _close_text(expected: str, actual: str, eps: float) -> bool:
    """Two texts with numbers in them: the same text around the numbers, whole numbers equal, and each decimal
    within the bound plus one unit of its last shown digit (a value at a rounding boundary shows either side)."""
    want, got = SHOWN_NUMBER.findall(expected), SHOWN_NUMBER.findall(actual)
    if not want or SHOWN_NUMBER.sub("#", expected) != SHOWN_NUMBER.sub("#", actual) or len(want) != len(got):
        return False
    for a, b in zip(want, got):
        if a == b:
            continue
        if "." not in a or "." not in b:
            return False  # whole numbers (counts, ids, positions): exactly
        x, y = (float(t.replace(",", "").replace("−", "-")) for t in (a, b))
        unit = 10.0 ** -len(a.rsplit(".", 1)[1])
        if not abs(x - y) <= 2 * eps * max(1.0, abs(x)) + unit * (1 + 1e-9):
            return False
    return True


def compare_rows(
    where: str, expected: list[list[str]], actual: list[list[str]], header: list[str], eps: float
) -> list[str]:
    problems = []
    for index, (want, got) in enumerate(zip(expected, actual)):
        for column, (a, b) in enumerate(zip(want, got)):
            if not _close(a, b, eps):
                problems.append(f"{where} row {index} {header[column]}: {a!r} -> {b!r}")
    return problems[:10]


def compare(name: str, key: str, expected: dict, text: str, eps: float) -> list[str]:
    actual = summarise(text)
    where = f"{name}/{key}"
    if actual["header"] != expected["header"] or actual["n_rows"] != expected["n_rows"]:
        return [
            f"{where}: columns {expected['header']} x {expected['n_rows']} rows -> "
            f"{actual['header']} x {actual['n_rows']} rows"
        ]
    if "rows" in expected:
        return compare_rows(where, expected["rows"], actual["rows"], expected["header"], eps)
    indices = sorted(expected["kept"], key=int)
    problems = compare_rows(
        where,
        [expected["kept"][i] for i in indices],
        [actual["kept"].get(i, []) for i in indices],
        expected["header"],
        eps,
    )
    for column, (total, magnitude) in expected["sums"].items():
        got_total, _ = actual["sums"].get(column, (math.nan, 0.0))
        if not abs(total - got_total) <= 2 * eps * max(1.0, magnitude):
            problems.append(f"{where} sum of {column}: {total!r} -> {got_total!r}")
    return problems


def open_page_link(url_path: str, query: dict[str, str]) -> AppTest:
    return open_link(_script(url_path), query, TIMEOUT)


def model_facts(model: str) -> dict:
    """What the tolerance needs of a model: its shapes, and its logit scale (the largest |logit| after the
    default prompt, which the derived bound multiplies)."""
    from inference import load_engine

    engine = load_engine(model=None if model == "SmolLM2-135M-Instruct" else model, device="cpu", dtype="float32")
    config = engine.config
    scale = float(
        engine.recompute_last(engine.encode_prompt("The cat sat on the mat because it was tired.")).abs().max()
    )
    return {
        "d_model": config.d_model,
        "d_ff": config.d_ff,
        "n_heads": config.n_heads,
        "head_dim": config.head_dim,
        "n_layers": config.n_layers,
        "logit_scale": round(scale, 2),
    }


def _gemma_installed() -> bool:
    from inference.model.packages import GEMMA3_270M, is_installed

    return is_installed(GEMMA3_270M)


@pytest.mark.real_model
@pytest.mark.parametrize("name, url_path, query", LINKS, ids=[link[0] for link in LINKS])
def test_a_link_shows_the_numbers_it_showed(name, url_path, query, deferred_downloads):
    if name in NEEDS_GEMMA and not _gemma_installed():
        pytest.skip(f"{GEMMA} is not installed")
    at = open_page_link(url_path, query)
    tables = chart_tables(at, deferred_downloads)
    assert tables, f"{name}: no chart table on the page"
    stored = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {"links": {}, "models": {}}
    model = query.get("model", "SmolLM2-135M-Instruct")
    if WRITE:
        stored["links"][name] = {key: summarise(text) for key, text in sorted(tables.items())}
        if model not in stored["models"]:
            stored["models"][model] = model_facts(model)
        FIXTURE.parent.mkdir(exist_ok=True)
        FIXTURE.write_text(json.dumps(stored, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        return
    expected = stored["links"][name]
    assert set(tables) == set(expected), f"{name}: charts {sorted(expected)} -> {sorted(tables)}"
    eps = model_eps(stored["models"][model])
    for key in GENERATED & set(expected):  # each strip up to its first draw the logits' bound can turn
        expected[key] = up_to_open_draws(expected[key], tables[key], query, eps)
        tables[key] = _csv([expected[key]["header"], *expected[key].pop("actual")])
    problems = [p for key in sorted(expected) for p in compare(name, key, expected[key], tables[key], eps)]
    assert not problems, "\n".join(problems)


def up_to_open_draws(expected: dict, text: str, query: dict[str, str], eps: float) -> dict:
    """A continuations table (``GENERATED``) as far as its tokens are determined: where a strip parts from the
    fixture, its rows from the first open step on are dropped from both sides, when that step comes no later. Returns
    the fixture's table with its kept rows, and ``actual``: the page's kept rows."""
    actual = list(csv.reader(io.StringIO(text)))[1:]
    if actual == expected["rows"]:
        return {**expected, "actual": actual}
    keep_expected, keep_actual = [], []
    for setting in dict.fromkeys(row[0] for row in expected["rows"]):
        want = [row for row in expected["rows"] if row[0] == setting]
        got = [row for row in actual if row[0] == setting]
        parted = next((i for i, (a, b) in enumerate(zip(want, got)) if a[2] != b[2]), None)
        if parted is not None:
            first_open = open_step(setting, query, len(want), eps)
            if first_open is not None and first_open <= parted:
                want, got = want[:first_open], got[:first_open]
        keep_expected += want
        keep_actual += got
    return {**expected, "n_rows": len(keep_expected), "rows": keep_expected, "actual": keep_actual}


def open_step(setting: str, query: dict[str, str], n_tokens: int, eps: float) -> int | None:
    """The first step of a continuation whose token two evaluations of the logits within ``eps`` of the exact ones
    may choose differently, on the model's solo run (None: none). A draw: u within 8 eps / T of its range's edge
    (each edge, a sum of probabilities each off by at most a factor exp(2 eps / T) before top-p's renormalisation and
    as much after it, moves by at most 4 eps / T; two evaluations part by twice that), plus float32's rounding of
    the edges. Greedy: the top two logits within 4 eps."""
    from inference import SamplingParams
    from ui.common.state import DEFAULT_PROMPT

    temperature = float(SETTING_T.search(setting).group(1))
    params = SamplingParams(
        temperature=temperature,
        top_k=int(query.get("top_k", 0)),
        top_p=float(query.get("top_p", 1.0)),
        min_p=float(query.get("min_p", 0.0)),
        repetition_penalty=float(query.get("repetition_penalty", 1.0)),
        seed=int(query.get("seed", 0)),
        max_new_tokens=n_tokens,
    ).canonical()
    engine = _solo_engine(query.get("model"))
    prompt = engine.encode_prompt(query.get("prompt", DEFAULT_PROMPT), chat=query.get("chat") == "1")
    for step in engine.generate(prompt, params, record_sampling=True, top_n=2):
        if params.greedy:
            first, second = step.top[0].probability, step.top[1].probability
            if second > 0 and math.log(first / second) <= 4 * eps:
                return step.index
            continue
        draw = step.sample
        chosen = (draw.range_token_ids == draw.token_id).nonzero().item()
        edge = min(draw.u - float(draw.range_starts[chosen]), float(draw.range_ends[chosen]) - draw.u)
        if edge <= 8 * eps / temperature + 2.0**-23:
            return step.index
    return None


@functools.lru_cache(maxsize=1)  # the positive control asks twice, a parted link once per strip
def _solo_engine(model: str | None):
    """The model's own engine for ``open_step``'s solo runs (None: the default model)."""
    from inference import load_engine

    return load_engine(model=model, device="cpu", dtype="float32")


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


def test_the_comparison_can_fail():
    """Positive control: a number moved past the bound, a changed token and a missing row are each reported."""
    table = "token,probability\n·on,0.25\n·in,0.125\n"
    stored = summarise(table)
    eps = 1e-3
    assert compare("link", "chart", stored, "token,probability\n·on,0.2502\n·in,0.125\n", eps) == []
    assert compare("link", "chart", stored, "token,probability\n·on,0.26\n·in,0.125\n", eps)
    assert compare("link", "chart", stored, "token,probability\n·at,0.25\n·in,0.125\n", eps)
    assert compare("link", "chart", stored, "token,probability\n·on,0.25\n", eps)
    shown = summarise("part,text\nlogits,p 0.42 of 1\n")  # numbers inside a text, as shown
    assert compare("link", "chart", shown, "part,text\nlogits,p 0.43 of 1\n", eps) == []  # one unit of the last digit
    assert compare("link", "chart", shown, "part,text\nlogits,p 0.44 of 1\n", eps)
    assert compare("link", "chart", shown, "part,text\nlogits,p 0.42 of 2\n", eps)  # a whole number: exactly
    assert compare("link", "chart", shown, "part,text\nlogits,q 0.42 of 1\n", eps)  # the text around it: exactly
    long = "x,y\n" + "".join(f"{i},{i / 7}\n" for i in range(1000))
    shifted = "x,y\n" + "".join(f"{i},{i / 7 + 0.5}\n" for i in range(1000))
    assert compare("link", "chart", summarise(long), long, eps) == []
    assert compare("link", "chart", summarise(long), shifted, eps)  # a whole column moved


@pytest.mark.real_model
def test_a_strip_may_part_only_from_a_draw_the_bound_can_turn():
    """Gemma's sampling link, as the fixture keeps it: B (T = 1.5) parting at step 8, as a CI run's batch once made
    it (the solo run's own tokens there), is compared up to its first open draw (step 1, u 8e-6 from its range's
    edge) and passes; A (T = 0.3) parting at step 1, before its first open draw (step 4), is reported."""
    if not _gemma_installed():
        pytest.skip(f"{GEMMA} is not installed")
    stored = json.loads(FIXTURE.read_text())
    name = "gemma-sampling"
    query = next(q for n, _, q in LINKS if n == name)
    expected = stored["links"][name]["two_settings"]
    eps = model_eps(stored["models"][GEMMA])

    def checked(rows: list[list[str]]) -> list[str]:
        kept = up_to_open_draws(copy.deepcopy(expected), _csv([expected["header"], *rows]), query, eps)
        return compare(name, "two_settings", kept, _csv([expected["header"], *kept.pop("actual")]), eps)

    b_parts = [list(row) for row in expected["rows"]]
    b_parts[18][2:4], b_parts[19][2:4] = ["38045", "·x"], ["107", "↵"]
    assert checked(b_parts) == []
    a_parts = [list(row) for row in expected["rows"]]
    a_parts[1][2:4] = ["999", "·y"]
    assert checked(a_parts) == [
        f"{name}/two_settings row 1 token_id: '818' -> '999'",
        f"{name}/two_settings row 1 token: 'The' -> '·y'",
    ]
