"""A slow, jittery Streamlit server on demand, to bring out races a loaded class server meets now and then.

With this folder on ``PYTHONPATH`` and ``SLOW_SERVER_CHAOS`` (a test tool's variable, not an app setting) set to a
probability p (0 < p ≤ 1), every Python process that starts (the test workers, the servers they fork) delays, each
with probability p, for a random time: the handling of a script runner's event on the server's event loop (up to 50
ms), the start of a script run (up to 150 ms), and the handling of a message from a browser (up to 50 ms). A
CPU-starved server does the same to these three, only less often. Without the variable nothing is patched and
Streamlit is not even imported here.

    PYTHONPATH=scripts/chaos SLOW_SERVER_CHAOS=0.3 bash scripts/run-tests.sh tests/test_browser.py -k class_link

docs/testing.md ("Races under a slow server") says what it found.
"""

import os
import random
import time

_P = float(os.environ.get("SLOW_SERVER_CHAOS") or 0)


def _jitter(method, longest_s: float):
    def delayed(*args, **kwargs):
        if random.random() < _P:
            time.sleep(random.random() * longest_s)
        return method(*args, **kwargs)

    return delayed


if _P > 0:
    try:
        from streamlit.runtime.app_session import AppSession
        from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
    except ImportError:  # a Python without Streamlit (a tool the tests start): nothing to slow down
        pass
    else:
        AppSession._handle_scriptrunner_event_on_event_loop = _jitter(
            AppSession._handle_scriptrunner_event_on_event_loop, 0.05
        )
        ScriptRunner._run_script = _jitter(ScriptRunner._run_script, 0.15)
        AppSession.handle_backmsg = _jitter(AppSession.handle_backmsg, 0.05)
