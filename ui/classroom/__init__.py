"""A class on one server: the room every session shares (``room``), a session's side of it (``broadcast``: the
teacher key, the teacher's broadcast, following it, who is who) and the class rounds on screen (``rounds``).
The rounds' numbers are ``ui.compute.classroom``; their figures and sentences ``ui.figures.classroom`` and
``ui.claims.classroom``."""
