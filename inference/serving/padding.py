"""Left padding: prompts of different lengths laid out as one (B, T) batch whose last column is each row's newest token."""

from __future__ import annotations

import torch


def left_pad(rows: list[list[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids, padding mask and positions, each (B, T), for prompts of different lengths.

    Each row's positions are ``cumsum(mask) - 1`` so every prompt starts at 0 exactly as
    if it ran alone (pads get position 0; they are masked as keys and their outputs are
    never used).
    """
    if not rows:
        raise ValueError("left_pad needs at least one row")
    width = max(len(row) for row in rows)
    ids = torch.tensor([[pad_id] * (width - len(row)) + list(row) for row in rows], dtype=torch.long)  # (B, T)
    mask = torch.tensor([[False] * (width - len(row)) + [True] * len(row) for row in rows])  # (B, T)
    positions = (mask.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T) every prompt starts at 0
    return ids, mask, positions
