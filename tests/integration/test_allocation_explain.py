"""dra_allocation_explain_info against the real kube-scheduler: generated scenarios, and reasons on known cases.

Agreement: each batch of generated scenarios (tests/integration/allocation_scenarios.py) is created with its
test pods gated; the explainer answers for every gated pod (one module run per batch); then the gates are
removed and kube-scheduler decides. A pod the explainer says fits must be bound to one of the nodes it names;
one it says does not fit must be marked Unschedulable and stay unbound once every other pod of the batch is
settled. Every disagreement is printed with its scenario's objects and the explanation. Pods with what the
explainer does not model (pod (anti-)affinity, topology spread, host ports: allocation_scenarios.UNCHECKED_KINDS)
are never `fits`: `cannot_tell`, or a certain answer the scheduler confirms. The tally counts the verdicts per kind
of what build_pod_features gave a pod; resource requests must give both a `fits` and a `does_not_fit`.

How many scenarios: the tier's (tests/integration/tiers.py). Tier full takes all FULL_SCENARIOS; tier ci the first
CI_SCENARIOS, plus the first scenario of each kind (allocation_scenarios.kinds) those lack among the full run's, so
every kind of scenario the release's full run has is still there. DRA_IT_EXPLAIN_SCENARIOS: the first that many.
"""
import json
import os
import sys

import pytest
import yaml

import allocation_scenarios as gen
import tiers
from kube import Api, WaitTimeout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

extended = clusterlib.collection_module("allocation.extended")
# What the explanation says where kube-scheduler's extended-resource cache may differ from the current classes
# (before 1.38: extended.unsure_mappings), which no object of the cluster shows.
UNSURE_MAPPING = "kube-scheduler before 1.%d" % extended.MAPPING_FROM_CURRENT_CLASSES_FROM

FULL_SCENARIOS, CI_SCENARIOS = 200, 50
BATCH = 100
SEED = "dra-admin-explain-1"
ADMIN_LABELS = {"resource.kubernetes.io/admin-access": "true", "resource.k8s.io/admin-access": "true"}


def served(cluster, resource):
    group = json.loads(cluster.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
    for version in [v["version"] for v in group["versions"]]:
        listing = json.loads(cluster.kubectl("get", "--raw", f"/apis/resource.k8s.io/{version}").stdout)
        if any(r["name"] == resource for r in listing["resources"]):
            return version
    return None


def pods_state(cluster, namespace):
    """{pod: (node or None, unschedulable)}: not scheduled is PodScheduled false for Unschedulable, or for
    SchedulerError (an allocator error on any node fails the whole attempt)."""
    out = {}
    for pod in cluster.get_json("pods", "-n", namespace)["items"]:
        conditions = pod.get("status", {}).get("conditions") or []
        unschedulable = any(c["type"] == "PodScheduled" and c["status"] == "False"
                            and c.get("reason") in ("Unschedulable", "SchedulerError") for c in conditions)
        out[pod["metadata"]["name"]] = (pod["spec"].get("nodeName"), unschedulable)
    return out


def context(cluster, namespace, batch, features):
    items = cluster.get_json("nodes")["items"]
    nodes = sorted(n["metadata"]["name"] for n in items)
    return {"api": cluster.resource_version, "nodes": nodes, "namespace": namespace, "batch": batch,
            "allocatable": {n["metadata"]["name"]: n["status"]["allocatable"] for n in items},
            "device_taints": "DRADeviceTaints" in features,
            "taint_rules_api": served(cluster, "devicetaintrules") if "DRADeviceTaints" in features else None,
            "prioritized_list": "DRAPrioritizedList" in features, "admin_access": "DRAAdminAccess" in features,
            "extended_resource": "DRAExtendedResource" in features,
            "semver": cluster.minor >= 34}


def create_batch(cluster, namespace, scenarios):
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("label", "namespace", namespace, *[f"{k}={v}" for k, v in ADMIN_LABELS.items()])
    cluster.wait_for_default_service_account(namespace)
    cluster.apply([o for s in scenarios for o in s.objects_first])
    fillers = [f for s in scenarios for f in s.fillers + s.neighbours]
    cluster.wait_until(lambda: all(pods_state(cluster, namespace).get(f, (None,))[0] for f in fillers), 180,
                       f"the {len(fillers)} filler and neighbour pods to be scheduled")
    cluster.apply([o for s in scenarios for o in s.objects_then])


def ungate(cluster, namespace, pods):
    api = Api(cluster.kubeconfig)
    for pod in pods:
        api.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod}", {"spec": {"schedulingGates": None}})


