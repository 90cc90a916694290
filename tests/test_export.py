"""Chart export: ``figure_csv`` writes exactly the numbers a figure draws, and every chart on a page
gets a PNG file name and a CSV download (``ui.common.charts.show``).

Unit tests build figures by hand and with the real chapter figure builders (``ui/<chapter>/figures.py``) (small inputs, as in
``test_figures_*``) and read the CSV back; the AppTest part opens real pages and reaches each CSV
through the download button's deferred callable."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from tests import apptest_utils
from tests.apptest_utils import assert_clean, chart, plotly_array
from ui.attention import figures as att_figs
from ui.batching import figures as batch_figs
from ui.common import charts
from ui.common.chart import Chart
from ui.common.export import decode_array, figure_csv
from ui.common.state import PRESENTER
from ui.embeddings import figures as emb_figs
from ui.generation import figures as gen_figs
from ui.logits import figures as logit_figs
from ui.sampling import figures as sampling_figs
from ui.tokenization.figures import make_token_id_chart

PIECES = ["The", " cat", " sat", "."]


def read(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def floats(rows: list[dict[str, str]], column: str) -> np.ndarray:
    return np.array([float(r[column]) if r[column] != "" else np.nan for r in rows])


def of_trace(rows: list[dict[str, str]], name: str) -> list[dict[str, str]]:
    return [r for r in rows if r["trace"] == name]


def grid(rows: list[dict[str, str]], shape: tuple[int, int]) -> np.ndarray:
    """Heatmap rows back into a matrix (cells the CSV left out are NaN)."""
    out = np.full(shape, np.nan)
    for r in rows:
        out[int(r["row"]), int(r["col"])] = float(r["z"]) if r["z"] else np.nan
    return out


def _uniform_causal(t: int) -> np.ndarray:
    probs = np.tril(np.ones((t, t)))
    return probs / probs.sum(-1, keepdims=True)


# -- hand-made figures -----------------------------------------------------------------------
def test_bar_rows_are_the_bars():
    fig = go.Figure(go.Bar(x=["a", "b", "c"], y=[1.5, -2, 3.25], text=["x", "y", "z"], name="scores"))
    rows = read(figure_csv(fig))
    assert list(rows[0]) == ["trace", "type", "x", "y", "text"]  # unused columns left out
    assert [r["x"] for r in rows] == ["a", "b", "c"]
    assert floats(rows, "y").tolist() == [1.5, -2.0, 3.25]
    assert {r["trace"] for r in rows} == {"scores"} and {r["type"] for r in rows} == {"bar"}
    assert [r["text"] for r in rows] == ["x", "y", "z"]


def test_scatter_without_x_uses_plotly_positions_and_keeps_float32_text_short():
    y = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    fig = go.Figure([go.Scatter(y=y, name="a"), go.Scatter(x=[10, 20], y=[5, 6])])
    rows = read(figure_csv(fig))
    assert [r["x"] for r in of_trace(rows, "a")] == ["0", "1", "2"]
    assert [r["y"] for r in of_trace(rows, "a")] == ["0.1", "0.2", "0.3"]  # not 0.10000000149011612
    assert np.array_equal(floats(of_trace(rows, "a"), "y").astype(np.float32), y)
    assert floats(of_trace(rows, "trace 1"), "x").tolist() == [10, 20]  # unnamed: Plotly's own default name


def test_heatmap_one_row_per_drawn_cell_masked_cells_left_out():
    z = [[1.0, None, 3.0], [np.nan, 5.5, -6.0]]
    text = [["a", "", "c"], ["masked but labelled", "e", "f"]]
    fig = go.Figure(go.Heatmap(z=z, x=["k0", "k1", "k2"], y=["q0", "q1"], text=text, name="map"))
    rows = read(figure_csv(fig))
    assert [(r["row"], r["col"]) for r in rows] == [("0", "0"), ("0", "2"), ("1", "0"), ("1", "1"), ("1", "2")]
    assert [(r["y"], r["x"]) for r in rows] == [("q0", "k0"), ("q0", "k2"), ("q1", "k0"), ("q1", "k1"), ("q1", "k2")]
    assert [r["z"] for r in rows] == ["1.0", "3.0", "", "5.5", "-6.0"]  # a masked cell with text: kept, z empty
    assert rows[2]["text"] == "masked but labelled"
    assert {r["trace"] for r in rows} == {"map"}


def test_heatmap_of_numpy_with_nan_and_no_labels():
    z = np.array([[0.25, np.nan], [0.5, 0.75]])
    rows = read(figure_csv(go.Figure(go.Heatmap(z=z))))
    assert np.array_equal(grid(rows, (2, 2)), z, equal_nan=True)
    assert [(r["x"], r["y"]) for r in rows] == [("0", "0"), ("0", "1"), ("1", "1")]  # labels default to indices


def test_typed_arrays_from_json_give_the_same_csv():
    fig = go.Figure(
        [
            go.Heatmap(z=np.arange(6, dtype=np.float32).reshape(2, 3) / 7),
            go.Bar(x=np.array([1, 2]), y=np.array([3, 4], dtype=np.int8)),
        ]
    )
    parsed = go.Figure(json.loads(pio.to_json(fig)))  # arrays now {"dtype", "bdata", "shape"}
    assert isinstance(parsed.data[0].z, dict) and "bdata" in parsed.data[0].z
    assert figure_csv(parsed) == figure_csv(fig)
    assert decode_array(parsed.data[0].z).shape == (2, 3)


def test_traces_without_numbers_are_skipped():
    fig = go.Figure(go.Scatter(name="empty"))
    fig.add_shape(type="rect", x0=0, x1=1, y0=0, y1=1)
    fig.add_annotation(x=0.5, y=0.5, text="note")
    assert figure_csv(fig) == "trace,type,x,y\n"


def test_tick_labels_name_integer_positions():
    fig = logit_figs.make_logits_bar([" on", " in", "."], [12.5, 11.25, 9.0], greedy_index=0)
    rows = read(figure_csv(fig))
    assert [r["x_label"] for r in rows] == ["·on", "·in", "."]
    assert floats(rows, "y").tolist() == [12.5, 11.25, 9.0] and floats(rows, "x").tolist() == [0, 1, 2]


# -- the real figure builders ----------------------------------------------------------------
def test_attention_heatmap_csv_holds_the_weights_and_the_row_sums():
    probs = _uniform_causal(4)
    rows = read(figure_csv(att_figs.make_attention_heatmap(probs, PIECES, "t")))
    cells = of_trace(rows, "trace 0")
    assert {r["subplot"] for r in cells} == {"xy"}
    assert len(cells) == 10  # the lower triangle; future keys are masked and left out
    expected = np.where(np.tril(np.ones((4, 4))) > 0, probs, np.nan)
    assert np.allclose(grid(cells, (4, 4)), expected, equal_nan=True)
    assert (cells[-1]["y"], cells[-1]["x"]) == ("3: .", "3: .")
    sums = of_trace(rows, "trace 1")
    assert {r["subplot"] for r in sums} == {"x2y2"} and {r["type"] for r in sums} == {"bar"}
    assert np.allclose(floats(sums, "x"), 1.0) and [r["y"] for r in sums] == ["0: The", "1: ·cat", "2: ·sat", "3: ."]


def test_score_steps_keep_every_subplot_and_masked_scores_empty():
    raw = np.array([2.0, -1.0, 4.0, 0.5])
    masked = np.array([2.0, -1.0, -np.inf, -np.inf]) / 8
    probs = np.array([0.6, 0.4, 0.0, 0.0])
    rows = read(figure_csv(att_figs.make_score_steps(raw, raw / 8, masked, probs, PIECES, query=1, head_dim=64)))
    by_subplot = {s: [r for r in rows if r["subplot"] == s] for s in ("xy", "x2y2", "x3y3", "x4y4")}
    assert floats(by_subplot["xy"], "y").tolist() == raw.tolist()
    assert floats(by_subplot["x2y2"], "y").tolist() == (raw / 8).tolist()
    masked_bars = of_trace(by_subplot["x3y3"], "trace 2")
    assert [r["y"] for r in masked_bars] == ["0.25", "-0.125", "", ""] and masked_bars[2]["text"] == "−∞"
    assert floats(by_subplot["x4y4"], "y").tolist() == probs.tolist()


def test_heads_grid_csv_has_every_heads_visible_weights():
    probs = np.stack([_uniform_causal(4) * (h + 1) / 9 for h in range(9)])
    fig = att_figs.make_heads_grid(probs, PIECES, [h // 3 for h in range(9)], layer=2)
    rows = read(figure_csv(fig))
    assert len(rows) == 9 * 10  # nine lower triangles; gaps and future keys drawn blank, left out
    z = grid(rows, (14, 14))
    assert np.allclose(z[5:9, 5:9][np.tril_indices(4)], probs[4][np.tril_indices(4)])


def test_embedding_heatmap_float32_values_round_trip():
    values = (np.arange(4 * 6, dtype=np.float32).reshape(4, 6) - 10) / 3
    rows = read(figure_csv(emb_figs.make_embedding_heatmap(values, PIECES, (49152, 576))))
    assert np.array_equal(grid(rows, (4, 6)).astype(np.float32), values)
    assert (rows[6]["row"], rows[6]["col"], rows[6]["y"], rows[6]["x"]) == ("1", "0", "1: ·cat", "0")


def test_stage_figure_keeps_cut_cells_as_text():
    probs = np.array([[0.5, 0.3, 0.2], [0.625, 0.375, 0.0]])
    rows = read(
        figure_csv(logit_figs.make_stage_figure([" on", " a", " the"], ["softmax", "top-p"], probs, [49152, 2]))
    )
    assert np.allclose(grid(rows, (2, 3)), np.where(probs > 0, probs, np.nan), equal_nan=True)
    cut = rows[-1]
    assert (cut["row"], cut["col"], cut["z"], cut["text"], cut["x_label"]) == ("1", "2", "", "cut", "·the")
    assert rows[0]["y"] == "softmax · 49,152 left"


def test_cumulative_ranges_write_start_and_width():
    fig = sampling_figs.make_cumulative_ranges(
        ["a", "b"], [0.0, 0.5], [0.5, 0.8], u=0.6, chosen_index=1, title="t", other_label="rest"
    )
    rows = read(figure_csv(fig))
    assert [r["trace"] for r in rows] == ["ranges"] * 3
    assert np.allclose(floats(rows, "base"), [0.0, 0.5, 0.8]) and np.allclose(floats(rows, "x"), [0.5, 0.3, 0.2])
    assert rows[0]["text"] == "a 0.00–0.50"  # Plotly's <br> written as a space


def test_temperature_sweep_names_both_axes():
    fig = logit_figs.make_temperature_sweep([0.5, 1.0, 2.0], [1.0, 2.0, 3.0], [0.9, 0.5, 0.2], current=0.5)
    rows = read(figure_csv(fig))
    entropy, top = of_trace(rows, "entropy (bits)"), of_trace(rows, "top token's probability")
    assert floats(entropy, "y").tolist() == [1.0, 2.0, 3.0] and {r["subplot"] for r in entropy} == {"xy"}
    assert floats(top, "y").tolist() == [0.9, 0.5, 0.2] and {r["subplot"] for r in top} == {"xy2"}
    assert floats(top, "x").tolist() == [0.5, 1.0, 2.0]


def test_batching_and_generation_figures():
    positions = batch_figs.make_positions_heatmap(
        np.array([[0, 0, 1], [0, 1, 2]]), np.array([[False, True, True], [True, True, True]])
    )
    rows = read(figure_csv(positions))
    assert [(r["z"], r["text"]) for r in rows[:3]] == [("", "pad→0"), ("0.0", "0"), ("1.0", "1")]
    timing = read(figure_csv(gen_figs.make_cache_timing([4, 5, 6], [10.0, 10.5, 10.2], [30.0, 35.0, 41.0])))
    assert floats(of_trace(timing, "KV cache: one new position"), "y").tolist() == [10.0, 10.5, 10.2]
    assert floats(of_trace(timing, "no cache: recompute all"), "y").tolist() == [30.0, 35.0, 41.0]
    assert floats(of_trace(timing, "no cache: recompute all"), "x").tolist() == [4, 5, 6]
    phases = read(figure_csv(gen_figs.make_phase_timeline(["prefill", "decode"], [0.2, 0.05], [11, 1], ["a", "b"])))
    assert [(r["trace"], float(r["base"]), float(r["x"])) for r in phases] == [
        ("prefill", 0.0, 200.0),
        ("decode", 200.0, 50.0),
    ]


BUILDERS = {
    "token_ids": lambda: make_token_id_chart(PIECES, [504, 2644, 2643, 30]),
    "vector": lambda: emb_figs.make_vector_chart(np.linspace(-1, 1, 8), " cat"),
    "neighbours": lambda: emb_figs.make_neighbour_chart([(1, " Cat", 0.7), (2, " dog", 0.5)], " cat"),
    "projection": lambda: emb_figs.make_projection_scatter(
        np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]), ["a", "b", "c"], ["prompt", "word set", "word set"], (0.5, 0.2)
    ),
    "rope": lambda: emb_figs.make_rope_rotation(np.outer(np.arange(5), [1.0, 0.1]), [0, 1], np.array([6.28, 62.8])),
    "distance": lambda: emb_figs.make_distance_scores(np.arange(5), np.linspace(0, 1, 5), 2, 0.5, " it", " cat"),
    "query_layers": lambda: att_figs.make_query_over_layers(np.random.default_rng(0).random((30, 4)), PIECES, query=3),
    "gqa": lambda: att_figs.make_gqa_diagram(9, 3),
    "window": lambda: att_figs.make_window_heatmap(np.tril(np.full((8, 8), 0.1)), 4, 32, 8, "t", local=True),
    "layer_kinds": lambda: att_figs.make_layer_kinds([0, 1, 3], 4, 512),
    "overlay": lambda: logit_figs.make_probability_overlay(
        ["a", "b", "c"], [0.5, 0.3, 0.2], [0.8, 0.15, 0.05], "T = 1", "T = 0.5"
    ),
    "histogram": lambda: sampling_figs.make_draw_histogram(["a", "b"], [0.6, 0.4], [0.55, 0.45], 1000, 10.1, 1, 0.0015),
    "strips": lambda: sampling_figs.make_token_strips(
        [[" on", " a"], [" on"]], ["A", "B"], [[0.9, 0.5], [0.8]], 1, "t"
    ),
    "padded": lambda: batch_figs.make_padded_batch([[None, None, "The", " cat"], ["Once", " upon", " a", " time"]]),
    "mask": lambda: batch_figs.make_mask_heatmap(np.tril(np.ones((3, 3))), [None, "a", "b"], 0),
    "timeline": lambda: batch_figs.make_batch_timeline(np.array([[0, 0], [1, -2]]), ["prefill", "decode"], "t", "row"),
    "kv": lambda: gen_figs.make_kv_heatmaps(
        np.random.default_rng(1).normal(size=(3, 5, 4)),
        np.random.default_rng(2).normal(size=(3, 5, 4)),
        ["a", "b", "c", "d", "e"],
        new_rows=[4],
        layer=2,
    ),
    "phases": lambda: gen_figs.make_phase_timeline(
        ["prefill", "decode", "decode"], [0.2, 0.05, 0.05], [11, 1, 1], [" on", " the", " mat"]
    ),
    "alternatives": lambda: gen_figs.make_alternatives_bar([" on", " down"], [0.6, 0.2], " down", "step 0"),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_csv_equals_its_traces(name):
    """For any builder: each trace's rows, in order, give back its x/y (points) or its z (drawn cells)."""
    fig = BUILDERS[name]()
    rows = read(figure_csv(fig))
    names = [trace.name or f"trace {index}" for index, trace in enumerate(fig.data)]
    assert rows and {r["trace"] for r in rows} == set(names), name
    for index, trace in enumerate(fig.data):
        mine = of_trace(rows, names[index])
        if names.count(names[index]) > 1:  # two traces of one name share their rows: checked by the tests above
            continue
        z = getattr(trace, "z", None)
        if z is not None and np.ndim(z) == 2:
            z = np.asarray(z, dtype=float)
            drawn = ~np.isnan(z)
            assert np.allclose(grid(mine, z.shape)[drawn], z[drawn]), (name, index)
        elif trace.y is not None and len(trace.y) and not isinstance(trace.y[0], str):
            assert np.allclose(floats(mine, "y"), np.asarray(trace.y, dtype=float), equal_nan=True), (name, index)
        elif trace.x is not None and len(trace.x) and not isinstance(trace.x[0], str):
            assert np.allclose(floats(mine, "x"), np.asarray(trace.x, dtype=float), equal_nan=True), (name, index)


