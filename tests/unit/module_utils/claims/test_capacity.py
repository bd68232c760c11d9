"""Device capacity on API answers recorded from the real cluster (Kubernetes v1.36.3, 2 KWOK nodes with 8 devices
each of the example driver), fixtures/doctor/capacity.json, recorded like test_claims_doctor's fixtures:

  cap.example.com/shared  a slice on node-000000 made by hand: `big` (allowMultipleAllocations, memory 80Gi),
                          `spare` (memory 16Gi, not shared), `tainted` (a NoSchedule taint)
  cap/share-0, share-1    claims of 10Gi memory each, both allocated `big` by the scheduler (consumable capacity)
  cap/model               a claim of DeviceClass latest-gpu (a selector on an attribute besides the driver's)
  doc/term-pod-gpu-*      a gpu.example.com claim on node-000001
"""
import json
import subprocess
from fractions import Fraction

import pytest

from ansible_collections.dra.admin.plugins.module_utils.claims import capacity
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import PoolStatusError, gather_capacity

from test_claims_doctor import ReplayApi

GI = 2 ** 30


def report(**kwargs):
    api = ReplayApi("capacity.json")
    out = gather_capacity(api, **kwargs)
    return out, api


def test_counts_per_driver_pool_node_and_class():
    out, api = report()
    assert api.requests == 6  # discovery (group, v1), /version, slices, claims, DeviceClasses
    shared = out["by_pool"]["cap.example.com/shared"]
    assert (shared["total"], shared["allocated"], shared["tainted"], shared["free"]) == (3, 1, 1, 1)
    assert shared["capacity"] == {"memory": {"total": 80 * GI, "used": 20 * GI, "left": 60 * GI}}
    assert out["by_driver"]["gpu.example.com"] == {"total": 16, "allocated": 2, "tainted": 0, "free": 14,
                                                   "unavailable": 0, "capacity": {}}
    assert shared["complete"] is True and shared["problem"] is None and shared["counters"] == {}
    assert out["allocator"] == {"release": 36, "counters_per_pool": True, "incomplete_pools_allocated": False,
                                "taint_reader": "allocator"}
    assert out["by_node"]["node-000000"]["total"] == 11 and out["by_node"]["node-000001"]["allocated"] == 2
    assert out["totals"]["total"] == 19 and out["totals"]["free"] == 15
    classes = out["by_device_class"]
    assert classes["cap.example.com"]["total"] == 3 and classes["cap.example.com"]["selectors_evaluated"]
    assert classes["latest-gpu"] == {"total": None, "allocated": 1, "tainted": None, "free": None,
                                     "unavailable": None, "capacity": {}, "selectors_evaluated": False}
    assert out["unpublished_allocations"] == [] and out["pool_status_served"] is False


def test_one_driver():
    out, dummy = report(driver="cap.example.com")
    assert list(out["by_driver"]) == ["cap.example.com"] and out["totals"]["allocated"] == 1
    assert out["by_device_class"]["gpu.example.com"]["total"] == 0


def test_allocations_no_slice_publishes_are_listed():
    api = ReplayApi("capacity.json")
    api.recorded["/apis/resource.k8s.io/v1/resourceslices"]["items"] = [
        s for s in api.recorded["/apis/resource.k8s.io/v1/resourceslices"]["items"]
        if s["spec"].get("nodeName") != "node-000001"]
    out = gather_capacity(api)
    assert out["unpublished_allocations"] == ["gpu.example.com/node-000001/gpu-0", "gpu.example.com/node-000001/gpu-1"]


def test_admin_access_does_not_take_the_device():
    claim = {"status": {"allocation": {"devices": {"results": [
        {"driver": "d", "pool": "p", "device": "x", "request": "r", "adminAccess": True}]}}}}
    assert capacity.allocations([claim]) == []


@pytest.mark.parametrize("text, value", [("80Gi", 80 * GI), ("100", 100), ("500m", Fraction(1, 2)), ("1e3", 1000),
                                         ("1.5k", 1500), ("2Ki", 2048)])
def test_quantities(text, value):
    assert capacity.quantity(text) == value


@pytest.mark.parametrize("text", ["", "12Qi", "abc"])
def test_bad_quantities(text):
    with pytest.raises(capacity.QuantityError):
        capacity.quantity(text)


