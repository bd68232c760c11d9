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
    taken = [(10000, 16999), (20000, 22999), (23000, 25999), (31000, 31999)]  # DRA_IT_PORT_BASE choices (first and
    # second shard), make demo
    assert not [r for r in taken if first <= r[1] and last >= r[0]]


def test_the_second_shards_ports_are_its_own_and_below_the_ephemeral_range():
    """hack/integration-per-version: the second shard's clusters from 23000 (three releases of 1000 ports), its
    control-plane tests from 26000 (three of 500); the first shard's from 20000 and 18000."""
    second = [(23000, 25999), (26000, 27499)]
    first = [(18000, 19499), (20000, 22999)]
    for low, high in second:
        clusterlib.ensure_outside_ephemeral_range(low, high, "the second shard's ports", (32768, 60999))
        assert not [r for r in first if low <= r[1] and high >= r[0]]
    with open(os.path.join(ROOT, "hack", "integration-per-version")) as fh:
        script = fh.read()
    assert "first=$((26000 + 500 * i))" in script and "base=23000" in script
