"""The Embeddings chapter: rows of the embedding matrix, their distances and projections, RoPE's rotation."""
