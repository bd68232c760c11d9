"""Effect Evict's pure part (devices.evictions): the waves, what is still waited for, what kept pods, on objects
recorded from the local v1.37.2 control plane (tests/integration/test_device_eviction.py with DRA_IT_RECORD):

- three-waves: two bare pods s1, s2 sharing claim "shared", Deployment "train" (two pods, template claims, no
  budget) and Deployment "web" (two pods, template claims) under PodDisruptionBudget "web" (maxUnavailable 1),
  all allocated from pool "rack" of evict.example.com; pool "spare" on another node unused (KWOK completes a
  Job's pods at once, so the Job's pods are those of "train" given a Job as their controller);
- held: Deployment "precious" (one pod) under PodDisruptionBudget "precious" (maxUnavailable 0).
"""
import copy

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import pod_ref
from ansible_collections.dra.admin.plugins.module_utils.devices import evictions as ev
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import (
    affected_claims, selected_devices, selector,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import label_selector_matches
from conftest import recorded_by_kind

DRIVER = "evict.example.com"
TAINT = {"key": "dra.admin/maintenance", "effect": "NoExecute"}


def recorded(moment):
    return recorded_by_kind("device-eviction-%s-v1.37.2.json" % moment)


def affected(objs, pool, pods=None, claims=None):
    pods = objs["Pod"] if pods is None else pods
    by_uid = dict((p["metadata"]["uid"], pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                  for p in pods)
    sel = selector(DRIVER, pool)
    devices = selected_devices(objs["ResourceSlice"], sel)
    return affected_claims(objs["ResourceClaim"] if claims is None else claims, devices, TAINT, by_uid, sel=sel)


def names(objs, prefix):
    return sorted("%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]) for p in objs["Pod"]
                  if p["metadata"]["name"].startswith(prefix))


def as_job_pods(objs, prefix, job):
    """The pods named with `prefix` controlled by Job `job` instead of their ReplicaSet."""
    for pod in objs["Pod"]:
        if pod["metadata"]["name"].startswith(prefix):
            pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                                   "uid": "job-uid", "controller": True}]


def test_waves_group_a_shared_claim_and_a_budget_and_leave_unrelated_pods_alone():
    objs = recorded("three-waves")
    ns = objs["Pod"][0]["metadata"]["namespace"]
    waves = ev.plan_waves(affected(objs, "rack"), objs["Pod"], objs["PodDisruptionBudget"])
    train = names(objs, "train-")
    assert [w["wave"] for w in waves] == [1, 2, 3, 4]
    assert [w["pods"] for w in waves] == [names(objs, "s"), train[:1], train[1:], names(objs, "web-")]
    shared, web = waves[0], waves[3]
    assert shared["claims"] == ["%s/shared" % ns] and shared["unmanaged"] == names(objs, "s")
    assert shared["pod_disruption_budgets"] == [] and shared["jobs"] == []
    assert waves[1]["unmanaged"] == [] and len(waves[1]["claims"]) == 1
    assert web["pod_disruption_budgets"] == ["%s/web" % ns] and web["jobs"] == [] and len(web["claims"]) == 2
    assert all(w["terminating"] == [] for w in waves)
    # The budgets as the dry run shows them: the disruption controller's counts.
    [view] = ev.budget_views(objs["PodDisruptionBudget"], set(web["pod_disruption_budgets"]))
    assert view == {"name": "%s/web" % ns, "disruptions_allowed": 1, "current_healthy": 2, "desired_healthy": 1,
                    "expected_pods": 2, "spec": {"maxUnavailable": 1}}


def test_the_pods_of_one_job_go_together():
    objs = copy.deepcopy(recorded("three-waves"))
    ns = objs["Pod"][0]["metadata"]["namespace"]
    as_job_pods(objs, "train-", "train")
    waves = ev.plan_waves(affected(objs, "rack"), objs["Pod"], objs["PodDisruptionBudget"])
    assert [w["pods"] for w in waves] == [names(objs, "s"), names(objs, "train-"), names(objs, "web-")]
    assert waves[1]["jobs"] == ["%s/train" % ns] and len(waves[1]["claims"]) == 2


