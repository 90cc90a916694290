"""The facts about a loaded model that pages show, as one plain dataclass (no tensor, no module)."""

from __future__ import annotations

from dataclasses import dataclass

from ..generation.engine import Engine
from ..model.config import ModelConfig
from ..model.decode_step import StepStatus


@dataclass(frozen=True)
class ModelInfo:
    config: ModelConfig
    device: str  # "cpu", "cuda:0", ...
    dtype: str  # of the activations and the KV cache: "float32", "bfloat16"
    dtype_bytes: int  # one element of that dtype
    parameter_count: int  # weights the model has (tied embeddings once), dense or quantized
    weights_description: str  # what the weights are, in words (the sidebar's "Weights" line)
    eos_ids: frozenset[int]  # the tokens that end a text
    position_scheme: str  # "rope" or "learned": how the model tells positions apart
    embedding_shape: tuple[int, int]  # (vocabulary, model width) of the embedding matrix
    step_status: StepStatus | None = None  # what the decode step runs now (compiling, compiled, eager and why)

    @property
    def name(self) -> str:
        return self.config.name


def model_info(engine: Engine) -> ModelInfo:
    """``engine``'s facts; the embedding matrix's shape is read off the module (a quantized one is never decoded)."""
    embed = engine.model.embed
    rows, width = embed.num_embeddings, embed.embedding_dim  # nn.Embedding and QuantEmbedding both keep these
    return ModelInfo(
        config=engine.config,
        device=str(engine.device),
        dtype=str(engine.dtype).removeprefix("torch."),
        dtype_bytes=engine.dtype.itemsize,
        parameter_count=engine.parameter_count,
        weights_description=engine.weights_description,
        eos_ids=frozenset(engine.eos_ids),
        position_scheme="rope" if engine.model.rope is not None else "learned",
        embedding_shape=(int(rows), int(width)),
        step_status=engine.step_status,
    )
