"""Every sentence that states a fact about this prompt's numbers, as a small pure function of those numbers.

A teaching text that contradicts its chart is a bug, so no page writes such a sentence
by hand: it calls a helper here with the numbers the chart draws, and the helper returns
the sentence, or ``None`` (or a different sentence) when the claim does not hold for this
prompt and these settings. No Streamlit, no model: plain numbers in, a markdown string
out, so ``tests/test_claims.py`` can run each helper on several prompts' real numbers
and check every claim against the numbers it quotes.

- ``reading``: Tokenization, Embeddings, Attention
- ``predicting``: Transformer block & logit lens, Logits & temperature, Sampling
- ``generating``: Generation & KV cache, Batching
"""