# -- ui.common.charts: file names, config, presenter copy ---------------------------------------------
def test_chart_config_and_file_stem():
    config = charts.chart_config("llm-explorer_logits_logits_bar")
    assert config == {
        "toImageButtonOptions": {"format": "png", "filename": "llm-explorer_logits_logits_bar", "scale": 2},
        "displaylogo": False,
    }
    assert charts.file_stem("logits_bar") == "llm-explorer_logits_bar"  # no page outside a Streamlit run
    assert charts.file_stem("logits_bar", name="top logits / T=0.5") == "llm-explorer_top-logits-T-0-5"


def test_presenter_copy_is_larger_and_leaves_the_original_alone():
    fig = att_figs.make_attention_heatmap(_uniform_causal(4), PIECES, "t")
    before = fig.to_json()
    big = charts.presenter_copy(fig)
    assert fig.to_json() == before
    assert big.layout.font.size == round(12 * charts.FONT_SCALE)
    assert big.layout.title.font.size == round(16 * charts.FONT_SCALE)
    assert big.layout.xaxis.tickfont.size == round(12 * charts.FONT_SCALE)
    assert big.data[1].textfont.size == round(12 * charts.FONT_SCALE)  # an explicit text size grows too
    assert big.layout.height == round(fig.layout.height * charts.HEIGHT_SCALE)
    assert figure_csv(big) == figure_csv(fig)  # same numbers


