"""The model: its configuration, weights and loading, the transformer forward, the KV cache, traces, tokenizer.

Nothing here knows about sampling, generation loops or serving (``inference.generation``
and ``inference.serving`` build on this package, never the other way round).
"""
