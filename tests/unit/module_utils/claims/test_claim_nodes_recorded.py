"""Claims on nodes, on whole scenarios recorded from the real cluster (Kubernetes v1.36.3).

tests/unit/fixtures/recorded/scenario-*.json were written by
tests/integration/test_claims_on_nodes.py with DRA_IT_RECORD=<dir>: the test's
claims and pods, the cluster's slices and nodes, and the pods as the server's
Table (what the modules read). Allocations are the real scheduler's:
network-attached   slice with allNodes; the allocation has no node selector
shared-pool        one claim on a pool whose slice selects two nodes, a pod on each
per-device         a perDeviceNodeSelection slice; a pod on node-000001
daemonset          a DaemonSet pod with a claim from a template
"""
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.claims import claims
from ansible_collections.dra.admin.plugins.module_utils.kube import locations
from ansible_collections.dra.admin.plugins.module_utils.kube import slices
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import POD_NODE_COLUMN, pod_index
from conftest import FIXTURES, recorded_by_kind

REC = os.path.join(FIXTURES, "recorded")


class TableApi(DraApi):
    """DraApi answering every LIST with the recorded page (Table or plain list)."""

    def __init__(self, page):
        super(TableApi, self).__init__(api_client=object())
        self.page = page
        self.asked = []

    def get(self, path, query=None, accept="application/json"):
        self.requests += 1
        self.asked.append((path, dict(query or {}), accept))
        return self.page


def scenario(name):
    return recorded_by_kind("scenario-%s.json" % name)


def world(name, pods_from_table=True):
    s = scenario(name)
    page = s["Table"][0] if pods_from_table else {"kind": "PodList", "items": s["Pod"], "metadata": {}}
    return {
        "claims": s.get("ResourceClaim", []), "pods": s.get("Pod", []),
        "nodes": dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in s["Node"]),
        "slices": s.get("ResourceSlice", []),
        "index": pod_index(TableApi(page)),
    }


def views(w):
    index = slices.device_index(w["slices"])
    return [claims.claim_view(c, w["nodes"], w["index"], index) for c in w["claims"]]


@pytest.mark.parametrize("from_table", [True, False])
def test_pods_are_placed_from_the_table_or_a_plain_list(from_table):
    w = world("shared-pool", pods_from_table=from_table)
    assert w["index"] == dict((p["metadata"]["uid"], (p["spec"]["nodeName"], False)) for p in w["pods"])


def test_the_pod_list_asks_for_the_table_with_metadata():
    api = TableApi(scenario("daemonset")["Table"][0])
    pod_index(api, ["ns1", "ns2"])
    assert [a[0] for a in api.asked] == ["/api/v1/namespaces/ns1/pods", "/api/v1/namespaces/ns2/pods"]
    assert all(q["includeObject"] == "Metadata" and "as=Table" in accept for _p, q, accept in api.asked)


def test_a_table_without_the_node_column_is_an_error():
    table = json.loads(json.dumps(scenario("daemonset")["Table"][0]))
    table["columnDefinitions"] = [c for c in table["columnDefinitions"] if c["name"] != POD_NODE_COLUMN]
    with pytest.raises(Exception) as err:
        pod_index(TableApi(table))
    assert "no column Node" in str(err.value)


def test_recorded_network_attached_claim_is_on_the_node_of_its_pod():
    w = world("network-attached")
    (view,) = views(w)
    node = w["pods"][0]["spec"]["nodeName"]
    assert view["node_scope"] == locations.CLAIM_CLUSTER_WIDE and view["allocation_nodes"] == []
    assert view["nodes"] == [node] and view["problems"] == []
    assert claims.blocks_node(view, node)
    assert not any(claims.blocks_node(view, other) for other in w["nodes"] if other != node)


def test_recorded_shared_claim_is_on_both_nodes_until_one_pod_goes():
    w = world("shared-pool")
    (view,) = views(w)
    pod_nodes = sorted(p["spec"]["nodeName"] for p in w["pods"])
    assert view["node_scope"] == locations.CLAIM_SELECTOR and view["allocation_nodes"] == pod_nodes
    assert view["nodes"] == pod_nodes and all(claims.blocks_node(view, n) for n in pod_nodes)
    assert all(claims.summarize_by_node([view])[n]["reserved"] == 1 for n in pod_nodes)
    gone, stays = w["pods"]
    w["index"].pop(gone["metadata"]["uid"])
    (after,) = views(w)
    assert after["nodes"] == [stays["spec"]["nodeName"]]
    assert not claims.blocks_node(after, gone["spec"]["nodeName"])
    assert [c["name"] for c in after["missing_consumers"]] == [gone["metadata"]["name"]]


def test_recorded_per_device_slice_and_its_claim():
    w = world("per-device")
    part = next(s for s in w["slices"] if s["spec"].get("perDeviceNodeSelection"))
    driver = part["spec"]["driver"]
    by_node = slices.devices_by_node(slices.summarize_pools(w["slices"]))
    assert by_node["node-000000"][driver]["devices"] == 2 and by_node["node-000001"][driver]["devices"] == 1
    assert by_node[locations.SLICE_ALL_NODES][driver]["devices"] == 1
    assert driver not in by_node["node-000002"]
    (view,) = views(w)
    assert view["node_scope"] == locations.CLAIM_PINNED and view["nodes"] == ["node-000001"]
    assert view["problems"] == []


def test_recorded_daemonset_pod_claim_is_reported_not_blocking():
    w = world("daemonset")
    (view,) = views(w)
    node = w["pods"][0]["spec"]["nodeName"]
    assert view["consumers"][0]["daemonset"] is True and view["nodes"] == [node]
    assert not claims.blocks_node(view, node) and claims.daemonset_claims([view], node) == [view]