def test_presenter_copy_wraps_a_long_title_and_makes_room_for_it():
    title = "Layer 0: the cache's keys and values (19 positions × 64 dims per K/V head); red = written this step"
    fig = go.Figure(go.Bar(y=[1]), layout={"title": title, "height": 300, "margin": {"t": 50}})
    big = charts.presenter_copy(fig)
    lines = big.layout.title.text.split("<br>")
    assert len(lines) == 2 and " ".join(lines) == title and all(len(l) <= charts.TITLE_LINE_CHARS for l in lines)
    assert big.layout.margin.t > 50 and big.layout.height > round(300 * charts.HEIGHT_SCALE)
    assert charts.presenter_copy(go.Figure(layout={"title": "Short"})).layout.title.text == "Short"


def test_a_chart_csv_uses_its_table_from_the_same_arguments_and_falls_back_to_the_traces():
    chart = logit_figs.logits_bar(["<0xF0><0x9F>", " on"], [3.5, -1.25], 0, token_ids=[100, 319])
    rows = read(chart.csv())
    assert list(rows[0]) == ["rank", "token_id", "token", "logit", "greedy_pick"]
    assert [r["token"] for r in rows] == ["<0xF0><0x9F>", "·on"]  # the chart's own notation
    assert floats(rows, "logit").tolist() == [3.5, -1.25]
    assert read(Chart(logit_figs.make_logits_bar)(["a", "b"], [1.0, 2.0]).csv())[0]["trace"]  # no table: the traces


