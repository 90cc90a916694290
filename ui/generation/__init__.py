"""The Generation & KV cache chapter: the autoregressive loop step by step (``walk``), cache growth and timing."""
