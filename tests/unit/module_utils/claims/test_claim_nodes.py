"""Which claims are on a node, and which nodes a slice's devices are on.

Built from the objects recorded from the real cluster (tests/unit/fixtures/recorded/,
see test_claims_views.py), changed only where a scenario needs it: a claim's
allocation without a node selector (network-attached devices), a pool shared by
two nodes, a consumer that is a DaemonSet pod, slices with perDeviceNodeSelection.
"""
import copy
import importlib
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.claims import claims
from ansible_collections.dra.admin.plugins.module_utils.kube import locations as location_names
from ansible_collections.dra.admin.plugins.module_utils.kube import slices as slice_rules
from conftest import FIXTURES

REC = os.path.join(FIXTURES, "recorded")
A, B, C = "node-000000", "node-000001", "node-000002"


def load(name):
    with open(os.path.join(REC, name)) as fh:
        return json.load(fh)["items"]


@pytest.fixture(scope="module")
def rec():
    pods = dict((p["metadata"]["name"], p) for p in load("pods.json"))
    return {
        "nodes": dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in load("nodes.json")),
        "slices": load("resourceslices.json"),
        "pods": pods,
        "driver_pods": load("driver-pods.json"),
        "shared": next(c for c in load("claims-reserved.json") if c["metadata"]["name"] == "shared"),
    }


def index(*pods):
    return dict((p["metadata"]["uid"], claims.pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                for p in pods)


def moved(pod, node):
    pod = copy.deepcopy(pod)
    pod["spec"]["nodeName"] = node
    return pod


def reserved_by(claim, *pods):
    claim = copy.deepcopy(claim)
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                                      for p in pods]
    return claim


def view(rec, claim, pods):
    return claims.claim_view(claim, rec["nodes"], pods, slice_rules.device_index(rec["slices"]))


def network_attached(claim):
    claim = copy.deepcopy(claim)
    del claim["status"]["allocation"]["nodeSelector"]
    return claim


