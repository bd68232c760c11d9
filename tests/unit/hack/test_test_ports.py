"""The control-plane test's listening ports stay out of the kernel's ephemeral port range.

Its components restart many times; while one is down, any outgoing connection on the host can be
given its port as a source port (connect() picks from net.ipv4.ip_local_port_range), and the new
process then cannot bind it until that connection ends. With 36000-36999 (inside 32768-60999) the
roles' waits for the restarted component timed out on busy machines.
"""
import os
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position
import control_plane_helpers  # noqa: E402  pylint: disable=wrong-import-position


@pytest.mark.parametrize("port_range", [(32768, 60999), None], ids=["linux-default", "this-host"])
def test_control_plane_ports_are_below_the_ephemeral_range(port_range):
    first, last = control_plane_helpers.PORT_RANGE
    clusterlib.ensure_outside_ephemeral_range(first, last, "the control-plane test's ports", port_range)


def test_control_plane_ports_are_not_used_by_the_clusters_of_the_suite():
    first, last = control_plane_helpers.PORT_RANGE
    taken = [(10000, 16999), (20000, 22999), (31000, 31999)]  # DRA_IT_PORT_BASE choices, default, make demo
    assert not [r for r in taken if first <= r[1] and last >= r[0]]
