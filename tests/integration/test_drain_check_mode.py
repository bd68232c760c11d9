"""dra_node_drain's check mode reports a change whenever the real run would write anything.

A Node object of the test's own (no kubelet, no KWOK stage, no pods), already cordoned and already
carrying the driver exclusion label: the only write left for a drain is the annotation that remembers
the node was cordoned before it (dra.admin/cordoned-before-drain).
"""
import os

import pytest

from dra_objects import EXCLUSION_LABEL as EXCLUSION
CORDON_ANNOTATION = "dra.admin/cordoned-before-drain"


@pytest.fixture
def cordoned_node(cluster):
    name = "it-check-mode-%d" % os.getpid()
    cluster.apply({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "labels": {EXCLUSION: "true", "kubernetes.io/hostname": name}},
                   "spec": {"unschedulable": True}})
    yield name
    cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def annotations(cluster, node):
    return cluster.get_json("node", node)["metadata"].get("annotations") or {}


def test_check_mode_reports_the_annotation_only_write(cluster, cordoned_node):
    node = cordoned_node
    args = {"node": node, "driver_daemonsets": [], "timeout": 60, "poll_interval": 0.5}
    assert CORDON_ANNOTATION not in annotations(cluster, node)

    planned = cluster.run_module("dra.admin.dra_node_drain", args, check=True)
    assert planned["changed"] is True
    assert planned["was_cordoned"] is True and planned["eviction_order"] == [] and planned["driver_pods"] == []
    assert CORDON_ANNOTATION not in annotations(cluster, node), "check mode wrote the annotation"

    done = cluster.run_module("dra.admin.dra_node_drain", args)
    assert done["changed"] is True
    assert annotations(cluster, node)[CORDON_ANNOTATION] == "true"

    # Nothing left to write: both modes say so.
    assert cluster.run_module("dra.admin.dra_node_drain", args, check=True)["changed"] is False
    assert cluster.run_module("dra.admin.dra_node_drain", args)["changed"] is False