def shared_pool(claim, nodes):
    """The allocation a pool offered to several nodes gets: a label selector, not matchFields."""
    claim = copy.deepcopy(claim)
    claim["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}]}
    return claim


# --- network-attached devices ---------------------------------------------------------------

def test_network_attached_claim_is_on_the_node_of_its_pod(rec):
    pod = rec["pods"]["tmpl"]  # runs on B
    claim = reserved_by(network_attached(rec["shared"]), pod)
    v = view(rec, claim, index(pod))
    assert v["node_scope"] == location_names.CLAIM_CLUSTER_WIDE and v["allocation_nodes"] == []
    assert v["nodes"] == [B] and v["consumers"][0]["node"] == B
    assert claims.blocks_node(v, B) and not claims.blocks_node(v, A)
    assert claims.claim_selected(v, node=B) and not claims.claim_selected(v, node=A)


def test_network_attached_claim_without_a_live_pod_is_on_no_node(rec):
    claim = reserved_by(network_attached(rec["shared"]), rec["pods"]["tmpl"])
    v = view(rec, claim, {})
    assert v["nodes"] == [] and v["orphaned"]
    assert claims.summarize_by_node([v]) == {"<cluster-wide>": claims.summarize_by_node([v])["<cluster-wide>"]}


# --- a claim shared by pods on two nodes ----------------------------------------------------

def test_shared_claim_is_on_every_node_whose_pods_use_it(rec):
    on_a, on_b = rec["pods"]["share-a"], moved(rec["pods"]["share-b"], B)
    claim = reserved_by(shared_pool(rec["shared"], [A, B]), on_a, on_b)
    v = view(rec, claim, index(on_a, on_b))
    assert v["node_scope"] == location_names.CLAIM_SELECTOR and v["allocation_nodes"] == [A, B]
    assert v["nodes"] == [A, B]
    summary = claims.summarize_by_node([v])
    assert summary[A]["reserved"] == 1 and summary[B]["reserved"] == 1


def test_shared_claim_used_only_elsewhere_does_not_hold_the_node(rec):
    on_a, on_b = rec["pods"]["share-a"], moved(rec["pods"]["share-b"], B)
    claim = reserved_by(shared_pool(rec["shared"], [A, B]), on_b)  # the pod on A was evicted
    v = view(rec, claim, index(on_b))
    assert v["nodes"] == [B]
    assert not claims.blocks_node(v, A) and claims.blocks_node(v, B)
    assert v["problems"] == []


def test_node_local_claim_without_live_consumers_stays_on_its_nodes(rec):
    claim = shared_pool(rec["shared"], [A, B])
    v = view(rec, claim, {})  # both consumers gone, reservation not yet dropped
    assert v["orphaned"] and v["nodes"] == [A, B] and claims.blocks_node(v, A)
    allocated = copy.deepcopy(rec["shared"])
    allocated["status"]["reservedFor"] = []
    v = view(rec, allocated, {})
    assert v["state"] == claims.ALLOCATED and v["nodes"] == [A] and claims.blocks_node(v, A)


def test_consumer_outside_a_pinned_allocation_is_a_problem(rec):
    stray = moved(rec["pods"]["share-b"], C)
    claim = reserved_by(rec["shared"], rec["pods"]["share-a"], stray)  # pinned to A
    v = view(rec, claim, index(rec["pods"]["share-a"], stray))
    assert v["nodes"] == [A, C]
    assert v["problems"] == ["consumer pods/share-b runs on node %s, outside the allocation's node(s) %s" % (C, A)]


# --- DaemonSet pods --------------------------------------------------------------------------

def test_claims_of_daemonset_pods_are_reported_not_blocking(rec):
    agent = next(p for p in rec["driver_pods"] if p["spec"]["nodeName"] == A)
    claim = reserved_by(rec["shared"], agent)
    v = view(rec, claim, index(agent))
    assert v["consumers"][0]["daemonset"] is True and v["nodes"] == [A]
    assert not claims.blocks_node(v, A)
    assert claims.daemonset_claims([v], A) == [v]
    with_workload = reserved_by(rec["shared"], agent, rec["pods"]["share-a"])
    v = view(rec, with_workload, index(agent, rec["pods"]["share-a"]))
    assert claims.blocks_node(v, A) and claims.daemonset_claims([v], A) == []


def test_pod_ref_reads_the_pod_table_node_cell():
    assert claims.pod_ref("<none>", None) == (None, False)
    assert claims.pod_ref("", None) == (None, False)
    assert claims.pod_ref("n1", [{"kind": "DaemonSet", "name": "x", "controller": True}]) == ("n1", True)
    assert claims.pod_ref("n1", [{"kind": "DaemonSet", "name": "x"}]) == ("n1", False)


def test_gate_message_names_the_consumer_node(rec):
    pod = rec["pods"]["tmpl"]
    v = view(rec, reserved_by(network_attached(rec["shared"]), pod), index(pod))
    assert "pods/tmpl on %s" % B in claims.blocking_message(B, [v])


# --- where slices' devices are ----------------------------------------------------------------

def per_device(rec):
    """One recorded slice re-published with perDeviceNodeSelection: devices on A, on B, and shared."""
    item = copy.deepcopy(next(s for s in rec["slices"] if s["spec"]["nodeName"] == A))
    spec = item["spec"]
    del spec["nodeName"]
    spec["perDeviceNodeSelection"] = True
    spec["pool"]["name"] = "partitioned"
    for i, device in enumerate(spec["devices"]):
        if i < 4:
            device["nodeName"] = A
        elif i < 6:
            device["nodeName"] = B
        elif i == 6:
            device["allNodes"] = True
        else:
            device["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [A, B]}]}]}
    return item


def test_per_device_slice_counts_under_the_nodes_its_devices_name(rec):
    item = per_device(rec)
    assert slice_rules.slice_locations(item) == {A: 4, B: 2, location_names.SLICE_ALL_NODES: 1,
                                                 location_names.SLICE_NODE_SELECTOR: 1}
    assert slice_rules.slice_nodes(item) == [A, B]
    pools = slice_rules.summarize_pools([item])
    by_node = slice_rules.devices_by_node(pools)
    driver = item["spec"]["driver"]
    assert by_node[A][driver]["devices"] == 4 and by_node[B][driver]["devices"] == 2
    assert by_node[location_names.SLICE_ALL_NODES][driver]["devices"] == 1
    # The allNodes device covers C too: the driver publishes for every node. Without it, the selector
    # device still covers A and B by their hostname labels, and C is left.
    assert slice_rules.nodes_without_slices(rec["nodes"], slice_rules.node_publishers([item]), driver) == []
    no_all_nodes = copy.deepcopy(item)
    del no_all_nodes["spec"]["devices"][6]
    assert slice_rules.nodes_without_slices(rec["nodes"], slice_rules.node_publishers([no_all_nodes]), driver) == [C]
    assert slice_rules.slices_for_node([item], B, driver) == [item]
    assert slice_rules.slices_for_node([item], C, driver) == []


def test_node_keeps_its_own_slice_devices_beside_a_per_device_pool(rec):
    slices = rec["slices"] + [per_device(rec)]
    by_node = slice_rules.devices_by_node(slice_rules.summarize_pools(slices))
    driver = slices[0]["spec"]["driver"]
    assert by_node[A][driver]["devices"] == 8 + 4 and by_node[C][driver]["devices"] == 8
    assert sorted(by_node[B][driver]["pools"]) == sorted([B, "partitioned"])


def test_claim_on_a_per_device_pool_is_cross_checked_per_device(rec):
    item = per_device(rec)
    claim = copy.deepcopy(rec["shared"])
    result = claim["status"]["allocation"]["devices"]["results"][0]
    result["pool"] = "partitioned"
    result["device"] = item["spec"]["devices"][4]["name"]  # a device on B
    v = claims.claim_view(claim, rec["nodes"], {}, slice_rules.device_index(rec["slices"] + [item]))
    assert v["problems"] == ["device %s/partitioned/%s: allocated for node(s) %s but it is published for node %s"
                             % (result["driver"], result["device"], A, B)]
    result["device"] = item["spec"]["devices"][0]["name"]  # a device on A
    v = claims.claim_view(claim, rec["nodes"], {}, slice_rules.device_index(rec["slices"] + [item]))
    assert v["problems"] == []


def test_stale_generations_are_left_out_everywhere(rec):
    old = copy.deepcopy(next(s for s in rec["slices"] if s["spec"]["nodeName"] == B))
    new = per_device(rec)
    new["spec"]["pool"]["name"] = old["spec"]["pool"]["name"]
    new["spec"]["pool"]["generation"] = old["spec"]["pool"]["generation"] + 1
    locations, pools = slice_rules.device_index([old, new])
    driver = old["spec"]["driver"]
    assert pools == {slice_rules.pool_key(old)}
    assert set(locations.values()) == set(slice_rules.slice_locations(new))
    assert slice_rules.current_slices([old, new]) == [new]
    assert slice_rules.slices_for_node([old, new], B, driver) == [new]


@pytest.mark.parametrize("module,names", [
    ("dra_claims_info", location_names.CLAIM_SCOPES + location_names.CLAIM_MARKERS),
    ("dra_cluster_info", location_names.SLICE_MARKERS),
    ("dra_slices_info", location_names.SLICE_MARKERS),
])
def test_return_docs_name_the_locations_the_code_reports(module, names):
    doc = importlib.import_module("ansible_collections.dra.admin.plugins.modules." + module).RETURN
    for name in names:
        assert "C(%s)" % name in doc
    assert "per-device-node-selection>" not in doc


def test_newest_generation_per_pool_has_one_rule():
    assert slice_rules.newest_by_pool([("a", 1), ("b", 4), ("a", 3), ("a", 2)]) == {"a": 3, "b": 4}


def test_device_index_keeps_the_newest_generation_whatever_the_order(rec):
    old = copy.deepcopy(next(s for s in rec["slices"] if s["spec"]["nodeName"] == B))
    new = copy.deepcopy(old)
    new["spec"]["pool"]["generation"] = old["spec"]["pool"]["generation"] + 1
    new["spec"]["nodeName"] = A
    for order in ([old, new], [new, old]):
        locations, pools = slice_rules.device_index(order)
        assert pools == {slice_rules.pool_key(old)} and set(locations.values()) == {A}
        assert slice_rules.current_slices(order) == [new]
