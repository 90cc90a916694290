"""The pages' numbers: cached helpers keyed by the model's name, plain values in, numpy arrays and dataclasses out."""
