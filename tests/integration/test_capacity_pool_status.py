"""dra_capacity_info with pool_status on a cluster that serves ResourcePoolStatusRequest (the releases the catalog
gives an API version for gate DRAResourcePoolStatus: 1.36 and 1.37, resource.k8s.io/v1alpha3): one more two-node
cluster with the gate (`hack/cluster/up --feature-gates`, which adds the runtime-config) and, where the release has
it, DRAPartitionableDevicesType; claims allocated by the real scheduler, and the real kube-controller-manager
answering the module's request. Both sources must give the same counts for the same pools, the request must be gone
afterwards, and check mode must create none.

On releases whose pool status reports the per-pool views (1.37): a partitionable pool (a slice of shared counters
and a slice of devices consuming them, grouped by a partitionTypeAttribute, one of them under a NoSchedule
DeviceTaintRule) and a pool of one shared device with
consumable capacity, each partly allocated; the controller's partitionSummary and shareableSummary must agree with
the computed partition types and capacity.

The shared `cluster` (gate off) gets the quick "not served" path in test_capacity.py."""
import os
import sys

import pytest

from conftest import own_cluster
from dra_objects import DRIVER, claim, device_class, device_request, pod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

gate_catalog = clusterlib.collection_module("releases.catalog")
capacity_rules = clusterlib.collection_module("claims.capacity")
VERSIONS = clusterlib.supported_k8s_versions()
SERVED = [v for v in VERSIONS if gate_catalog.parse_minor(v) in gate_catalog.gate_api_versions(capacity_rules.POOL_STATUS_GATE)]
MODULE = "dra.admin.dra_capacity_info"
PARTITIONS = "partitions.example.com"
SHARED = "shared.example.com"
PROFILE = PARTITIONS + "/profile"
# device -> (partition type, counter units it consumes) of one 8-unit physical device
PARTITION_DEVICES = {"full": ("full", 8), "half-0": ("half", 4), "half-1": ("half", 4),
                     "quarter-0": ("quarter", 2), "quarter-1": ("quarter", 2), "quarter-2": ("quarter", 2),
                     "quarter-3": ("quarter", 2)}


def gates_for(version):
    """The pool status gate, and DRAPartitionableDevicesType where the release has it."""
    wanted = [capacity_rules.POOL_STATUS_GATE, "DRAPartitionableDevicesType"]
    return ",".join("%s=true" % g for g in wanted if gate_catalog.gate_info(version, g) is not None)


@pytest.fixture(scope="module", params=SERVED)
def pool_status_cluster(request):
    with own_cluster("it-pools", request.param, 2, 500, gates_for(request.param)) as cluster:
        yield cluster


def make_namespace(cluster, namespace):
    cluster.kubectl("create", "namespace", namespace)
    cluster.wait_for_default_service_account(namespace)


def wait_allocated(cluster, namespace, count):
    def allocated():
        found = cluster.get_json("resourceclaims", "-n", namespace)["items"]
        return len(found) == count and all((c.get("status") or {}).get("allocation") for c in found)
    cluster.wait_until(allocated, 120, f"{count} claims allocated in {namespace}")


def test_pool_status_and_computed_counts_agree(pool_status_cluster):
    cluster = pool_status_cluster
    v = cluster.resource_version
    namespace = "pools"
    make_namespace(cluster, namespace)
    objects = []
    for i in range(3):
        objects += [claim(v, namespace, f"c{i}", device_class=DRIVER), pod(namespace, f"p{i}", claim_name=f"c{i}")]
    cluster.apply(objects)
    wait_allocated(cluster, namespace, 3)

    out = cluster.run_module(MODULE, {"pool_status": True, "driver": DRIVER})
    status = out["pool_status"]
    assert status["source"] == "ResourcePoolStatusRequest" and status["skipped"] is None, status
    assert status["disagreements"] == [], status
    pools = sorted(k for k in out["by_pool"] if k.startswith(DRIVER + "/"))
    assert pools and sorted(status["pools"]) == pools
    for key in pools:
        theirs, ours = status["pools"][key], out["by_pool"][key]
        assert (theirs["totalDevices"], theirs["allocatedDevices"], theirs["availableDevices"]) == (
            ours["total"], ours["allocated"], ours["free"])
    assert sum(status["pools"][k]["allocatedDevices"] for k in pools) == 3
    assert out["pool_status_served"] is True and out["changed"] is False and len(status["requests"]) == 1
    assert cluster.get_json("resourcepoolstatusrequests")["items"] == []

    checked = cluster.run_module(MODULE, {"pool_status": True, "driver": DRIVER}, check=True)
    assert checked["pool_status"]["skipped"].startswith("check mode") and checked["pool_status"]["pools"] == {}
    assert checked["by_pool"] == out["by_pool"]
    assert cluster.get_json("resourcepoolstatusrequests")["items"] == []


