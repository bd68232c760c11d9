"""nodes.readiness: whether a node is back, on the nodes and ResourceSlices recorded from a kind cluster at v1.37.2
(tests/unit/fixtures/canary/kind-v1.37.2.json: the example driver's slices), and kubelet journal lines as the
v1.37.2 kubelets wrote them (the upgrade of a kind node, and `kubelet --dra-admin-no-such-flag` run here)."""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.nodes import readiness as r
from conftest import FIXTURES

DRIVER = "gpu.example.com"


def recorded():
    with open(os.path.join(FIXTURES, "canary", "kind-v1.37.2.json")) as fh:
        return json.load(fh)


def worker():
    data = recorded()
    return [n for n in data["nodes"] if n["metadata"]["name"].endswith("-worker")][0], data["slices"]


def test_a_ready_node_at_its_release_has_no_problem_and_another_release_is_named():
    node, dummy = worker()
    name = node["metadata"]["name"]
    assert r.node_problems(node, "v1.37.2") == []
    assert r.node_problems(node, "") == []
    assert r.node_problems(node, "v1.38.0") == ["node %s runs kubelet v1.37.2, not v1.38.0" % name]
    distribution = copy.deepcopy(node)
    distribution["status"]["nodeInfo"]["kubeletVersion"] = "v1.37.2-1+0a1b2c"
    assert r.node_problems(distribution, "v1.37.2") == []
    assert not r.same_release("v1.37.20", "v1.37.2")


def test_the_expected_release_is_taken_as_kubespray_writes_it_and_anything_else_refused():
    node, dummy = worker()
    assert r.expected_release("1.37.2") == "v1.37.2" and r.expected_release("v1.37.2") == "v1.37.2"
    assert r.node_problems(node, r.expected_release("1.37.2")) == []
    assert r.expected_release("") == ""
    assert r.expected_release("1.38.0-beta.0") == "v1.38.0-beta.0"  # a test cluster upgraded to a pre-release
    for bad in ("1.37", "v1.37.2-rc", "v1.37.2-3+abc", "latest"):
        with pytest.raises(ValueError, match="v1.37.2"):
            r.expected_release(bad)


