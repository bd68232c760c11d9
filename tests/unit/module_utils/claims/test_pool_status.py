"""The pool status comparison on Kubernetes 1.37's ResourcePoolStatusRequest (second alpha: partitionSummary,
shareableSummary, taints counted as unavailable), from objects recorded on a real v1.37.2 cluster.

fixtures/capacity/pool-status-v1.37.2.json: `hack/cluster/up --k8s-version v1.37.2 --nodes 2 --feature-gates
DRAResourcePoolStatus=true,DRAPartitionableDevicesType=true`, then the objects of
tests/integration/test_capacity_pool_status.py: a partitionable pool partitions.example.com/gpu-0 on node-000000 (a
slice with one counter set of 8 units, a slice of seven partitions grouped by partitions.example.com/profile: full 8,
half 4 x2, quarter 2 x4) with a half and a quarter allocated and quarter-3 under a NoSchedule DeviceTaintRule; a
shared device shared.example.com/shared-0 (10Gi
consumable memory) shared by claims of 2Gi and 3Gi; and one example-driver claim (gpu.example.com). Recorded with
kubectl of the same release: discovery, /version, the four v1 LISTs (DeviceTaintRules too), and for each driver a
ResourcePoolStatusRequest as created (keyed by driver under "POST ...") and as kube-controller-manager answered it.
"""
import copy
import json
import os
from fractions import Fraction

import hypothesis
import hypothesis.strategies as st

from ansible_collections.dra.admin.plugins.module_utils.claims import capacity
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import gather_capacity
from conftest import FIXTURES

CAPACITY = os.path.join(FIXTURES, "capacity")
PATH = "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"
PARTITIONS = "partitions.example.com/gpu-0"
SHARED = "shared.example.com/shared-0"


def recorded(name="pool-status-v1.37.2.json"):
    with open(os.path.join(CAPACITY, name)) as handle:
        return json.load(handle)


class Replay137(DraApi):
    """Answers GETs from the recording; a POST returns the request recorded for its driver; keeps every write."""

    def __init__(self, recording=None):
        super(Replay137, self).__init__(api_client=object())
        self.recorded = recording or recorded()
        self.writes = []

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        self.requests += 1
        if method == "POST":
            self.writes.append((method, path, body))
            return copy.deepcopy(self.recorded["POST " + path][body["spec"]["driver"]])
        if method != "GET":
            self.writes.append((method, path, body))
            return {}
        return copy.deepcopy(self.recorded[path])


def answered(recording, driver):
    name = recording["POST " + PATH][driver]["metadata"]["name"]
    return recording[PATH + "/" + name]["status"]


def run(api):
    return gather_capacity(api, pool_status=True, clock=lambda: 0.0, sleep=lambda s: None)


def test_recorded_137_pool_status_agrees_with_every_computed_count_and_view():
    api = Replay137()
    out = run(api)
    status = out["pool_status"]
    assert status["source"] == "ResourcePoolStatusRequest" and status["disagreements"] == []
    assert len(status["requests"]) == 3 and [w[0] for w in api.writes] == ["POST", "DELETE"] * 3
    assert api.writes[0][2]["apiVersion"] == "resource.k8s.io/v1alpha3"  # the version discovery lists it in
    summary = dict((p["type"], (p["total"], p["allocatable"])) for p in status["pools"][PARTITIONS]["partitionSummary"])
    assert summary == {"full": (1, 0), "half": (2, 0), "quarter": (4, 1)}
    # The rule's device is unavailable on both sides; the controller's availableDevices ignores counters (4),
    # free means allocatable now (the two untainted quarters left, each on its own).
    assert status["pools"][PARTITIONS]["unavailableDevices"] == 1 and out["by_pool"][PARTITIONS]["tainted"] == 1
    assert status["pools"][PARTITIONS]["availableDevices"] == 4 and out["by_pool"][PARTITIONS]["free"] == 2
    assert out["by_pool"][SHARED]["capacity"]["memory"] == {
        "total": 10 * 2 ** 30, "used": 5 * 2 ** 30, "left": 5 * 2 ** 30}


def test_computed_views_of_the_recorded_objects():
    rec = recorded()
    computed = capacity.pool_status_computed(rec["/apis/resource.k8s.io/v1/resourceslices"]["items"],
                                             rec["/apis/resource.k8s.io/v1/resourceclaims"]["items"], "v1.37.2",
                                             rec["/apis/resource.k8s.io/v1/devicetaintrules"]["items"])
    profile = "partitions.example.com/profile"
    assert computed[PARTITIONS] == {"idle": 4, "partitions": {
        (profile, "full"): {"total": 1, "allocatable": 0}, (profile, "half"): {"total": 2, "allocatable": 0},
        (profile, "quarter"): {"total": 4, "allocatable": 1}}}
    assert computed[SHARED] == {"idle": 0, "partitions": {}}
    # Before 1.37 the pool status has no views: none are computed to compare.
    before = capacity.pool_status_computed(rec["/apis/resource.k8s.io/v1/resourceslices"]["items"],
                                           rec["/apis/resource.k8s.io/v1/resourceclaims"]["items"], "v1.36.3")
    assert before[PARTITIONS]["partitions"] is None and before[PARTITIONS]["idle"] == 5  # no rules given


