"""LLM inference in plain PyTorch, readable end to end, for the explorer and on its own.

    from inference import load_engine, SamplingParams
    engine = load_engine()
    for step in engine.generate("The cat sat", SamplingParams(temperature=0.8, seed=0)):
        print(step.text, end="")

The package never imports streamlit or plotly.
"""
from .batching import BatchResult, BatchRun, BatchStep, run_static
from .config import ModelConfig, UnsupportedModelError
from .continuous import ContinuousBatcher, run_continuous
from .engine import Candidate, Completion, Engine, PromptError, StepRecord
from .gguf_loader import ModelLoadError
from .kv_cache import CacheFullError, KVCache
from .loader import load_engine
from .sampling import SampleResult, SamplingError, SamplingParams, sample, sample_many
from .scheduler import Scheduler, Sequence, SequenceStatus
from .server import BusyError, EngineServer, RequestHandle, TokenEvent
from .slot_cache import SlotKVCache
from .tokenizer import TokenizerError
from .trace import ForwardTrace, LayerTrace

__all__ = [
    "load_engine", "SamplingParams", "SamplingError", "SampleResult", "sample", "sample_many", "Engine", "StepRecord",
    "Candidate", "Completion", "ModelConfig", "KVCache", "CacheFullError", "ForwardTrace", "LayerTrace",
    "PromptError", "ModelLoadError", "TokenizerError", "UnsupportedModelError",
    "BatchResult", "BatchRun", "BatchStep", "run_static", "run_continuous", "ContinuousBatcher",
    "Scheduler", "Sequence", "SequenceStatus", "SlotKVCache",
    "EngineServer", "RequestHandle", "TokenEvent", "BusyError",
]
