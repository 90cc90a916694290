"""Finding, reading and placing a model: ``load_model`` and its helpers.

Owns model resolution (the embedded default GGUF, a packaged model by name such as
``gemma-3-270m``, a ``.gguf`` path, a local Hugging Face folder, or a hub id when a hub
is reachable), safetensors-only weight reading
(no pickle, never ``trust_remote_code``), and the device/dtype choice: CUDA in
bfloat16 if present, else Apple MPS, else CPU in float32, each overridable.
It returns the weights and the tokenizer; ``inference.generation.engine.load_engine``
wraps them in an ``Engine``. Thread counts are not its concern (``inference.threads``).

The model holds one copy of each weight: with ``quant="gguf"`` the float tensors that the file's
blocks replace are never read (``read_folder``'s ``skip``), and no tensor is left viewing the
checkpoint's mapped file, which would keep every page the load read resident beside the copies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from .config import ModelConfig
from .decode_graph import FAMILIES
from .decode_step import DecodeStep, compiler_problem
from .errors import ModelLoadError
from .gguf import cache_root, converted_folder, default_gguf_path, read_raw_weights
from .memory import release_freed_memory
from .packages import PACKAGED
from .quant import QuantizationError, block_sourced, quantize_model
from .tokenizer import Tokenizer
from .transformer import Transformer
from .weights import projection_sources, to_engine_state_dict

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
HUB_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N or mps") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is available")
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' was asked for but Apple MPS is not available")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}: use one of {sorted(DTYPES)}") from None


def model_folder(model: str | Path | None) -> Path:
    """A local HF-format folder for ``model``: converting a GGUF or downloading a hub id if needed."""
    if model is None:
        return converted_folder(default_gguf_path())
    text = str(model)
    if text in PACKAGED:  # a packaged model by name ("gemma-3-270m")
        return converted_folder(PACKAGED[text]())
    path = Path(text).expanduser()
    if path.suffix == ".gguf":
        return converted_folder(path)
    if path.is_dir():
        return path
    if path.exists():
        raise ModelLoadError(f"{text} is a file, not a model folder or a .gguf file")
    looks_like_hub_id = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if not looks_like_hub_id:
        raise ModelLoadError(f"model path not found: {text}")
    return _download(text)


def _download(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
    except Exception as exc:  # offline, unknown id, gated repo...
        raise ModelLoadError(f"could not fetch {repo_id!r} from the model hub: {exc}") from exc


def read_config(folder: Path) -> ModelConfig:
    """The model's config, from the folder's ``config.json``."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelLoadError(f"{folder} has no config.json")
    try:
        settings = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{config_path} is not JSON: {exc}") from None
    return ModelConfig.from_hf_dict(settings, name=folder.name)


