"""A browser session's state: the registry of session keys and their defaults, the shareable link, the experiment."""
