"""HAProxy in front of two replicas, with the config ``scripts/run-school.sh`` generates (``--haproxy-config``), on
loopback: what the proxy itself promises a school, checked with the websocket client (``tests/streamlit_client.py``)
and its cookies and reconnect. The replicas are a tiny Streamlit app (``tests/fixtures/replica_app.py``: which
replica, which cookies, how many runs), so no model loads (the school itself: ``tests/school.py``; the two
replicas of the real app: ``tests/test_school_app.py``).

- a tab's first ``GET /`` gets HAProxy's ``SERVERID`` cookie, and its websocket reaches that replica, with the
  app's own cookies (the student's id) and the tab's address in HAProxy's ``X-Forwarded-For``; the next tab goes to the other replica (``balance leastconn``);
- a replica killed (SIGKILL): its tab reconnects through HAProxy to the other one within 10 s, the same student;
- a full school (every replica at its ``maxconn``): HAProxy's own 503 after its 5 s queue, not a hang.

Skipped, with the install command, where Debian's ``haproxy`` is missing.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.school import HAPROXY, INSTALL_HINT, School
from tests.streamlit_client import StreamlitSession

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "fixtures" / "replica_app.py"
STUDENT = "c0ffee" * 5 + "00"


@pytest.fixture
def school(tmp_path, request):
    if HAPROXY is None:
        pytest.skip(INSTALL_HINT)
    built = School(tmp_path, APP, per_replica=getattr(request, "param", 20))
    yield built
    built.stop()


def shown(session: StreamlitSession) -> dict[str, str]:
    """What the tiny app drew: replica, student, runs."""
    return dict(text.split("=", 1) for text in session.last.texts() if "=" in text)


def test_a_tab_sticks_to_its_replica_and_a_killed_replicas_tab_reconnects_to_the_other(school):
    first = StreamlitSession(school.url, timeout=30, cookies={"llmx_student": STUDENT}, load_page=True)
    first.open("")
    where = shown(first)
    assert first.cookies["SERVERID"] == where["replica"] and where["student"] == STUDENT
    assert where["forwarded"] == "127.0.0.1"  # HAProxy's own X-Forwarded-For: the tab's address, for the key back-off
    second = StreamlitSession(school.url, timeout=30, load_page=True)
    second.open("")
    assert shown(second)["replica"] != where["replica"]  # leastconn: the next tab goes to the other replica
    for _ in range(3):  # the same tab's reruns stay on its replica and its session
        first.open("")
    assert shown(first)["replica"] == where["replica"] and shown(first)["runs"] == "4"

    started = time.monotonic()
    school.kill(where["replica"])
    first.reconnect(within_s=10)
    back = shown(first)
    assert time.monotonic() - started < 10
    assert back["replica"] != where["replica"] and back["student"] == STUDENT  # same student, the other replica
    assert first.cookies["SERVERID"] == back["replica"] and back["runs"] == "1"  # a new session there
    first.close()
    second.close()


@pytest.mark.parametrize("school", [1], indirect=True)
def test_a_full_school_gets_haproxys_503_not_a_hang(school):
    tabs = [StreamlitSession(school.url, timeout=30, load_page=True) for _ in range(2)]  # one websocket each
    for tab in tabs:
        tab.open("")
    assert {shown(tab)["replica"] for tab in tabs} == {"r1", "r2"}
    started = time.monotonic()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(school.url + "/", timeout=30)
    waited = time.monotonic() - started
    assert refused.value.code == 503 and 4 <= waited < 10, waited  # the 5 s queue, then HAProxy's own page
    for tab in tabs:
        tab.close()
