"""dra_device_taint's effect Evict on the real control plane (KWOK nodes): the rule written NoSchedule, the pods
using the devices evicted through the Eviction API in waves, PodDisruptionBudgets respected.

The real kube-apiserver answers the evictions (a budget's refusal is its 429 with the budget's message), the
real disruption controller computes the budgets, the real scheduler keeps the tainted devices from the
replacements; KWOK marks pods Running and Ready and deletes them after their grace period. What happened is
read from the API server's record of the pods (a gap-free watch), not from the module's report.

On 1.37 the rule is served by default (resource.k8s.io/v1); on 1.33 DeviceTaintRule is an alpha behind a gate
without effect None or a status, and the module refuses effect Evict as every other state, naming what it needs.

With DRA_IT_RECORD=<dir> the objects are saved for the unit tests (tests/unit/fixtures/recorded/).
"""
import os
import sys

import pytest

from api_recorder import ApiRecorder
from cluster_harness import record
from dra_objects import claim, device_class, pod, resource_slice

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

MODULE = "dra.admin.dra_device_taint"
CATALOG = clusterlib.catalog()
DRIVER = "evict.example.com"
TOLERATE_KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def template(api, namespace, name):
    body = claim(api, namespace, name, device_class=DRIVER)
    return {"apiVersion": body["apiVersion"], "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": body["spec"]}}


def pod_template(name, grace=1):
    return {"metadata": {"labels": {"app": name}}, "spec": {
        "tolerations": TOLERATE_KWOK, "terminationGracePeriodSeconds": grace,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}],
        "containers": [{"name": "main", "image": "registry.invalid/app:none", "resources": {"claims": [{"name": "gpu"}]}}]}}


def deployment(namespace, name, replicas):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": pod_template(name)}}


def budget(namespace, name, **limit):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": dict(limit, selector={"matchLabels": {"app": name}})}


def live(cluster, namespace, app=None):
    args = ["pods", "-n", namespace] + (["-l", f"app={app}"] if app else [])
    return sorted(f"{namespace}/{p['metadata']['name']}" for p in cluster.get_json(*args)["items"]
                  if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))


def running(cluster, namespace, app, want):
    def probe():
        names = live(cluster, namespace, app)
        return names if len(names) == want else None
    return cluster.wait_until(probe, 90, f"{want} running pods of {app}")


def budget_in_force(cluster, namespace, name, pods, allowed):
    def computed():
        status = cluster.get_json("pdb", name, "-n", namespace).get("status") or {}
        return status.get("expectedPods") == pods and status.get("disruptionsAllowed") == allowed
    cluster.wait_until(computed, 60, f"PodDisruptionBudget {namespace}/{name} to cover {pods} pods")


def rules(cluster):
    return cluster.get_json("devicetaintrules.resource.k8s.io")["items"]


def eviction_objects(namespace):
    """What record saves of a scenario (device-eviction-<name>): the namespace's pods, claims and budgets and the
    driver's slices."""
    return (("resourceclaims,pods,poddisruptionbudgets", "-n", namespace),
            ("resourceslices", "--field-selector", f"spec.driver={DRIVER}"))


def first_nodes(cluster):
    return [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]][:2]


def assert_refused(cluster, base):
    """Where the release cannot serve the rule for dra.admin: effect Evict is refused as every state, and says
    what it needs; nothing is evicted."""
    for args in (dict(base, state="tainted", effect="Evict"), dict(base, state="tainted", effect="Evict", wait=False)):
        failed = cluster.run_module(MODULE, args, expect_failure=True)
        assert failed["changed"] is False
        assert CATALOG.device_taint_rules_unavailable(cluster.version) in failed["msg"], failed["msg"]
        assert "effect Evict needs the rule as well" in failed["msg"]


