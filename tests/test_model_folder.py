"""A malformed model folder, and the library's other edges: each is one clear library exception naming the problem.

A tiny Llama (and a tiny GPT-2 and Gemma 3) folder is written to tmp_path, then one field of its config.json is
removed, given the wrong type, or given an impossible value: loading raises ``ModelLoadError`` naming the field,
never a raw ``KeyError`` / ``TypeError`` / ``ZeroDivisionError``. Then the engine's and the tokenizer's inputs:
ids that are not ints, negative or past the vocabulary, and text with a lone surrogate.
"""

from __future__ import annotations

import json

import pytest

from inference import ModelConfig, ModelLoadError, PromptError, SamplingParams, TokenizerError, load_engine
from tests.tiny_models import save_folder, tiny_gemma3, tiny_gpt2, tiny_llama

LLAMA_FIELDS = ["num_attention_heads", "num_hidden_layers", "hidden_size", "intermediate_size", "vocab_size"]
GPT2_FIELDS = ["n_embd", "n_head", "n_layer", "vocab_size", "n_positions", "layer_norm_epsilon"]
GEMMA3_FIELDS = LLAMA_FIELDS + ["sliding_window", "query_pre_attn_scalar", "head_dim"]
ILL = [-1, 0, "12", 1.5, None, float("nan"), [], {}, True, 10**30]


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer_folder):
    root = tmp_path_factory.mktemp("folders")
    return {
        "llama": save_folder(tiny_llama(), root / "llama", tokenizer_folder),
        "gpt2": save_folder(tiny_gpt2(), root / "gpt2", tokenizer_folder),
        "gemma3": save_folder(tiny_gemma3(), root / "gemma3", tokenizer_folder),
    }


def broken(folders, tmp_path, family: str, change) -> str:
    """A copy of ``family``'s folder whose config.json is ``change(config)``."""
    folder = tmp_path / family
    folder.mkdir()
    for file in folders[family].iterdir():
        (folder / file.name).symlink_to(file)
    config = json.loads((folders[family] / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps(change(config)))
    return str(folder)


OPTIONAL = {"sliding_window", "query_pre_attn_scalar", "head_dim", "n_positions", "layer_norm_epsilon"}
REAL_VALUED = {"layer_norm_epsilon", "query_pre_attn_scalar"}
CASES = [(family, field) for family, fields in (("llama", LLAMA_FIELDS), ("gpt2", GPT2_FIELDS)) for field in fields]
CASES += [("gemma3", field) for field in GEMMA3_FIELDS]
ILL_CASES = [
    (family, field, value)
    for family, field in CASES
    for value in ILL
    if not (value is None and (field in OPTIONAL or family == "gpt2"))  # null: the default stands in
    and not (field in REAL_VALUED and value in (1.5, 10**30))  # valid numbers for a real-valued field
]
REQUIRED = [(f, field) for f, field in CASES if f != "gpt2" and field not in OPTIONAL]  # GPT-2's all have defaults


@pytest.fixture(scope="module")
def configs(folders):
    return {family: json.loads((folder / "config.json").read_text()) for family, folder in folders.items()}


@pytest.mark.parametrize("family, field, value", ILL_CASES, ids=repr)
def test_an_ill_typed_or_impossible_field_names_itself(configs, family, field, value):
    with pytest.raises(ModelLoadError, match=f"tiny's config.json(: | has no ){field}"):
        ModelConfig.from_hf_dict({**configs[family], field: value}, name="tiny")


@pytest.mark.parametrize("family, field", REQUIRED)
def test_a_missing_required_field_names_itself(configs, family, field):
    with pytest.raises(ModelLoadError, match=f"tiny's config.json has no {field}"):
        ModelConfig.from_hf_dict({k: v for k, v in configs[family].items() if k != field}, name="tiny")


@pytest.mark.parametrize(
    "change",
    [
        lambda c: {k: v for k, v in c.items() if k != "num_attention_heads"},
        lambda c: {**c, "hidden_size": -1},
        lambda c: {**c, "num_hidden_layers": "2"},
    ],
)
def test_the_folder_itself_loads_as_a_model_load_error(folders, tmp_path, change):
    """The issue's three examples, through ``load_engine`` on a folder (the matrix above checks the config)."""
    folder = broken(folders, tmp_path, "llama", change)
    with pytest.raises(ModelLoadError, match="num_attention_heads|hidden_size=-1|num_hidden_layers='2'"):
        load_engine(model=folder, device="cpu")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: [c], "must hold an object"),
        (lambda c: {**c, "rms_norm_eps": "tiny"}, "rms_norm_eps"),
        (lambda c: {**c, "tie_word_embeddings": "no"}, "tie_word_embeddings"),
        (lambda c: {**c, "eos_token_id": [2, "x"]}, "eos_token_id"),
        (lambda c: {**c, "bos_token_id": -1}, "bos_token_id"),
        (lambda c: {**c, "rope_theta": -5}, "rope_theta"),
        (lambda c: {**c, "rope_scaling": "linear"}, "rope_scaling"),
        (lambda c: {**{k: v for k, v in c.items() if k != "head_dim"}, "hidden_size": 63}, "not a multiple of 4 heads"),
        (lambda c: {**c, "model_type": 5}, "model_type"),
    ],
)
def test_other_malformed_settings(folders, tmp_path, change, message):
    folder = broken(folders, tmp_path, "llama", change)
    with pytest.raises(ModelLoadError, match=message):
        load_engine(model=folder, device="cpu")


