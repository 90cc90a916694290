"""Moved to ``ui.session.links`` (the UI's sub-packages); this name stays for the class files until they move too."""
import sys

from ui.session import links as _moved

sys.modules[__name__] = _moved
