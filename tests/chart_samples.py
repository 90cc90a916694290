"""Small hand-made arguments for every chart spec (``ui.common.chart.Chart``) of the chapters' figures, by
``<chapter>.<spec>``, and how many of the figure's plotted points (``ui.common.export.figure_rows``: one per bar,
marker or drawn heatmap cell) the CSV table's rows stand for: ``tests/test_chart_spec.py`` builds both from one
call and checks them against each other."""

from __future__ import annotations

import numpy as np

from inference.api import PagingEvent, PagingStep, PagingTrace

R = np.random.default_rng(0)
TOKENS = [" the", " cat", "<0xF0>", "\n"]
ATT = np.tril(np.full((4, 4), 0.25, dtype=np.float32))
ATT = ATT / ATT.sum(axis=1, keepdims=True)  # (T, T) rows sum to 1
MASKED = np.where(np.tril(np.ones((4, 4), dtype=bool)), 1.0, -np.inf)[2]

# Two sequences on a pool of 4 blocks of 2 positions: both hold block 0 (a shared prompt start), each its own next.
STEP = PagingStep(
    index=1,
    phase="decode",
    rows=(0, 1),
    fed=(1, 1),
    ref_counts=np.array([2, 1, 1, 0]),
    owners=np.array([0, 0, 1, -1]),
    filled=np.array([2, 1, 1, 0]),
    cached=np.array([False, False, False, True]),
    tables=(np.array([0, 1]), np.array([0, 2])),
    held=np.array([3, 3]),
    events=(PagingEvent("allocate", 1, (2,)),),
    paged_bytes=3 * 2 * 64,
    slot_bytes=2 * 8 * 64,
    used_bytes=6 * 64,
    distinct_bytes=4 * 64,
)
FIRST = PagingStep(
    index=0,
    phase="prefill",
    rows=(0, 1),
    fed=(2, 0),
    ref_counts=np.array([2, 0, 0, 0]),
    owners=np.array([0, -1, -1, -1]),
    filled=np.array([2, 0, 0, 0]),
    cached=np.array([False] * 4),
    tables=(np.array([0]), np.array([0])),
    held=np.array([2, 2]),
    events=(PagingEvent("allocate", 0, (0,)), PagingEvent("prefix_hit", 1, (0,))),
    paged_bytes=2 * 64,
    slot_bytes=2 * 8 * 64,
    used_bytes=4 * 64,
    distinct_bytes=2 * 64,
)
TRACE = PagingTrace(2, 4, 64, 8, (0, 0), (2, 2), (FIRST, STEP), 1, 0, 0, 0)

