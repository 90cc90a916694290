"""Guided lessons: a lesson is a TOML file of steps, each opening a chapter's state and asking the learner to predict
before the model's own answer is revealed (issue 37).

``format`` reads and checks a file (no model), ``files`` finds the files in ``lessons/``, ``answers`` computes every
right answer from the model, ``figures`` and ``claims`` show the reveal, ``widgets`` and ``view`` are the page's glue,
``classmode`` runs a lesson with a class through the classroom's room; ``python -m ui.lesson check FILE`` is the
teacher's check. No answer is ever read from a file.
"""