def settled(cluster, namespace, expected):
    """Every test pod bound or Unschedulable, and every pod expected to fit bound (else None)."""
    state = pods_state(cluster, namespace)
    done = all(state[p][0] or state[p][1] for p in expected)
    return state if done and all(state[p][0] for p, e in expected.items() if e["verdict"] == "fits") else None


def delete_batch(cluster, namespace, batch):
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    for kind in ("resourceslices", "deviceclasses", "devicetaintrules"):
        cluster.kubectl("delete", kind, "-l", f"{gen.LABEL}={batch}", "--ignore-not-found", check=False)


def disagreement(pod, verdict, state, scenario):
    """None where the scheduler confirms the verdict; `cannot_tell` only for a pod with what the explainer does
    not model, which it names in `unchecked`, or (before 1.38) an extended resource whose mapping depends on the
    history of the DeviceClasses (every other generated pod gets a certain answer)."""
    node, unschedulable = state
    if verdict["verdict"] == "fits" and node in verdict["fits_on"]:
        return None
    if verdict["verdict"] == "does_not_fit" and not node and unschedulable:
        return None
    if verdict["verdict"] == "cannot_tell" and verdict.get("unchecked") \
            and scenario.pod_kinds.get(pod, set()) & set(gen.UNCHECKED_KINDS):
        return None
    if verdict["verdict"] == "cannot_tell" and asks_extended_resources(scenario, pod) \
            and UNSURE_MAPPING in verdict["message"]:
        return None  # the scheduler's cache of extended resource names (its history) decides, which is not visible
    shown = ("verdict", "fits_on", "message", "requests", "nodes", "unchecked")
    return {"pod": pod, "explainer": {k: verdict[k] for k in shown},
            "scheduler": {"node": node, "unschedulable": unschedulable},
            "objects": scenario.objects_first + scenario.objects_then}


def asks_extended_resources(scenario, pod_name):
    pod = next(o for o in scenario.objects_then if o["kind"] == "Pod" and o["metadata"]["name"] == pod_name)
    return any("limits" in c.get("resources", {}) for c in pod["spec"]["containers"])


def chosen_scenarios(cluster, features):
    """The indices of the scenarios this run takes (the module's docstring)."""
    if os.environ.get("DRA_IT_EXPLAIN_SCENARIOS"):
        return list(range(int(os.environ["DRA_IT_EXPLAIN_SCENARIOS"])))
    ctx = context(cluster, "it-explain-b0", "0", features)  # the namespace and batch are only labels
    return tiers.covering([gen.kinds(gen.generate(i, SEED, ctx)) for i in range(FULL_SCENARIOS)],
                          tiers.sized(CI_SCENARIOS, FULL_SCENARIOS))


