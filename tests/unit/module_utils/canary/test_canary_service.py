"""A canary run against an API that answers from the recorded kind cluster (fixtures/canary/kind-<release>.json):
the lists the plan reads, then the probe's pod and claim as they were recorded, one recorded look per round."""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.canary import canary
from ansible_collections.dra.admin.plugins.module_utils.canary.canary_service import Canary
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi, DraApiError
from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from conftest import FIXTURES

RELEASES = ["v1.37.2", "v1.33.13"]
NS = "dra-canary"


def recorded(release):
    with open(os.path.join(FIXTURES, "canary", "kind-%s.json" % release)) as handle:
        return json.load(handle)


class RecordedCluster(DraApi):
    """GETs from the recording; the probe's pod and claim advance one recorded look per LIST of pods."""

    def __init__(self, data, namespace_exists=True):
        super(RecordedCluster, self).__init__(api_client=object())
        self.data, self.namespace_exists = data, namespace_exists
        self.writes, self.look, self.pod_name = [], -1, None
        self.pending_pods = []

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        self.requests += 1
        if method != "GET":
            self.writes.append((method, path))
            if method == "POST" and path.endswith("/pods"):
                self.pod_name = body["metadata"]["name"]
            return body
        return {"items": self.answer(path, query or {}), "metadata": {}} if not self.single(path) else self.one(path)

    def single(self, path):
        return path in ("/version", "/apis/resource.k8s.io") or path.startswith("/api/v1/namespaces/%s" % NS) and \
            path.count("/") == 4 or path.startswith("/apis/resource.k8s.io/") and path.count("/") == 3

    def one(self, path):
        if path == "/version":
            return {"gitVersion": self.data["version"]}
        if path == "/apis/resource.k8s.io":
            return {"versions": [{"version": self.data["resource_api_version"]}]}
        if path.startswith("/api/v1/namespaces/"):
            if not self.namespace_exists:
                raise DraApiError("not found", status=404)
            return {"metadata": {"name": NS}}
        return {"resources": [{"name": "resourceslices"}, {"name": "resourceclaims"}]}

    def current(self):
        snaps = self.data["progress"]
        return copy.deepcopy(snaps[min(self.look, len(snaps) - 1)])

    def answer(self, path, query):
        if "labelSelector" in query:
            if path.endswith("/pods"):
                self.look += 1
            snap = self.current()
            obj = snap["pod"] if path.endswith("/pods") else snap["claim"]
            if obj is None:
                return []
            if path.endswith("/pods"):
                obj["metadata"]["name"] = self.pod_name
            else:
                obj["metadata"]["ownerReferences"][0]["name"] = self.pod_name
            return [obj]
        if path == "/api/v1/pods" and query.get("fieldSelector") == "status.phase=Pending":
            # The recording has no Pending pod; a test adds its own (pending_pods).
            return copy.deepcopy(self.pending_pods)
        for key, name in (("resourceslices", "slices"), ("resourceclaims", "claims"),
                          ("deviceclasses", "deviceclasses"), ("/nodes", "nodes"), ("/events", "events")):
            if path.endswith(key):
                return copy.deepcopy(self.data[name])
        raise AssertionError("unexpected GET %s" % path)


OPTIONS = {"namespace": NS, "image": "busybox", "expect_env": dict(canary.DEFAULT_EXPECT_ENV),
           "expect_paths": ["/dev/null"], "tolerations": [],
           "timeouts": {"allocation": 60, "prepare": 180, "unprepare": 120}, "sleep": 0.5}


def run(api, release_data, check_mode=False, pools=None, skip_waited_pools=True):
    clock = {"now": 0.0}

    def sleep(seconds):
        clock["now"] += seconds
    runner = Canary(api, copy.deepcopy(OPTIONS), clock=lambda: clock["now"], sleep=sleep, wall=lambda: 1700000000.0)
    return runner, runner.run(["gpu.example.com"], pools or [release_data["probe"]["pool"]], None, check_mode,
                              skip_waited_pools)