@pytest.mark.per_release("device_taint_rule_support", key="default_on")
def test_evict_goes_wave_by_wave_and_waits_for_the_budget(cluster, namespace, cluster_objects, tmp_path):
    """Two bare pods sharing a claim, a Deployment of two pods without a budget and a Deployment of two pods under
    a budget allowing one at a time, all on one pool: check mode and the dry run name four waves (the shared claim;
    each pod of the first Deployment alone; the budget's pods) and change nothing; effect Evict then evicts the
    waves in order - no pod of a wave is marked for deletion before every pod of the wave before it is gone - and
    the budget's pods one after the other (the second after a replacement on the other pool was ready); the rule
    is NoSchedule, the claims released, a second run changes nothing and the lift removes the rule. The role in
    check mode names the same waves. (KWOK completes a Job's pods at once, so the Job's wave is the unit tests'.)"""
    api = cluster.resource_version
    ns = namespace
    node, other = first_nodes(cluster)
    cluster_objects([device_class(api, DRIVER),
                     resource_slice(api, DRIVER, "rack", ["dev-%d" % i for i in range(8)], nodeName=node)])
    cluster.apply([claim(api, ns, "shared", device_class=DRIVER), template(api, ns, "one"),
                   pod(ns, "s1", claim_name="shared", node=node, grace=1),
                   pod(ns, "s2", claim_name="shared", node=node, grace=1),
                   deployment(ns, "train", 2), deployment(ns, "web", 2), budget(ns, "web", maxUnavailable=1)])
    for app, want in (("s1", 1), ("s2", 1), ("train", 2), ("web", 2)):
        running(cluster, ns, app, want)
    base = {"driver": DRIVER, "pool": "rack", "wait_timeout": 120, "wait_sleep": 0.5}
    support = CATALOG.device_taint_rule_support(cluster.version)
    if not support["default_on"]:
        assert_refused(cluster, base)
        return
    budget_in_force(cluster, ns, "web", 2, 1)
    # Replacements find devices only on another pool, published now that every pod has one on "rack".
    cluster_objects([resource_slice(api, DRIVER, "spare", ["spare-%d" % i for i in range(6)], nodeName=other)])
    shared = [f"{ns}/s1", f"{ns}/s2"]
    train, web = live(cluster, ns, "train"), live(cluster, ns, "web")
    record(cluster, "device-eviction-three-waves", *eviction_objects(ns))

    # The role (effect Evict by default) in check mode: the waves named, nothing written or evicted.
    role = cluster.run_role("dra.admin.device_maintenance", tmp_path, {
        "dra_device_maintenance_driver": DRIVER, "dra_device_maintenance_pool": "rack",
        "dra_device_maintenance_state": "tainted"}, check=True)
    assert role.returncode == 0, role.stdout[-4000:]
    assert "eviction waves (effect Evict): %s | %s | %s | %s" % (", ".join(shared), train[0], train[1], ", ".join(web)) \
        in role.stdout, role.stdout[-4000:]
    checked = cluster.run_module(MODULE, dict(base, state="tainted", effect="Evict"), check=True)
    dry = cluster.run_module(MODULE, dict(base, state="dry_run"))
    for result in (checked, dry):
        assert [w["pods"] for w in result["waves"]] == [shared, train[:1], train[1:], web], result["waves"]
        assert result["waves"][0]["claims"] == [f"{ns}/shared"] and result["waves"][0]["unmanaged"] == shared
        assert [w["pod_disruption_budgets"] for w in result["waves"]] == [[], [], [], [f"{ns}/web"]]
        assert [b["name"] for b in result["pod_disruption_budgets"]] == [f"{ns}/web"]
    assert checked["changed"] is True and dry["changed"] is False
    assert rules(cluster) == [] and live(cluster, ns) == sorted(shared + train + web)

    recorder = ApiRecorder(cluster.kubeconfig)
    recorder.watch_pods(ns)
    try:
        result = cluster.run_module(MODULE, dict(base, state="tainted", effect="Evict"))
    finally:
        recorder.stop()
    assert result["changed"] is True and result["not_evicted"] == [] and result["claims_released"] is True
    assert result["evicted"] == sorted(shared + train + web) and result["still_holding"] == []
    assert result["rule"]["taint"]["effect"] == "NoSchedule"
    assert [r["spec"]["taint"]["effect"] for r in rules(cluster)] == ["NoSchedule"]

    def gone(key):
        return recorder.first("pod", key, lambda t, o: t == "DELETED")
    waves = [shared, train[:1], train[1:], web]
    for earlier, later in zip(waves, waves[1:]):
        assert max(gone(k) for k in earlier) < min(recorder.deletion_started("pod", k) for k in later), \
            (earlier, later)
    # The budget's pods one by one: the second eviction only after a replacement was ready on the spare pool.
    first, second = sorted(recorder.deletion_started("pod", k) for k in web)
    ready_replacements = [stamp for stamp, kind, _t, key, obj in recorder.events
                          if kind == "pod" and key not in web and key.startswith(f"{ns}/web-")
                          and obj["status"].get("phase") == "Running" and obj["spec"].get("nodeName") == other]
    assert ready_replacements and first < min(ready_replacements) < second, (first, second, ready_replacements)

    again = cluster.run_module(MODULE, dict(base, state="tainted", effect="Evict"))
    assert again["changed"] is False and again["waves"] == [] and again["evicted"] == []
    lifted = cluster.run_module(MODULE, dict(base, state="absent"))
    assert lifted["changed"] is True and lifted["lifted"] is True and rules(cluster) == []


