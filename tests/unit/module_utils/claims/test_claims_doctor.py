"""The claim doctor on API answers recorded from the real cluster (Kubernetes v1.36.3, hack/cluster/up, 2 KWOK
nodes, the example driver), by a DraApi that kept every answer the module read (its path as the key).

fixtures/doctor/findings.json, in namespace doc, with kube-controller-manager stopped:
  orphan-pod-gpu-*  its pod (node-000000) force-deleted: reserved for a pod that is gone
  term-pod-gpu-*    its pod on node-000001, deleted with a 600 s grace period: terminating
  held              a claim made by hand, used by held-pod on node-000001, then deleted
  ok-pod-gpu-*      a pod on node-000000 using it: healthy
  node-000001's kubelet plugin stopped and its ResourceSlice deleted (what the kubelet does when the
  plugin is gone).
fixtures/doctor/findings-consumer-gone.json: the same after held-pod was force-deleted.
"""
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.claims import doctor as doctor_rules
from ansible_collections.dra.admin.plugins.module_utils.claims import doctor_service
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi
from conftest import FIXTURES

FIX = os.path.join(FIXTURES, "doctor")
# The clock of the recording: after every deletion, before term-pod's grace period ended (17:18:01).
RECORDED_AT = doctor_rules.epoch("2026-11-23T17:08:30Z")


class ReplayApi(DraApi):
    """Answers GETs from a recording; keeps every write."""

    def __init__(self, name):
        super(ReplayApi, self).__init__(api_client=object())
        with open(os.path.join(FIX, name)) as fh:
            self.recorded = json.load(fh)
        self.writes = []

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        self.requests += 1
        if method != "GET":
            self.writes.append((method, path, body, content_type))
            return {}
        return json.loads(json.dumps(self.recorded[path]))


def by_kind(findings):
    out = {}
    for finding in findings:
        out.setdefault(finding["kind"], []).append(finding)
    return out


