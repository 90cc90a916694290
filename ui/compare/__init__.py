"""The Compare chapter: two models or two settings on one prompt, side by side."""
