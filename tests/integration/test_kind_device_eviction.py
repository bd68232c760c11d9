"""Real nodes: devices taken out of service with PodDisruptionBudgets respected (dra_device_taint's effect Evict,
role device_maintenance's default), on the kind cluster of each pinned release (conftest.py's `kind_cluster`).

Effect Evict writes the DeviceTaintRule with effect NoSchedule and evicts the pods using the devices through the
Eviction API, wave by wave, so that a PodDisruptionBudget paces or holds the eviction; a NoExecute rule would
have kube-controller-manager delete them all at once. What the budget allowed is proven from the API server's
record of the pods (a gap-free watch), not from the module's own report.

Where the release cannot serve the rule as dra.admin needs it (1.33: DeviceTaintRule is an alpha behind
DRADeviceTaints, without effect None or a status, and the kind cluster's --enable-dra switches on only
DynamicResourceAllocation), the module refuses with the catalog's reason and says what effect Evict needs;
nothing is written and the pods keep running.

Not part of `make integration` (it needs podman and the kind build): `make integration-kind-nodes`.
"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kindlib  # noqa: E402
from api_recorder import ApiRecorder  # noqa: E402
from dra_objects import claim, claim_template  # noqa: E402
from kind_nodes import (claim_device, is_ready, role_task_results, wait_for_earlier_tests_to_leave,  # noqa: E402
                        wait_until)

MODULE = "dra.admin.dra_device_taint"
ROLE = "dra.admin.device_maintenance"


def deployment(c, namespace, name, replicas, node=None, claim_name=None):
    """A Deployment whose pods each use one device (template claim one-gpu) and sleep; ready once running. With
    `claim_name` every pod names that one ResourceClaim instead."""
    ref = {"name": "gpu", "resourceClaimName": claim_name} if claim_name else \
        {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
    spec = {"terminationGracePeriodSeconds": 1,
            "resourceClaims": [ref],
            "containers": [{"name": "ctr", "image": kindlib.cluster_images(c.versions, c.version)["local-path-helper"],
                            "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"],
                            "resources": {"claims": [{"name": "gpu"}]}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def budget(namespace, name, **limit):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": dict(limit, selector={"matchLabels": {"app": name}})}


def ready_pods(c, namespace, app, want):
    def probe():
        pods = [p for p in c.get_json("pods", "-n", namespace, "-l", f"app={app}")["items"]
                if is_ready(p) and not p["metadata"].get("deletionTimestamp")]
        return pods if len(pods) == want else None
    return wait_until(probe, 240, f"{want} ready pods of {namespace}/{app}")


def budget_in_force(c, namespace, name, pods, allowed):
    """Until the disruption controller has computed the budget for its pods (before that every eviction it
    covers is refused for another reason)."""
    def computed():
        status = c.get_json("pdb", name, "-n", namespace).get("status") or {}
        return status.get("expectedPods") == pods and status.get("disruptionsAllowed") == allowed
    wait_until(computed, 120, f"PodDisruptionBudget {namespace}/{name} to cover {pods} pods, allowing {allowed}")


def rules_of(c, support):
    return c.get_json(f"devicetaintrules.{support['api_version']}.resource.k8s.io")["items"]


@pytest.fixture
def leaves_the_cluster_as_found(kind_cluster):
    """Whatever a test's outcome: the DeviceTaintRules it wrote are deleted, the nodes it cordoned are uncordoned
    and its namespace goes (the other real-node tests share the cluster: a rule left in force would keep their
    pods Pending). The test names its namespace through the function this yields."""
    c = kind_cluster
    support = clusterlib.catalog().device_taint_rule_support(c.version)
    before = {r["metadata"]["name"] for r in rules_of(c, support)} if support["usable"] else set()
    cordoned = {n["metadata"]["name"] for n in c.get_json("nodes")["items"] if n["spec"].get("unschedulable")}
    namespaces = []
    yield namespaces.append
    if support["usable"]:
        for rule in rules_of(c, support):
            if rule["metadata"]["name"] not in before:
                c.kubectl("delete", f"devicetaintrules.{support['api_version']}.resource.k8s.io",
                          rule["metadata"]["name"], "--ignore-not-found", check=False)
    for node in c.get_json("nodes")["items"]:
        if node["spec"].get("unschedulable") and node["metadata"]["name"] not in cordoned:
            c.kubectl("uncordon", node["metadata"]["name"], check=False)
    for ns in namespaces:
        c.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)


def refused_on_this_release(c, tmp_path, namespace, target, pods):
    """1.33: the role (effect Evict by default) fails with the catalog's reason, nothing is evicted."""
    rc, results = role_task_results(c, ROLE, tmp_path, dict(target, dra_device_maintenance_state="tainted"))
    assert rc != 0
    failed = [r for r in results if r.get("failed")]
    message = failed[0]["msg"]
    assert clusterlib.catalog().device_taint_rules_unavailable(c.version) in message, message
    assert "effect Evict needs the rule as well" in message and "dra.admin.dra_node_drain" in message, message
    assert failed[0].get("changed") is False
    now = c.get_json("pods", "-n", namespace)["items"]
    assert sorted(p["metadata"]["uid"] for p in now if not p["metadata"].get("deletionTimestamp")) == \
        sorted(p["metadata"]["uid"] for p in pods)
    c.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.per_release("device_taint_rule_support", key="usable")
