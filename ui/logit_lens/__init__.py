"""The Transformer block & logit lens chapter: the block diagram, each layer's read-out, where the answer forms."""
