"""Moved to ``ui.shell.resources`` (the UI's sub-packages); this name stays for the class files until they move too."""
import sys

from ui.shell import resources as _moved

sys.modules[__name__] = _moved
