"""Moved to ``ui.compute.sampling`` (the UI's sub-packages); this name stays for the class files until they move too."""
import sys

from ui.compute import sampling as _moved

sys.modules[__name__] = _moved
