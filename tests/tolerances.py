"""The suite's numeric tolerances: the engine's own derived bounds (``inference/model/tolerances.py``, where the
derivation is written), imported here under the name the tests use."""

from inference.model.tolerances import (  # noqa: F401  (re-exported for the tests)
    UNIT_ROUNDOFF,
    logit_tolerance,
    max_abs_diff,
    model_tolerance,
    top2_margin,
)
