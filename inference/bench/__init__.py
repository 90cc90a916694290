"""Benchmarks of the engine against references measured in the same run (transformers; llama.cpp when installed).

``python -m inference.bench`` (the engine) and ``python -m inference.bench.batching``. The
references live here, never in the library itself.
"""