def run_batch(cluster, batch, indices, features, keep=False):
    namespace = f"it-explain-b{batch}"
    ctx = context(cluster, namespace, str(batch), features)
    scenarios = [gen.generate(i, SEED, ctx) for i in indices]
    by_pod = {p: s for s in scenarios for p in s.test_pods}
    create_batch(cluster, namespace, scenarios)
    try:
        result = cluster.run_module("dra.admin.dra_allocation_explain_info", {"namespace": namespace, "detail": "nodes"})
        verdicts = {e["pod"].split("/", 1)[1]: e for e in result["explanations"] if "pod" in e}
        assert set(by_pod) <= set(verdicts), sorted(set(by_pod) - set(verdicts))
        expected = {p: verdicts[p] for p in by_pod}
        ungate(cluster, namespace, sorted(by_pod))
        try:
            state = cluster.wait_until(lambda: settled(cluster, namespace, expected), 240, "the scheduler's decisions")
        except WaitTimeout:
            state = pods_state(cluster, namespace)
        found = [disagreement(p, expected[p], state.get(p, (None, False)), by_pod[p]) for p in sorted(by_pod)]
        tally = {v: sum(1 for e in expected.values() if e["verdict"] == v) for v in ("fits", "does_not_fit", "cannot_tell")}
        extended = [p for p in by_pod if asks_extended_resources(by_pod[p], p)]
        for v in ("fits", "does_not_fit"):
            tally["extended " + v] = sum(1 for p in extended if expected[p]["verdict"] == v)
        for p in by_pod:
            for kind in by_pod[p].pod_kinds.get(p, ()):
                key = f"{kind}: {expected[p]['verdict']}"
                tally[key] = tally.get(key, 0) + 1
            kinds = by_pod[p].pod_kinds.get(p, set())
            if kinds & set(gen.REQUEST_KINDS):
                key = "requests " + expected[p]["verdict"]
                tally[key] = tally.get(key, 0) + 1
            if kinds & set(gen.UNCHECKED_KINDS) and expected[p]["verdict"] == "fits":
                found.append({"pod": p, "fits although not checked": sorted(kinds & set(gen.UNCHECKED_KINDS)),
                              "explainer": {k: expected[p][k] for k in ("verdict", "fits_on", "message")}})
        return [d for d in found if d], tally, result["api_requests"]
    finally:
        if not keep:
            delete_batch(cluster, namespace, str(batch))


@pytest.mark.per_release("gate_catalog")
def test_explainer_agrees_with_the_scheduler_on_generated_scenarios(cluster):
    probe = cluster.run_module("dra.admin.dra_allocation_explain_info", {"namespace": "default"})
    features = set(probe["features"])
    cluster.kubectl("taint", "node", sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])[-1],
                    f"{gen.NODE_TAINT['key']}={gen.NODE_TAINT['value']}:{gen.NODE_TAINT['effect']}", "--overwrite")
    disagreements, totals, pods = [], {}, 0
    try:
        chosen = chosen_scenarios(cluster, features)
        for batch, first in enumerate(range(0, len(chosen), BATCH)):
            found, tally, dummy = run_batch(cluster, batch, chosen[first:first + BATCH], features)
            disagreements += found
            for k, v in tally.items():
                totals[k] = totals.get(k, 0) + v
            pods += sum(tally[v] for v in ("fits", "does_not_fit", "cannot_tell"))
    finally:
        nodes = cluster.get_json("nodes")["items"]
        for node in nodes:
            cluster.kubectl("taint", "node", node["metadata"]["name"], f"{gen.NODE_TAINT['key']}-", check=False)
    print(f"\n{len(chosen)} scenarios (tier {tiers.TIER}), {pods} test pods on {cluster.version}: {totals}; "
          f"{len(disagreements)} disagreements")
    assert totals.get("fits") and totals.get("does_not_fit"), totals
    # The resource filter gives certain answers both ways; what is not modelled is never "fits" (above).
    assert totals.get("requests fits") and totals.get("requests does_not_fit"), totals
    assert any(totals.get(f"{k}: cannot_tell") for k in gen.UNCHECKED_KINDS), totals
    if "DRAExtendedResource" in features:
        assert totals.get("extended fits") and totals.get("extended does_not_fit"), totals
    assert not disagreements, yaml.safe_dump(disagreements[:3], width=140)
