"""Claim, slice and drain-plan logic on objects recorded from the real local cluster.

tests/unit/fixtures/recorded/ holds what the API returned (Kubernetes v1.36.3):
claims-reserved.json      a template claim, a claim shared by two pods, a pending claim
claims-orphan-deallocating.json  the same after one sharer was deleted while
                          kube-controller-manager was stopped and the shared claim was deleted
pods.json / pods-after-delete.json, nodes.json, resourceslices.json,
driver-daemonsets.json / driver-pods.json (the driver role's DaemonSet)
"""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.claims import claims
from ansible_collections.dra.admin.plugins.module_utils.kube import pod_claims
from ansible_collections.dra.admin.plugins.module_utils.nodes import drain
from ansible_collections.dra.admin.plugins.module_utils.kube import evictions, pods
from ansible_collections.dra.admin.plugins.module_utils.kube import locations
from ansible_collections.dra.admin.plugins.module_utils.kube import selection
from ansible_collections.dra.admin.plugins.module_utils.kube import slices
from conftest import FIXTURES

REC = os.path.join(FIXTURES, "recorded")


def load(name):
    with open(os.path.join(REC, name)) as fh:
        return json.load(fh)["items"]


@pytest.fixture(scope="module")
def world():
    nodes = load("nodes.json")
    return {
        "nodes": dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in nodes),
        "slices": load("resourceslices.json"),
        "pods": load("pods.json"),
        "pods_after": load("pods-after-delete.json"),
        "claims": load("claims-reserved.json"),
        "claims_after": load("claims-orphan-deallocating.json"),
    }


def pod_index(pods):
    return dict((p["metadata"]["uid"], claims.pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                for p in pods)


def views(world, claims_key, pods_key):
    index = slices.device_index(world["slices"])
    pods = pod_index(world[pods_key])
    return dict((c["metadata"]["name"], claims.claim_view(c, world["nodes"], pods, index))
                for c in world[claims_key])


def pod_node(world, name):
    return next(p["spec"]["nodeName"] for p in world["pods"] if p["metadata"]["name"] == name)


def test_states_nodes_and_consumers_of_recorded_claims(world):
    v = views(world, "claims", "pods")
    generated = next(name for name in v if name.startswith("tmpl-gpu-"))
    assert v[generated]["state"] == "reserved"
    assert v[generated]["node_scope"] == "node" and v[generated]["nodes"] == [pod_node(world, "tmpl")]
    assert v["shared"]["state"] == "reserved"
    assert sorted(c["name"] for c in v["shared"]["consumers"]) == ["share-a", "share-b"]
    assert all(c["exists"] for c in v["shared"]["consumers"])
    assert v["impossible"]["state"] == "pending" and v["impossible"]["node_scope"] == "unallocated"
    assert not any(view["orphaned"] or view["problems"] for view in v.values())


def test_devices_are_published_by_the_nodes_slices(world):
    v = views(world, "claims", "pods")
    published = dict(((s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]), s["spec"]["nodeName"])
                     for s in world["slices"] for d in s["spec"]["devices"])
    for view in v.values():
        for dev in view["devices"]:
            assert published[(dev["driver"], dev["pool"], dev["device"])] in view["nodes"]


def test_deleted_consumer_and_deleted_claim_after_recording(world):
    v = views(world, "claims_after", "pods_after")
    shared = v["shared"]
    assert shared["state"] == "deallocating" and shared["deletion_requested"]
    assert [c["name"] for c in shared["missing_consumers"]] == ["share-b"]
    assert shared["orphaned"] is False  # share-a still holds it


def test_orphan_when_every_consumer_is_gone(world):
    claim = copy.deepcopy(next(c for c in world["claims"] if c["metadata"]["name"] == "shared"))
    view = claims.claim_view(claim, world["nodes"], {}, slices.device_index(world["slices"]))
    assert view["orphaned"] is True and len(view["missing_consumers"]) == 2


def test_slice_cross_check_flags_a_pool_on_another_node(world):
    claim = copy.deepcopy(next(c for c in world["claims"] if c["metadata"]["name"] == "shared"))
    node = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
    other = next(n for n in world["nodes"] if n != node)
    claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = [other]
    view = claims.claim_view(claim, world["nodes"], {}, slices.device_index(world["slices"]))
    assert view["nodes"] == [other]
    assert len(view["problems"]) == 1 and "published for node %s" % node in view["problems"][0]


def test_label_selector_allocation_is_matched_against_node_labels(world):
    claim = copy.deepcopy(next(c for c in world["claims"] if c["metadata"]["name"] == "shared"))
    claim["status"]["allocation"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(world["nodes"])[:2]}]}]}
    scope, nodes = claims.allocation_nodes(claim, world["nodes"])
    assert scope == "selector" and nodes == sorted(world["nodes"])[:2]


