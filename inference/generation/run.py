"""What every finished request's record reads off its steps, plain or speculative: the text and why it stopped.

``Completion`` (one plain run, a ``StepRecord`` per token) and ``SpeculativeRun`` (a ``SpeculativeStep`` per forward
of the model) both keep their steps in order; each step carries its own text and, the last one, the finish reason.
"""

from __future__ import annotations


class StepsRun:
    """A run's ``steps`` in order (each with ``text`` and ``finish_reason``), read as one answer."""

    steps: list

    @property
    def text(self) -> str:
        return "".join(step.text for step in self.steps)

    @property
    def finish_reason(self) -> str | None:
        return self.steps[-1].finish_reason if self.steps else None
