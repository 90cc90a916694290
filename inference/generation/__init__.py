"""Generation on one loaded model: the sampler and its stop rule, the engine (prefill, decode, generate), the stepper.

Builds on ``inference.model``; knows nothing about batching many requests (``inference.serving``).
"""