def test_a_node_not_ready_is_named_with_the_kubelets_reason():
    node, dummy = worker()
    for condition in node["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition.update(status="False", reason="KubeletNotReady", message="container runtime is down")
    assert r.node_problems(node) == ["node %s is not Ready (KubeletNotReady: container runtime is down)"
                                     % node["metadata"]["name"]]


def test_the_devices_published_for_the_node_and_a_change_of_them():
    node, slices = worker()
    name = node["metadata"]["name"]
    devices = r.published_devices(slices, name, [DRIVER, "other.example.com"])
    assert devices[DRIVER] == sorted("%s/gpu-%d" % (name, i) for i in range(8)) and devices["other.example.com"] == []
    assert r.device_problems(name, devices, {DRIVER: devices[DRIVER]}) == []
    fewer = {DRIVER: devices[DRIVER][1:], "other.example.com": []}
    assert r.device_problems(name, fewer, {DRIVER: devices[DRIVER]}) == [
        "%s no longer publishes %s for %s" % (DRIVER, devices[DRIVER][0], name)]
    none = {DRIVER: [], "other.example.com": []}
    assert r.device_problems(name, none, {DRIVER: devices[DRIVER]})[0].startswith(
        "%s publishes no device for %s (it had " % (DRIVER, name))
    assert r.device_problems(name, devices, {DRIVER: devices[DRIVER][1:]}) == [
        "%s publishes %s for %s, which it did not before" % (DRIVER, devices[DRIVER][0], name)]


def test_a_driver_without_devices_before_is_not_judged():
    """A control-plane node the driver never served, or a node a stopped run left drained (its slices removed by
    the kubelet): nothing is known of before, so nothing is required after."""
    node, slices = worker()
    name = node["metadata"]["name"]
    devices = r.published_devices(slices, name, [DRIVER])
    assert r.device_problems(name, devices, {DRIVER: []}) == []
    assert r.device_problems(name, devices, {}) == []
    assert r.device_problems(name, {DRIVER: []}, {DRIVER: []}) == []


def test_kubelet_errors_keep_the_error_lines_and_those_of_a_kubelet_that_refuses_to_start():
    lines = [
        'I1127 21:59:10.197114    3193 server.go:530] "Kubelet version" kubeletVersion="v1.37.2"',
        'W1127 21:59:10.495530    3193 manager.go:1079] Failed to process watch event: rpc error: code = NotFound',
        'E1127 21:59:33.217929    3193 remote_runtime.go:657] "ContainerStatus from runtime service failed"',
        'E1127 22:48:34.383945   25757 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: '
        '--dra-admin-no-such-flag"',
        "kubelet.service: Main process exited, code=exited, status=1/FAILURE",
    ]
    assert r.kubelet_errors(lines) == [lines[2], lines[3]]
    assert r.kubelet_errors(lines, keep=1) == [lines[3]]
    assert r.kubelet_errors([]) == []


class RecordedApi(object):
    """The recorded kind cluster behind the calls readiness_service makes; `failures` are raised first, one per
    call, as a kube-apiserver that kubeadm just restarted answers (403 until its authorizer has synced)."""

    def __init__(self, data, failures=()):
        self.data = data
        self.failures = list(failures)

    def _answer(self):
        if self.failures:
            raise self.failures.pop(0)

    def resource_path(self, plural):
        return "/apis/resource.k8s.io/v1/" + plural

    def get_or_none(self, path):
        self._answer()
        name = path.rsplit("/", 1)[1]
        return copy.deepcopy(([n for n in self.data["nodes"] if n["metadata"]["name"] == name] or [None])[0])

    def list_items(self, path, query=None):
        self._answer()
        return copy.deepcopy(self.data["slices"]) if path.endswith("resourceslices") else []


def params(node, **extra):
    return dict({"node": node, "kubelet_version": "v1.37.2", "driver_daemonsets": [], "drivers": [DRIVER],
                 "expect_devices": {}, "wait_timeout": 60, "wait_sleep": 1.0, "fail_when_not_back": True}, **extra)


class Clock(object):
    def __init__(self):
        self.now, self.slept = 0.0, []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_a_restarting_api_server_is_waited_for_and_a_missing_node_is_refused():
    from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
    from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
    from ansible_collections.dra.admin.plugins.module_utils.nodes import readiness_service as service
    node, dummy = worker()
    name = node["metadata"]["name"]
    clock = Clock()
    api = RecordedApi(recorded(), [DraApiError("GET /api/v1/nodes/x failed: HTTP 403: forbidden", status=403),
                                   DraApiError("HTTP 503", status=503)])
    result = service.wait_until_back(api, params(name), clock.time, clock.sleep)
    assert result["back"] and len(clock.slept) == 2 and result["devices"][DRIVER]
    with pytest.raises(DraAdminError) as err:
        service.wait_until_back(RecordedApi(recorded()), params("no-such-node"), clock.time, clock.sleep)
    assert str(err.value).startswith("node: the cluster has no node no-such-node")
    with pytest.raises(DraApiError) as err:  # not a restart: no wait
        service.wait_until_back(RecordedApi(recorded(), [DraApiError("HTTP 400", status=400)]), params(name),
                                clock.time, clock.sleep)
    assert err.value.status == 400


def test_a_node_not_back_after_the_time_names_each_problem():
    from ansible_collections.dra.admin.plugins.module_utils.nodes import readiness_service as service
    node, dummy = worker()
    name = node["metadata"]["name"]
    clock = Clock()
    with pytest.raises(service.NodeNotBack) as err:
        service.wait_until_back(RecordedApi(recorded()), params(name, kubelet_version="v1.38.0", wait_timeout=10),
                                clock.time, clock.sleep)
    assert str(err.value) == "%s is not back after 10s: node %s runs kubelet v1.37.2, not v1.38.0" % (name, name)
    assert err.value.details["back"] is False and 10 <= clock.now < 12
    looked = service.wait_until_back(RecordedApi(recorded()), params(name, kubelet_version="v1.38.0", wait_timeout=0,
                                                                     fail_when_not_back=False), clock.time, clock.sleep)
    assert looked["problems"] == ["node %s runs kubelet v1.37.2, not v1.38.0" % name]