def test_budget_allowing_none_holds_the_eviction_and_keeps_the_device_noschedule(
        kind_cluster, kind_driver, tmp_path, leaves_the_cluster_as_found):
    """A PodDisruptionBudget with maxUnavailable 0 holds effect Evict: the run fails after its wait timeout naming
    the pod, its budget and the API server's message; the pod keeps running (same UID, never marked for
    deletion), the rule is in place with effect NoSchedule, and the devices return to service by the lift. The dry
    run beforehand names the pod's wave and writes nothing."""
    c = kind_cluster
    support = clusterlib.catalog().device_taint_rule_support(c.version)
    node = c.nodes[-1]
    ns = "itk-evict-held"
    leaves_the_cluster_as_found(ns)
    c.fresh_namespace(ns)
    c.apply([claim_template(c.resource_version, ns, "one-gpu"), deployment(c, ns, "held", 1, node=node),
             budget(ns, "held", maxUnavailable=0)])
    pods = ready_pods(c, ns, "held", 1)
    pod = f"{ns}/{pods[0]['metadata']['name']}"
    _uid, drv, pool, device = claim_device(c, ns, pods[0])
    target = {"dra_device_maintenance_driver": drv, "dra_device_maintenance_pool": pool,
              "dra_device_maintenance_device": device, "dra_device_maintenance_wait_timeout": 20,
              "dra_device_maintenance_poll_interval": 1}
    if not support["usable"]:
        refused_on_this_release(c, tmp_path, ns, target, pods)
        return
    budget_in_force(c, ns, "held", 1, 0)
    before = rules_of(c, support)

    rc, results = role_task_results(c, ROLE, tmp_path, target)  # the default state: dry run
    assert rc == 0, results
    planned = [r for r in results if "waves" in r][0]
    assert [(w["wave"], w["pods"], w["pod_disruption_budgets"]) for w in planned["waves"]] == \
        [(1, [pod], [f"{ns}/held"])], planned["waves"]
    assert planned["pod_disruption_budgets"][0]["disruptions_allowed"] == 0
    assert rules_of(c, support) == before, "the dry run wrote a DeviceTaintRule"

    rc, results = role_task_results(c, ROLE, tmp_path, dict(target, dra_device_maintenance_state="tainted"))
    assert rc != 0, results
    failed = [r for r in results if r.get("failed")][-1]
    assert f"{pod} (wave 1)" in failed["msg"] and f"{ns}/held" in failed["msg"], failed["msg"]
    assert "The disruption budget held needs 1 healthy pods and has 1 currently" in failed["msg"], failed["msg"]
    assert "effect NoSchedule" in failed["msg"] and "state=absent" in failed["msg"]
    assert [(f["pod"], f["reason"], f["pod_disruption_budgets"]) for f in failed["not_evicted"]] == \
        [(pod, "budget", [f"{ns}/held"])], failed["not_evicted"]
    still = c.get_json("pods", "-n", ns, "-l", "app=held")["items"]
    assert [p["metadata"]["uid"] for p in still] == [pods[0]["metadata"]["uid"]]
    assert not still[0]["metadata"].get("deletionTimestamp") and is_ready(still[0])
    rule = [r for r in rules_of(c, support) if r not in before]
    assert len(rule) == 1 and rule[0]["spec"]["taint"]["effect"] == "NoSchedule", rule
    assert rule[0]["spec"]["deviceSelector"] == {"driver": drv, "pool": pool, "device": device}

    rc, results = role_task_results(c, ROLE, tmp_path, dict(target, dra_device_maintenance_state="absent"))
    assert rc == 0, results
    assert rules_of(c, support) == before
    c.kubectl("delete", "namespace", ns, "--wait=false")


