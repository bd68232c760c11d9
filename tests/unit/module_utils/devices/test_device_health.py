"""Device health (devices.health, device_health) on objects recorded from the real cluster (Kubernetes v1.36.3).

tests/unit/fixtures/device-health/v1.36.3/ holds one namespace's pods and ResourceClaims, every
ResourceSlice and /version, read with kubectl from a hack/cluster/up cluster (2 KWOK nodes, the example
driver publishing gpu.example.com pools node-000000 and node-000001). Allocations are the real scheduler's.
What was written by hand, as a driver or the kubelet would (the nodes are KWOK fakes: no kubelet):
- a ResourceSlice of driver health.example.com, pool health-pool on node-000000, devices dev-0..dev-2; dev-0
  carries the taint health.example.com/unhealthy=ecc-errors:NoSchedule (timeAdded stamped by the API server,
  after claim h1/a had been allocated dev-0 for pod pa), dev-1 an effect-None taint with a given timeAdded;
- pods' status.containerStatuses[0].allocatedResourcesStatus, through the pods/status subresource:
  pa  claim:gpu        resourceID health.example.com/health-pool/dev-0  Unknown   (the device is also tainted)
  pc  claim:gpu        resourceID k8s.gpu.example.com/gpu=common        Unhealthy, message "ECC errors"
      (the example driver's first CDI device ID: what the 1.36 kubelet writes as resourceID)
  pd  claim:pair/gpus  resourceID k8s.gpu.example.com/gpu=common        Unknown   (a request of two devices)
  pe  claim:gpu        resourceID gpu.example.com/node-000000/gpu-1     Healthy
"""
import copy
import datetime
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.devices import health as dh
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi
from ansible_collections.dra.admin.plugins.module_utils.devices.health_service import gather_device_health
from conftest import FIXTURES

REC = os.path.join(FIXTURES, "device-health", "v1.36.3")
NOW = datetime.datetime(2026, 11, 23, 17, 30, tzinfo=datetime.timezone.utc)
TAINTED = "health.example.com/health-pool/dev-0"


def recorded(name):
    with open(os.path.join(REC, name + ".json")) as fh:
        data = json.load(fh)
    return data.get("items", data)


def objects():
    return recorded("resourceslices"), recorded("resourceclaims"), recorded("pods")


def pod_named(pods, name):
    return next(p for p in pods if p["metadata"]["name"] == name)


def device_of(pods, claims, pod_name):
    """The (single) device id the recorded scheduler allocated to a pod's claim."""
    claim_name = dh.pod_claim_names(pod_named(pods, pod_name))
    claim = next(c for c in claims if c["metadata"]["name"] in claim_name.values())
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    return dh.device_key(result["driver"], result["pool"], result["device"])


def report(**kwargs):
    slices, claims, pods = objects()
    return dh.device_health(slices, claims, pods, NOW, **kwargs)


def by_id(entries):
    return dict((e["id"], e) for e in entries)


def test_recorded_findings_name_exactly_the_affected_devices_and_pods():
    slices, claims, pods = objects()
    result = dh.device_health(slices, claims, pods, NOW)
    pc_device = device_of(pods, claims, "pc")
    pe_device = device_of(pods, claims, "pe")

    assert set(by_id(result["unhealthy"])) == {TAINTED, pc_device}
    in_use = by_id(result["unhealthy_in_use"])
    assert set(in_use) == {TAINTED, pc_device}
    assert [p["name"] for p in in_use[TAINTED]["pods"]] == ["pa"]
    assert in_use[TAINTED]["claims"] == ["h1/a"]
    assert [(p["name"], p["node"]) for p in in_use[pc_device]["pods"]] == [
        ("pc", pod_named(pods, "pc")["spec"]["nodeName"])]

    devices = by_id(result["devices"])
    # pa reports its tainted device Unknown: the taint makes it unhealthy, both reasons are kept apart.
    assert devices[TAINTED]["health"] == "Unknown" and devices[TAINTED]["condition"] == "unhealthy"
    assert devices[TAINTED]["reasons"] == ["driver taint health.example.com/unhealthy=ecc-errors:NoSchedule"]
    # pc's resourceID is the CDI id, tied to the device through its one-device request.
    assert devices[pc_device]["reports"][0]["resource_id"] == "k8s.gpu.example.com/gpu=common"
    assert devices[pc_device]["reports"][0]["message"] == "ECC errors"
    assert devices[pe_device]["condition"] == "healthy"
    # An effect-None taint is listed, and makes nothing unhealthy.
    assert devices["health.example.com/health-pool/dev-1"]["condition"] == "not-reported"
    assert sorted((t["device"], t["effect"]) for t in result["driver_taints"]) == [
        ("dev-0", "NoSchedule"), ("dev-1", "None")]

    # pd's request holds two devices and the CDI resourceID names neither: unresolved, both candidates listed.
    (unresolved,) = result["unresolved"]
    assert unresolved["pod"] == "pd" and unresolved["health"] == "Unknown" and len(unresolved["candidates"]) == 2
    assert result["summary"] == {
        "devices": 19, "published": 19, "unhealthy": 2, "unknown": 0, "healthy": 1, "not_reported": 16,
        "tainted": 2, "unhealthy_in_use": 2, "long_unknown": 0, "unresolved": 1, "pods_reporting": 4}
    lines = dh.problems(result, 600)
    assert len(lines) == 3 and any("pod h1/pd reports Unknown" in line for line in lines)