def test_each_finding_of_the_recorded_cluster():
    api = ReplayApi("findings.json")
    found = by_kind(doctor_service.examine(api, now=RECORDED_AT)["findings"])
    assert sorted(found) == sorted(doctor_rules.KINDS)
    (orphan,) = found["orphaned"]
    assert orphan["claim"].startswith("doc/orphan-pod-gpu-") and orphan["action"] == doctor_rules.RESYNC
    assert "pods/orphan-pod" in orphan["message"]
    (stuck,) = found["stuck_deletion"]
    assert stuck["claim"] == "doc/held" and stuck["nodes"] == ["node-000001"]
    assert stuck["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert stuck["action"] is None and "held-pod" in stuck["refused"]
    (pod,) = found["pod_stuck_terminating"]
    assert (pod["pod"], pod["node"], pod["drivers"]) == ("doc/term-pod", "node-000001", ["gpu.example.com"])
    assert pod["claims"][0].startswith("doc/term-pod-gpu-") and pod["overdue_seconds"] == 0
    assert sorted(f["claim"].split("-gpu-")[0] for f in found["missing_devices"]) == ["doc/held", "doc/term-pod"]
    assert all(d.startswith("gpu.example.com/node-000001/") for f in found["missing_devices"] for d in f["devices"])
    # A fixed number of requests: discovery, nodes, slices, pods, claims.
    assert api.requests == 5 and not api.writes


def test_a_pod_past_its_grace_period_says_by_how_much():
    found = by_kind(doctor_service.examine(ReplayApi("findings.json"), now=doctor_rules.epoch("2026-11-23T17:19:01Z"))["findings"])
    assert found["pod_stuck_terminating"][0]["overdue_seconds"] == 60
    assert "60s past its grace period" in found["pod_stuck_terminating"][0]["message"]


def test_finalizers_are_removed_only_with_force_and_without_a_consumer():
    refused = by_kind(doctor_service.examine(ReplayApi("findings-consumer-gone.json"), now=RECORDED_AT)["findings"])
    assert refused["stuck_deletion"][0]["action"] is None
    assert "force: true" in refused["stuck_deletion"][0]["refused"]
    api = ReplayApi("findings-consumer-gone.json")
    found = doctor_service.examine(api, force=True, now=RECORDED_AT)
    (stuck,) = by_kind(found["findings"])["stuck_deletion"]
    assert stuck["action"] == doctor_rules.REMOVE_FINALIZERS and "scheduler may give them" in stuck["warning"]
    todo = doctor_rules.plan(found["findings"], ["stuck_deletion"])
    assert [f["claim"] for f in todo] == ["doc/held"]
    doctor_service.carry_out(api, found["version"], stuck, found["metas"]["doc/held"])
    ((method, path, body, content_type),) = api.writes
    assert (method, path, content_type) == ("PATCH", "/apis/resource.k8s.io/v1/namespaces/doc/resourceclaims/held",
                                            "application/json-patch+json")
    assert body[0] == {"op": "test", "path": "/metadata/uid", "value": found["metas"]["doc/held"]["uid"]}
    assert body[1]["value"] == ["resource.kubernetes.io/delete-protection"]
    assert body[2] == {"op": "replace", "path": "/metadata/finalizers", "value": []}


def test_the_orphan_fix_is_an_annotation_conditional_on_the_resource_version():
    api = ReplayApi("findings.json")
    found = doctor_service.examine(api, now=RECORDED_AT)
    (orphan,) = doctor_rules.plan(found["findings"], ["orphaned"])
    meta = found["metas"][orphan["claim"]]
    doctor_service.carry_out(api, found["version"], orphan, meta)
    ((method, path, body, content_type),) = api.writes
    assert method == "PATCH" and content_type == "application/merge-patch+json" and path.endswith(orphan["name"])
    assert body["metadata"]["resourceVersion"] == meta["resourceVersion"]
    assert list(body["metadata"]["annotations"]) == [doctor_rules.RESYNC_ANNOTATION]
    before, after = doctor_rules.claim_diff(orphan, meta)
    assert doctor_rules.RESYNC_ANNOTATION not in before["annotations"] and doctor_rules.RESYNC_ANNOTATION in after["annotations"]


def test_nothing_is_planned_without_fix_and_report_only_kinds_have_no_action():
    found = doctor_service.examine(ReplayApi("findings.json"), force=True, now=RECORDED_AT)["findings"]
    assert doctor_rules.plan(found, []) == []
    assert all(f["action"] is None for f in found if f["kind"] in ("pod_stuck_terminating", "missing_devices"))


def test_an_unreserved_claim_of_a_gone_pod_is_deleted_one_made_by_hand_only_reported():
    recorded = ReplayApi("findings.json").recorded
    claims = recorded["/apis/resource.k8s.io/v1/resourceclaims"]["items"]
    generated = next(c for c in claims if c["metadata"]["name"].startswith("orphan-pod-gpu-"))
    generated["status"].pop("reservedFor")
    by_hand = json.loads(json.dumps(generated))
    by_hand["metadata"].update(name="by-hand", ownerReferences=[])
    claims.append(by_hand)
    # An allocated claim reserved for nobody may be a workload's PodGroup's: the doctor looks for PodGroups, which
    # this cluster (1.36, GenericWorkload off) does not serve - scheduling.k8s.io/v1 has PriorityClasses only.
    version = {"groupVersion": "scheduling.k8s.io/v1", "version": "v1"}
    recorded["/apis/scheduling.k8s.io"] = {"kind": "APIGroup", "name": "scheduling.k8s.io",
                                           "preferredVersion": version, "versions": [version]}
    recorded["/apis/scheduling.k8s.io/v1"] = {"kind": "APIResourceList", "groupVersion": "scheduling.k8s.io/v1",
                                              "resources": [{"name": "priorityclasses", "namespaced": False,
                                                             "kind": "PriorityClass"}]}
    api = ReplayApi("findings.json")
    api.recorded = recorded
    orphans = dict((f["name"], f) for f in by_kind(doctor_service.examine(api, now=RECORDED_AT)["findings"])["orphaned"])
    assert orphans[generated["metadata"]["name"]]["action"] == doctor_rules.DELETE
    assert orphans["by-hand"]["action"] is None and "Delete the claim" in orphans["by-hand"]["advice"]
    doctor_service.carry_out(api, "v1", orphans[generated["metadata"]["name"]], generated["metadata"])
    ((method, dummy, body, dummy2),) = api.writes
    assert method == "DELETE" and body["preconditions"]["uid"] == generated["metadata"]["uid"]


def test_no_finding_once_the_driver_is_back():
    api = ReplayApi("findings.json")
    slices = api.recorded["/apis/resource.k8s.io/v1/resourceslices"]["items"]
    back = json.loads(json.dumps(slices[0]))
    back["metadata"]["name"] = "back"
    back["spec"].update(nodeName="node-000001", pool=dict(back["spec"]["pool"], name="node-000001"))
    slices.append(back)
    kinds = set(f["kind"] for f in doctor_service.examine(api, now=RECORDED_AT)["findings"])
    assert kinds == {"orphaned"}  # the controller, not the driver, releases that one


@pytest.mark.parametrize("fix, force, error", [
    (["pod_stuck_terminating"], False, "reported only"),
    (["orphaned"], True, "force: true only applies"),
])
def test_bad_fix_requests_name_the_field(fix, force, error):
    errors = doctor_rules.validate_fix(fix, force)
    assert errors and error in " ".join(errors)


def test_good_fix_requests():
    assert doctor_rules.validate_fix(["orphaned", "stuck_deletion"], True) == []
    want = {"orphaned": 1, "stuck_deletion": 0, "pod_stuck_terminating": 0, "missing_devices": 0}
    assert doctor_rules.counts([{"kind": "orphaned"}]) == want