@pytest.mark.parametrize("release", RELEASES)
def test_check_mode_creates_nothing_and_says_what_it_would_probe(release):
    data = recorded(release)
    api = RecordedCluster(data)
    _runner, report = run(api, data, check_mode=True)
    assert api.writes == [] and report["results"] == [] and report["metrics_text"] == ""
    assert report["summary"] == ['would probe gpu.example.com/%s: device gpu-0 on node %s, selector %s' % (
        data["probe"]["pool"], data["probe"]["node"], data["probe"]["selector"])]
    assert report["resource_api_version"] == data["resource_api_version"]


@pytest.mark.parametrize("release", RELEASES)
def test_a_pool_a_pending_pod_waits_for_is_not_probed_unless_asked(release):
    data = recorded(release)
    api = RecordedCluster(data)
    claim = {"metadata": {"namespace": "team", "name": "wants"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    data["claims"] = data["claims"] + [claim]
    api.pending_pods = [{"metadata": {"namespace": "team", "name": "waits"}, "status": {"phase": "Pending"},
                         "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "wants"}]}}]
    _runner, report = run(api, data, check_mode=True)
    assert report["planned"] == [] and api.writes == []
    (waited,) = [s for s in report["skipped_pools"] if s["pool"] == data["probe"]["pool"]]
    assert waited["waiting_pods"] == ["team/waits"] and "team/waits" in waited["reason"]
    assert any("skipped, pods wait for devices" in line for line in report["summary"])
    _runner, anyway = run(RecordedCluster(data), data, check_mode=True, skip_waited_pools=False)
    assert [p["pool"] for p in anyway["planned"]] == [data["probe"]["pool"]]


@pytest.mark.parametrize("release", RELEASES)
def test_a_run_creates_the_template_and_pod_then_deletes_pod_claim_and_template(release):
    data = recorded(release)
    api = RecordedCluster(data)
    runner, report = run(api, data)
    name = canary.object_name(runner.run_id, 0)
    version = data["resource_api_version"]
    templates = "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaimtemplates" % (version, NS)
    pods = "/api/v1/namespaces/%s/pods" % NS
    assert api.writes[:2] == [("POST", templates), ("POST", pods)]
    deletes = [path for method, path in api.writes if method == "DELETE"]
    assert deletes[0] == "%s/%s" % (pods, name) and deletes[-1] == "%s/%s" % (templates, name)
    assert any("/resourceclaims/dra-canary-rec-0-device-" in path for path in deletes) and len(deletes) == 3
    (result,) = report["results"]
    assert report["ok"] is True and report["failed_pools"] == [] and result["ok"] is True
    assert list(result["phases"]) == list(canary.PHASES)
    assert "%s{driver=\"gpu.example.com\",phase=\"unprepare\",pool=\"%s\"} 1" % (
        canary.METRIC_SUCCESS, data["probe"]["pool"]) in report["metrics_text"]


class RefusePods(RecordedCluster):
    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        if method == "POST" and path.endswith("/pods"):
            self.writes.append((method, path))
            raise DraApiError("POST %s failed: HTTP 403: forbidden" % path, status=403)
        return super(RefusePods, self).request(method, path, query, body, content_type, accept)


@pytest.mark.parametrize("release", RELEASES)
def test_an_error_after_the_template_was_made_deletes_it_and_is_raised(release):
    data = recorded(release)
    api = RefusePods(data)
    with pytest.raises(DraApiError, match="HTTP 403"):
        run(api, data)
    templates = "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaimtemplates" % (data["resource_api_version"], NS)
    (_post, _refused, delete) = api.writes
    assert api.writes[:2] == [("POST", templates), ("POST", "/api/v1/namespaces/%s/pods" % NS)]
    assert delete[0] == "DELETE" and delete[1].startswith(templates + "/dra-canary-")


@pytest.mark.parametrize("release", RELEASES)
def test_a_missing_namespace_or_pool_is_refused_before_anything_is_made(release):
    data = recorded(release)
    api = RecordedCluster(data, namespace_exists=False)
    with pytest.raises(InputError, match="namespace: dra-canary does not exist"):
        run(api, data)
    api = RecordedCluster(data)
    with pytest.raises(InputError, match="pools: no pool nowhere"):
        run(api, data, pools=["nowhere"])
    assert api.writes == []
