"""The node doctor's comparison, on node states and objects recorded from a v1.37.2 kind cluster
(tests/unit/fixtures/node-state/v1.37.2): `stuck.json` (the driver taken off nsx-worker2 by the drain's exclusion
label, then a claim pod deleted: stuck terminating) and `ckpt.json` (the kubelet of nsx-worker2 stopped, the claim
pod force-deleted and its claim gone: the checkpoint still holds it, the container still runs)."""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.common.times import epoch_seconds
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check_service
from conftest import FIXTURES

NODE = "nsx-worker2"
DAEMONSET = "dra-system/gpu-example-com-kubeletplugin"


def scenario(name):
    with open(os.path.join(FIXTURES, "node-state", "v1.37.2", name + ".json")) as handle:
        return json.load(handle)


def cluster_of(rec, states=None):
    states = rec["node_states"] if states is None else states
    return node_check.cluster_facts(rec["resourceclaims"], rec["pods"], rec["resourceslices"], rec["nodes"],
                                    rec["daemonsets"], node_check.node_drivers_named(states))


def run(rec, states=None, now=None):
    states = rec["node_states"] if states is None else states
    if now is None:
        stamps = [epoch_seconds(p["metadata"]["deletionTimestamp"]) for p in rec["pods"]
                  if p["metadata"].get("deletionTimestamp")]
        now = max(stamps) + 60 if stamps else 2000000000
    return node_check.check(states, cluster_of(rec, states), now)


def report_of(result, node=NODE):
    return [n for n in result["nodes"] if n["node"] == node][0]


def kinds(report):
    return sorted(f["kind"] for f in report["findings"])


def state_of(rec, node=NODE):
    return [s for s in rec["node_states"] if s["node"] == node][0]


def test_a_pod_stuck_because_its_driver_is_gone_names_the_daemonset_and_why():
    result = run(scenario("stuck"))
    report = report_of(result)
    assert kinds(report) == ["pod_stuck_terminating"], report
    stuck = report["findings"][0]
    assert stuck["reason"] == node_check.REASON_DRIVER_GONE and stuck["subject"] == "explore/p2"
    assert "DaemonSet %s (driver gpu.example.com) does not run on this node" % DAEMONSET in stuck["next_step"]
    assert "exclusion label" in stuck["next_step"]
    assert report["repairs"] == [] and report["force_delete_safe"] == []
    assert report_of(result, "nsx-worker")["findings"] == []
    assert result["counts"]["pod_stuck_terminating"] == 1 and result["repairs"] == 0


def test_a_pod_deleted_a_moment_ago_is_not_stuck_yet():
    rec = scenario("stuck")
    stamp = max(epoch_seconds(p["metadata"]["deletionTimestamp"]) for p in rec["pods"]
                if p["metadata"].get("deletionTimestamp"))
    assert report_of(run(rec, now=stamp + node_check.STUCK_AFTER_SECONDS - 1))["findings"] == []


def test_a_stuck_pod_whose_claims_are_unprepared_and_containers_stopped_may_be_force_deleted():
    rec = scenario("stuck")
    state = state_of(rec)
    state["checkpoint"]["claims"] = []
    report = report_of(run(rec))
    assert report["findings"][0]["reason"] == node_check.REASON_UNPREPARED
    assert [p["name"] for p in report["force_delete_safe"]] == ["p2"]


def test_no_force_delete_when_the_node_cannot_tell():
    rec = scenario("stuck")
    state = state_of(rec)
    state["checkpoint"]["claims"] = []
    state["containers"] = {"available": False, "crictl": None, "reason": "crictl not found", "items": []}
    report = report_of(run(rec))
    assert report["findings"][0]["reason"] == node_check.REASON_UNKNOWN and report["force_delete_safe"] == []


def test_a_stuck_pod_whose_driver_answers_is_an_unprepare_failure():
    rec = scenario("stuck")
    healthy = state_of(rec, "nsx-worker")
    state_of(rec)["registration"] = copy.deepcopy(healthy["registration"])
    stuck = [f for f in report_of(run(rec))["findings"] if f["kind"] == "pod_stuck_terminating"]
    assert stuck[0]["reason"] == node_check.REASON_UNPREPARE_FAILING
    assert "read the driver plugin's log" in stuck[0]["next_step"]


def test_a_claim_deleted_while_the_kubelet_was_down_is_a_stale_checkpoint_entry():
    rec = scenario("ckpt")
    report = report_of(run(rec))
    assert report["kubelet_running"] is False
    assert kinds(report) == ["stale_cdi_spec", "stale_checkpoint_claim"], report
    held = [f for f in report["findings"] if f["kind"] == "stale_checkpoint_claim"][0]
    assert "gone from the API" in held["message"] and held["pods_running"], held
    assert held["next_step"].startswith("start the kubelet") and held["repair"] is None
    spec = [f for f in report["findings"] if f["kind"] == "stale_cdi_spec"][0]
    assert spec["repair"] is None and "still use it" in spec["next_step"]
    assert report_of(run(rec), "nsx-worker")["findings"] == []


def test_with_the_kubelet_running_the_entry_waits_for_its_reconcile():
    rec = scenario("ckpt")
    state_of(rec)["kubelet_running"] = True
    held = [f for f in report_of(run(rec))["findings"] if f["kind"] == "stale_checkpoint_claim"][0]
    assert held["next_step"].startswith("nothing to do but wait")


def test_a_spec_the_kubelet_still_holds_is_not_moved():
    rec = scenario("ckpt")
    state_of(rec)["containers"]["items"] = []
    for spec in state_of(rec)["cdi_specs"]:
        spec["used_by"] = []
    spec = [f for f in report_of(run(rec))["findings"] if f["kind"] == "stale_cdi_spec"][0]
    assert spec["repair"] is None and "still holds claim" in spec["next_step"]