def read_folder(folder: Path, skip: frozenset[str] = frozenset()) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """The config and the (HF-named) tensors of a local folder, from safetensors only.

    The tensors view the files' mapped pages (nothing is copied here). A tensor named in ``skip`` is not
    read at all: it is a meta tensor of its shape, for weights that come from elsewhere (a GGUF's own
    blocks, ``quant="gguf"``), so their float pages are never touched.
    """
    from safetensors import safe_open

    config = read_config(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        extra = f" (found {pickles}: pickle checkpoints are never loaded)" if pickles else ""
        raise ModelLoadError(f"{folder} has no .safetensors weights{extra}")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():
                    if name in skip:
                        tensors[name] = torch.empty(handle.get_slice(name).get_shape(), device="meta")
                    else:
                        tensors[name] = handle.get_tensor(name)
        except Exception as exc:
            raise ModelLoadError(f"could not read {file}: {exc}") from exc
    return config, tensors


def build_model(
    config: ModelConfig,
    hf_tensors: dict[str, torch.Tensor],
    device: torch.device,
    dtype: torch.dtype,
    from_blocks: frozenset[str] = frozenset(),
) -> Transformer:
    """The model on ``device`` in ``dtype``, holding its own copy of every weight (none left viewing the file).

    ``from_blocks`` names the modules (``layers.3.attn.qkv``, ``embed``, ``lm_head``) whose weights
    ``quantize_model`` builds from a GGUF's blocks next: they stay meta tensors here, never read.
    """
    with torch.device("meta"):
        model = Transformer(config)
    try:
        state = to_engine_state_dict(hf_tensors, config)
        model.load_state_dict(state, strict=False, assign=True)
    except (KeyError, RuntimeError, ValueError) as exc:  # a tensor missing, or shaped unlike its config.json says
        detail = str(exc).strip().splitlines()
        shown = next((line.strip() for line in detail if "mismatch" in line), detail[0] if detail else repr(exc))
        raise ModelLoadError(f"{config.name}'s weights do not fit its config.json: {shown}") from None
    if config.tie_embeddings:
        model.lm_head.weight = model.embed.weight
    missing = [n for n, p in model.named_parameters() if p.is_meta and n.rpartition(".")[0] not in from_blocks]
    if missing:
        raise ModelLoadError(f"checkpoint is missing weights for {missing[:5]}")
    model.reset_rotary("cpu")  # real RoPE buffers in place of the meta ones, so the model can move
    _place(model, device, dtype)
    model.reset_rotary(device)  # RoPE frequencies stay float32 whatever the weights' dtype
    if device.type == "cpu" and dtype == torch.float32:
        _store_projections_transposed(model)
    file_storages = {t.untyped_storage().data_ptr() for t in hf_tensors.values() if not t.is_meta and t.numel()}
    _copy_out_of_file(model, file_storages)
    return model.eval()


def _place(model: Transformer, device: torch.device, dtype: torch.dtype) -> None:
    """``model.to(device, dtype)``, leaving the meta tensors (weights still to come from a GGUF's blocks) as they are."""

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.is_meta:
            return tensor
        return tensor.to(device, dtype if tensor.is_floating_point() else None)

    model._apply(convert)


def _copy_out_of_file(model: Transformer, file_storages: set[int]) -> None:
    """Give the model its own copy of every tensor still viewing the checkpoint's mapped file (the norms, an
    untied embedding), so the mapping can close.

    Why: one such tensor keeps the whole mapping open, and every page a load read (all of them, when the
    projections were copied out transposed) stays resident: 513 MB of float32 for SmolLM2, counted again
    beside the model's own copies.
    """
    copies: dict[int, torch.Tensor] = {}  # id of the file's tensor -> its copy (a tied tensor stays one tensor)
    for module in model.modules():
        for name, tensor in [*module._parameters.items(), *module._buffers.items()]:
            if tensor is None or tensor.is_meta or tensor.untyped_storage().data_ptr() not in file_storages:
                continue
            if id(tensor) not in copies:
                copy = tensor.detach().clone()
                copies[id(tensor)] = (
                    nn.Parameter(copy, requires_grad=False) if isinstance(tensor, nn.Parameter) else copy
                )
            setattr(module, name, copies[id(tensor)])


def _store_projections_transposed(model: Transformer) -> None:
    """Hold each projection's (out, in) weight as a view of (in, out) storage: the same tensor to every reader.

    Why: torch's CPU float32 matrix-vector product (a decode step, one row) streams a weight
    stored (in, out) about twice as fast as one stored (out, in): 22 against 12 GB/s measured
    here with 2 threads. A tied embedding then reads its rows from the output matrix's
    transposed storage too, rather than keep its own copy: Gemma's 262,144 × 640 matrix is
    671 MB, and a lookup of strided rows costs microseconds (16 rows: 0.09 against 0.006 ms;
    512 rows: 8.0 ms either way), nothing next to a step.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and not module.weight.is_meta:  # meta: its blocks replace it
            module.weight = torch.nn.Parameter(module.weight.detach().t().contiguous().t(), requires_grad=False)
    if model.config.tie_embeddings:
        model.embed.weight = model.lm_head.weight  # one (V, D) matrix again, stored (D, V)


DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class LoadedModel:
    """What ``load_model`` read: the weights on their device, the tokenizer, and the folder they came from."""

    transformer: Transformer
    tokenizer: Tokenizer
    folder: Path


def load_model(
    model: str | Path | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    quant: str | None = None,
    compile: bool = False,
    kernel: str | None = None,
) -> LoadedModel:
    """Read a model (the embedded SmolLM2-135M-Instruct by default) onto ``device`` in ``dtype``.

    ``quant`` (``inference.model.quant``): None keeps dense weights; "gguf" keeps a GGUF file's own
    blocks; "int8" / "int4" quantize the weights on load. ``compile`` compiles the one-token decode
    step (``inference.model.decode_step``); without a C++ compiler it keeps the eager path and
    says why in ``transformer.compile_note``. ``kernel`` (``inference.model.kernels``) multiplies by
    the 4-bit and Q8_0 groups; None picks the one for this CPU.
    """
    resolved_device = resolve_device(device)
    resolved_dtype = resolve_dtype(dtype, resolved_device)
    folder = model_folder(model)
    config = read_config(folder)
    gguf_weights = _gguf_weights(model, config, quant)
    from_blocks = block_sourced(gguf_weights) if gguf_weights else frozenset()
    config, tensors = read_folder(folder, skip=_unread_tensors(config, from_blocks))
    if model is None or str(model) in PACKAGED:
        config = replace(config, name=DEFAULT_MODEL_NAME if model is None else str(model))
    transformer = build_model(config, tensors, resolved_device, resolved_dtype, from_blocks)
    del tensors  # the last views of the mapped checkpoint: the mapping closes
    if quant is not None:
        transformer.quantization = quantize_model(transformer, quant, gguf_weights, kernel)
    del gguf_weights  # views of the mapped GGUF: the quantized modules hold their own codes
    unread = [name for name, t in [*transformer.named_parameters(), *transformer.named_buffers()] if t.is_meta]
    if unread:
        raise ModelLoadError(f"no weights were built for {unread[:5]}")
    tokenizer = Tokenizer.from_folder(folder)
    release_freed_memory()  # the load's temporaries (decoded blocks, the float tensors read) go back to the system
    if compile:
        problem = compiler_problem() or (None if config.family in FAMILIES else f"the {config.family} family")
        if problem:
            transformer.compile_note = f"compile=True fell back to the eager decode step: {problem}"
        else:  # compiles in the background; the eager step serves until it is ready
            mode = quant or str(resolved_dtype).removeprefix("torch.")
            transformer.decode_step = DecodeStep(transformer, mode, cache_root() / "compiled-steps")
    return LoadedModel(transformer, tokenizer, folder)


def gguf_source(model: str | Path | None) -> Path | None:
    """The GGUF file a model comes from (the embedded default, a packaged model's name, or a ``.gguf`` path), or None."""
    if model is None:
        return default_gguf_path()
    if str(model) in PACKAGED:
        return PACKAGED[str(model)]()
    path = Path(str(model)).expanduser()
    return path if path.suffix == ".gguf" else None


def _unread_tensors(config: ModelConfig, from_blocks: frozenset[str]) -> frozenset[str]:
    """The checkpoint tensors no module reads once the ``from_blocks`` modules are built from a GGUF's blocks
    (a tied embedding's rows only when both the lookup and the output matrix come from blocks)."""
    if not from_blocks:
        return frozenset()
    readers: dict[str, set[str]] = {}
    for module, hf_names in projection_sources(config).items():
        for hf_name in hf_names:
            readers.setdefault(hf_name, set()).add(module)
    return frozenset(hf_name for hf_name, modules in readers.items() if modules <= from_blocks)


def _gguf_weights(model: str | Path | None, config: ModelConfig, quant: str | None) -> dict | None:
    """For ``quant="gguf"``: each engine projection's GGUF tensors as stored, in stacking order."""
    if quant != "gguf":
        return None
    source = gguf_source(model)
    if source is None:
        raise QuantizationError(
            f'quant="gguf" keeps a GGUF file\'s own blocks, but {model} is not a .gguf file: '
            'use quant="int8" or "int4" to quantize its float weights on load'
        )
    raw = read_raw_weights(source)
    return {name: [raw[hf] for hf in hf_names] for name, hf_names in projection_sources(config).items()}