def test_a_config_that_is_not_json(folders, tmp_path):
    folder = broken(folders, tmp_path, "llama", lambda c: c)
    (tmp_path / "llama" / "config.json").write_bytes(b"{\xff not json")
    with pytest.raises(ModelLoadError, match="is not JSON"):
        load_engine(model=folder, device="cpu")


@pytest.mark.parametrize("field, value", [("hidden_size", 128), ("num_hidden_layers", 3), ("vocab_size", 100)])
def test_a_config_that_does_not_fit_its_weights(folders, tmp_path, field, value):
    folder = broken(folders, tmp_path, "llama", lambda config: {**config, field: value})
    with pytest.raises(ModelLoadError, match="weights do not fit its config.json"):
        load_engine(model=folder, device="cpu")


# ---- the engine's and the tokenizer's own inputs ---------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_engine(folders):
    return load_engine(model=folders["llama"], device="cpu")


@pytest.mark.parametrize(
    "ids, message",
    [
        (None, "must be text or a list of token ids"),
        (5, "must be text or a list of token ids"),
        (["a", "b"], "must be whole numbers, got 'a'"),
        (["5"], "must be whole numbers, got '5'"),
        ([1.7], "must be whole numbers, got 1.7"),
        ([2.0], "must be whole numbers, got 2.0"),
        ([True], "must be whole numbers, got True"),
        ([None], "must be whole numbers, got None"),
        ([-5], "outside the vocabulary"),
        ([10**30], "outside the vocabulary"),
        ([], "has no tokens"),
    ],
    ids=repr,
)
def test_forward_logits_refuses_what_is_not_token_ids(tiny_engine, ids, message):
    with pytest.raises(PromptError, match=message):
        tiny_engine.forward_logits(ids)


def test_forward_logits_takes_numpy_and_torch_integers(tiny_engine):
    import numpy as np
    import torch

    expected = tiny_engine.forward_logits([1, 2, 3])
    assert torch.equal(tiny_engine.forward_logits(np.array([1, 2, 3])), expected)
    assert torch.equal(tiny_engine.forward_logits(torch.tensor([1, 2, 3])), expected)


@pytest.mark.parametrize(
    "ids, message",
    [
        ([-5], "token id -5 is outside the vocabulary"),
        ([49152], "token id 49152 is outside the vocabulary"),
        ([10**30], "outside the vocabulary"),
        ([1.0], "must be whole numbers, got 1.0"),
        ([False], "must be whole numbers, got False"),
        (["1"], "must be whole numbers"),
        (None, "must be a list of whole numbers"),
        ("12", "must be a list of whole numbers"),
    ],
    ids=repr,
)
def test_decode_and_raw_tokens_refuse_ids_outside_the_vocabulary(tiny_engine, ids, message):
    for call in (tiny_engine.tokenizer.decode, tiny_engine.tokenizer.raw_tokens, tiny_engine.tokenizer.token_strings):
        with pytest.raises(TokenizerError, match=message):
            call(ids)


def test_the_vocabulary_ends_still_decode(tiny_engine):
    tokenizer = tiny_engine.tokenizer
    assert tokenizer.decode([0, tokenizer.vocab_size - 1]) == tokenizer.decode([0]) + tokenizer.decode([49151])
    assert tokenizer.decode([]) == ""


@pytest.mark.parametrize("text", ["\ud800", "a\udcffb", "ok \udfff"])
def test_a_lone_surrogate_is_a_tokenizer_error(tiny_engine, text):
    with pytest.raises(TokenizerError, match="lone surrogate"):
        tiny_engine.tokenizer.encode(text)
    with pytest.raises(TokenizerError, match="lone surrogate"):
        tiny_engine.tokenizer.pre_tokens(text)
    with pytest.raises(TokenizerError, match="lone surrogate"):
        list(tiny_engine.generate(text, SamplingParams(max_new_tokens=1)))


def test_text_that_is_not_a_str_is_a_tokenizer_error(tiny_engine):
    with pytest.raises(TokenizerError, match="must be a str, got bytes"):
        tiny_engine.tokenizer.encode(b"abc")