def test_a_spec_of_a_gone_claim_that_nothing_uses_or_holds_is_the_one_repair():
    rec = scenario("ckpt")
    state = state_of(rec)
    uid = state["checkpoint"]["claims"][0]["uid"]
    state["checkpoint"]["claims"] = []
    state["containers"]["items"] = []
    for spec in state["cdi_specs"]:
        spec["used_by"] = []
    report = report_of(run(rec))
    assert kinds(report) == ["stale_cdi_spec"]
    assert report["repairs"] == [{"kind": "cdi_spec", "path": "/var/run/cdi/k8s.gpu.example.com-gpu_%s.yaml" % uid,
                                  "claim_uids": [uid], "reason": report["repairs"][0]["reason"]}]


def registration_entry(uid, answers):
    name = "gpu.example.com-%s-reg.sock" % uid
    return {"name": name, "path": "/var/lib/kubelet/plugins_registry/" + name, "driver": "gpu.example.com",
            "pod_uid": uid, "naming": "rolling-update", "is_socket": True, "answers": answers,
            "error": None if answers else "Connection refused"}


def test_a_dead_socket_of_a_pod_that_is_gone_is_removed_one_of_a_running_pod_is_not():
    rec = scenario("ckpt")
    state = state_of(rec, "nsx-worker")
    live_uid = state["registration"]["sockets"][0]["pod_uid"]
    state["registration"]["sockets"].append(registration_entry("0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11", False))
    report = report_of(run(rec), "nsx-worker")
    assert kinds(report) == ["dead_socket"] and report["repairs"][0]["kind"] == "socket"
    state["registration"]["sockets"] = [registration_entry(live_uid, False)]
    report = report_of(run(rec), "nsx-worker")
    assert sorted(kinds(report)) == ["dead_socket", "driver_without_socket"], report
    dead = [f for f in report["findings"] if f["kind"] == "dead_socket"][0]
    assert dead["repair"] is None and "restart the pod" in dead["next_step"]


def test_sockets_of_other_plugins_are_not_the_checks():
    rec = scenario("ckpt")
    state = state_of(rec, "nsx-worker")
    csi = registration_entry("0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11", False)
    csi.update(driver="hostpath.csi.k8s.io", name="hostpath.csi.k8s.io-reg.sock")
    state["registration"]["sockets"].append(csi)
    assert report_of(run(rec), "nsx-worker")["findings"] == []


def test_a_driver_publishing_for_a_node_without_a_socket_is_named_with_its_daemonset():
    rec = scenario("ckpt")
    state_of(rec, "nsx-worker")["registration"]["sockets"] = []
    report = report_of(run(rec), "nsx-worker")
    assert kinds(report) == ["driver_without_socket"]
    assert "DaemonSet %s (driver gpu.example.com) selects this node" % DAEMONSET in report["findings"][0]["next_step"]


def test_a_claim_allocated_to_another_node_is_stale_here():
    """The stuck pod's claim is allocated to nsx-worker2; held prepared by nsx-worker's kubelet it is stale there."""
    rec = scenario("stuck")
    held = copy.deepcopy(state_of(rec)["checkpoint"]["claims"][0])
    assert held["uid"] in [c["metadata"]["uid"] for c in rec["resourceclaims"]]
    state_of(rec, "nsx-worker")["checkpoint"]["claims"] = [held]
    result = run(rec)
    stale = [f for f in report_of(result, "nsx-worker")["findings"] if f["kind"] == "stale_checkpoint_claim"]
    assert [f["subject"] for f in stale] == [held["uid"]]
    assert "no longer allocated to or reserved on this node" in stale[0]["message"]
    assert not [f for f in report_of(result)["findings"] if f["kind"] == "stale_checkpoint_claim"]


def test_unknown_files_are_reported_and_nothing_is_concluded_from_them():
    rec = scenario("ckpt")
    state = state_of(rec, "nsx-worker")
    state["checkpoint"].update(format="unknown", error="not JSON", claims=[])
    state["cdi_specs"].append({"path": "/etc/cdi/x.json", "format": "unknown", "error": "not JSON", "claim_uids": [],
                               "devices": [], "used_by": []})
    assert kinds(report_of(run(rec), "nsx-worker")) == ["unreadable_node_state", "unreadable_node_state"]


class FakeApi(object):
    """The recorded objects behind the paths node_check_service lists; counts requests as DraApi does."""

    def __init__(self, rec):
        self.rec, self.requests = rec, 0

    def resource_api_version(self):
        self.requests += 1
        return "v1"

    def resource_path(self, plural, version=None):
        return "/apis/resource.k8s.io/%s/%s" % (version, plural)

    def list_items(self, path):
        self.requests += 1
        return iter(self.rec[path.rsplit("/", 1)[1]])


def test_the_api_is_read_once_for_every_node():
    rec = scenario("stuck")
    one = FakeApi(rec)
    node_check_service.run_check(one, rec["node_states"][:1], now=2000000000)
    both = FakeApi(rec)
    report = node_check_service.run_check(both, {"a": rec["node_states"][0], "b": rec["node_states"][1]},
                                          now=2000000000)
    assert one.requests == both.requests == 6 and report["resource_api_version"] == "v1"


@pytest.mark.parametrize("states", [[], {}, [{"node": "x"}]])
def test_node_states_that_are_not_the_facts_are_refused(states):
    with pytest.raises(InputError, match="dra_node_state"):
        node_check_service.run_check(FakeApi(scenario("stuck")), states)