def test_no_node_selector_means_cluster_wide_never_a_guess(world):
    claim = copy.deepcopy(next(c for c in world["claims"] if c["metadata"]["name"] == "shared"))
    del claim["status"]["allocation"]["nodeSelector"]
    assert claims.allocation_nodes(claim, world["nodes"]) == ("cluster-wide", [])


def test_summaries_and_totals(world):
    v = list(views(world, "claims", "pods").values())
    totals = claims.claim_totals(v)
    assert totals == {"pending": 1, "allocated": 0, "reserved": 2, "deallocating": 0, "orphaned": 0, "total": 3}
    summary = claims.summarize_by_node(v)
    assert summary["<unallocated>"]["pending"] == 1
    assert sum(c["reserved"] for k, c in summary.items() if not locations.is_marker(k)) == 2


def test_gate_message_names_claims_and_consumers(world):
    v = views(world, "claims", "pods")
    node = v["shared"]["nodes"][0]
    held = [view for view in v.values() if node in view["nodes"] and claims.holds_devices(view)]
    message = claims.blocking_message(node, held)
    assert "on node %s" % node in message and "pods/share-a" in message and "pods/share-b" in message


def test_slice_pools_complete_and_per_node(world):
    pools = slices.summarize_pools(world["slices"])
    assert pools and all(p["complete"] and p["devices"] == 8 for p in pools)
    by_node = slices.devices_by_node(pools)
    assert set(by_node) == set(world["nodes"])
    every_node = dict(world["nodes"], ghost={})
    assert slices.nodes_without_slices(every_node, slices.node_publishers(world["slices"])) == ["ghost"]


def test_incomplete_pool_and_stale_generation():
    pool = {"name": "p", "generation": 2, "resourceSliceCount": 2}
    base = {"metadata": {"name": "s1"}, "spec": {"driver": "d", "nodeName": "n1", "devices": [{"name": "a"}], "pool": pool}}
    stale = copy.deepcopy(base)
    stale["metadata"]["name"] = "s0"
    stale["spec"]["pool"]["generation"] = 1
    pools = slices.summarize_pools([base, stale])
    assert pools[0]["complete"] is False and pools[0]["slices_seen"] == 1 and pools[0]["stale_slices"] == 1


def test_drain_plan_on_recorded_pods_and_driver(world):
    driver_ds = load("driver-daemonsets.json")[0]
    driver_pods = load("driver-pods.json")
    node = pod_node(world, "share-a")
    on_node = [p for p in world["pods"] + driver_pods if p["spec"].get("nodeName") == node]
    ref = "%s/%s" % (driver_ds["metadata"]["namespace"], driver_ds["metadata"]["name"])
    # Recorded test pods have no controller: without force they block the drain.
    plan = drain.plan_drain(on_node, driver_daemonsets=[ref])
    assert [p["pod"].split("/")[1] for p in plan["blocked"]] and not plan["claim_pods"]
    assert len(plan["driver_pods"]) == 1
    forced = drain.plan_drain(on_node, driver_daemonsets=[ref], force=True)
    assert sorted(p["metadata"]["name"] for p in forced["claim_pods"]) == sorted(
        p["metadata"]["name"] for p in world["pods"] if p["spec"].get("nodeName") == node)
    assert set(forced["unmanaged"]) == set(pods.pod_key(p) for p in forced["claim_pods"])
    assert selection.daemonset_excludes(driver_ds, selection.DEFAULT_EXCLUSION_LABEL)
    assert not selection.daemonset_excludes(driver_ds, "other/label")


def test_drain_skips_mirror_and_other_daemonset_pods_and_blocks_emptydir(world):
    pod = copy.deepcopy(world["pods"][0])
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    mirror = copy.deepcopy(pod)
    mirror["metadata"]["annotations"] = {drain.MIRROR_ANNOTATION: "x"}
    ds_pod = copy.deepcopy(pod)
    ds_pod["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "logger", "controller": True}]
    scratch = copy.deepcopy(pod)
    scratch["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    plan = drain.plan_drain([mirror, ds_pod, scratch])
    assert [s["reason"].split(" ")[0] for s in plan["skipped"]] == ["mirror", "DaemonSet"]
    assert "emptyDir" in plan["blocked"][0]["reason"]
    assert drain.plan_drain([scratch], delete_emptydir_data=True)["claim_pods"] == [scratch]
    assert drain.plan_drain([ds_pod], evict_daemonset_pods=True)["claim_pods"] == [ds_pod]


def test_claim_names_from_template_and_direct_references(world):
    tmpl = next(p for p in world["pods"] if p["metadata"]["name"] == "tmpl")
    share = next(p for p in world["pods"] if p["metadata"]["name"] == "share-a")
    assert pod_claims.pod_claims(tmpl)[0].startswith("tmpl-gpu-")
    assert pod_claims.pod_claims(share) == ["shared"]


def test_backoff_is_bounded():
    delays = evictions.backoff_delays()
    assert [next(delays) for attempt in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