def test_since_comes_from_the_taint_or_what_an_earlier_run_saw():
    slices, claims, pods = objects()
    pc_device = device_of(pods, claims, "pc")
    first = dh.device_health(slices, claims, pods, NOW)
    unhealthy = by_id(first["unhealthy"])
    assert unhealthy[TAINTED]["since_source"] == "taint"
    assert unhealthy[TAINTED]["since"] == next(
        t["time_added"] for t in first["driver_taints"] if t["effect"] == "NoSchedule")
    assert unhealthy[pc_device]["since_source"] == "this-run" and unhealthy[pc_device]["for_seconds"] == 0

    # The next run, an hour later, given the first run's first_seen: pc's device keeps its first time.
    later = NOW + datetime.timedelta(hours=1)
    second = dh.device_health(slices, claims, pods, later, first_seen=first["first_seen"])
    again = by_id(second["unhealthy"])[pc_device]
    assert again["since_source"] == "first-seen" and again["for_seconds"] == 3600
    # A remembered time of another condition does not count.
    other = {pc_device: {"condition": "unknown", "since": "2026-11-23T10:00:00Z"}}
    assert by_id(dh.device_health(slices, claims, pods, later, first_seen=other)["unhealthy"])[pc_device][
        "since_source"] == "this-run"


def test_long_unknown_needs_the_time_an_earlier_run_first_saw_it():
    slices, claims, pods = objects()
    pods = copy.deepcopy(pods)
    pe = pod_named(pods, "pe")
    pe["status"]["containerStatuses"][0]["allocatedResourcesStatus"][0]["resources"][0]["health"] = "Unknown"
    device = device_of(pods, claims, "pe")

    fresh = dh.device_health(slices, claims, pods, NOW, unknown_after=600)
    assert by_id(fresh["devices"])[device]["condition"] == "unknown" and fresh["long_unknown"] == []

    seen = {device: {"condition": "unknown", "since": "2026-11-23T16:30:00Z"}}
    old = dh.device_health(slices, claims, pods, NOW, first_seen=seen, unknown_after=600)
    (entry,) = old["long_unknown"]
    assert entry["id"] == device and entry["for_seconds"] == 3600 and [p["name"] for p in entry["pods"]] == ["pe"]
    assert any("has been Unknown for 3600s" in line for line in dh.problems(old, 600))
    assert dh.device_health(slices, claims, pods, NOW, first_seen=seen, unknown_after=7200)["long_unknown"] == []


def test_a_clean_cluster_reports_nothing():
    slices, claims, pods = copy.deepcopy(objects())
    for item in slices:
        for device in item["spec"]["devices"]:
            device.pop("taints", None)
    for pod in pods:
        for status in pod["status"].get("containerStatuses") or []:
            status.pop("allocatedResourcesStatus", None)
    result = dh.device_health(slices, claims, pods, NOW)
    assert result["unhealthy"] == [] and result["unhealthy_in_use"] == [] and result["long_unknown"] == []
    assert result["driver_taints"] == [] and result["unresolved"] == [] and result["first_seen"] == {}
    assert result["summary"]["not_reported"] == result["summary"]["devices"] == 19
    assert dh.problems(result, 600) == []


def test_driver_filter_keeps_only_that_drivers_devices():
    result = report(driver="health.example.com")
    assert set(d["driver"] for d in result["devices"]) == {"health.example.com"}
    assert [d["id"] for d in result["unhealthy"]] == [TAINTED]
    assert result["unresolved"] == []  # pd's candidates are gpu.example.com devices


