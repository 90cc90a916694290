"""Moved to ``ui.controls.sampling`` (the UI's sub-packages); this name stays for the class files until they move too."""
import sys

from ui.controls import sampling as _moved

sys.modules[__name__] = _moved