# name: (positional arguments, keyword arguments)
SAMPLES: dict[str, tuple[tuple, dict]] = {
    "attention.attention_heatmap": ((ATT, TOKENS, "title"), {}),
    "attention.score_steps": (
        (
            np.array([1.0, 2.0, 3.0, 9.0]),
            np.array([0.5, 1.0, 1.5, 4.5]),
            MASKED,
            np.array([0.2, 0.3, 0.5, 0.0]),
            TOKENS,
            2,
            4.0,
        ),
        {},
    ),
    "attention.heads_grid": ((np.stack([ATT, ATT, ATT, ATT]), TOKENS, [0, 0, 1, 1], 0), {}),
    "attention.gqa_diagram": ((4, 2), {}),
    "attention.layer_kinds": (([0, 1, 3], 4, 512), {}),
    "attention.query_over_layers": ((R.random((3, 4)), TOKENS, 3), {}),
    "attention.window_heatmap": ((ATT, 2, 8, 4, "title", False), {}),
    "batching.padded_batch": (([[None, " a", " b"], [" c", " d", " e"]],), {"labels": [0, 2]}),
    "batching.mask_heatmap": ((np.tril(np.ones((3, 3), dtype=bool)), [None, " a", " b"], 0), {}),
    "batching.positions_heatmap": ((np.array([[0, 0, 1], [0, 1, 2]]), np.array([[False, True, True], [True] * 3])), {}),
    "batching.batch_timeline": (
        (np.array([[0, 0, -1], [1, 1, 1]]), ["prefill", "decode", "decode"], "title", "row"),
        {"labels": [0, 1], "step_ms": [10.0, 5.0, 5.0]},
    ),
    "batching.request_latency": (([0, 1], [10.0, 12.0], [8.0, 9.0], [2.0, None], [1.5, 1.7]), {}),
    "batching.memory_chart": (([100, 100], [40, 60], [80, 80], [50, 70]), {}),
    "batching.throughput_curve": (([1, 2, 4], [10.0, 18.0, 30.0], [100.0, 111.0, 133.0]), {}),
    "class_page.guesses": ((["·the", "·a", "other"], [0.5, 0.25, 0.25], [0.4, 0.1, 0.5], 4), {}),
    "embeddings.embedding_heatmap": ((R.standard_normal((3, 8)).astype(np.float32), TOKENS[:3], (100, 8)), {}),
    "embeddings.vector_chart": ((R.standard_normal(8).astype(np.float32), " cat"), {}),
    "embeddings.neighbour_chart": (([(5, " dog", 0.8), (6, " cats", 0.7)], " cat"), {}),
    "embeddings.projection_scatter": (
        (R.standard_normal((4, 2)), TOKENS, ["prompt", "prompt", "word set", "word set"], (0.4, 0.2)),
        {},
    ),
    "embeddings.rope_rotation": ((R.random((4, 3)) * 6.0, [0, 2], np.array([6.0, 60.0, 600.0])), {}),
    "embeddings.distance_scores": ((np.arange(5), R.standard_normal(5), 2, 0.5, " it", " cat"), {}),
    "embeddings.position_heatmap": ((R.random((3, 4)), "title", "frequency pair", "cos"), {}),
    "experiments.before_after": ((TOKENS[:3], np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.5, 0.3]), "title"), {}),
    "experiments.lens_with_region": (
        (
            ["embed", "layer 0", "layer 1"],
            ["x", "y"],
            R.random((3, 2, 1)),  # (L, T, k)
            [[[" a"], [" b"]], [[" c"], [" d"]], [[" e"], [" f"]]],
            (1, 1),
            np.array([[False, False], [False, True], [True, True]]),
        ),
        {},
    ),
    "experiments.head_importance": ((R.standard_normal((2, 3)), " Paris", "off"), {}),
    "experiments.attribution": ((["embed", "L0.H0", "L0.mlp"], np.array([1.5, -0.5, 0.25]), " Paris"), {}),
    "experiments.patching": ((R.random((2, 3)), [" the", " it", "."], (" Paris", " Rome")), {}),
    "generation.alternatives_bar": (
        ([" cat", " dog"], [0.7, 0.3], " cat", "title"),
        {"token_ids": [5, 6], "chosen_id": 5},
    ),
    "generation.kv_heatmaps": (
        (R.standard_normal((2, 3, 4)), R.standard_normal((2, 3, 4)), TOKENS[:3], [2], 0),
        {"first_position": 0},
    ),
    "generation.cache_timing": (([1, 2, 3], [1.0, 1.1, 1.2], [1.0, 2.0, 3.0]), {}),
    "generation.phase_timeline": ((["prefill", "decode"], [0.05, 0.01], [4, 1], [" cat", " sat"]), {}),
    "logit_lens.block_diagram": (
        (["resid_pre", "attn", "resid_mid", "mlp", "resid_post"], (4, 8), [1.0, 2.0, 3.0, 4.0, 5.0], "t"),
        {},
    ),
    "logit_lens.block_activations": ((["resid_pre", "resid_post"], R.standard_normal((2, 8))), {"n_dims": 6}),
    "logit_lens.logit_lens": (
        (
            ["embed", "layer 0"],
            ["x", "y", "z"],
            R.random((2, 3, 1)),
            [[[" a"], [" b"], [" c"]], [[" d"], [" e"], [" f"]]],
        ),
        {"first_position": 0},
    ),
    "logit_lens.answer_formation": ((["embed", "layer 0", "layer 1"], [0.01, 0.2, 0.9], " Paris"), {}),
    "logits.logits_bar": (([" on", "<0xF0>"], [3.5, -1.25], 0), {"token_ids": [100, 319]}),
    "logits.probability_overlay": (
        ([" on", " in"], np.array([0.6, 0.4]), np.array([0.8, 0.2]), "T = 1", "T = 0.5"),
        {},
    ),
    "logits.temperature_sweep": (([0.5, 1.0, 2.0], [0.5, 1.0, 2.0], [0.9, 0.6, 0.3], 1.0), {}),
    "logits.stage_chart": (
        ([" on", " in", " at"], ["softmax", "top-k"], np.array([[0.5, 0.3, 0.2], [0.625, 0.375, 0.0]]), ["3", "2"]),
        {"token_ids": [1, 2, 3], "survivor_counts": [3, 2]},
    ),
    "quantization.block_layout": (
        ([0, 3, 7, 15], np.array([-1.0, -0.5, 0.0, 1.0]), 2, (0, 15), None, "title"),
        {"scales": [0.1, 0.2], "offsets": [-1.0, -0.5], "reference": np.array([-1.01, -0.49, 0.02, 0.98])},
    ),
    "quantization.bytes_chart": ((["float32", "Q8_0"], [540.0, 143.0], [200.0, 755.0], 108.0), {}),
    "quantization.mode_probabilities": (([" on", " in"], ["bf16", "int8"], np.array([[0.6, 0.4], [0.55, 0.45]])), {}),
    "quantization.mode_speed": ((["bf16", "int8"], [30.0, 40.0]), {}),
    "sampling.cumulative_ranges": (
        ([" on", " in"], [0.0, 0.6], [0.6, 0.9], 0.7, 1, "title"),
        {"other_label": "9 other tokens"},
    ),
    "sampling.draw_histogram": (
        ([" on", " in", "other (9 tokens)"], [0.5, 0.3, 0.2], [0.6, 0.3, 0.1], 10, 1.5, 1, 0.2),
        {},
    ),
    "sampling.token_strips": (
        ([[" a", " b"], [" a", " c", " d"]], ["T = 0", "T = 1"], [[0.9, 0.8], [0.9, 0.1, 0.5]], 1, "title"),
        {"token_ids": [[1, 2], [1, 3, 4]]},
    ),
    "speculative.step_rows": (
        ([[(" on", "kept", "a"), (" mat", "bonus", "c")], [(" as", "residual", "e")]], ["0 · prompt", "1 · verify"]),
        {},
    ),
    "speculative.p_vs_q": (([" on", " in"], [0.5, None], [0.4, 0.3], 0, "title"), {"ids": [1, 2]}),
    "speculative.acceptance_test": ((0.0, 0.8, 0.3, True, "title"), {}),
    "speculative.distribution": (([" on", " in"], [0.7, 0.3], 0, "title"), {"ids": [1, 2]}),
    "speculative.sweep": (([2, 4], [None, 0.5], [1.0, 1.5], [0.9, 1.2], "k", "title"), {}),
    "speculative.seed_counts": (([" on · the", " in · a"], [3, 1], [2, 2], "title"), {}),
    "tokenization.token_id_chart": ((TOKENS, [1, 2, 3, 4]), {}),
    "lesson.token_reveal": (([" on", " in", " at"], [0.5, 0.3, 0.2], 0, 1, "title"), {}),
    "lesson.bars_reveal": ((["L0 H0", "L0 H1"], [0.7, 0.3], 0, 0.5, "title", "share"), {}),
    "lesson.curve_reveal": (([1.0, 2.0, 3.0], [0.5, 0.8, 1.0], 2.0, 0.8, 0.7, False, "title", "tokens", "mass"), {}),
    "lesson.number_line": ((0.42, 0.05, 0.4, "title", "probability"), {}),
    "lesson.direction_reveal": (([0.5, 1.0, 1.5], [1.0, 2.0, 3.0], 0.5, 1.5, 1.0, 3.0, "title", "T", "entropy"), {}),
    "lesson.estimates_histogram": (([0.3, 0.4, 0.5], 0.42, 0.05, "probability"), {}),
    "paged_kv.block_grid": ((STEP, ("a", "b"), 2), {}),
    "paged_kv.block_tables": ((STEP, ("a", "b"), ["running", "running"]), {}),
    "paged_kv.memory_timeline": ((TRACE, 1), {}),
    "paged_kv.memory_at_step": ((STEP,), {}),
}
