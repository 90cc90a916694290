"""Benchmarks of the engine against references measured in the same run (transformers; llama.cpp when installed).

``python -m inference.bench`` (the engine), ``python -m inference.bench.batching`` and
``python -m inference.bench.gemv`` (the float32 path's ceiling with torch's matrix kernels). The
references live here, never in the library itself.
"""
