"""The names the class files (issue 27's lane) still read of the Generation page, until they move into ui/ too:
the walk's session keys (now ``ui.session.state``) and its link parameters (``ui.session.walk``)."""
from ui.session import state
from ui.session.walk import walk_query

STEPPER_KEY = state.GEN_STEPPER
REPLAY_KEY, REPLAY_FORCED_KEY, REPLAY_PROMPT_KEY = state.GEN_REPLAY_STEPS, state.GEN_REPLAY_FORCED, state.GEN_REPLAY_PROMPT

__all__ = ["STEPPER_KEY", "REPLAY_KEY", "REPLAY_FORCED_KEY", "REPLAY_PROMPT_KEY", "walk_query"]
