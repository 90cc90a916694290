"""The Speculative decoding chapter: a draft proposes, the target verifies; acceptance, residual sampling, speed-up."""