def test_a_budget_over_two_workloads_joins_their_waves():
    objs = copy.deepcopy(recorded("three-waves"))
    ns = objs["Pod"][0]["metadata"]["namespace"]
    # One budget selecting train's pods and s1 (matchExpressions): the shared claim pulls s2 in as well.
    objs["PodDisruptionBudget"].append({"metadata": {"name": "both", "namespace": ns}, "spec": {"selector": {
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["train", "s1"]}]}}})
    waves = ev.plan_waves(affected(objs, "rack"), objs["Pod"], objs["PodDisruptionBudget"])
    assert [w["pods"] for w in waves] == [names(objs, "s") + names(objs, "train-"), names(objs, "web-")]
    assert waves[0]["pod_disruption_budgets"] == ["%s/both" % ns]


def test_budgets_of_another_namespace_or_a_null_selector_cover_nothing_and_an_empty_one_all():
    objs = recorded("three-waves")
    pod = [p for p in objs["Pod"] if p["metadata"]["name"] == "s1"][0]
    ns = pod["metadata"]["namespace"]
    pdbs = [{"metadata": {"name": "elsewhere", "namespace": "other"}, "spec": {"selector": {}}},
            {"metadata": {"name": "none", "namespace": ns}, "spec": {}},
            {"metadata": {"name": "every", "namespace": ns}, "spec": {"selector": {}}}]
    assert ev.covering_budgets(pod, pdbs) == ["%s/every" % ns]
    assert label_selector_matches({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["s1"]}]},
                                  pod["metadata"]["labels"]) is False
    assert label_selector_matches({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
                                  pod["metadata"]["labels"]) is True


def test_claims_tolerating_for_ever_keep_their_pods_out_of_the_waves():
    objs = copy.deepcopy(recorded("three-waves"))
    for claim in objs["ResourceClaim"]:
        if claim["metadata"]["name"] == "shared":
            for result in claim["status"]["allocation"]["devices"]["results"]:
                result["tolerations"] = [{"key": TAINT["key"], "operator": "Exists", "effect": "NoExecute"}]
    waves = ev.plan_waves(affected(objs, "rack"), objs["Pod"], objs["PodDisruptionBudget"])
    train = names(objs, "train-")
    assert [w["pods"] for w in waves] == [train[:1], train[1:], names(objs, "web-")]
    assert [w["wave"] for w in waves] == [1, 2, 3]


def test_another_pool_has_no_waves():
    objs = recorded("three-waves")
    assert ev.plan_waves(affected(objs, "spare"), objs["Pod"], objs["PodDisruptionBudget"]) == []


def test_waiting_for_a_wave_then_the_claims_then_nothing():
    objs = recorded("three-waves")
    now = affected(objs, "rack")
    waves = ev.plan_waves(now, objs["Pod"], objs["PodDisruptionBudget"])
    assert ev.eviction_waiting_for(waves, objs["Pod"], now) == (ev.WAVE_EVICTED, names(objs, "s"), 1)
    # The first wave gone: the second is waited for; a pod of the same name but another UID is a new pod.
    left = [p for p in objs["Pod"] if not p["metadata"]["name"].startswith("s")]
    renamed = copy.deepcopy([p for p in objs["Pod"] if p["metadata"]["name"] == "s1"][0])
    renamed["metadata"]["uid"] = "another"
    assert ev.eviction_waiting_for(waves, left + [renamed], now) == (ev.WAVE_EVICTED, names(objs, "train-")[:1], 2)
    # Every pod gone, the claims still allocated a device of the pool: the claims are waited for.
    wait, pending, number = ev.eviction_waiting_for(waves, [], now)
    assert wait == ev.CLAIMS_RELEASED and number is None and "%s/shared" % objs["Pod"][0]["metadata"]["namespace"] in pending
    assert len(pending) == 5
    assert ev.eviction_waiting_for(waves, [], []) == (None, [], None)


def test_what_kept_pods_and_the_failure_message():
    objs = recorded("held")
    now = affected(objs, "held")
    waves = ev.plan_waves(now, objs["Pod"], objs["PodDisruptionBudget"])
    [pod] = names(objs, "precious-")
    ns = pod.split("/")[0]
    assert [(w["pods"], w["pod_disruption_budgets"]) for w in waves] == [([pod], ["%s/precious" % ns])]
    [view] = ev.budget_views(objs["PodDisruptionBudget"], {"%s/precious" % ns})
    assert view["disruptions_allowed"] == 0 and view["spec"] == {"maxUnavailable": 0}
    said = "The disruption budget precious needs 1 healthy pods and has 1 currently"
    refused = ev.not_evicted([{"pod": pod, "reason": "budget", "pdbs": ["%s/precious" % ns],
                               "message": "%s refused by PodDisruptionBudget %s/precious (%s)" % (pod, ns, said)}], waves)
    assert refused == [{"pod": pod, "wave": 1, "reason": "budget", "pod_disruption_budgets": ["%s/precious" % ns],
                        "message": "%s refused by PodDisruptionBudget %s/precious (%s)" % (pod, ns, said)}]
    text = ev.eviction_failure_message("dra-admin-x", 30, refused, [2, 3], ["%s/c" % ns])
    assert text.startswith("DeviceTaintRule dra-admin-x is in place with effect NoSchedule")
    assert "after 30s" in text and "%s (wave 1)" % pod in text and said in text
    assert "waves not started: 2, 3" in text and "claims still holding the devices: %s/c" % ns in text
    assert "relax the PodDisruptionBudget(s) %s/precious" % ns in text and "state=absent" in text
    terminating = ev.not_evicted([{"pod": pod, "reason": "terminating", "pdbs": [], "message": ""}], waves)
    assert "evicted but still terminating" in ev.eviction_failure_message("r", 5, terminating, [])


def test_report_at_the_end_and_terminating_pods():
    objs = copy.deepcopy(recorded("three-waves"))
    now = affected(objs, "rack")
    waves = ev.plan_waves(now, objs["Pod"], objs["PodDisruptionBudget"])
    assert ev.eviction_report(now, waves)["evicted"] == []
    report = ev.eviction_report([], waves)
    assert report["evicted"] == sorted(k for w in waves for k in w["pods"]) and report["still_holding"] == []
    assert all("uids" not in w for w in report["waves"])
    for pod in objs["Pod"]:
        pod["metadata"]["deletionTimestamp"] = "2026-11-25T02:00:00Z"
    terminating = ev.plan_waves(now, objs["Pod"], objs["PodDisruptionBudget"])
    assert [w["terminating"] for w in terminating] == [w["pods"] for w in terminating]


def under_replicaset(objs, prefix, name):
    """The pods named with `prefix` controlled by ReplicaSet `name` (as a Deployment's pods are)."""
    for pod in objs["Pod"]:
        if pod["metadata"]["name"].startswith(prefix):
            pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                                                   "uid": "rs-uid", "controller": True}]


