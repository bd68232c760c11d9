"""The explainer on a real cluster's objects (fixtures/allocation/kwok-v1.37.2.json), against what kube-scheduler
did with the same pods.

Recorded on a v1.37.2 KWOK cluster (3 nodes, 8 devices of the example driver each): `rec/holder` holds 6
devices of node-000000; a DeviceTaintRule taints node-000001's pool NoSchedule; the other pods of namespace
`rec` were recorded while gated (the explainer's input), then ungated: `outcomes` is where the scheduler put each
(or its PodScheduled reason). Each case's reason is known from how it was made.
"""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import cel
from ansible_collections.dra.admin.plugins.module_utils.allocation import explain, explain_service, search

from conftest import FIXTURES

RECORDED = os.path.join(FIXTURES, "allocation", "kwok-v1.37.2.json")


def recorded_cluster():
    """(the cluster as explain_service.read_cluster gives it, the scheduler's features, the pods as recorded,
    the scheduler's outcomes) of the recorded fixture."""
    with open(RECORDED) as handle:
        data = json.load(handle)
    by_kind = {}
    for item in data["items"]:
        by_kind.setdefault(item["kind"], []).append(item)
    cluster = {"server_version": data["server_version"], "slices": by_kind["ResourceSlice"],
               "claims": by_kind["ResourceClaim"], "nodes": by_kind["Node"], "templates": [],
               "classes": dict((c["metadata"]["name"], c) for c in by_kind["DeviceClass"]),
               "rules": by_kind.get("DeviceTaintRule", []),
               "pods": [p for p in by_kind["Pod"] if not p["spec"].get("nodeName")]}
    return cluster, set(data["features"]), by_kind["Pod"], data["outcomes"]


