"""Serving many requests on one engine: request records, left padding, static and continuous batching, the server.

Builds on ``inference.generation`` and ``inference.model``; ``ServeConfig`` holds every serving default.
"""