def availability(events, start):
    """[(time, ready pods not being deleted)] after each pod event after `start` (the LIST's stamp), replayed
    from the record."""
    current = {}
    timeline = []
    for stamp, kind, event_type, _name, obj in sorted(events, key=lambda e: e[0]):
        if kind != "pod":
            continue
        uid = obj["metadata"]["uid"]
        if event_type == "DELETED":
            current.pop(uid, None)
        else:
            current[uid] = obj
        if stamp > start:  # after the LIST the record starts from, every pod of it replayed
            timeline.append((stamp, sum(1 for p in current.values()
                                        if is_ready(p) and not p["metadata"].get("deletionTimestamp"))))
    return timeline


def test_budget_allowing_one_at_a_time_is_honoured_pod_by_pod(kind_cluster, kind_driver, tmp_path,
                                                              leaves_the_cluster_as_found):
    """Three pods of one Deployment on one worker's devices, a PodDisruptionBudget with maxUnavailable 1: the
    role (effect Evict by default) takes the worker's whole pool out of service and evicts the three in one wave,
    one after the other. The pods' record shows at most one of them unavailable at any time (a replacement on the
    other worker was ready before the next eviction went through), all three originals gone and their claims
    deleted; a second run changes nothing; the lift returns the pool."""
    c = kind_cluster
    support = clusterlib.catalog().device_taint_rule_support(c.version)
    worker, node = c.nodes[1], c.nodes[-1]
    ns = "itk-evict-paced"
    leaves_the_cluster_as_found(ns)
    # The whole pool of `node` goes out of service: earlier tests' pods still there (namespaces deleted without
    # waiting) would be evicted in a wave of their own.
    wait_for_earlier_tests_to_leave(c, node, ns)
    c.fresh_namespace(ns)
    c.apply([claim_template(c.resource_version, ns, "one-gpu")])
    # All three on `node`: the other worker is cordoned while they are placed (the control plane's taint keeps
    # them off it), and uncordoned for their replacements.
    c.kubectl("cordon", worker)
    try:
        c.apply([deployment(c, ns, "trainer", 3), budget(ns, "trainer", maxUnavailable=1)])
        pods = ready_pods(c, ns, "trainer", 3)
    finally:
        c.kubectl("uncordon", worker)
    assert {p["spec"]["nodeName"] for p in pods} == {node}
    originals = sorted(f"{ns}/{p['metadata']['name']}" for p in pods)
    claims = sorted(p["status"]["resourceClaimStatuses"][0]["resourceClaimName"] for p in pods)
    drv, pool = claim_device(c, ns, pods[0])[1:3]
    target = {"dra_device_maintenance_driver": drv, "dra_device_maintenance_pool": pool,
              "dra_device_maintenance_wait_timeout": 300, "dra_device_maintenance_poll_interval": 1,
              "dra_device_maintenance_state": "tainted"}
    if not support["usable"]:
        refused_on_this_release(c, tmp_path, ns, target, pods)
        return
    budget_in_force(c, ns, "trainer", 3, 1)
    before = rules_of(c, support)

    recorder = ApiRecorder(c.kubeconfig)
    recorder.watch_pods(ns)
    start = recorder.events[-1][0]
    try:
        rc, results = role_task_results(c, ROLE, tmp_path, target)
    finally:
        recorder.stop()
    assert rc == 0, results
    result = [r for r in results if "ansible_facts" in r and "dra_device_maintenance_result" in r["ansible_facts"]]
    result = result[0]["ansible_facts"]["dra_device_maintenance_result"]
    assert [(w["pods"], w["pod_disruption_budgets"]) for w in result["waves"]] == [(originals, [f"{ns}/trainer"])]
    assert result["evicted"] == originals and result["claims_released"] is True and result["changed"] is True
    assert result["not_evicted"] == []

    # From the API's record: every original was deleted, one at a time - never fewer than two ready pods.
    deleted = sorted(recorder.deletion_started("pod", key) for key in originals)
    assert None not in deleted, deleted
    timeline = availability(recorder.events, start)
    assert min(count for _stamp, count in timeline) == 2, timeline
    for earlier, later in zip(deleted, deleted[1:]):
        # Between two evictions the count was back at three: a replacement became ready first.
        assert any(earlier < stamp < later and count == 3 for stamp, count in timeline), (deleted, timeline)
    replacements = ready_pods(c, ns, "trainer", 3)
    assert {p["spec"]["nodeName"] for p in replacements} == {worker}
    left = c.get_json(f"resourceclaims.{c.resource_version}.resource.k8s.io", "-n", ns)["items"]
    assert not set(claims) & {x["metadata"]["name"] for x in left}

    rc, results = role_task_results(c, ROLE, tmp_path, target)  # again: nothing to write, nobody to evict
    assert rc == 0 and not any(r.get("changed") for r in results), results
    rc, results = role_task_results(c, ROLE, tmp_path, dict(target, dra_device_maintenance_state="absent"))
    assert rc == 0, results
    assert rules_of(c, support) == before
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_pods_a_deployment_recreates_on_one_named_claim_are_refused_before_any_write(
        kind_cluster, kind_driver, tmp_path, leaves_the_cluster_as_found):
    """Two pods of a Deployment name one ResourceClaim: each replacement would name it too and reserve it again,
    still allocated the device, so evicting them cannot free the device. The dry run names the claim, its device and
    the ReplicaSet; effect Evict (the role's default) refuses before any write: no rule, the pods keep running with
    the same UIDs and the claim keeps its device."""
    c = kind_cluster
    support = clusterlib.catalog().device_taint_rule_support(c.version)
    node = c.nodes[-1]
    ns = "itk-evict-named"
    leaves_the_cluster_as_found(ns)
    c.fresh_namespace(ns)
    c.apply([claim(c.resource_version, ns, "shared-gpu"), deployment(c, ns, "shared", 2, node=node,
                                                                     claim_name="shared-gpu")])
    pods = ready_pods(c, ns, "shared", 2)
    allocated = c.get_json(f"resourceclaims.{c.resource_version}.resource.k8s.io", "shared-gpu", "-n", ns)
    result = allocated["status"]["allocation"]["devices"]["results"][0]
    drv, pool, device = result["driver"], result["pool"], result["device"]
    target = {"dra_device_maintenance_driver": drv, "dra_device_maintenance_pool": pool,
              "dra_device_maintenance_device": device, "dra_device_maintenance_wait_timeout": 60,
              "dra_device_maintenance_poll_interval": 1}
    if not support["usable"]:
        refused_on_this_release(c, tmp_path, ns, target, pods)
        return
    before = rules_of(c, support)
    replica_set = pods[0]["metadata"]["ownerReferences"][0]["name"]
    want = [{"claim": f"{ns}/shared-gpu", "devices": [f"{drv}/{pool}/{device}"],
             "pods": sorted(f"{ns}/{p['metadata']['name']}" for p in pods),
             "controllers": [f"ReplicaSet {ns}/{replica_set}"]}]

    rc, results = role_task_results(c, ROLE, tmp_path, target)  # the default state: dry run
    assert rc == 0, results
    planned = [r for r in results if "claims_not_freed" in r][0]
    assert planned["claims_not_freed"] == want, planned

    rc, results = role_task_results(c, ROLE, tmp_path, dict(target, dra_device_maintenance_state="tainted"))
    assert rc != 0, results
    failed = [r for r in results if r.get("failed")][-1]
    for part in (f"{ns}/shared-gpu", f"ReplicaSet {ns}/{replica_set}", f"{drv}/{pool}/{device}",
                 "no rule was written", "scale the workload to zero"):
        assert part in failed["msg"], (part, failed["msg"])
    assert failed.get("changed") is False and failed["claims_not_freed"] == want
    assert rules_of(c, support) == before, "a rule was written"
    now = c.get_json("pods", "-n", ns, "-l", "app=shared")["items"]
    assert sorted(p["metadata"]["uid"] for p in now) == sorted(p["metadata"]["uid"] for p in pods)
    assert not any(p["metadata"].get("deletionTimestamp") for p in now)
    after = c.get_json(f"resourceclaims.{c.resource_version}.resource.k8s.io", "shared-gpu", "-n", ns)
    assert after["status"]["allocation"] == allocated["status"]["allocation"]
    c.kubectl("delete", "namespace", ns, "--wait=false")
