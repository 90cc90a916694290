"""Small randomly initialised Llama, GPT-2 and Gemma 3 checkpoints, written as local HF folders.

Nothing is downloaded: the configs are built here, the weights are random, and the
tokenizer files are copied from the embedded model's converted folder (any fast
tokenizer will do for id-level tests), or trained here on a paragraph
(``train_tokenizer``) when a model needs a tokenizer of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

VOCAB = 49152  # matches the copied tokenizer


def tiny_llama(**overrides) -> LlamaForCausalLM:
    torch.manual_seed(0)
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        eos_token_id=2,
        bos_token_id=1,
    )
    config = LlamaConfig(**{**settings, **overrides})
    return LlamaForCausalLM(config).eval()


def tiny_gpt2(**overrides) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    settings = dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=256, eos_token_id=2, bos_token_id=1)
    config = GPT2Config(**{**settings, **overrides})
    return GPT2LMHeadModel(config).eval()


def tiny_gemma3(**overrides) -> Gemma3ForCausalLM:
    """Gemma 3 in miniature: a 4-key sliding window on layers 0 and 2, multi-query attention, heads x head_dim
    != d_model, a score scalar other than head_dim, and random (not zero) norm weights so (1 + w) matters."""
    torch.manual_seed(0)
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=256,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        query_pre_attn_scalar=24,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
        rms_norm_eps=1e-6,
        eos_token_id=2,
        bos_token_id=1,
        pad_token_id=0,
    )
    model = Gemma3ForCausalLM(Gemma3TextConfig(**{**settings, **overrides})).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.normal_(0.0, 0.3)
    return model


def save_folder(model, folder: Path, tokenizer_source: Path) -> Path:
    """Write ``model`` as config.json + model.safetensors, plus a tokenizer, into ``folder``."""
    model.save_pretrained(str(folder), safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tokenizer_source / name).exists():
            shutil.copy(tokenizer_source / name, folder / name)
    return folder


CORPUS = (
    "The cat sat on the mat because it was tired. A dog ran to the park and the cat watched it. "
    "Bank is closed on Sunday, so the dog and the cat stayed home. "
) * 20


def train_tokenizer(folder: Path, vocab_size: int = 320, corpus: str = CORPUS) -> int:
    """Train a small byte-level BPE on ``corpus`` and save it in ``folder`` as a fast tokenizer; its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator([corpus], trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>")
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(folder))
    return tokenizer.get_vocab_size()