def test_class_drivers_only_for_driver_selectors():
    def cls(*exprs):
        return {"spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}}
    assert capacity.class_drivers(cls('device.driver == "a.example.com"')) == {"a.example.com"}
    assert capacity.class_drivers(cls('device.driver == "a"', 'device.attributes["a"].x == 1')) is None
    assert capacity.class_drivers(cls()) is None


def test_v1beta1_devices_keep_their_fields_under_basic():
    item = {"spec": {"driver": "d", "pool": {"name": "p", "generation": 1}, "nodeName": "n",
                     "devices": [{"name": "x", "basic": {"taints": [{"key": "k", "effect": "NoExecute"}],
                                                         "capacity": {"m": {"value": "1Gi"}}}}]}}
    (device,) = list(capacity.published_devices([item]).values())
    assert device["tainted"] and device["capacity"] == {"m": GI} and device["location"] == "n"


def test_pool_status_comparison():
    out, dummy = report()
    statuses = [{"driver": "gpu.example.com", "poolName": "node-000001", "totalDevices": 8, "allocatedDevices": 2},
                {"driver": "gpu.example.com", "poolName": "node-000000", "totalDevices": 8, "allocatedDevices": 1},
                {"driver": "other", "poolName": "p"}]
    assert capacity.pool_status_comparison(out, statuses) == [
        "gpu.example.com/node-000000: allocatedDevices 1, computed allocated 0",
        "other/p: in the pool status, not in the slices read"]
    assert json.dumps(out)  # the module returns it as it is


def test_summary_lines():
    out, dummy = report()
    assert out["summary"] == [
        "devices of cap.example.com: 1 free of 3 (1 allocated, 1 tainted); memory 64424509440 left of 85899345920",
        "devices of gpu.example.com: 14 free of 16 (2 allocated, 0 tainted)"]
    assert capacity.summary_lines({"by_driver": {}}) == ["no driver publishes devices"]


# fixtures/capacity/pool-status-v1.36.3.json: recorded from Kubernetes v1.36.3 with the DRAResourcePoolStatus gate
# (2 KWOK nodes, 8 example devices each; claims cap/c0..c2 allocated one device on node-000000 and two on
# node-000001): discovery, the three LISTs, a ResourcePoolStatusRequest for gpu.example.com as the POST returned
# it (no status yet) and as kube-controller-manager answered it, and one for a driver with no pools (probe-none).
POOL_FIXTURE = "../capacity/pool-status-v1.36.3.json"
POOL_PATH = "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"


class PoolStatusApi(ReplayApi):
    """Replays the recording; a POST of a request returns it as created, a GET the controller's answer after
    `pending` GETs without status."""

    def __init__(self, pending=0):
        super(PoolStatusApi, self).__init__(POOL_FIXTURE)
        self.pending = pending
        self.created = self.recorded["POST " + POOL_PATH]

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        if method == "POST" and path == POOL_PATH:
            super(PoolStatusApi, self).request(method, path, query, body, content_type, accept)
            return json.loads(json.dumps(self.created))
        if method == "GET" and path.startswith(POOL_PATH + "/") and self.pending > 0:
            self.requests += 1
            self.pending -= 1
            return json.loads(json.dumps(self.created))
        return super(PoolStatusApi, self).request(method, path, query, body, content_type, accept)


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def pool_report(api, **kwargs):
    clock = Clock()
    return gather_capacity(api, pool_status=True, clock=clock, sleep=clock.sleep, **kwargs)


def test_recorded_pool_status_agrees_with_the_computed_counts():
    api = PoolStatusApi(pending=2)
    out = pool_report(api)
    name = api.created["metadata"]["name"]
    status = out["pool_status"]
    assert status["source"] == "ResourcePoolStatusRequest" and status["skipped"] is None
    assert status["disagreements"] == [] and status["requests"] == [name]
    assert sorted(status["pools"]) == ["gpu.example.com/node-000000", "gpu.example.com/node-000001"]
    for key, pool in status["pools"].items():
        ours = out["by_pool"][key]
        assert (pool["totalDevices"], pool["allocatedDevices"], pool["availableDevices"]) == (
            ours["total"], ours["allocated"], ours["free"])
    assert out["by_driver"]["gpu.example.com"]["allocated"] == 3
    (post, delete) = api.writes
    assert post[:2] == ("POST", POOL_PATH) and post[2]["spec"] == {"driver": "gpu.example.com", "limit": 1000}
    assert post[2]["apiVersion"] == "resource.k8s.io/v1alpha3"
    assert delete[:2] == ("DELETE", POOL_PATH + "/" + name)
    # discovery (group, v1, v1alpha3), /version, four LISTs (DeviceTaintRules of v1alpha3), POST, 3 GETs until
    # answered, DELETE
    assert api.requests == 13


def test_pool_status_disagreements_are_reported():
    api = PoolStatusApi()
    answered = api.recorded[POOL_PATH + "/" + api.created["metadata"]["name"]]
    answered["status"]["pools"][0]["allocatedDevices"] = 0
    # An incomplete pool: the controller sets validationError and leaves the counts out.
    answered["status"]["pools"][1] = dict((k, v) for k, v in answered["status"]["pools"][1].items()
                                          if k in ("driver", "poolName", "generation"))
    answered["status"]["pools"][1]["validationError"] = "incomplete pool generation 2"
    answered["status"]["pools"].append({"driver": "gpu.example.com", "poolName": "gone", "totalDevices": 1})
    out = pool_report(api)
    assert out["pool_status"]["disagreements"] == [
        "gpu.example.com/gone: in the pool status, not in the slices read",
        "gpu.example.com/node-000000: allocatedDevices 0, computed allocated 1",
        "gpu.example.com/node-000001: the pool status has no counts: incomplete pool generation 2"]


def test_pool_status_unanswered_times_out_and_the_request_is_deleted():
    api = PoolStatusApi(pending=10 ** 6)
    with pytest.raises(PoolStatusError, match="had no status after 5s.*DRAResourcePoolStatus"):
        pool_report(api, timeout=5)
    assert [w[0] for w in api.writes] == ["POST", "DELETE"]


def test_pool_status_of_a_driver_without_pools_lists_the_computed_pools_as_missing():
    api = PoolStatusApi()
    api.recorded[POOL_PATH + "/" + api.created["metadata"]["name"]] = api.recorded[POOL_PATH + "/probe-none"]
    out = pool_report(api, driver="gpu.example.com")
    assert out["pool_status"]["pools"] == {}
    assert out["pool_status"]["disagreements"] == [
        "gpu.example.com/node-000000: in the slices read, not in the pool status",
        "gpu.example.com/node-000001: in the slices read, not in the pool status"]


def test_pool_status_skipped_where_not_served_or_in_check_mode():
    api = ReplayApi("capacity.json")
    out = pool_report(api)
    assert out["pool_status"]["source"] == "computed" and "not served" in out["pool_status"]["skipped"]
    api = PoolStatusApi()
    out = pool_report(api, check_mode=True)
    assert out["pool_status"]["skipped"].startswith("check mode") and api.writes == []
    assert out["pool_status_served"] is True


def test_failed_pool_status_request():
    answer = capacity.pool_status_answer({"status": {"conditions": [
        {"type": "Failed", "status": "True", "message": "boom"}]}})
    assert answer["complete"] is False and answer["message"] == "boom"
    assert capacity.pool_status_answer({"metadata": {"name": "x"}}) is None


def promtool_check(text):
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    return res.returncode, res.stdout + res.stderr


def test_metrics_text_passes_promtool_and_carries_the_counts():
    out, dummy = report()
    text = out["metrics_text"]
    rc, said = promtool_check(text)
    assert rc == 0, said
    assert 'dra_admin_devices{driver="cap.example.com",pool="shared",state="free"} 1\n' in text
    assert 'dra_admin_devices{driver="gpu.example.com",pool="node-000001",state="allocated"} 2\n' in text
    assert ('dra_admin_device_capacity{capacity="memory",driver="cap.example.com",kind="left",pool="shared"} %d\n'
            % (60 * GI)) in text
    assert "dra_admin_pool_status_disagreements" not in text
    compared = pool_report(PoolStatusApi())["metrics_text"]
    assert promtool_check(compared)[0] == 0 and compared.endswith("dra_admin_pool_status_disagreements 0\n")


def test_metrics_labels_are_escaped():
    text = capacity.metrics_text({"by_pool": {'d/p"o\\ol': {"total": 1, "allocated": 0, "tainted": 0, "free": 1,
                                                            "capacity": {}}}})
    assert 'pool="p\\"o\\\\ol"' in text and promtool_check(text)[0] == 0