@pytest.fixture(scope="module")
def recorded():
    cluster, features, dummy, outcomes = recorded_cluster()
    ctx = explain.context(cel.Environment(37), cluster, features)
    claims = dict(("%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]), c) for c in cluster["claims"])
    answers = {}
    for subject, pod, label in explain_service.subjects(cluster, "rec"):
        answers[pod["metadata"]["name"]] = explain_service.explain_subject(ctx, subject, pod, label, claims, {},
                                                                           cluster, explain.DETAIL_DEVICES)
    return answers, outcomes


def test_every_verdict_agrees_with_the_scheduler(recorded):
    answers, outcomes = recorded
    assert set(answers) == set(outcomes) - {"holder"}
    for name, answer in answers.items():
        node = outcomes[name]["node"]
        if answer["verdict"] == search.FITS:
            assert node in answer["fits_on"], (name, answer["message"], outcomes[name])
        else:
            assert node is None, (name, answer["message"], outcomes[name])


def request_row(answers, pod):
    (row,) = answers[pod]["requests"]
    return row


@pytest.mark.parametrize("pod,reason,count", [
    ("selector-miss", search.REQUEST_SELECTOR, 24),
    ("tainted", search.TAINTED, 8),
    ("exhausted", search.IN_USE, 6),
    ("cel-error", search.SELECTOR_ERROR, 8),
    ("unsupported", search.CANNOT_EVALUATE, 8),
])
def test_known_reason_is_counted(recorded, pod, reason, count):
    answers, dummy = recorded
    row = request_row(answers, pod)
    assert row["excluded"].get(reason) == count, row


def test_exhausted_pool_says_what_is_left(recorded):
    answers, dummy = recorded
    answer = answers["exhausted"]
    assert answer["verdict"] == search.DOES_NOT_FIT
    assert request_row(answers, "exhausted")["available"] == 2
    assert "needs 3 device(s)" in answer["message"] and "are allocated to other claims" in answer["message"]


def test_selector_error_fails_the_node_as_the_scheduler_does(recorded):
    answers, dummy = recorded
    answer = answers["cel-error"]
    assert answer["verdict"] == search.DOES_NOT_FIT
    assert "kube-scheduler stops with an error" in answer["message"]


def test_unsupported_expression_is_never_a_fit(recorded):
    answers, dummy = recorded
    assert answers["unsupported"]["verdict"] == search.CANNOT_TELL
    assert answers["unsupported"]["fits_on"] == []


def test_admin_access_may_take_allocated_devices(recorded):
    answers, dummy = recorded
    assert answers["admin"]["fits_on"] == ["node-000000"]
    assert "allocated" not in request_row(answers, "admin")["excluded"]


def test_first_available_falls_back_to_the_second_subrequest(recorded):
    answers, dummy = recorded
    rows = answers["first-available"]["requests"]
    assert [r["request"] for r in rows] == ["g/many", "g/one"]
    # node-000001 is tainted by the rule and the request tolerates nothing
    assert rows[0]["nodes_with_enough"] == 0 and rows[1]["nodes_with_enough"] == 2
    assert answers["first-available"]["verdict"] == search.FITS


def test_constraint_that_no_pair_meets_is_named(recorded):
    answers, dummy = recorded
    answer = answers["constraint"]
    assert answer["verdict"] == search.DOES_NOT_FIT
    assert "not together on one node" in answer["message"]


def test_taint_rule_tolerated_fits_only_there(recorded):
    answers, dummy = recorded
    assert answers["tolerated"]["fits_on"] == ["node-000001"]
    assert answers["tainted"]["verdict"] == search.DOES_NOT_FIT


def test_pods_alike_share_one_search_and_keep_their_own_claim_names():
    """Two pods asking alike (only their claims' names differ) get the answer each would get alone."""
    cluster, features, dummy, dummy2 = recorded_cluster()
    ctx = explain.context(cel.Environment(37), cluster, features)
    spec = next(c for c in cluster["claims"] if c["metadata"]["name"] == "exhausted")["spec"]
    memo = {}
    answers = []
    for name in ("rec/one", "rec/two"):
        claim = search.Claim(name, spec)
        shared = explain.explain(ctx, {"claim": name}, [claim], [], [], cluster["nodes"], None,
                                 explain.DETAIL_DEVICES, memo)
        alone = explain.explain(ctx, {"claim": name}, [search.Claim(name, spec)], [], [], cluster["nodes"], None,
                                explain.DETAIL_DEVICES)
        assert shared == alone
        answers.append(shared)
    assert len(memo) == 1
    assert answers[1]["requests"][0]["claim"] == "rec/two" and "rec/one" not in json.dumps(answers[1])


# --- the rest of the pod: resources left on each node, and filters not modelled (kube.pod_fit) ----------------

@pytest.fixture(scope="module")
def recorded_objects():
    cluster, features, dummy, outcomes = recorded_cluster()
    return cluster, features


def explain_one(cluster, features, pod):
    ctx = explain.context(cel.Environment(37), cluster, features)
    claims = dict(("%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]), c) for c in cluster["claims"])
    subject = {"pod": "%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"])}
    return explain_service.explain_subject(ctx, subject, pod, None, claims, {}, cluster, explain.DETAIL_NODES)


def fitting_pod(cluster, features):
    """A recorded pod the explainer answers fits (ungated: the gate is a problem of its own)."""
    for subject, pod, label in explain_service.subjects(cluster, "rec"):
        pod = copy.deepcopy(pod)
        pod["spec"].pop("schedulingGates", None)
        if explain_one(cluster, features, pod)["verdict"] == search.FITS:
            return pod
    raise AssertionError("no recorded pod fits")


def test_a_node_whose_cpu_is_taken_is_ruled_out_and_a_pod_too_big_for_every_node_does_not_fit(recorded_objects):
    cluster, features = recorded_objects
    pod = fitting_pod(cluster, features)
    pod["spec"]["containers"][0].setdefault("resources", {})["requests"] = {"cpu": "1"}
    fits_on = explain_one(cluster, features, pod)["fits_on"]
    assert fits_on
    hog = {"metadata": {"name": "hog", "namespace": "default"}, "status": {"phase": "Running"},
           "spec": {"nodeName": fits_on[0], "containers": [{"name": "c", "resources": {"requests": {"cpu": "32"}}}]}}
    cluster = dict(cluster, bound_pods=[hog])
    answer = explain_one(cluster, features, pod)
    assert fits_on[0] not in answer["fits_on"] and answer["verdict"] in (search.FITS, search.DOES_NOT_FIT)
    ruled_out = [o for o in answer["nodes"] if o["name"] == fits_on[0]][0]
    assert ruled_out["node_reason"].startswith("Insufficient cpu (the pod requests")
    huge = copy.deepcopy(pod)
    huge["spec"]["containers"][0].setdefault("resources", {})["requests"] = {"cpu": "1000"}
    answer = explain_one(cluster, features, huge)
    assert answer["verdict"] == search.DOES_NOT_FIT and "Insufficient cpu" in answer["message"]


def test_pods_that_differ_only_in_what_they_request_do_not_share_a_search(recorded_objects):
    """Explained together (one memo, as the module explains a namespace), a pod too big for every node and one
    like it but small get their own answers: the search key holds every field the node filters read."""
    cluster, features = recorded_objects
    small = fitting_pod(cluster, features)
    huge = copy.deepcopy(small)
    huge["metadata"]["name"] = "huge"
    huge["spec"]["containers"][0].setdefault("resources", {})["requests"] = {"cpu": "1000"}
    ctx = explain.context(cel.Environment(37), cluster, features)
    claims = dict(("%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]), c) for c in cluster["claims"])
    memo = {}
    answers = [explain_service.explain_subject(ctx, {"pod": pod["metadata"]["name"]}, pod, None, claims, {}, cluster,
                                               explain.DETAIL_NODES, memo) for pod in (huge, small)]
    assert answers[0]["verdict"] == search.DOES_NOT_FIT and "Insufficient cpu" in answers[0]["message"]
    assert answers[1]["verdict"] == search.FITS and "Insufficient cpu" not in answers[1]["message"]
    assert len(memo) == 2
    other = copy.deepcopy(small)  # another pod like it with a claim of its own name: the same search
    other["spec"]["hostname"] = "other-0"
    for entry in other["spec"].get("resourceClaims") or ():
        entry.pop("resourceClaimTemplateName", None)
        entry["resourceClaimName"] = "renamed"
    assert explain.search_key([], [], other["spec"]) == explain.search_key([], [], small["spec"])


def test_fits_is_cannot_tell_where_the_pod_uses_a_filter_not_modelled(recorded_objects):
    cluster, features = recorded_objects
    pod = fitting_pod(cluster, features)
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "other"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    answer = explain_one(cluster, features, pod)
    assert answer["verdict"] == search.CANNOT_TELL and answer["unchecked"] == ["required pod anti-affinity"]
    assert "kube-scheduler also checks what is not modelled here: required pod anti-affinity" in answer["message"]


def test_the_schedulers_last_word_stands_beside_the_explanation(recorded_objects):
    cluster, features = recorded_objects
    pod = fitting_pod(cluster, features)
    # Recorded while gated: the scheduler's word then (no disagreement: it did not try).
    answer = explain_one(cluster, features, pod)
    assert answer["scheduler"]["reason"] == "SchedulingGated" and not answer["problems"]
    pod["status"]["conditions"] = []
    assert explain_one(cluster, features, pod)["scheduler"] is None
    pod["status"]["conditions"] = [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": "2026-12-07T06:00:00Z",
        "message": "0/3 nodes are available: 3 Insufficient cpu."}]
    answer = explain_one(cluster, features, pod)
    assert answer["scheduler"] == {"reason": "Unschedulable", "since": "2026-12-07T06:00:00Z",
                                   "message": "0/3 nodes are available: 3 Insufficient cpu."}
    assert answer["verdict"] == search.FITS
    assert any("kube-scheduler's last attempt (2026-12-07T06:00:00Z) found no node: 0/3 nodes are available: 3 "
               "Insufficient cpu. - it and this explanation disagree" in p for p in answer["problems"])
    assert "but kube-scheduler's last attempt" in answer["message"]