# -- AppTest: every chart on a page has its PNG name and a working CSV download ----------------
@pytest.fixture
def deferred_downloads(monkeypatch) -> dict[str, dict]:
    """Records each deferred download (its callable, file name, mime) by the button's element id."""
    recorded: dict[str, dict] = {}
    original = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, *, element_id=""):
        recorded[element_id] = {"callable": data_callable, "mimetype": mimetype, "file_name": file_name}
        return original(self, data_callable, mimetype, coordinates, file_name, element_id=element_id)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return recorded


def chart_exports(at, deferred: dict[str, dict]) -> dict[str, dict]:
    """{chart key: its config, its CSV button and that button's recorded download} for every chart drawn."""
    buttons = {b.proto.id.rsplit("-", 1)[-1]: b for b in at.get("download_button")}
    out = {}
    for element in at.get("plotly_chart"):
        key = element.proto.id.rsplit("-", 1)[-1]
        button = buttons.get(f"{key}_csv")
        out[key] = {
            "config": json.loads(element.proto.config),
            "button": button,
            "download": deferred.get(button.proto.id) if button is not None else None,
        }
    return out


@pytest.mark.real_model
@pytest.mark.parametrize(
    "script, url_path, keys",
    [
        ("pages/attention.py", "attention", {"attention_heatmap", "score_steps", "heads_grid", "gqa_diagram"}),
        ("pages/logits.py", "logits", {"logits_bar", "probability_overlay", "temperature_sweep", "stage_figure"}),
        ("pages/embeddings.py", "embeddings", {"embedding_heatmap", "embedding_vector", "embedding_neighbours"}),
    ],
)
def test_every_chart_on_a_page_is_exportable(script, url_path, keys, deferred_downloads):
    at = apptest_utils.open_page(script)
    assert_clean(at)
    exports = chart_exports(at, deferred_downloads)
    assert keys <= set(exports), sorted(exports)
    for key, export in exports.items():
        stem = f"llm-explorer_{url_path}_{key}"
        assert export["config"] == charts.chart_config(stem), key
        button = export["button"]
        assert button is not None, f"{key}: no download button with key {key}_csv"
        assert button.proto.label == "Download CSV" and button.proto.type == "tertiary" and button.proto.ignore_rerun
        assert button.proto.deferred_file_id  # built on click, not on every rerun
        download = export["download"]
        assert download["file_name"] == stem + ".csv" and download["mimetype"] == "text/csv", key


