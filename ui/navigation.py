"""Moved to ``ui.shell.navigation`` (the UI's sub-packages); this name stays for the class files until they move too."""
import sys

from ui.shell import navigation as _moved

sys.modules[__name__] = _moved
