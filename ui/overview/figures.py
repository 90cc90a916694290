"""The Overview picture: one prediction's whole path, drawn as an SVG from the model's own numbers.

Eight parts in a loop, each a link to the page that explains it (``data-page``): the text, its tokens,
their ids, the vectors the first block reads (a strip of real values per token), one block (where the
last token's attention goes, what the feed-forward network adds), the final vector, the logits' top 5,
and the chosen token appended, from which the loop starts again. Plain numbers in (the fields of
``ui.overview.compute.Overview``), an SVG string out; every number is written by ``ui.common.format``.
Sizes are set for a 1280×720 projector: the picture is drawn about 850 px wide, so text of 15-17 units
reads at 13-15 px.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from ui.common import format as fmt
from ui.common.conventions import fit_label
from ui.common.token_text import visible

W, H = 2 * 20 + 4 * 226 + 3 * 32, 560  # four cards and three gaps across, two rows of cards
CARD_W, CARD_H, GAP = 226, 230, 32
ROWS_Y = (40, 310)
PAGE_OF = {
    "text": "tokenization",
    "tokens": "tokenization",
    "ids": "tokenization",
    "embeddings": "embeddings",
    "attention": "attention",
    "mlp": "logit_lens",
    "final": "logit_lens",
    "logits": "logits",
    "chosen": "sampling",
    "loop": "generation",
}
BLUE, WHITE, RED = (33, 102, 172), (247, 247, 247), (178, 24, 43)
CHOSEN_COLOR, CHIP_COLOR, BAR_COLOR = "#cfe2ff", "#eef1f5", "#1f77b4"
CHIP_CHARS = 7  # a chip is 63 units wide: 7 characters of its 14-unit monospace font


def _x(column: int) -> float:
    return 20 + column * (CARD_W + GAP)


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _colour(value: float, limit: float) -> str:
    """A diverging colour for ``value`` on [-limit, limit]: blue below zero, red above, white at zero."""
    t = max(-1.0, min(1.0, value / limit)) if limit else 0.0
    end = RED if t > 0 else BLUE
    mix = [round(w + (e - w) * abs(t)) for w, e in zip(WHITE, end)]
    return f"rgb({mix[0]},{mix[1]},{mix[2]})"


def _strip(values: Sequence[float], x: float, y: float, width: float, height: float, limit: float) -> str:
    cell = width / max(len(values), 1)
    return "".join(
        f'<rect x="{x + i * cell:.1f}" y="{y:.1f}" width="{cell - 1:.1f}" height="{height:.1f}" '
        f'fill="{_colour(float(v), limit)}"><title>{fmt.fixed(float(v), 3)}</title></rect>'
        for i, v in enumerate(values)
    )


def _card(part: str, column: int, row: int, title: str, body: str, label: str) -> str:
    x, y = _x(column), ROWS_Y[row]
    return (
        f'<g class="ov-part" data-page="{PAGE_OF[part]}" data-part="{part}" tabindex="0" role="link" '
        f'aria-label="{_escape(label)}"><rect class="ov-card" x="{x}" y="{y}" width="{CARD_W}" height="{CARD_H}" '
        f'rx="10"/><text class="ov-title" x="{x + 12}" y="{y + 26}">{_escape(title)}</text>{body}</g>'
    )


def _text(x: float, y: float, text: str, cls: str = "ov-body", anchor: str = "start") -> str:
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{_escape(text)}</text>'


def _chips(
    pieces: Sequence[str],
    x: float,
    y: float,
    highlight: int | None = None,
    per_row: int = 3,
    labels: Sequence[str] | None = None,
) -> str:
    width, height, gap = (CARD_W - 24 - (per_row - 1) * 6) / per_row, 30, 6
    out = []
    for i, piece in enumerate(pieces):
        r, c = divmod(i, per_row)
        cx, cy = x + c * (width + gap), y + r * (height + gap)
        fill = CHOSEN_COLOR if i == highlight else CHIP_COLOR
        shown = labels[i] if labels is not None else fit_label(visible(piece) or "∅", CHIP_CHARS)
        out.append(
            f'<rect x="{cx:.1f}" y="{cy:.1f}" width="{width:.1f}" height="{height}" rx="5" fill="{fill}" '
            f'stroke="{"#0d6efd" if i == highlight else "#b8bec6"}"/>'
            + _text(cx + width / 2, cy + 20, shown, "ov-chip", "middle")
        )
    return "".join(out)


def _arrow(x1: float, y1: float, x2: float, y2: float) -> str:
    return (
        f'<line class="ov-arrow" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" marker-end="url(#ov-head)"/>'
    )


def _wrap(text: str, width: int, lines: int) -> list[str]:
    words, out, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = fit_label(out[-1] + " …", width)
    return [fit_label(o, width) for o in out]


def _tail_lines(text: str, width: int, lines: int) -> list[str]:
    """The end of ``text`` in at most ``lines`` lines of ``width`` characters (a long text keeps its last words,
    where the prediction is made, behind a leading '…')."""
    wrapped = _wrap(text, width, 10_000)
    if len(wrapped) <= lines:
        return wrapped
    kept = wrapped[-lines:]
    kept[0] = fit_label("… " + kept[0], width)
    return kept


def overview_svg(data) -> str:
    """The picture for ``data`` (an ``ui.overview.compute.Overview``: its fields only are read)."""
    n = len(data.token_strings)
    pieces = data.token_strings
    cut = data.first_shown > 0 or data.traced_tokens < data.prompt_tokens
    parts = []

    # Row 1, left to right: text -> tokens -> ids -> embedding rows
    typed = " ".join(data.prompt.split())  # the text as written (line breaks as spaces); its end when it is long
    lines = _tail_lines(typed, 22, 5)
    body = "".join(_text(_x(0) + 12, ROWS_Y[0] + 60 + 24 * i, line, "ov-body") for i, line in enumerate(lines))
    body += _text(_x(0) + 12, ROWS_Y[0] + CARD_H - 16, f"{fmt.count(data.prompt_tokens, 'token')} in all", "ov-note")
    parts.append(_card("text", 0, 0, "1 · Your text", body, "Your text: the Tokenization page"))

    shown = "the last " + str(n) if cut else "all " + str(n)
    body = _chips(pieces, _x(1) + 12, ROWS_Y[0] + 44)
    body += _text(_x(1) + 12, ROWS_Y[0] + CARD_H - 16, f"{shown} tokens shown", "ov-note")
    parts.append(_card("tokens", 1, 0, "2 · Cut into tokens", body, "Tokens: the Tokenization page"))

    body = _chips(pieces, _x(2) + 12, ROWS_Y[0] + 44, labels=[f"{i:,}" for i in data.token_ids])
    body += _text(_x(2) + 12, ROWS_Y[0] + CARD_H - 16, "each token's row number", "ov-note")
    parts.append(_card("ids", 2, 0, "3 · Their ids", body, "Token ids: the Tokenization page"))

    limit = float(np.abs(data.embeddings).max()) or 1.0
    body = "".join(
        _strip(row, _x(3) + 12, ROWS_Y[0] + 44 + i * 24, CARD_W - 24, 18, limit)
        for i, row in enumerate(data.embeddings)
    )
    scaled = f" × √{data.d_model}" if data.embed_scale != 1 else ""
    body += _text(_x(3) + 12, ROWS_Y[0] + CARD_H - 34, f"a row of {data.d_model} numbers{scaled} per id,", "ov-note")
    body += _text(_x(3) + 12, ROWS_Y[0] + CARD_H - 16, f"its first {data.embeddings.shape[1]} drawn", "ov-note")
    parts.append(_card("embeddings", 3, 0, "4 · Embedding rows", body, "Embedding rows: the Embeddings page"))

    # Row 2, right to left: one block -> final vector -> logits -> the chosen token appended
    x, y = _x(3), ROWS_Y[1]
    attention = [_text(x + 12, y + 50, f"attention from “{fit_label(visible(pieces[-1]) or '∅', 8)}”:", "ov-note")]
    bar_w = CARD_W - 24 - 96
    for i, (piece, weight) in enumerate(zip(pieces, data.attention)):
        top = y + 58 + i * 17
        attention.append(_text(x + 12, top + 12, fit_label(visible(piece) or "∅", 8), "ov-small"))
        attention.append(
            f'<rect x="{x + 72}" y="{top + 2}" width="{max(bar_w * float(weight), 1):.1f}" height="12" '
            f'fill="{BAR_COLOR}"/>' + _text(x + CARD_W - 12, top + 12, fmt.pct(float(weight)), "ov-small", "end")
        )
    if data.attention_elsewhere > 0:
        attention.append(
            _text(x + 12, y + 58 + n * 17 + 12, f"+ {fmt.pct(data.attention_elsewhere)} on earlier tokens", "ov-small")
        )
    attention_part = (
        f'<g class="ov-part" data-page="attention" data-part="attention" tabindex="0" role="link" '
        f'aria-label="Attention: the Attention page">{"".join(attention)}</g>'
    )
    mlp_limit = float(np.abs(data.mlp_output).max()) or 1.0
    mlp_part = (
        '<g class="ov-part" data-page="logit_lens" data-part="mlp" tabindex="0" role="link" '
        'aria-label="The feed-forward network: the Transformer block page">'
        + _text(x + 12, y + CARD_H - 38, f"then the MLP adds (‖x‖ {fmt.fixed(data.mlp_norm, 1)}):", "ov-note")
        + _strip(data.mlp_output, x + 12, y + CARD_H - 28, CARD_W - 24, 16, mlp_limit)
        + "</g>"
    )
    parts.append(
        f'<g><rect class="ov-card" x="{x}" y="{y}" width="{CARD_W}" height="{CARD_H}" rx="10"/>'
        + _text(x + 12, y + 26, f"5 · Block {data.layer} of {data.n_layers}", "ov-title")
        + attention_part
        + mlp_part
        + "</g>"
    )

    final_limit = float(np.abs(data.final_vector).max()) or 1.0
    body = _strip(data.final_vector, _x(2) + 12, y + 60, CARD_W - 24, 26, final_limit)
    body += _text(_x(2) + 12, y + 116, f"after all {data.n_layers} blocks", "ov-note")
    body += _text(_x(2) + 12, y + 136, "and the final norm: the last", "ov-note")
    body += _text(_x(2) + 12, y + 156, f"token's vector, {data.d_model} numbers", "ov-note")
    parts.append(_card("final", 2, 1, "6 · The final vector", body, "The final vector: the Transformer block page"))

    body = []
    top_p = max(data.top_probs) or 1.0
    for i, (piece, p) in enumerate(zip(data.top_strings, data.top_probs)):
        row_y = y + 50 + i * 32
        body.append(_text(_x(1) + 12, row_y + 14, fit_label(visible(piece) or "∅", 9), "ov-mono"))
        body.append(
            f'<rect x="{_x(1) + 100}" y="{row_y + 2}" width="{max(70 * p / top_p, 1):.1f}" height="16" '
            f'fill="{"#d62728" if i == 0 else BAR_COLOR}"/>'
        )
        body.append(_text(_x(1) + CARD_W - 12, row_y + 15, fmt.pct(p, 1), "ov-small", "end"))
    body.append(
        _text(_x(1) + 12, y + CARD_H - 16, f"top logit {fmt.fixed(data.top_logits[0], 2)}; p at T = 1", "ov-note")
    )
    parts.append(_card("logits", 1, 1, "7 · Logits: the top 5", "".join(body), "Logits: the Logits & temperature page"))

    tail = list(pieces[-2:]) + [data.top_strings[0]]
    body = _chips(tail, _x(0) + 12, y + 44, highlight=len(tail) - 1)
    body += _text(
        _x(0) + 12, y + 112, f"the greedy pick {fit_label(visible(data.top_strings[0]) or '∅', 10)}", "ov-note"
    )
    body += _text(_x(0) + 12, y + 132, "is appended (sampling draws", "ov-note")
    body += _text(_x(0) + 12, y + 152, "from the probabilities instead)", "ov-note")
    parts.append(_card("chosen", 0, 1, "8 · The chosen token", body, "The chosen token: the Sampling page"))

    # arrows: along row 1, down on the right, back along row 2, and the loop up on the left
    arrows = [
        _arrow(_x(c) + CARD_W + 2, ROWS_Y[0] + CARD_H / 2, _x(c + 1) - 4, ROWS_Y[0] + CARD_H / 2) for c in range(3)
    ]
    arrows.append(_arrow(_x(3) + CARD_W / 2, ROWS_Y[0] + CARD_H + 2, _x(3) + CARD_W / 2, ROWS_Y[1] - 4))
    arrows += [
        _arrow(_x(c + 1) - 2, ROWS_Y[1] + CARD_H / 2, _x(c) + CARD_W + 4, ROWS_Y[1] + CARD_H / 2) for c in range(3)
    ]
    loop = (
        '<g class="ov-part" data-page="generation" data-part="loop" tabindex="0" role="link" '
        'aria-label="The loop: the Generation and KV cache page">'
        + _arrow(_x(0) + CARD_W / 2, ROWS_Y[1] - 2, _x(0) + CARD_W / 2, ROWS_Y[0] + CARD_H + 4)
        + _text(
            _x(0) + CARD_W / 2 + 10,
            (ROWS_Y[0] + CARD_H + ROWS_Y[1]) / 2 + 5,
            "and again, one token longer (the KV cache keeps the rest)",
            "ov-loop",
        )
        + "</g>"
    )
    defs = (
        '<defs><marker id="ov-head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>'
    )
    return (
        f'<svg class="ov-svg" viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="One prediction of {_escape(data.model)}, step by step">{defs}{"".join(arrows)}{loop}'
        f"{''.join(parts)}</svg>"
    )
