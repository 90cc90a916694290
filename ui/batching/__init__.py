"""The Batching chapter: static against continuous batching of real requests, padding masks, throughput curves; the request list a session edits (``requests``)."""
