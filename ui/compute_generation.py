"""Moved to ``ui.compute.generation`` (the UI's sub-packages); this name stays for the class files until they move too."""
import sys

from ui.compute import generation as _moved

sys.modules[__name__] = _moved
