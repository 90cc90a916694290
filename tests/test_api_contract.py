"""The backend seam (``inference.api.Backend``): both implementations keep its contract, on a tiny random Llama.

Statically: each implementation has every method and attribute of the Protocol, with the Protocol's
parameters, and nothing public beyond it. Then the same assertions run against the in-process client
(``EngineClient``) and the process server's (``ChildClient``, whose forwards run in the child), and
every method a client in another process may be asked to run by name gives, through the child, what
it gives here.
"""

from __future__ import annotations

import inspect
from dataclasses import is_dataclass

import numpy as np
import pytest

from inference.api import (
    FACETS,
    AttentionArrays,
    Backend,
    ChildClient,
    Completion,
    EngineClient,
    EngineServer,
    HeadEdit,
    Interventions,
    PagedKV,
    PagingTrace,
    PositionTables,
    ProcessServer,
    PromptError,
    SamplingParams,
    ServeConfig,
    Speculation,
    SpeculativeRun,
    TracedPrompt,
    load_engine,
    members,
)
from inference.serving.client import PLAIN_CALLS
from inference.serving.process import check_plain
from tests.tiny_models import save_folder, tiny_llama

WAIT = 120.0  # a child's start (torch's import) on a busy machine; never a performance assertion
PROMPT = "The cat sat on the mat because"
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=4, stop_on_eos=False)
IMPLEMENTATIONS = (EngineClient, ChildClient)


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")} | {
        name for name in getattr(cls, "__annotations__", {}) if not name.startswith("_")
    }


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda cls: cls.__name__)
def test_each_implementation_has_the_protocols_members_and_nothing_public_beyond_them(cls):
    wanted = members(Backend)
    assert len(wanted - {"info", "tokenizer"}) <= 24  # methods; the two attributes are the model's facts and text
    public = _public(cls) | {"tokenizer"}  # set in __init__ (checked on an instance below)
    assert public == wanted, f"missing: {sorted(wanted - public)}; beyond the seam: {sorted(public - wanted)}"
    for facet in FACETS:
        for name, declared in vars(facet).items():
            if name.startswith("_") or not callable(declared):
                continue
            expected = list(inspect.signature(declared).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == expected, f"{cls.__name__}.{name}"


def test_every_call_a_child_may_run_is_a_method_of_the_seam():
    assert PLAIN_CALLS <= members(Backend)


# -- the same assertions against both -----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_load(tmp_path_factory, tokenizer_folder) -> dict:
    folder = save_folder(tiny_llama(), tmp_path_factory.mktemp("tiny") / "llama", tokenizer_folder)
    return {"model": str(folder), "device": "cpu", "dtype": "float32"}


@pytest.fixture(scope="module")
def engine(tiny_load):
    return load_engine(**tiny_load)


@pytest.fixture(scope="module")
def process_server(engine, tiny_load):
    with ProcessServer(engine, tiny_load, ServeConfig(n_slots=2, max_waiting=8)) as running:
        yield running


@pytest.fixture(scope="module")
def thread_server(engine):
    server = EngineServer(engine, ServeConfig(n_slots=2, max_waiting=8))
    yield server
    server.close()


@pytest.fixture(scope="module", params=IMPLEMENTATIONS, ids=lambda cls: cls.__name__)
def backend(request, engine, tiny_load) -> Backend:
    if request.param is ChildClient:
        return ChildClient(engine, request.getfixturevalue("process_server"), tiny_load["model"])
    server = request.getfixturevalue("thread_server")
    return EngineClient(engine, lambda: server, tiny_load["model"])


@pytest.fixture(scope="module")
def ids(backend) -> list[int]:
    return backend.encode_prompt(PROMPT)


def test_it_is_a_backend_with_the_models_facts_and_its_tokenizer(backend, ids):
    assert isinstance(backend, Backend)
    assert {name for name in vars(backend) if not name.startswith("_")} <= members(Backend)
    config = backend.info.config
    assert backend.info.embedding_shape == (config.vocab_size, config.d_model)
    assert backend.tokenizer.encode(PROMPT) == ids
    assert backend.encode_prompt(ids) == ids
    with pytest.raises(PromptError):
        backend.encode_prompt("")


def test_a_forward_and_what_it_records(backend, ids):
    config = backend.info.config
    logits = backend.last_logits(ids)
    assert logits.shape == (config.vocab_size,) and np.isfinite(logits).all()
    probs = backend.next_token_probs(ids)
    assert probs.dtype == np.float64 and probs.sum() == pytest.approx(1.0)
    assert int(probs.argmax()) == int(logits.argmax())

    maps = backend.attention(ids)
    assert isinstance(maps, AttentionArrays)
    T = len(ids)
    assert maps.probs.shape == (config.n_layers, config.n_heads, T, T)
    np.testing.assert_allclose(maps.probs.sum(-1), 1.0, rtol=1e-5)
    assert np.allclose(np.triu(maps.probs[0, 0], 1), 0)  # causal

    traced = backend.trace(ids)
    assert isinstance(traced, TracedPrompt)
    assert traced.lens.top_ids.shape == (config.n_layers + 1, T, 3)
    assert traced.lens.top_ids[-1, -1, 0] == int(logits.argmax())  # the last layer's guess is the model's answer
    assert backend.trace(ids, keep_from=T - 2).lens.top_ids.shape[1] == 2

    last = backend.last_position(ids)
    np.testing.assert_allclose(last.logits, logits, rtol=1e-4, atol=1e-4)


def test_embeddings_and_positions(backend, ids):
    config = backend.info.config
    rows = backend.embedding_rows(ids)
    assert rows.shape == (len(ids), config.d_model)
    near = backend.nearest(ids[0], k=5)
    assert len(near) == 5 and ids[0] not in [i for i, _ in near]
    assert all(-1.0 - 1e-6 <= cosine <= 1.0 + 1e-6 for _, cosine in near)
    assert backend.word_cosines(" cat", (" cat",))[0] == pytest.approx(1.0, abs=1e-5)
    distinct, drawn, vectors = backend.projection_vectors(ids, (" dog",))
    assert vectors.shape == (len(distinct) + len(drawn), config.d_model)
    tables = backend.positions(8)
    assert isinstance(tables, PositionTables) and tables.scheme == "rope"
    assert tables.cos.shape == (8, config.head_dim) and tables.angles.shape == (8, config.head_dim // 2)
    np.testing.assert_allclose(np.cos(tables.angles), tables.half_cos, atol=1e-5)
    assert tables.wavelengths[0] == pytest.approx(2 * np.pi, rel=1e-3)


def test_generation_alone_stepped_and_on_the_server(backend, ids):
    done = backend.complete(ids, GREEDY)
    assert isinstance(done, Completion) and len(done.token_ids) == 4
    assert int(np.argmax(backend.last_logits(ids))) == done.token_ids[0]
    fast = backend.complete(ids, GREEDY, speculation=Speculation(drafter="self", draft_tokens=2, layers=1))
    assert isinstance(fast, SpeculativeRun)  # greedy speculation: the same tokens
    assert [t for step in fast.steps for t in step.token_ids][:4] == done.token_ids

    stepper = backend.stepper(ids, GREEDY, max_steps=4)
    assert backend.owns(stepper)
    stepper.step()
    assert stepper.chosen[0].token_id == done.token_ids[0]

    handle = backend.submit(ids, GREEDY)
    assert handle.result(timeout=WAIT).token_ids == done.token_ids

    timing = backend.measure_cache_timing(ids, 3)
    assert timing.prompt_tokens == len(ids) and timing.max_abs_diff < 1e-3


def test_batching_gives_each_request_its_solo_tokens(backend, ids):
    solo = backend.complete(ids, GREEDY).token_ids
    for n_slots in (None, 2):
        run = backend.run_batch([ids, ids[:3]], [GREEDY, GREEDY], n_slots=n_slots)
        assert run.results[0].token_ids == solo


def test_batching_on_paged_blocks_gives_solo_tokens_and_a_plain_frozen_trace(backend, ids):
    other = ids[:-1] + [(ids[-1] + 1) % backend.info.config.vocab_size]  # the same start, its own last token
    solo = [backend.complete(prompt, GREEDY).token_ids for prompt in (ids, other)]
    run = backend.run_batch([ids, other], [GREEDY, GREEDY], paged=PagedKV(block_size=2, samples=2))
    assert [r.index for r in run.results] == [0, 1, 2, 3]  # two answers per prompt, in order
    assert [r.token_ids for r in run.results] == [solo[0], solo[0], solo[1], solo[1]]
    trace = run.paging
    assert isinstance(trace, PagingTrace) and trace.block_size == 2 and trace.prompt_of == (0, 0, 1, 1)
    kinds = {e.kind for step in trace.steps for e in step.events}
    assert {"allocate", "fork", "prefix_hit", "finish"} <= kinds  # answers 1 and 3 forked, prompt 1 hits prompt 0's
    assert len(trace.steps) == len(run.steps)
    check_plain(trace, "a paging trace")
    for record in (trace, trace.steps[0], trace.steps[0].events[0]):
        assert is_dataclass(record) and type(record).__dataclass_params__.frozen
    with pytest.raises(ValueError, match="paged run"):
        backend.run_batch([ids], [GREEDY], n_slots=2, paged=PagedKV())


def test_weights_of_a_float_checkpoint_and_the_comparison_with_itself(backend, ids):
    assert backend.file_summary() is None  # a folder of safetensors: no GGUF blocks
    assert backend.stored_block("blk.0.attn_q.weight") is None
    compared = backend.compare_modes({"none": backend}, ids, top_n=3)
    assert compared.top1_agreement == [1.0] and compared.mean_kl[0] == pytest.approx(0.0, abs=1e-12)


def test_experiments(backend, ids):
    config = backend.info.config
    target = int(np.argmax(backend.last_logits(ids)))
    importance = backend.head_importance(ids, target, "mean", 0.0, 0)
    assert importance.shape == (config.n_heads,) and np.all(importance <= 0)
    ablated = Interventions(heads=(HeadEdit(0, 0, "mean"),))
    assert backend.next_token_probs(ids, ablated).shape == (config.vocab_size,)
    assert isinstance(backend.complete(ids, GREEDY, spec=ablated), Completion)
    split = backend.attribution(ids, target)
    assert split.total == pytest.approx(split.logit, abs=1e-3)
    corrupt = list(ids)
    corrupt[1] = corrupt[1] + 1
    patched = backend.patch(ids, corrupt, positions=[1])
    assert patched.restored.shape == (1, config.n_layers)
    assert backend.patch(ids, corrupt).restored.shape == (0, config.n_layers)


def test_what_travels_is_plain_frozen_records(backend, ids):
    for value in (
        backend.attention(ids),
        backend.trace(ids),
        backend.last_position(ids),
        backend.positions(4),
        backend.patch(ids, ids[:1] + [ids[1] + 1] + ids[2:], positions=[1]),
    ):
        check_plain(value, "a result")
        assert is_dataclass(value) and type(value).__dataclass_params__.frozen


def test_every_plain_call_gives_through_the_child_what_it_gives_here(engine, process_server):
    here = EngineClient(engine)
    ids = here.encode_prompt(PROMPT)
    args = {
        "encode_prompt": (PROMPT,),
        "last_logits": (ids,),
        "next_token_probs": (ids,),
        "attention": (ids,),
        "window": None,  # the tiny Llama has no sliding window
        "trace": (ids,),
        "last_position": (ids,),
        "embedding_rows": (ids,),
        "nearest": (ids[0], 4),
        "word_cosines": (" cat", (" dog",)),
        "projection_vectors": (ids, (" dog",)),
        "positions": (4,),
        "complete": (ids, GREEDY),
        "head_importance": (ids, ids[-1], "scale", 0.0, 0),
        "patch": (ids, ids[:1] + [ids[1] + 1] + ids[2:], (1,)),
        "attribution": (ids, ids[-1]),
    }
    assert set(args) == PLAIN_CALLS
    for name, call in args.items():
        if call is None:
            continue
        there, mine = process_server.call(name, *call, timeout=WAIT), getattr(here, name)(*call)
        if name == "complete":
            there, mine = there.token_ids, mine.token_ids  # the steps' times differ
        _assert_same(there, mine, name)


def _assert_same(a, b, where: str) -> None:
    if is_dataclass(a):
        assert type(a) is type(b), where
        for key in vars(a):
            _assert_same(getattr(a, key), getattr(b, key), f"{where}.{key}")
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for x, y in zip(a, b):
            _assert_same(x, y, where)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-5), where
    else:
        assert a == b, where
