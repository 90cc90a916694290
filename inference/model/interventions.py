"""Interventions: change what the model computes inside one forward, per request, to ask why it answers as it does.

Owns the spec (``Interventions``: validated, frozen dataclasses) and ``ForwardEdits``,
the spec laid out as tensors for one batched forward. Like the KV cache, a spec is an
explicit per-request object passed into ``Transformer.forward(interventions=...)``;
the shared model never holds one. A spec can:

- ablate a head (``HeadEdit``): zero its output, replace it with its mean over the
  prompt's positions, or scale it. The head's output is its weighted average of the
  values, before the output projection mixes the heads;
- cut an attention edge (``EdgeCut``): query position i may not look at key position
  j, masked before the softmax, so the row's other weights still sum to 1;
- zero or scale an MLP's output (``MLPEdit``);
- patch the residual stream after block ``layer`` at one position (``ResidualPatch``)
  with a vector from another run (activation patching).

Positions are the tokens' positions in the sequence (0 = first prompt token), so one
spec means the same thing alone, left-padded in a static batch, in a continuous-batching
slot, and in any decode step: a cut edge or a patch applies in whichever forward computes
that query position, and K/V written under a spec are the intervened ones (``KVCache``
logs which spec wrote which positions). A mean ablation needs the head's mean, which
``Engine.prepare_interventions`` fills in from the prompt, so a cached decode step and a
full recompute use the same vector.

With no spec the forward never builds a ``ForwardEdits`` and runs exactly as before.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch

from .config import ModelConfig
from .kv_cache import causal_padding_mask

# The blocks whose hook points are known: pre-norm attention + MLP (Llama, GPT-2), and Gemma 3's, whose
# post-norms come before the stream: an MLP edit acts on what is added to it.
SUPPORTED_FAMILIES = ("llama", "gpt2", "gemma3")
HEAD_MODES = ("zero", "mean", "scale")


class InterventionError(ValueError):
    """An intervention that cannot be applied (out of range, malformed, or an unsupported model)."""


def _index(what: str, value) -> int:
    """``value`` as a non-negative whole number, or a clear error (bools and fractions are refused)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool):
        raise InterventionError(f"{what} must be a whole number, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise InterventionError(f"{what} must be a whole number, got {value!r}") from None
    if number < 0:
        raise InterventionError(f"{what} must be >= 0, got {number}")
    return number


def _factor(what: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InterventionError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise InterventionError(f"{what} must be finite, got {value!r}")
    return number


def _vector(what: str, value) -> torch.Tensor:
    vector = torch.as_tensor(value, dtype=torch.float32).detach().to("cpu").flatten().clone()
    if vector.numel() == 0 or not bool(torch.isfinite(vector).all()):
        raise InterventionError(f"{what} must be a non-empty vector of finite numbers")
    return vector


@dataclass(frozen=True)
class HeadEdit:
    """One head's output (before the output projection): ``zero``, its ``mean`` over positions, or times ``factor``."""

    layer: int
    head: int
    mode: str = "zero"
    factor: float = 0.0  # used by "scale"
    mean: torch.Tensor | None = field(default=None, compare=False, repr=False)  # (head_dim,) for "mean"

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer", _index("a head edit's layer", self.layer))
        object.__setattr__(self, "head", _index("a head edit's head", self.head))
        if self.mode not in HEAD_MODES:
            raise InterventionError(f"head mode must be one of {', '.join(HEAD_MODES)}, got {self.mode!r}")
        object.__setattr__(self, "factor", _factor("a head's scale factor", self.factor))
        if self.mean is not None:
            object.__setattr__(self, "mean", _vector("a head's mean output", self.mean))

    def describe(self) -> str:
        action = {"zero": "off", "mean": "mean-ablated", "scale": f"× {self.factor:g}"}[self.mode]
        return f"head L{self.layer} H{self.head} {action}"  # not "3.8", which reads as a decimal


@dataclass(frozen=True)
class EdgeCut:
    """Query position ``query`` may not attend to key position ``key`` (in ``layer``/``head``, or all when None)."""

    query: int
    key: int
    layer: int | None = None
    head: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "query", _index("a cut edge's query position", self.query))
        object.__setattr__(self, "key", _index("a cut edge's key position", self.key))
        if self.layer is not None:
            object.__setattr__(self, "layer", _index("a cut edge's layer", self.layer))
        if self.head is not None:
            object.__setattr__(self, "head", _index("a cut edge's head", self.head))
        if self.key > self.query:
            raise InterventionError(
                f"key {self.key} comes after query {self.query}: the causal mask already hides "
                "it, there is nothing to cut"
            )

    def describe(self) -> str:
        where = "every layer" if self.layer is None else f"layer {self.layer}"
        heads = "every head" if self.head is None else f"head {self.head}"
        return f"edge {self.query} → {self.key} cut ({where}, {heads})"


@dataclass(frozen=True)
class MLPEdit:
    """One MLP's output times ``factor`` (0 switches it off)."""

    layer: int
    factor: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer", _index("an MLP edit's layer", self.layer))
        object.__setattr__(self, "factor", _factor("an MLP's scale factor", self.factor))

    def describe(self) -> str:
        return f"MLP {self.layer} " + ("off" if self.factor == 0 else f"× {self.factor:g}")


@dataclass(frozen=True, eq=False)
class ResidualPatch:
    """The residual stream after block ``layer`` at ``position`` replaced by ``vector`` (d_model,) from another run."""

    layer: int
    position: int
    vector: torch.Tensor = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer", _index("a patch's layer", self.layer))
        object.__setattr__(self, "position", _index("a patch's position", self.position))
        object.__setattr__(self, "vector", _vector("a patch's vector", self.vector))

    def describe(self) -> str:
        return f"stream after block {self.layer} at position {self.position} patched"


@dataclass(frozen=True)
class Interventions:
    """Everything one request changes inside the forward; an empty spec changes nothing."""

    heads: tuple[HeadEdit, ...] = ()
    edges: tuple[EdgeCut, ...] = ()
    mlps: tuple[MLPEdit, ...] = ()
    patches: tuple[ResidualPatch, ...] = ()

    def __post_init__(self) -> None:
        for name, kind in (("heads", HeadEdit), ("edges", EdgeCut), ("mlps", MLPEdit), ("patches", ResidualPatch)):
            items = getattr(self, name)
            if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
                raise InterventionError(f"{name} must be a list of {kind.__name__}, got {type(items).__name__}")
            items = tuple(items)
            for item in items:
                if not isinstance(item, kind):
                    raise InterventionError(f"{name} holds a {type(item).__name__}, not a {kind.__name__}")
            object.__setattr__(self, name, items)
        _no_repeats("head", [(h.layer, h.head) for h in self.heads], lambda k: f"L{k[0]} H{k[1]}")
        _no_repeats("MLP", [m.layer for m in self.mlps], str)
        _no_repeats(
            "patch", [(p.layer, p.position) for p in self.patches], lambda k: f"at block {k[0]}, position {k[1]}"
        )

    @property
    def empty(self) -> bool:
        return not (self.heads or self.edges or self.mlps or self.patches)

    @property
    def needs_means(self) -> bool:
        return any(h.mode == "mean" and h.mean is None for h in self.heads)

    def check(self, config: ModelConfig, n_positions: int | None = None) -> None:
        """Raise ``InterventionError`` unless every edit fits ``config`` (and positions < ``n_positions``)."""
        if config.family not in SUPPORTED_FAMILIES:
            raise InterventionError(
                f"interventions are not supported on {config.family!r} models (only "
                f"{', '.join(SUPPORTED_FAMILIES)}): their blocks have other hook points"
            )
        positions = config.max_seq_len if n_positions is None else n_positions
        for head in self.heads:
            _in_range(f"{head.describe()}: layer", head.layer, config.n_layers)
            _in_range(f"{head.describe()}: head", head.head, config.n_heads)
            if head.mean is not None and head.mean.numel() != config.head_dim:
                raise InterventionError(
                    f"{head.describe()}: its mean has {head.mean.numel()} numbers, a head outputs {config.head_dim}"
                )
        for edge in self.edges:
            if edge.layer is not None:
                _in_range(f"{edge.describe()}: layer", edge.layer, config.n_layers)
            if edge.head is not None:
                _in_range(f"{edge.describe()}: head", edge.head, config.n_heads)
            _in_range(f"{edge.describe()}: query position", edge.query, positions)
        for mlp in self.mlps:
            _in_range(f"{mlp.describe()}: layer", mlp.layer, config.n_layers)
        for patch in self.patches:
            _in_range(f"{patch.describe()}: layer", patch.layer, config.n_layers)
            _in_range(f"{patch.describe()}: position", patch.position, positions)
            if patch.vector.numel() != config.d_model:
                raise InterventionError(
                    f"{patch.describe()}: the vector has {patch.vector.numel()} numbers, the "
                    f"stream has {config.d_model}"
                )
        self._check_rows_keep_a_key(config)

    def _check_rows_keep_a_key(self, config: ModelConfig) -> None:
        """A query whose every key is cut would have nothing to take a softmax over."""
        cut: dict[tuple[int, int, int], set[int]] = {}
        for edge in self.edges:
            layers = range(config.n_layers) if edge.layer is None else [edge.layer]
            heads = range(config.n_heads) if edge.head is None else [edge.head]
            for layer in layers:
                for head in heads:
                    keys = cut.setdefault((layer, head, edge.query), set())
                    keys.add(edge.key)
                    if len(keys) == edge.query + 1:
                        raise InterventionError(
                            f"every key of query {edge.query} would be cut (layer {layer}, "
                            f"head {head}): a query must keep at least one key to attend to"
                        )

    def affected_from(self) -> tuple[int, int] | None:
        """(first block, first position) whose output the spec can change, or None for an empty spec.

        Head and MLP edits change every position of their block; a cut edge first changes its
        query position, a patch its own position; later blocks and positions inherit the change.
        """
        if self.empty:
            return None
        starts = [(h.layer, 0) for h in self.heads] + [(m.layer, 0) for m in self.mlps]
        starts += [(e.layer or 0, e.query) for e in self.edges] + [(p.layer, p.position) for p in self.patches]
        return min(layer for layer, _ in starts), min(position for _, position in starts)

    def describe(self) -> str:
        """One line naming every edit ("head L3 H4 off, MLP 2 × 0.5"), or "no intervention"."""
        parts = [item.describe() for group in (self.heads, self.edges, self.mlps, self.patches) for item in group]
        return ", ".join(parts) if parts else "no intervention"

    def with_means(self, means: torch.Tensor) -> Interventions:
        """A copy whose mean ablations carry their head's mean from ``means`` (L, H, head_dim)."""
        heads = tuple(
            replace(h, mean=means[h.layer, h.head]) if h.mode == "mean" and h.mean is None else h for h in self.heads
        )
        return replace(self, heads=heads)


def _in_range(what: str, value: int, size: int) -> None:
    if value >= size:
        raise InterventionError(f"{what} {value} is out of range: the model has 0..{size - 1}")


def _no_repeats(what: str, keys: list, show) -> None:
    seen = set()
    for key in keys:
        if key in seen:
            raise InterventionError(f"{what} {show(key)} is listed twice: give each one edit")
        seen.add(key)


def head_means(trace) -> torch.Tensor:
    """Each head's output averaged over the positions of a traced forward (row 0): (L, H, head_dim)."""
    means = []
    for layer in trace.layers:
        group = layer.queries.shape[1] // layer.values.shape[1]
        values = layer.values[0].repeat_interleave(group, dim=0)  # (H, S, hd)
        outputs = layer.attention_probs[0] @ values  # (H, T, hd)
        means.append(outputs.mean(dim=1))  # (H, hd)
    return torch.stack(means)  # (L, H, hd)


Spec = Interventions | Sequence[Interventions | None] | None


class ForwardEdits:
    """One forward's specs (one per batch row) as per-layer tensors, applied at the model's hook points.

    Built by ``Transformer.forward`` only when some row has an edit; every hook returns its
    input unchanged for a layer without edits, and a row without edits keeps its exact values
    (x · 1 + 0) when a batch mate has some.
    """

    def __init__(
        self,
        specs: list[Interventions | None],
        config: ModelConfig,
        positions: torch.Tensor,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.specs = specs
        self.positions = positions  # (B, T) position of each query column
        batch, n_heads, head_dim = len(specs), config.n_heads, config.head_dim
        self.heads: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # layer -> keep (B, H, 1, 1), add (B, H, 1, hd)
        self.edges: dict[int, list[tuple[int, int | None, int, int]]] = {}  # layer -> (row, head, query, key)
        self.mlps: dict[int, torch.Tensor] = {}  # layer -> factor (B, 1, 1)
        self.patches: dict[int, list[tuple[int, int, torch.Tensor]]] = {}  # layer -> (row, position, (D,))
        for row, spec in enumerate(specs):
            if spec is None:
                continue
            for edit in spec.heads:
                keep, add = self.heads.get(edit.layer) or (
                    torch.ones(batch, n_heads, 1, 1, device=device, dtype=dtype),
                    torch.zeros(batch, n_heads, 1, head_dim, device=device, dtype=dtype),
                )
                keep[row, edit.head] = edit.factor if edit.mode == "scale" else 0.0
                if edit.mode == "mean":
                    add[row, edit.head, 0] = edit.mean.to(device, dtype)
                self.heads[edit.layer] = (keep, add)
            for edge in spec.edges:
                for layer in range(config.n_layers) if edge.layer is None else [edge.layer]:
                    self.edges.setdefault(layer, []).append((row, edge.head, edge.query, edge.key))
            for mlp in spec.mlps:
                factor = self.mlps.get(mlp.layer)
                if factor is None:
                    factor = self.mlps[mlp.layer] = torch.ones(batch, 1, 1, device=device, dtype=dtype)
                factor[row] = mlp.factor
            for patch in spec.patches:
                self.patches.setdefault(patch.layer, []).append((row, patch.position, patch.vector.to(device, dtype)))

    @classmethod
    def build(
        cls, interventions: Spec, config: ModelConfig, positions: torch.Tensor, device: torch.device, dtype: torch.dtype
    ) -> ForwardEdits | None:
        """The edits for a forward over ``positions`` (B, T), or ``None`` when no row changes anything."""
        batch = positions.shape[0]
        if isinstance(interventions, Interventions):
            specs = [interventions] * batch
        elif isinstance(interventions, Sequence) and not isinstance(interventions, (str, bytes)):
            specs = list(interventions)
            if len(specs) != batch:
                raise InterventionError(
                    f"got {len(specs)} intervention specs for a batch of {batch} rows: "
                    "pass one per row (None for a row without)"
                )
        else:
            raise InterventionError(
                f"interventions must be an Interventions or a list of them, got {type(interventions).__name__}"
            )
        for spec in specs:
            if spec is not None and not isinstance(spec, Interventions):
                raise InterventionError(f"an intervention spec is a {type(spec).__name__}, not Interventions")
        specs = [None if spec is None or spec.empty else spec for spec in specs]
        if all(spec is None for spec in specs):
            return None
        for spec in specs:
            if spec is not None:
                spec.check(config)
                if spec.needs_means:
                    raise InterventionError(
                        "a mean ablation needs the head's mean over the prompt: prepare the "
                        "spec with Engine.prepare_interventions(spec, prompt_ids)"
                    )
        return cls(specs, config, positions, device, dtype)

    # -- the hook points (each called by the model with its layer index) ---------------
    def attention_mask(self, layer: int, mask: torch.Tensor | None, n_heads: int, key_len: int) -> torch.Tensor | None:
        """The attention mask with this layer's cut edges hidden: (B, H, T, S), or ``mask`` unchanged."""
        edges = self.edges.get(layer)
        if not edges:
            return mask
        batch, steps = self.positions.shape
        if mask is None:  # SDPA's own causal mask was exact: keys are positions 0..S-1
            key_ok = torch.ones(batch, key_len, dtype=torch.bool, device=self.positions.device)
            mask = causal_padding_mask(key_ok, key_len - steps)  # (B, 1, T, S)
        # A real query at position i sees a contiguous run of positions ending at i, in column order,
        # whatever the padding or cache layout: 0..i under the causal mask, i - w + 1..i in a local
        # layer's window of w. So the n-th visible key of its row is position n - 1 + (i + 1 - visible).
        visible = mask.sum(dim=-1, keepdim=True)  # (B, 1, T, 1)
        first = self.positions[:, None, :, None] + 1 - visible  # (B, 1, T, 1) the row's first visible position
        key_positions = mask.long().cumsum(dim=-1) - 1 + first  # (B, 1, T, S)
        blocked = torch.zeros(batch, n_heads, steps, key_len, dtype=torch.bool, device=mask.device)  # (B, H, T, S)
        for row, head, query, key in edges:
            hit = (self.positions[row, :, None] == query) & (key_positions[row, 0] == key) & mask[row, 0]  # (T, S)
            if head is None:
                blocked[row] |= hit
            else:
                blocked[row, head] |= hit
        return (mask & ~blocked).contiguous()  # (B, H, T, S)

    def head_outputs(self, layer: int, attended: torch.Tensor) -> torch.Tensor:
        """Per-head outputs (B, H, T, hd) with this layer's head edits applied."""
        edit = self.heads.get(layer)
        if edit is None:
            return attended
        keep, add = edit
        return attended * keep + add  # (B, H, T, hd)

    def mlp_output(self, layer: int, output: torch.Tensor) -> torch.Tensor:
        """The MLP's output (B, T, D) scaled where a row asks for it."""
        factor = self.mlps.get(layer)
        return output if factor is None else output * factor

    def residual(self, layer: int, stream: torch.Tensor) -> torch.Tensor:
        """The stream after block ``layer`` (B, T, D) with this layer's patches written in."""
        patches = self.patches.get(layer)
        if not patches:
            return stream
        stream = stream.clone()
        for row, position, vector in patches:
            # Pad columns also carry position 0; they are never read (masked as keys, outputs unused).
            stream[row, self.positions[row] == position] = vector
        return stream

    def note_written(self, kv_cache) -> None:
        """Tell the cache that the positions this forward writes were computed under these specs."""
        note = getattr(kv_cache, "note_interventions", None)
        if note is not None:
            note(tuple(self.specs))