def test_every_difference_in_the_views_and_counts_is_reported():
    rec = recorded()
    parts = answered(rec, "partitions.example.com")["pools"][0]
    parts["partitionSummary"][2]["allocatable"] = 2
    del parts["partitionSummary"][0]
    parts["unavailableDevices"] = 2
    shared = answered(rec, "shared.example.com")["pools"][0]
    shared["shareableSummary"]["capacity"][0]["consumed"] = "4Gi"
    shared["shareableSummary"]["capacity"].append({"name": "cores", "total": "8", "consumed": "0", "available": "8"})
    out = run(Replay137(rec))
    assert out["pool_status"]["disagreements"] == [
        "partitions.example.com/gpu-0: unavailableDevices 2, computed tainted 1",
        "partitions.example.com/gpu-0: partition type partitions.example.com/profile=full: computed (1 devices), "
        "not in the pool status",
        "partitions.example.com/gpu-0: partition type partitions.example.com/profile=quarter: allocatable 2, "
        "computed 1",
        "shared.example.com/shared-0: shared capacity cores in the pool status, not computed",
        "shared.example.com/shared-0: shared capacity memory consumed 4Gi, computed used 5368709120"]


def test_a_validation_error_beside_counts_is_reported_and_the_counts_still_compared():
    rec = recorded()
    parts = answered(rec, "partitions.example.com")["pools"][0]
    parts["validationError"] = "PartitionCostMismatch: devices of partition type \"half\" consume different counters"
    parts["allocatedDevices"] = 3
    del parts["partitionSummary"]
    out = run(Replay137(rec))
    assert out["pool_status"]["disagreements"] == [
        "partitions.example.com/gpu-0: the pool status flags the pool: PartitionCostMismatch: devices of partition "
        "type \"half\" consume different counters",
        "partitions.example.com/gpu-0: allocatedDevices 3, computed allocated 2"]


def test_not_served_says_what_the_catalog_says_serves_it():
    rec = recorded()
    rec["/apis/resource.k8s.io"]["versions"] = [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]
    out = run(Replay137(rec))
    skipped = out["pool_status"]["skipped"]
    assert skipped.startswith("resourcepoolstatusrequests is not served")
    needs = catalog.gate_api_versions("DRAResourcePoolStatus")
    assert sorted(needs) == [36, 37, 38]
    for minor, entry in needs.items():
        assert "--runtime-config=%s=true" % entry in skipped and "1.%d" % minor in skipped
    assert "kube-apiserver and kube-controller-manager" in skipped


QUARTER_DEVICES = ["quarter-0", "quarter-1", "quarter-2", "quarter-3"]
HALF_DEVICES = ["half-0", "half-1"]
COST = {"full": 8, "half": 4, "quarter": 2}


def with_allocations(devices):
    """The recorded objects (slices, claims, DeviceTaintRules) with the partition claims' results set to `devices`
    (one result each)."""
    rec = recorded()
    slices = rec["/apis/resource.k8s.io/v1/resourceslices"]["items"]
    claims = [c for c in rec["/apis/resource.k8s.io/v1/resourceclaims"]["items"]
              if c["status"]["allocation"]["devices"]["results"][0]["driver"] != "partitions.example.com"]
    template = [c for c in rec["/apis/resource.k8s.io/v1/resourceclaims"]["items"]
                if c["status"]["allocation"]["devices"]["results"][0]["driver"] == "partitions.example.com"][0]
    for device in devices:
        claim = copy.deepcopy(template)
        claim["status"]["allocation"]["devices"]["results"][0]["device"] = device
        claims.append(claim)
    return slices, claims, rec["/apis/resource.k8s.io/v1/devicetaintrules"]["items"]


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(st.sets(st.sampled_from(["full"] + HALF_DEVICES + QUARTER_DEVICES)))
def test_allocatable_per_type_is_what_the_counters_have_left(allocated):
    """For every set of allocated partitions that fits the 8 units: each type's allocatable is
    min(its unallocated untainted devices, units left // its cost) (the devices of a type cost the same;
    quarter-3 is under the recorded NoSchedule rule)."""
    kind = dict((d, d.split("-", maxsplit=1)[0]) for d in ["full"] + HALF_DEVICES + QUARTER_DEVICES)
    used = sum(COST[kind[d]] for d in allocated)
    hypothesis.assume(used <= 8)
    slices, claims, rules = with_allocations(sorted(allocated))
    computed = capacity.pool_status_computed(slices, claims, "v1.37.2", rules)
    partitions = computed[PARTITIONS]["partitions"]
    for type_name, cost in COST.items():
        members = [d for d in kind if kind[d] == type_name]
        fresh = len([d for d in members if d not in allocated and d != "quarter-3"])
        expected = min(fresh, int(Fraction(8 - used) // cost))
        got = partitions[("partitions.example.com/profile", type_name)]
        assert (got["total"], got["allocatable"]) == (len(members), expected), (allocated, type_name)