def test_evictions_free_every_claim_made_per_pod_or_named_by_bare_pods():
    """Template claims go with their pods; the claim the bare pods s1, s2 name is not recreated with them."""
    objs = recorded("three-waves")
    assert ev.claims_not_freed(affected(objs, "rack"), objs["Pod"]) == []


def test_a_claim_named_by_a_controllers_pods_is_one_eviction_cannot_free():
    objs = recorded("three-waves")
    ns = objs["Pod"][0]["metadata"]["namespace"]
    under_replicaset(objs, "s", "shared-7d9")
    not_freed = ev.claims_not_freed(affected(objs, "rack"), objs["Pod"])
    assert [(c["claim"], c["pods"], c["controllers"]) for c in not_freed] == \
        [("%s/shared" % ns, names(objs, "s"), ["ReplicaSet %s/shared-7d9" % ns])]
    assert not_freed[0]["devices"] and all(d.startswith(DRIVER + "/rack/") for d in not_freed[0]["devices"])
    message = ev.not_freed_message("dra-admin-x", not_freed, rule_exists=False)
    for part in ("%s/shared" % ns, "ReplicaSet %s/shared-7d9" % ns, not_freed[0]["devices"][0],
                 "no rule was written", "scale the workload to zero", "resourceClaimTemplateName", "effect NoSchedule"):
        assert part in message, (part, message)
    assert "the rule stays as it was" in ev.not_freed_message("dra-admin-x", not_freed, rule_exists=True)


def test_a_claim_whose_pods_tolerate_the_taint_is_not_evicted_so_not_refused():
    objs = recorded("three-waves")
    under_replicaset(objs, "s", "shared-7d9")
    tolerant = [dict(c, toleration="forever") for c in affected(objs, "rack")]
    assert ev.claims_not_freed(tolerant, objs["Pod"]) == []