def partition_slices(v, node):
    """A pool on `node` of one physical device (8 counter units) as two slices: its counters, and its partitions
    (grouped by PROFILE), as a driver publishes partitionable devices from 1.35 on."""
    pool = {"name": "gpu-0", "generation": 1, "resourceSliceCount": 2}
    counters = {"apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceSlice",
                "metadata": {"name": "it-partitions-counters"},
                "spec": {"driver": PARTITIONS, "pool": pool, "nodeName": node,
                         "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]}}
    devices = [{"name": name, "attributes": {"profile": {"string": kind}},
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": str(units)}}}]}
               for name, (kind, units) in sorted(PARTITION_DEVICES.items())]
    partitions = {"apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceSlice",
                  "metadata": {"name": "it-partitions-devices"},
                  "spec": {"driver": PARTITIONS, "pool": pool, "nodeName": node, "partitionTypeAttribute": PROFILE,
                           "devices": devices}}
    return [counters, partitions]


def shared_slice(v, node):
    """One device many claims can share, with 10Gi of consumable memory (a claim without a request takes 1Gi)."""
    return {"apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceSlice", "metadata": {"name": "it-shared"},
            "spec": {"driver": SHARED, "pool": {"name": "shared-0", "generation": 1, "resourceSliceCount": 1},
                     "nodeName": node,
                     "devices": [{"name": "shared-0", "allowMultipleAllocations": True,
                                  "capacity": {"memory": {"value": "10Gi", "requestPolicy": {
                                      "default": "1Gi", "validRange": {"min": "1Gi"}}}}}]}}


def taint_rule(version, driver, pool, device):
    """A NoSchedule DeviceTaintRule on one device, in the resource.k8s.io version the release serves it in."""
    api_version = gate_catalog.device_taint_rule_support(version)["api_version"]
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "DeviceTaintRule",
            "metadata": {"name": f"it-pools-{device}"},
            "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                     "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}}}


def capacity_claim(v, namespace, name, memory):
    body = claim(v, namespace, name, device_class=SHARED)
    body["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": memory}}
    return body


@pytest.mark.parametrize("pool_status_cluster", [v for v in SERVED if capacity_rules.pool_status_views(v)], indirect=True)
def test_pool_status_views_agree_with_the_computed_partitions_and_capacity(pool_status_cluster):
    cluster = pool_status_cluster
    if not capacity_rules.pool_status_views(cluster.version):
        pytest.fail(f"{cluster.version}: the pool status has no per-pool views before "
                    f"1.{capacity_rules.POOL_STATUS_VIEWS_FROM}; this test is only parametrized for releases that have them")
    v = cluster.resource_version
    namespace = "views"
    make_namespace(cluster, namespace)
    node = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])[0]
    half = claim(v, namespace, "half", device_class=PARTITIONS)
    half["spec"]["devices"]["requests"] = [device_request(
        v, selector=f'device.attributes["{PARTITIONS}"].profile == "half"', device_class=PARTITIONS)]
    quarter = claim(v, namespace, "quarter", device_class=PARTITIONS)
    quarter["spec"]["devices"]["requests"] = [device_request(
        v, selector=f'device.attributes["{PARTITIONS}"].profile == "quarter"', device_class=PARTITIONS)]
    cluster.apply(partition_slices(v, node) + [
        shared_slice(v, node), device_class(v, PARTITIONS), device_class(v, SHARED), half, quarter,
        capacity_claim(v, namespace, "share-a", "2Gi"), capacity_claim(v, namespace, "share-b", "3Gi"),
        taint_rule(cluster.version, PARTITIONS, "gpu-0", "quarter-3")])
    cluster.apply([pod(namespace, name, claim_name=name, node=node)
                   for name in ("half", "quarter", "share-a", "share-b")])
    wait_allocated(cluster, namespace, 4)

    out = cluster.run_module(MODULE, {"pool_status": True})
    status = out["pool_status"]
    assert status["source"] == "ResourcePoolStatusRequest" and status["disagreements"] == [], status
    # 8 units: a half (4) and a quarter (2) allocated leave 2: nothing more of full or half, one more quarter.
    summary = dict((p["type"], (p["total"], p["allocatable"]))
                   for p in status["pools"][PARTITIONS + "/gpu-0"]["partitionSummary"])
    assert summary == {"full": (1, 0), "half": (2, 0), "quarter": (4, 1)}, status["pools"]
    assert [p["attribute"] for p in status["pools"][PARTITIONS + "/gpu-0"]["partitionSummary"]] == [PROFILE] * 3
    # The rule's device counts as unavailable on both sides.
    assert status["pools"][PARTITIONS + "/gpu-0"]["unavailableDevices"] == 1
    assert out["by_pool"][PARTITIONS + "/gpu-0"]["tainted"] == 1
    shared = status["pools"][SHARED + "/shared-0"]["shareableSummary"]
    assert shared["capacity"][0]["consumed"] == "5Gi" and shared["partiallyAvailableDevices"] == 1, shared
    ours = out["by_pool"][SHARED + "/shared-0"]["capacity"]["memory"]
    assert (ours["used"], ours["left"]) == (5 * 2 ** 30, 5 * 2 ** 30)
    assert out["by_pool"][PARTITIONS + "/gpu-0"]["free"] == 2  # each remaining untainted quarter fits on its own
    assert len(status["requests"]) == len(out["by_driver"]) and out["changed"] is False
    assert cluster.get_json("resourcepoolstatusrequests")["items"] == []
