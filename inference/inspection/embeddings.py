"""The embedding matrix and the position encodings, read from the loaded model's own weights.

Owns ``EmbeddingReader``: rows by id, every row's length (kept once per engine: one float per
row), nearest neighbours by cosine, the words' mean rows, RoPE's cos/sin tables per kind of
layer, learned position rows. The matrix is read a block of ``BLOCK_ROWS`` rows at a time and
never copied whole: a normalised copy of Gemma's 262,144 × 640 matrix would be another 671 MB,
and a quantized matrix (``QuantEmbedding``) is decoded only for the rows a lookup reads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..generation.engine import Engine


@dataclass(frozen=True)
class PositionTables:
    """Positions 0..P-1 as the model tells them apart: RoPE's tables (one kind of layer), or learned rows."""

    scheme: str  # "rope" or "learned"
    angles: np.ndarray | None  # (P, hd/2) RoPE angle (radians, in [-pi, pi]); pair i rotates dims (i, i + hd/2)
    cos: np.ndarray | None  # (P, hd) cos with which the layers rotate (the halves repeated, as the model multiplies)
    sin: np.ndarray | None  # (P, hd)
    wavelengths: np.ndarray | None  # (hd/2,) positions for one full turn of each pair: 2*pi / (angle per position)
    learned: np.ndarray | None  # (P, D) GPT-2 style learned position rows

    @property
    def half_cos(self) -> np.ndarray:
        """cos(angle) per position and frequency pair (P, hd/2)."""
        return self.cos[:, : self.cos.shape[-1] // 2]


BLOCK_ROWS = 32_768  # rows per float32 block in the similarity products (84 MB at Gemma's width)


class EmbeddingReader:
    """One engine's embedding matrix and position encodings, as numpy."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._norms: torch.Tensor | None = None
        self._lock = threading.Lock()

    # -- the matrix --------------------------------------------------------------------
    def _block(self, start: int, end: int) -> torch.Tensor:
        """Rows ``start:end`` in float32 (D columns): a view of a dense matrix, a lookup of a quantized one."""
        embed = self.engine.model.embed
        if isinstance(embed, nn.Embedding):
            return embed.weight[start:end].float()  # a bf16 matrix is converted a block at a time
        return embed(torch.arange(start, end, device=self.engine.device)).float()

    def _blocks(self) -> Iterator[torch.Tensor]:
        rows = self.engine.model.embed.num_embeddings
        for start in range(0, rows, BLOCK_ROWS):
            yield self._block(start, min(start + BLOCK_ROWS, rows))  # (<=BLOCK_ROWS, D)

    def _rows(self, ids: list[int] | torch.Tensor) -> torch.Tensor:
        """The float32 rows (N, D) of ``ids``, each read by lookup."""
        ids = torch.as_tensor(ids, dtype=torch.long, device=self.engine.device)
        return self.engine.model.embed(ids).float().cpu()

    def row_norms(self) -> torch.Tensor:
        """Every row's length (V,), computed once per engine, so a product divided by them gives cosines."""
        with self._lock:
            if self._norms is None:
                with torch.inference_mode():
                    self._norms = torch.cat([block.norm(dim=-1) for block in self._blocks()]).clamp_min(1e-12).cpu()
            return self._norms

    def rows(self, ids: list[int]) -> np.ndarray:
        """The embedding rows (T, D) that the token ids select: the model's first view of the prompt."""
        with torch.inference_mode():
            return self._rows(ids).numpy().copy()

    def nearest(self, token_id: int, k: int = 12) -> list[tuple[int, float]]:
        """(id, cosine) of the ``k`` vocabulary entries whose rows point most nearly the same way, itself excluded."""
        norms = self.row_norms()
        with torch.inference_mode():
            query = self._rows([token_id])[0] / norms[token_id]  # (D,) unit length
            cosines = torch.cat([block.cpu() @ query for block in self._blocks()]) / norms  # (V,)
            cosines[token_id] = -2.0
            values, indices = cosines.topk(k)
        return [(int(i), float(v)) for v, i in zip(values, indices)]

    def _word_row(self, word: str) -> torch.Tensor:
        """The unit-length row of ``word`` (its tokens' mean when it is several)."""
        ids = self.engine.tokenizer.encode(word, special_tokens=False)
        norms = self.row_norms()
        picked = torch.tensor(ids)
        row = (self._rows(picked) / norms[picked, None]).mean(0)  # (D,) mean of the unit rows
        return row / row.norm().clamp_min(1e-12)

    def word_cosines(self, word: str, others: tuple[str, ...]) -> list[float]:
        """Cosine similarity of ``word``'s row with each of ``others``' (words with their leading space)."""
        with torch.inference_mode():
            row = self._word_row(word)
            return [float(row @ self._word_row(other)) for other in others]

    def projection_vectors(
        self, ids: list[int], words: tuple[str, ...]
    ) -> tuple[list[int], list[tuple[str, int]], np.ndarray]:
        """The rows a 2-D map of the prompt and a word set is made of: (the prompt's distinct ids, in order;
        (word, its token count) for each word drawn; the vectors (N, D), the ids' rows then each word's mean row).

        A word that gives no token, or is one token already among the prompt's, is left out.
        """
        seen: list[int] = []
        drawn: list[tuple[str, int]] = []
        vectors = []
        with torch.inference_mode():
            for i in ids:
                if i not in seen:
                    seen.append(i)
                    vectors.append(self._rows([i])[0].numpy())
            for word in words:
                word_ids = self.engine.tokenizer.encode(word, special_tokens=False)  # the word alone, no BOS
                if not word_ids or (len(word_ids) == 1 and word_ids[0] in seen):
                    continue
                drawn.append((word, len(word_ids)))
                vectors.append(self._rows(word_ids).mean(0).numpy())
        return seen, drawn, np.stack(vectors)

    # -- positions ---------------------------------------------------------------------
    def _rope(self, local: bool):
        """The RoPE of the model's local layers (``local``, where it has them) or of its global layers."""
        transformer = self.engine.model
        return transformer.rope_local if local and transformer.rope_local is not None else transformer.rope

    def positions(self, n_positions: int, local: bool = False) -> PositionTables:
        """Positions 0..n-1: RoPE's tables of the model's local layers (``local``, where it has them) or of its
        global layers; the learned rows for a model without RoPE."""
        if self.engine.model.rope is None:
            with torch.inference_mode():
                rows = self.engine.model.pos_embed.weight[:n_positions].float().cpu().numpy().copy()  # (P, D)
            return PositionTables("learned", None, None, None, None, rows)
        cos, sin = self._rope(local).tables(max(n_positions, 2))  # (P, hd) each, the halves repeated
        cos, sin = cos.cpu(), sin.cpu()
        half = cos.shape[-1] // 2
        angles = torch.atan2(sin[:, :half], cos[:, :half])  # (P, hd/2)
        wavelengths = 2 * np.pi / angles[1].clamp_min(1e-12)  # (hd/2,) from the angle per position
        return PositionTables(
            "rope",
            angles[:n_positions].numpy().copy(),
            cos[:n_positions].numpy().copy(),
            sin[:n_positions].numpy().copy(),
            wavelengths.numpy().copy(),
            None,
        )
