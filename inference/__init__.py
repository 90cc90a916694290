"""LLM inference in plain PyTorch, readable end to end, for the explorer and on its own.

    from inference import load_engine, SamplingParams
    engine = load_engine()
    for step in engine.generate("The cat sat", SamplingParams(temperature=0.8, seed=0)):
        print(step.text, end="")

This file is the public API. The packages below it, by concern (each depends only on
the ones before it):

- ``inference.model``: config, GGUF reading, weights, loading, the transformer, the
  KV cache, traces, the tokenizer;
- ``inference.generation``: the sampler and its stop rule, the engine, the stepper, speculative decoding;
- ``inference.inspection``: what the explorer reads of a model (embeddings, attention,
  the residual stream, experiments, the sampler's numbers, the KV cache, the weights), as
  numpy arrays and plain dataclasses;
- ``inference.serving``: request records, left padding, static and continuous
  batching, the scheduler, the slot cache, the server (in a thread or a process of its
  own), ``ServeConfig``, and ``EngineClient``, the backend on an engine in this process;
- ``inference.api``: the one seam the explorer's pages read an engine through, the ``Backend``
  Protocol, its records and pure helpers (``EngineClient`` and ``ChildClient`` implement it);
- ``inference.bench``: benchmarks against references (not part of the library).

The package never imports streamlit or plotly.
"""

from . import inspection
from .generation.engine import Candidate, Completion, Engine, PromptError, StepRecord, load_engine
from .generation.sampling import SampleResult, SamplingError, SamplingParams, sample, sample_many
from .generation.speculative import (
    DraftCheck,
    FinalToken,
    Speculation,
    SpeculationError,
    SpeculativeRun,
    SpeculativeStep,
)
from .generation.stepper import Stepper, StepperError
from .inspection import release_freed_memory
from .model.config import ModelConfig, UnsupportedModelError
from .model.errors import ModelLoadError
from .model.interventions import EdgeCut, HeadEdit, InterventionError, Interventions, MLPEdit
from .model.kv_cache import CacheFullError, KVCache
from .model.loader import gguf_source
from .model.packages import GEMMA3_270M, SMOLLM2, install_hint, is_installed
from .model.tokenizer import Tokenizer, TokenizerError, parse_merges
from .model.trace import ForwardTrace, LayerTrace
from .serving.client import PLAIN_CALLS, EngineClient
from .serving.config import ServeConfig
from .serving.continuous import ContinuousBatcher, run_continuous
from .serving.process import ChildClient, ProcessServer
from .serving.requests import BatchResult, BatchRun, BatchStep
from .serving.scheduler import Scheduler, Sequence, SequenceStatus
from .serving.server import BusyError, EngineServer, RequestHandle, TokenEvent
from .serving.slot_cache import SlotKVCache
from .serving.static import run_static
from .threads import available_cores, set_threads

__all__ = [
    "load_engine",
    "SamplingParams",
    "SamplingError",
    "SampleResult",
    "sample",
    "sample_many",
    "Engine",
    "StepRecord",
    "Candidate",
    "Completion",
    "Stepper",
    "StepperError",
    "Speculation",
    "SpeculationError",
    "SpeculativeRun",
    "SpeculativeStep",
    "DraftCheck",
    "FinalToken",
    "ModelConfig",
    "KVCache",
    "CacheFullError",
    "ForwardTrace",
    "LayerTrace",
    "PromptError",
    "ModelLoadError",
    "TokenizerError",
    "UnsupportedModelError",
    "BatchResult",
    "BatchRun",
    "BatchStep",
    "run_static",
    "run_continuous",
    "ContinuousBatcher",
    "ServeConfig",
    "Scheduler",
    "Sequence",
    "SequenceStatus",
    "SlotKVCache",
    "EngineServer",
    "ProcessServer",
    "RequestHandle",
    "TokenEvent",
    "BusyError",
    "set_threads",
    "available_cores",
    "inspection",
    "EngineClient",
    "ChildClient",
    "PLAIN_CALLS",
    "release_freed_memory",
    "Interventions",
    "HeadEdit",
    "EdgeCut",
    "MLPEdit",
    "InterventionError",
    "Tokenizer",
    "parse_merges",
    "gguf_source",
    "GEMMA3_270M",
    "SMOLLM2",
    "install_hint",
    "is_installed",
]