def test_evict_held_by_a_budget_fails_naming_it_and_keeps_the_pod(cluster, namespace, cluster_objects):
    """A budget with maxUnavailable 0: one call fails after its wait timeout naming the pod, its wave, the budget
    and the API server's message, the pod keeps running and the rule stays NoSchedule; a round of the role's
    loop (wait false) names the refusal without failing, and a round after the timeout fails the same way."""
    api = cluster.resource_version
    ns = namespace
    node = first_nodes(cluster)[0]
    cluster_objects([device_class(api, DRIVER),
                     resource_slice(api, DRIVER, "held", ["dev-0", "dev-1"], nodeName=node)])
    cluster.apply([template(api, ns, "one"), deployment(ns, "precious", 1), budget(ns, "precious", maxUnavailable=0)])
    running(cluster, ns, "precious", 1)
    base = {"driver": DRIVER, "pool": "held", "wait_timeout": 5, "wait_sleep": 0.5}
    if not CATALOG.device_taint_rule_support(cluster.version)["default_on"]:
        assert_refused(cluster, base)
        return
    budget_in_force(cluster, ns, "precious", 1, 0)
    [precious] = live(cluster, ns, "precious")
    uid = cluster.get_json("pod", "-n", ns, precious.split("/")[1])["metadata"]["uid"]
    record(cluster, "device-eviction-held", *eviction_objects(ns))

    failed = cluster.run_module(MODULE, dict(base, state="tainted", effect="Evict"), expect_failure=True)
    message = "The disruption budget precious needs 1 healthy pods and has 1 currently"
    assert f"{precious} (wave 1)" in failed["msg"] and f"{ns}/precious" in failed["msg"], failed["msg"]
    assert message in failed["msg"] and "effect NoSchedule" in failed["msg"]
    assert failed["not_evicted"] == [{"pod": precious, "wave": 1, "reason": "budget",
                                      "pod_disruption_budgets": [f"{ns}/precious"],
                                      "message": f"{precious} refused by PodDisruptionBudget {ns}/precious ({message})"}]
    assert failed["changed"] is True and [r["spec"]["taint"]["effect"] for r in rules(cluster)] == ["NoSchedule"]

    step = cluster.run_module(MODULE, dict(base, state="tainted", effect="Evict", wait=False))
    assert step["changed"] is False and step["waiting_for"] == "wave_evicted" and step["pending"] == [precious]
    assert [f["reason"] for f in step["not_evicted"]] == ["budget"] and step["waves_left"] == 1
    late = cluster.run_module(MODULE, dict(base, state="tainted", effect="Evict", wait=False,
                                           since=step["started"] - 60), expect_failure=True)
    assert message in late["msg"] and "after 5s" in late["msg"], late["msg"]
    assert cluster.get_json("pod", "-n", ns, precious.split("/")[1])["metadata"]["uid"] == uid
    assert live(cluster, ns, "precious") == [precious]

    lifted = cluster.run_module(MODULE, dict(base, state="absent"))
    assert lifted["lifted"] is True and rules(cluster) == []
