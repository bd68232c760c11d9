"""Who uses a claim, on objects recorded from the 1.37 cluster (tests/integration/test_claim_consumers.py with
DRA_IT_RECORD):

extended-resource-v1.37.2.json  a DeviceClass with extendedResourceName, a Deployment's pod asking for that
                                resource in its limits, the claim the scheduler made for it (its name only in the
                                pod's status.extendedResourceClaimStatus)
workload-claims-v1.37.2.json    a PodGroup listing the claim gang-gpu, its two pods (spec.schedulingGroup), and
                                the claim reserved for the group (DRAWorkloadResourceClaims, GenericWorkload on)
"""
import copy
import datetime
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.claims import claims
from ansible_collections.dra.admin.plugins.module_utils.kube import pod_claims
from ansible_collections.dra.admin.plugins.module_utils.devices import health
from ansible_collections.dra.admin.plugins.module_utils.devices import taints
from ansible_collections.dra.admin.plugins.module_utils.nodes import drain
from conftest import FIXTURES

REC = os.path.join(FIXTURES, "recorded")


def load(name):
    with open(os.path.join(REC, name)) as fh:
        items = json.load(fh)["items"]
    out = {}
    for item in items:
        out.setdefault(item["kind"], []).append(item)
    return out


@pytest.fixture
def extended():
    return load("extended-resource-v1.37.2.json")


@pytest.fixture
def workload():
    return load("workload-claims-v1.37.2.json")


def pods_index(pods):
    return dict((p["metadata"]["uid"], claims.pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                for p in pods)


def node_of(pod):
    return pod["spec"]["nodeName"]


def test_the_extended_resources_claim_is_the_pods_though_its_spec_names_none(extended):
    (pod,), (claim,) = extended["Pod"], extended["ResourceClaim"]
    assert not pod["spec"].get("resourceClaims")
    name = claim["metadata"]["name"]
    assert pod_claims.pod_claim_refs(pod) == [(None, name, pod_claims.SOURCE_EXTENDED_RESOURCE)]
    assert pod_claims.pod_claims(pod) == [name] == pod_claims.pod_claims(pod, [claim])
    assert pod_claims.pod_claim_names(pod) == {}  # containers name no claim: no health report can name it
    assert drain.plan_drain([pod])["claim_pods"] == [pod]
    view = claims.claim_view(claim, {node_of(pod): {}}, pods_index([pod]), ({}, set()))
    assert view["extended_resource_claim"] is True and view["state"] == "reserved"
    assert [(c["kind"], c["name"], c["exists"], c["node"]) for c in view["consumers"]] == [
        ("pod", pod["metadata"]["name"], True, node_of(pod))]
    assert view["nodes"] == [node_of(pod)] and claims.blocks_node(view, node_of(pod))


def test_the_extended_resources_claim_is_orphaned_only_once_its_pod_is_gone(extended):
    (pod,), (claim,) = extended["Pod"], extended["ResourceClaim"]
    alive = claims.claim_view(claim, {node_of(pod): {}}, pods_index([pod]), ({}, set()))
    gone = claims.claim_view(claim, {node_of(pod): {}}, {}, ({}, set()))
    assert alive["orphaned"] is False and gone["orphaned"] is True


def test_device_health_and_the_taint_dry_run_name_the_extended_resources_pod(extended):
    (pod,), (claim,) = extended["Pod"], extended["ResourceClaim"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    users = health.device_users([claim], pods_index([pod]), health.pods_naming_claims([pod]))
    key = (result["driver"], result["pool"], result["device"])
    assert users[key]["pods"] == [{"namespace": pod["metadata"]["namespace"], "name": pod["metadata"]["name"],
                                   "node": node_of(pod)}]
    now = datetime.datetime(2026, 11, 24, 20, 0, tzinfo=datetime.timezone.utc)
    report = health.device_health([], [claim], [pod], now)
    assert report["seen"]["pod_status"] == 0  # the 1.37 kubelet writes no health for this claim
    affected = taints.affected_claims([claim], [dict(zip(("driver", "pool", "device"), key))],
                                      {"key": "k", "effect": "NoExecute"}, pods_index([pod]))
    assert taints.pod_names(affected) == ["%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"])]


def test_the_pod_groups_claim_is_held_by_the_group_whatever_happens_to_its_pods(workload):
    (group,), (claim,), pods = workload["PodGroup"], workload["ResourceClaim"], workload["Pod"]
    node = node_of(pods[0])
    assert [r["resource"] for r in claim["status"]["reservedFor"]] == ["podgroups"]
    assert all(pod_claims.pod_claims(p) == ["gang-gpu"] for p in pods)
    assert pod_claims.pod_claims(pods[0], [claim]) == ["gang-gpu"]  # reserved for the group, not the pod
    others = {("scheduling.k8s.io", "podgroups"): {group["metadata"]["uid"]}}
    view = claims.claim_view(claim, {node: {}}, pods_index(pods), ({}, set()), others)
    (consumer,) = view["consumers"]
    assert (consumer["kind"], consumer["name"], consumer["exists"], consumer["reserved"]) == \
        ("pod_group", "gang", True, True)
    assert view["orphaned"] is False and view["nodes"] == [node]
    # The node's pods use it: it blocks; once they are gone it does not, and it is reported with its consumer.
    assert claims.blocks_node(view, node, pod_claims.claims_used_by(pods))
    assert not claims.blocks_node(view, node, set()) and claims.non_pod_claims([view], node, set()) == [view]
    # Without the pods (evicted) the group keeps it; without the group it is orphaned.
    assert claims.claim_view(claim, {node: {}}, {}, ({}, set()), others)["orphaned"] is False
    gone = {("scheduling.k8s.io", "podgroups"): set()}
    assert claims.claim_view(claim, {node: {}}, {}, ({}, set()), gone)["orphaned"] is True


def test_the_pod_group_listing_the_claim_holds_it_after_its_reservation_is_dropped(workload):
    (group,), (claim,) = workload["PodGroup"], workload["ResourceClaim"]
    unreserved = copy.deepcopy(claim)
    del unreserved["status"]["reservedFor"]
    listed = claims.claims_listed_by_groups([group])
    assert listed == {("workload", "gang-gpu"): [claims.pod_group_ref(group)]}
    view = claims.claim_view(unreserved, {}, {}, ({}, set()), {}, listed)
    assert view["state"] == "allocated" and view["orphaned"] is False
    assert [(c["kind"], c["reserved"], c["exists"]) for c in view["consumers"]] == [("pod_group", False, True)]
    assert "podgroups.scheduling.k8s.io/gang" in claims.non_pod_message(view)