@pytest.mark.real_model
def test_logits_csv_download_holds_the_charts_numbers(deferred_downloads):
    """The real downloads: named columns built from the page's data, equal to what the charts draw."""
    at = apptest_utils.open_page("pages/logits.py")
    assert_clean(at)
    exports = chart_exports(at, deferred_downloads)

    bars = chart(at, "logits_bar")
    rows = bar_rows = read(exports["logits_bar"]["download"]["callable"]())
    assert list(rows[0]) == ["rank", "token_id", "token", "logit", "greedy_pick"]
    assert np.array_equal(floats(rows, "logit"), plotly_array(bars["data"][0]["y"]).astype(float))
    assert [r["token"] for r in rows] == bars["layout"]["xaxis"]["ticktext"]  # the same token notation

    stages = chart(at, "stage_figure")["data"][0]
    z = plotly_array(stages["z"]).astype(float)
    rows = read(exports["stage_figure"]["download"]["callable"]())
    assert {"stage", "token", "probability", "kept", "survivors_in_vocabulary"} <= set(rows[0])
    table = np.array([float(r["probability"]) for r in rows]).reshape(z.shape)
    assert np.array_equal(np.where(table > 0, table, np.nan), z, equal_nan=True)
    assert [r["kept"] == "True" for r in rows] == (table > 0).reshape(-1).tolist()

    sweep = read(exports["temperature_sweep"]["download"]["callable"]())
    assert list(sweep[0]) == ["temperature", "entropy_bits", "top_token_probability"]
    entropy = floats(sweep, "entropy_bits")
    assert np.all(np.diff(entropy) > 0)  # entropy grows with T: the sweep the chart draws

    at.session_state[PRESENTER] = True  # projector mode: bigger text, the same numbers
    at.run()
    assert_clean(at)
    assert chart(at, "logits_bar")["layout"]["font"]["size"] == round(12 * charts.FONT_SCALE)
    assert chart(at, "logits_bar")["layout"]["height"] == round(bars["layout"]["height"] * charts.HEIGHT_SCALE)
    exports = chart_exports(at, deferred_downloads)
    assert read(exports["logits_bar"]["download"]["callable"]()) == bar_rows


