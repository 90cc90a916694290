"""The Overview picture's numbers: the whole path of one prediction, from one traced forward of the prompt.

Text → tokens → ids → the vectors the first block reads (embedding rows) → one block (where the last
token's attention goes, what its feed-forward network adds) → the final vector → the logits' top 5 →
the chosen token appended. Everything comes from a single traced forward (``client.last_position``) of (the last
``MAX_TOKENS`` tokens, after its BOS, of) the prompt, kept as small numpy arrays: the picture is light, and its
numbers are the model's own for the current prompt and model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from ui.common.prompt_tail import prompt_tail
from ui.common.resources import client_for
from ui.common.token_text import token_texts

MAX_TOKENS = 128  # a traced forward keeps every layer's attention (T² each): a longer prompt is traced by its end
# (after its BOS: ``prompt_tail``)
SHOWN_TOKENS = 6  # tokens the picture draws (the prompt's last ones: the prediction is made at the end)
STRIP = 16  # numbers of each vector the picture draws


@dataclass(frozen=True)
class Overview:
    model: str
    prompt: str  # the user's text (without a chat template around it)
    prompt_tokens: int  # the whole prompt's length
    traced_tokens: int  # how many of its tokens the forward ran on (``traced_part`` says which)
    traced_part: str  # which, in words ("its first token and its last 127")
    first_shown: int  # position (in the traced tokens) of the first token drawn
    token_ids: list[int]  # (N,) the tokens drawn
    token_strings: list[str]
    embeddings: np.ndarray  # (N, STRIP) the vectors block 0 reads at those positions, first numbers
    d_model: int
    embed_scale: float
    n_layers: int
    layer: int  # the block drawn
    attention: np.ndarray  # (N,) that block's head-averaged attention from the last token onto the tokens drawn
    attention_elsewhere: float  # the rest of that attention (on tokens not drawn)
    mlp_output: np.ndarray  # (STRIP,) what that block's feed-forward network adds at the last position
    mlp_norm: float
    final_vector: np.ndarray  # (STRIP,) the last block's output after the final norm, last position
    top_ids: list[int]  # (5,)
    top_strings: list[str]
    top_logits: list[float]
    top_probs: list[float]  # softmax at T = 1


def _block_to_draw(last: np.ndarray) -> int:
    """The block whose head-averaged attention from the last token (``last``: (L, H, T)) is most concentrated on
    one earlier token other than the first (where heads park weight), so the picture shows attention doing something."""
    pooled = last.mean(axis=1)  # (L, T)
    if pooled.shape[-1] <= 2:
        return 0
    return int(np.argmax(pooled[:, 1:-1].max(axis=-1)))


@st.cache_data(max_entries=16, show_spinner="Running the model once for the picture…")
def overview(model: str, prompt: str, chat: bool) -> Overview:
    """One traced forward of the prompt (its last ``MAX_TOKENS`` tokens), read out for the picture."""
    client = client_for(model)
    all_ids = client.encode_prompt(prompt, chat=chat)
    ids, part = prompt_tail(all_ids, MAX_TOKENS, client.tokenizer.bos_token)
    traced = client.last_position(ids)
    layer = _block_to_draw(traced.attention_last)
    first = max(0, len(ids) - SHOWN_TOKENS)
    attention = traced.attention_last[layer].mean(axis=0)  # (H, T) -> (T,) over heads
    row = traced.logits  # (V,)
    top = np.argsort(row)[::-1][:5]
    p = np.exp(row - row.max())
    p /= p.sum()
    mlp = traced.mlp_last[layer]  # (D,)
    config = client.info.config
    return Overview(
        model=model,
        prompt=prompt,
        prompt_tokens=len(all_ids),
        traced_tokens=len(ids),
        traced_part=part,
        first_shown=first,
        token_ids=ids[first:],
        token_strings=token_texts(client.tokenizer, ids[first:]),
        embeddings=traced.embeddings[first:, :STRIP].copy(),
        d_model=config.d_model,
        embed_scale=float(config.embed_scale),
        n_layers=config.n_layers,
        layer=layer,
        attention=attention[first:].astype(np.float64),
        attention_elsewhere=float(attention[:first].sum()),
        mlp_output=mlp[:STRIP].copy(),
        mlp_norm=float(np.linalg.norm(mlp)),
        final_vector=traced.final_last[:STRIP].copy(),
        top_ids=[int(i) for i in top],
        top_strings=token_texts(client.tokenizer, [int(i) for i in top]),
        top_logits=[float(row[i]) for i in top],
        top_probs=[float(p[i]) for i in top],
    )