def test_sources_on_136_133_and_130():
    on = dh.source_availability("v1.36.3", {})
    assert on["pod_status"]["available"] and on["slice_taints"]["available"]
    assert "on by default" in on["pod_status"]["detail"]
    old = dh.source_availability("v1.33.13", {})
    assert not old["pod_status"]["available"] and not old["slice_taints"]["available"]
    assert "ResourceHealthStatus is alpha and off by default on 1.33" in old["pod_status"]["detail"]
    assert "DRADeviceTaints is alpha and off by default on 1.33" in old["slice_taints"]["detail"]
    assert "dra.admin.feature_gates" in old["slice_taints"]["detail"]
    # Switched on by hand: the objects carry the field, which proves the gate on.
    assert dh.source_availability("v1.33.13", {"pod_status": 2})["pod_status"]["available"]
    assert "has no DRADeviceTaints gate" in dh.source_availability("v1.30.14", {})["slice_taints"]["detail"]


@pytest.mark.parametrize("first_seen, unknown_after, words", [
    ({"a/b/c": "yesterday"}, 600, "first_seen['a/b/c']"),
    ({"a/b/c": {"condition": "broken", "since": "2026-11-23T10:00:00Z"}}, 600, "condition: unhealthy|unknown"),
    ({"a/b/c": {"condition": "unknown", "since": "noon"}}, 600, "RFC 3339"),
    (["a/b/c"], 600, "first_seen must be a mapping"),
    ({}, -1, "unknown_after is -1"),
])
def test_bad_options_are_refused_naming_the_option(first_seen, unknown_after, words):
    with pytest.raises(dh.HealthInputError) as err:
        dh.check_inputs(first_seen, unknown_after)
    assert words in str(err.value)


def test_resource_names_and_times():
    assert dh.parse_resource_name("claim:gpu/req") == ("gpu", "req")
    assert dh.parse_resource_name("claim:gpu") == ("gpu", None)
    assert dh.parse_resource_name("nvidia.com/gpu") is None
    assert dh.base_request("gpus/large") == "gpus"
    assert dh.format_time(dh.parse_time("2026-11-23T17:06:50.123456789Z")) == "2026-11-23T17:06:50Z"
    assert dh.format_time(dh.parse_time("2026-11-23T19:06:50+02:00")) == "2026-11-23T17:06:50Z"
    assert dh.worst_health(["Healthy", "Unknown"]) == "Unknown" and dh.worst_health([]) is None


class ListApi(DraApi):
    """DraApi answering each path with recorded objects (one page each)."""

    def __init__(self, answers):
        super(ListApi, self).__init__(api_client=object())
        self.answers = answers
        self.asked = []

    def get(self, path, query=None, accept="application/json"):
        self.requests += 1
        self.asked.append((path, dict(query or {})))
        return self.answers[path]


def _answers(slices, claims, pods):
    return {"/version": recorded("version"),
            "/apis/resource.k8s.io": {"versions": [{"version": "v1"}]},
            "/apis/resource.k8s.io/v1/resourceslices": {"items": slices},
            "/apis/resource.k8s.io/v1/resourceclaims": {"items": claims},
            "/api/v1/pods": {"items": pods}}


def test_requests_do_not_grow_with_the_nodes():
    slices, claims, pods = objects()
    api = ListApi(_answers(slices, claims, pods))
    result = gather_device_health(api, now=NOW)
    assert api.requests == 5 and result["kubernetes_version"] == "v1.36.3"
    assert result["sources"]["pod_status"]["available"] and len(result["problems"]) == 3
    assert ("/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed", "limit": 500}) \
        in api.asked

    # Fifty more nodes' slices: the same five requests.
    many = list(slices)
    for index in range(50):
        extra = copy.deepcopy(slices[0])
        extra["metadata"]["name"] = "extra-%d" % index
        extra["spec"]["nodeName"] = extra["spec"]["pool"]["name"] = "node-extra-%d" % index
        many.append(extra)
    api = ListApi(_answers(many, claims, pods))
    assert gather_device_health(api, now=NOW)["summary"]["published"] > 19 and api.requests == 5


def test_bad_options_make_no_request():
    api = ListApi({})
    with pytest.raises(dh.HealthInputError):
        gather_device_health(api, first_seen={"x": 1})
    assert api.requests == 0