@pytest.mark.real_model
def test_attention_and_embedding_downloads_have_named_columns(deferred_downloads):
    at = apptest_utils.open_page("pages/attention.py", prompt="I love pizza 🍕")
    assert_clean(at)
    exports = chart_exports(at, deferred_downloads)
    rows = read(exports["attention_heatmap"]["download"]["callable"]())
    assert list(rows[0]) == ["query_position", "query_token", "key_position", "key_token", "weight"]
    assert all(int(r["key_position"]) <= int(r["query_position"]) for r in rows)  # masked cells left out
    sums: dict[str, float] = {}
    for r in rows:
        sums[r["query_position"]] = sums.get(r["query_position"], 0.0) + float(r["weight"])
    assert np.allclose(list(sums.values()), 1.0, atol=1e-4)
    assert any("<0xF0>" in r["query_token"] for r in rows)  # byte pieces in the <0xNN> notation, never "�"
    assert not any("\ufffd" in r["query_token"] for r in rows)
    for key, export in exports.items():  # every chart of the page: a table of its own, not the trace dump
        header = next(csv.reader(io.StringIO(export["download"]["callable"]())))
        assert "trace" not in header, key


def test_a_shared_builder_builds_each_figure_once_for_every_session():
    """``charts.shared``: the same arguments give the very same figure (a class on one view builds it once);
    other arguments build another; the figure that comes back is the builder's, unchanged."""
    from ui.common import charts

    calls = []

    def make_bars(labels: list[str], values: np.ndarray) -> go.Figure:
        calls.append(labels)
        return go.Figure(go.Bar(x=labels, y=values))

    shared = charts.shared(make_bars)
    assert charts.shared(make_bars) is shared  # one cache per builder, however often a page asks for it
    first = shared(["a", "b"], np.array([0.25, 0.75]))
    assert shared(["a", "b"], np.array([0.25, 0.75])) is first and len(calls) == 1
    other = shared(["a", "b"], np.array([0.5, 0.5]))
    assert other is not first and len(calls) == 2
    assert list(first.data[0].y) == [0.25, 0.75] and list(other.data[0].y) == [0.5, 0.5]
