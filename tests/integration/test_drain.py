"""dra_node_drain on the real cluster: order proven from the API, PDBs, idempotency, return to service.

KWOK runs with a pod-delete stage that honours the grace period, so pod
termination takes real time, as with a kubelet.
"""
import json
import re
import threading
import time

import pytest

from api_recorder import ApiRecorder
from dra_objects import EXCLUSION_LABEL, claim, claim_template

DRIVER_NS = "dra-system"
DRIVER_DS = "dra-driver"
EXCLUSION = EXCLUSION_LABEL
TOLERATE_KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def driver_daemonset():
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": DRIVER_DS, "namespace": DRIVER_NS},
        "spec": {
            "selector": {"matchLabels": {"app": DRIVER_DS}},
            "template": {
                "metadata": {"labels": {"app": DRIVER_DS}},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": EXCLUSION, "operator": "DoesNotExist"}]}]}}},
                    "tolerations": TOLERATE_KWOK,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "plugin", "image": "registry.invalid/driver:none"}],
                },
            },
        },
    }


def claim_deployment(namespace, name, node, replicas, template, grace=2, labels=None, claim_name=None):
    """A Deployment on `node` whose pods use a claim from `template`, or with `claim_name` all one named claim."""
    labels = labels or {"app": name}
    ref = {"name": "gpu", "resourceClaimName": claim_name} if claim_name else \
        {"name": "gpu", "resourceClaimTemplateName": template}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": TOLERATE_KWOK,
                "terminationGracePeriodSeconds": grace,
                "resourceClaims": [ref],
                "containers": [{"name": "main", "image": "registry.invalid/app:none",
                                "resources": {"claims": [{"name": "gpu"}]}}]}},
        },
    }


def plain_deployment(namespace, name, node, replicas=1):
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": TOLERATE_KWOK,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "registry.invalid/app:none"}]}}},
    }


def pods_on(cluster, namespace, node, label=None):
    args = ["pods", "-n", namespace, "--field-selector", f"spec.nodeName={node}"]
    if label:
        args += ["-l", label]
    return [p for p in cluster.get_json(*args)["items"] if not p["metadata"].get("deletionTimestamp")]


def running_count(cluster, namespace, node, want, label=None):
    def probe():
        pods = [p for p in pods_on(cluster, namespace, node, label) if p["status"].get("phase") == "Running"]
        return pods if len(pods) >= want else None
    return cluster.wait_until(probe, 120, f"{want} running pods on {node}")


def deletion_grace(recorder, key):
    """deletionGracePeriodSeconds of the pod when the API server first marked it for deletion."""
    for _stamp, kind, _type, name, obj in recorder.events:
        meta = obj.get("metadata") or {}
        if kind == "pod" and name == key and meta.get("deletionTimestamp"):
            return meta.get("deletionGracePeriodSeconds")
    return None


def pdb_in_force(cluster, namespace, name, pods):
    """Until the disruption controller has computed the PDB's status for its pods (before that the API
    server refuses every eviction it covers, for a different reason)."""
    def computed():
        pdb = cluster.get_json("pdb", "-n", namespace, name)
        status = pdb.get("status") or {}
        return (status.get("observedGeneration") == pdb["metadata"]["generation"]
                and status.get("expectedPods") == pods)
    cluster.wait_until(computed, 60, f"PodDisruptionBudget {namespace}/{name} to cover {pods} pods")


def refused_evictions(cluster, code=429):
    """Evictions the API server has refused with this code since it started (429: a PodDisruptionBudget
    said no; 403: among others, the pod's namespace is being deleted)."""
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_request_total{") and 'subresource="eviction"' in line
               and f'code="{code}"' in line)


def pod_deletion_hold(name, namespace):
    """A ValidatingAdmissionPolicy and its binding that refuse every DELETE of a pod in the namespace
    (so the namespace controller cannot mark them for deletion while the namespace is terminating)."""
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {
                      "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                                         "resources": ["pods"]}],
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
                  "validations": [{"expression": "false", "message": f"{name}: pod deletion held"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def node_state(cluster, node):
    n = cluster.get_json("node", node)
    return {"labels": n["metadata"].get("labels", {}), "unschedulable": n["spec"].get("unschedulable", False),
            "taints": n["spec"].get("taints", []),
            "annotations": {k: v for k, v in n["metadata"].get("annotations", {}).items()
                            if k.startswith("dra.admin/")}}


@pytest.fixture(scope="module")
def driver(cluster):
    cluster.kubectl("create", "namespace", DRIVER_NS, check=False)
    cluster.apply(driver_daemonset())
    nodes = [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]
    for node in nodes:
        running_count(cluster, DRIVER_NS, node, 1)
    return nodes


def other_tests_pods_on(cluster, node):
    """Pods of earlier tests' namespaces (it-*, deleted without waiting) still on the node."""
    pods = cluster.get_json("pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
    return ["%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods
            if p["metadata"]["namespace"].startswith("it-")]


@pytest.fixture
def drain_node(cluster, driver):
    """A node for one test, restored afterwards whatever the test did. The test starts once the pods that
    earlier tests left on the node (their namespaces are deleted without waiting) are gone: a drain would
    rightly refuse their bare pods."""
    node = driver[-1]
    cluster.wait_until(lambda: not other_tests_pods_on(cluster, node), 180,
                       f"pods of earlier tests gone from {node}")
    before = node_state(cluster, node)
    yield node
    cluster.kubectl("label", "node", node, f"{EXCLUSION}-", check=False)
    cluster.kubectl("annotate", "node", node, "dra.admin/cordoned-before-drain-", check=False)
    if not before["unschedulable"]:
        cluster.kubectl("uncordon", node, check=False)
    running_count(cluster, DRIVER_NS, node, 1)


def drain_args(node, **extra):
    args = {"node": node, "driver_daemonsets": [f"{DRIVER_NS}/{DRIVER_DS}"], "timeout": 120,
            "poll_interval": 0.5}
    args.update(extra)
    return args


def recorded_drain(cluster, namespace, api, node):
    """Drain the node while watching the namespace's pods and claims and the driver's pods: (result, recorder)."""
    recorder = ApiRecorder(cluster.kubeconfig)
    recorder.watch_pods(namespace)
    recorder.watch_pods(DRIVER_NS)
    recorder.watch_claims(namespace, api)
    try:
        result = cluster.run_module("dra.admin.dra_node_drain", drain_args(node))
    finally:
        recorder.stop()
    return result, recorder


def test_drain_order_proven_from_api_then_return_to_service(cluster, namespace, drain_node):
    api = cluster.resource_version
    node = drain_node
    before = node_state(cluster, node)
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   claim_deployment(namespace, "trainer", node, 3, "one-gpu"),
                   plain_deployment(namespace, "web", node)])
    claim_pods = running_count(cluster, namespace, node, 3, "app=trainer")
    running_count(cluster, namespace, node, 1, "app=web")
    driver_pod = pods_on(cluster, DRIVER_NS, node)[0]
    claims = sorted(f"{namespace}/{s['resourceClaimName']}" for p in claim_pods
                    for s in p["status"]["resourceClaimStatuses"])

    planned = cluster.run_module("dra.admin.dra_node_drain", drain_args(node), check=True)
    assert planned["changed"] is True
    # claim holders first, then the other pods: exactly those, each once
    assert sorted(planned["claim_pods"]) == sorted(f"{namespace}/{p['metadata']['name']}" for p in claim_pods)
    assert [p.split("/")[1].rsplit("-", 2)[0] for p in planned["other_pods"]] == ["web"]
    assert planned["eviction_order"] == planned["claim_pods"] + planned["other_pods"]
    assert planned["driver_pods"] == [f"{DRIVER_NS}/{driver_pod['metadata']['name']}"]
    assert node_state(cluster, node) == before, "check mode changed the node"

    result, recorder = recorded_drain(cluster, namespace, api, node)
    assert result["changed"] is True
    assert set(result["phases"]) == {"preflight", "cordon", "evict_claim_pods", "evict_other_pods",
                                     "wait_claims_released", "remove_driver"}
    # The evictions kept the pods' grace period (2 s), as the API server recorded it on each pod.
    graces = [deletion_grace(recorder, f"{namespace}/{p['metadata']['name']}") for p in claim_pods]
    assert graces == [2, 2, 2], graces

    evicted = [recorder.deletion_started("pod", f"{namespace}/{p['metadata']['name']}") for p in claim_pods]
    released = [recorder.released(c) for c in claims]
    driver_gone = recorder.deletion_started("pod", f"{DRIVER_NS}/{driver_pod['metadata']['name']}")
    web_evicted = [recorder.deletion_started("pod", event[3]) for event in recorder.events
                   if event[1] == "pod" and event[3].startswith(f"{namespace}/web-")]
    assert None not in evicted and None not in released and driver_gone is not None, recorder.events[-5:]
    assert max(evicted) < max(released) < driver_gone
    assert min(w for w in web_evicted if w) > min(evicted)

    after = node_state(cluster, node)
    assert after["unschedulable"] is True and after["labels"][EXCLUSION] == "true"
    assert pods_on(cluster, DRIVER_NS, node) == []

    again = cluster.run_module("dra.admin.dra_node_drain", drain_args(node))
    assert again["changed"] is False and again["eviction_order"] == []

    back = cluster.run_module("dra.admin.dra_node_drain",
                              drain_args(node, state="in_service", drivers=["gpu.example.com"]))
    assert back["changed"] is True and back["uncordon"] is True
    assert node_state(cluster, node) == before
    running_count(cluster, DRIVER_NS, node, 1)
    assert cluster.run_module("dra.admin.dra_node_drain", drain_args(node, state="in_service"))["changed"] is False


def test_without_driver_names_the_excluding_daemonsets_are_the_drivers(cluster, drain_node):
    """Given no driver_daemonsets: every DaemonSet that keeps off nodes with the exclusion label leaves
    last, and the return to service waits until its pod is back and ready on the node."""
    node = drain_node
    before = node_state(cluster, node)
    args = {"node": node, "timeout": 120, "poll_interval": 0.5}
    driver_pod = f"{DRIVER_NS}/{pods_on(cluster, DRIVER_NS, node)[0]['metadata']['name']}"

    planned = cluster.run_module("dra.admin.dra_node_drain", args, check=True)
    assert driver_pod in planned["driver_pods"]
    drained = cluster.run_module("dra.admin.dra_node_drain", args)
    assert "driver pod(s) gone: " in drained["events"][-1] and driver_pod in drained["events"][-1]
    assert pods_on(cluster, DRIVER_NS, node) == []

    back = cluster.run_module("dra.admin.dra_node_drain", dict(args, state="in_service"))
    # Read at once: the module returned only after the driver's pod was ready again.
    ready = [p["metadata"]["name"] for p in pods_on(cluster, DRIVER_NS, node)
             if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]
    assert len(ready) == 1, pods_on(cluster, DRIVER_NS, node)
    assert any("driver pod(s) ready: " in e and f"{DRIVER_NS}/{ready[0]}" in e
               for e in back["events"]), back["events"]
    assert node_state(cluster, node) == before


def test_pdb_that_allows_later_is_waited_for(cluster, namespace, drain_node):
    api = cluster.resource_version
    node = drain_node
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   claim_deployment(namespace, "guarded", node, 2, "one-gpu", grace=1)])
    running_count(cluster, namespace, node, 2, "app=guarded")
    cluster.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "guard", "namespace": namespace},
                   "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}})
    pdb_in_force(cluster, namespace, "guard", 2)

    guarded = [p["metadata"]["name"] for p in pods_on(cluster, namespace, node, "app=guarded")]
    refused_before = refused_evictions(cluster)
    relaxed_at, relax_errors = [], []

    def relax():
        # Hold the PDB until the drain has been refused twice per pod (so it retried), then relax it.
        try:
            cluster.wait_until(lambda: refused_evictions(cluster) - refused_before >= 2 * len(guarded), 120,
                               "the drain's evictions to be refused twice per pod")
        except AssertionError as exc:
            relax_errors.append(exc)
        relaxed_at.append(time.monotonic())
        cluster.kubectl("patch", "pdb", "-n", namespace, "guard", "--type=merge", "-p",
                        '{"spec":{"minAvailable":0}}')

    recorder = ApiRecorder(cluster.kubeconfig)
    recorder.watch_pods(namespace)
    relaxer = threading.Thread(target=relax)
    relaxer.start()
    try:
        result = cluster.run_module("dra.admin.dra_node_drain", drain_args(node))
    finally:
        relaxer.join()
        recorder.stop()
    assert not relax_errors, relax_errors
    assert result["changed"] is True
    evicted = [recorder.deletion_started("pod", f"{namespace}/{name}") for name in guarded]
    assert None not in evicted
    # The PDB refused the evictions (the API server answered 429, more than once per pod) until it was
    # relaxed; the drain kept retrying instead of failing.
    assert min(evicted) > relaxed_at[0]


def test_pods_of_a_namespace_being_deleted_are_waited_for(cluster, namespace, drain_node):
    """In a terminating namespace no eviction can be created (403, cause NamespaceTerminating) until the
    namespace controller marks the pods for deletion; the drain waits for that instead of failing."""
    api = cluster.resource_version
    node = drain_node
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   claim_deployment(namespace, "leaving", node, 2, "one-gpu", grace=1)])
    leaving = running_count(cluster, namespace, node, 2, "app=leaving")
    hold = f"hold-{namespace}"[:63]
    cluster.apply(pod_deletion_hold(hold, namespace))
    try:
        # In force once a server-side dry-run delete is refused by it.
        cluster.wait_until(lambda: hold in cluster.kubectl(
            "delete", "pod", "-n", namespace, leaving[0]["metadata"]["name"], "--dry-run=server",
            check=False).stderr, 60, f"ValidatingAdmissionPolicy {hold} in force")
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
        cluster.wait_until(lambda: cluster.get_json("namespace", namespace)["status"].get("phase") == "Terminating",
                           60, f"namespace {namespace} terminating")
        refused_before = refused_evictions(cluster, 403)
        outcome = {}
        drainer = threading.Thread(target=lambda: outcome.update(
            result=cluster.run_module("dra.admin.dra_node_drain", drain_args(node))))
        drainer.start()
        try:
            # Hold the pods until the drain has been refused twice per pod (so it retried), then let go.
            cluster.wait_until(lambda: refused_evictions(cluster, 403) - refused_before >= 2 * len(leaving),
                               120, "the drain's evictions to be refused in the terminating namespace")
            assert [p["metadata"]["uid"] for p in pods_on(cluster, namespace, node, "app=leaving")] == \
                [p["metadata"]["uid"] for p in leaving], "the pods were deleted while held"
        finally:
            cluster.kubectl("delete", "validatingadmissionpolicybinding", hold, "--ignore-not-found")
            drainer.join()
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", hold,
                        "--ignore-not-found", check=False)
    result = outcome["result"]
    assert result["changed"] is True
    assert pods_on(cluster, namespace, node, "app=leaving") == []
    assert EXCLUSION in node_state(cluster, node)["labels"]


def test_pdb_that_never_allows_fails_with_node_cordoned_and_driver_untouched(cluster, namespace, drain_node):
    api = cluster.resource_version
    node = drain_node
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   claim_deployment(namespace, "precious", node, 1, "one-gpu", grace=1),
                   {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "never", "namespace": namespace},
                    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "precious"}}}}])
    running_count(cluster, namespace, node, 1, "app=precious")
    driver_pod = pods_on(cluster, DRIVER_NS, node)[0]
    pdb_in_force(cluster, namespace, "never", 1)
    failed = cluster.run_module("dra.admin.dra_node_drain", drain_args(node, timeout=8), expect_failure=True)
    assert f"{namespace}/never" in failed["msg"]
    assert failed["details"]["pod_disruption_budgets"] == [f"{namespace}/never"]
    state = node_state(cluster, node)
    assert state["unschedulable"] is True and EXCLUSION not in state["labels"]
    still = pods_on(cluster, DRIVER_NS, node)
    assert [p["metadata"]["uid"] for p in still] == [driver_pod["metadata"]["uid"]]


def test_a_claim_its_replacements_wait_for_under_a_budget_too_small_is_refused_before_any_write(
        cluster, namespace, drain_node):
    """Two pods of a Deployment name one ResourceClaim, allocated on the node: their replacements would name it
    too and wait for it (the node is cordoned), so it is released only once both are gone. A budget allowing one
    disruption would hold the drain for ever: the drain refuses before any write, naming the claim, the ReplicaSet
    and the budget (preview and check mode too). A budget allowing both lets the drain free the claim."""
    api = cluster.resource_version
    node = drain_node
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "shared", "namespace": namespace},
              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "shared"}}}}
    cluster.apply([claim(api, namespace, "shared-gpu"),
                   claim_deployment(namespace, "shared", node, 2, None, grace=1, claim_name="shared-gpu"), budget])
    pods = running_count(cluster, namespace, node, 2, "app=shared")
    pdb_in_force(cluster, namespace, "shared", 2)
    before = node_state(cluster, node)
    replica_set = pods[0]["metadata"]["ownerReferences"][0]["name"]
    want = [{"claim": f"{namespace}/shared-gpu", "pods": sorted(f"{namespace}/{p['metadata']['name']}" for p in pods),
             "controllers": [f"ReplicaSet {namespace}/{replica_set}"],
             "pod_disruption_budgets": [{"name": f"{namespace}/shared", "disruptions_allowed": 1}]}]

    preview = cluster.run_module("dra.admin.dra_node_drain", drain_args(node, preview=True))
    assert preview["claims_not_freed"] == want, preview
    for check in (True, False):
        failed = cluster.run_module("dra.admin.dra_node_drain", drain_args(node), check=check, expect_failure=True)
        assert failed["details"]["claims_not_freed"] == want, failed
        for part in (f"{namespace}/shared-gpu", f"ReplicaSet {namespace}/{replica_set}", f"{namespace}/shared allows 1",
                     "Nothing was changed", "scale the workload to zero"):
            assert part in failed["msg"], (part, failed["msg"])
        assert failed["changed"] is False
        assert node_state(cluster, node) == before
    assert sorted(p["metadata"]["uid"] for p in pods_on(cluster, namespace, node, "app=shared")) == \
        sorted(p["metadata"]["uid"] for p in pods)

    cluster.kubectl("patch", "pdb", "shared", "-n", namespace, "--type=merge", "-p", '{"spec":{"maxUnavailable":2}}')
    cluster.wait_until(lambda: (cluster.get_json("pdb", "shared", "-n", namespace).get("status") or {})
                       .get("disruptionsAllowed") == 2, 60, "the budget to allow 2 disruptions")
    result = cluster.run_module("dra.admin.dra_node_drain", drain_args(node))
    assert result["changed"] is True and result["claims_not_freed"] == [], result
    assert f"{namespace}/shared-gpu" in result["claims_held_at_start"]
    held = cluster.get_json("resourceclaims", "shared-gpu", "-n", namespace).get("status") or {}
    assert not [r for r in held.get("reservedFor") or [] if r.get("name") in [p["metadata"]["name"] for p in pods]]


def test_bad_input_changes_nothing(cluster, drain_node):
    node = drain_node
    before = node_state(cluster, node)
    failed = cluster.run_module("dra.admin.dra_node_drain", drain_args("no-such-node"), expect_failure=True)
    assert "node 'no-such-node' does not exist" in failed["msg"]
    failed = cluster.run_module("dra.admin.dra_node_drain", drain_args(node, driver_daemonsets=["kube-system/absent"]),
                                expect_failure=True)
    assert "driver DaemonSet kube-system/absent not found" in failed["msg"]
    failed = cluster.run_module("dra.admin.dra_node_drain", drain_args(node, exclusion_label="other/key"),
                                expect_failure=True)
    assert "does not keep its pods off nodes labelled other/key" in failed["msg"]
    failed = cluster.run_module("dra.admin.dra_node_drain", drain_args(node, timeout=0), expect_failure=True)
    assert "wait_timeout (alias timeout) must be a finite number of seconds above 0" in failed["msg"]
    assert node_state(cluster, node) == before


def test_role_drains_phase_by_phase_naming_what_is_pending(cluster, namespace, drain_node, tmp_path):
    """Role dra.admin.drain waits in until-loops, a line per round: each round's result names what is still
    pending and the seconds so far; the drain's result is the one call's (same phases, order, changed)."""
    api = cluster.resource_version
    node = drain_node
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   claim_deployment(namespace, "trainer", node, 2, "one-gpu", grace=12),
                   plain_deployment(namespace, "web", node)])
    claim_pods = sorted(f"{namespace}/{p['metadata']['name']}"
                        for p in running_count(cluster, namespace, node, 2, "app=trainer"))
    running_count(cluster, namespace, node, 1, "app=web")
    driver_pod = f"{DRIVER_NS}/{pods_on(cluster, DRIVER_NS, node)[0]['metadata']['name']}"
    out = tmp_path / "out.json"
    playbook = tmp_path / "drain.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles: [dra.admin.drain]\n  tasks:\n"
        "    - name: Keep the registered results\n      ansible.builtin.copy:\n"
        "        content: \"{{ {'result': dra_drain_result, 'step': dra_drain_step_claim_pods,"
        " 'wait': dra_drain_wait_claim_pods, 'driver': dra_drain_wait_driver_pods} | to_json }}\"\n"
        f"        dest: {out}\n")
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps({"dra_drain_node": node, "dra_drain_driver_daemonsets": [f"{DRIVER_NS}/{DRIVER_DS}"],
                                     "dra_drain_timeout": 120, "dra_drain_poll_interval": 0.5}))
    role_vars = ["-e", f"@{vars_file}", "-vvv"]
    recorder = ApiRecorder(cluster.kubeconfig)
    recorder.watch_pods(namespace)
    recorder.watch_pods(DRIVER_NS)
    recorder.watch_claims(namespace, api)
    try:
        run = cluster.run_playbook(str(playbook), *role_vars, env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    finally:
        recorder.stop()
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    got = json.loads(out.read_text())

    # The first phase found the claim pods pending; the wait's rounds named them until they were gone.
    assert got["step"]["waiting_for"] == "claim_pods_gone" and got["step"]["pending"] == claim_pods
    assert got["step"]["changed"] is True and got["step"]["elapsed"] >= 0
    # -vvv prints each round's result after its line: "FAILED - RETRYING: [host]: name (N retries left).Result was: {..}"
    retry_lines = [chunk for chunk in run.stdout.split("FAILED - RETRYING: ")[1:]
                   if "Wait until the evicted claim pods are gone" in chunk.split("\n", 1)[0]]
    assert retry_lines, run.stdout[-6000:]
    rounds = [json.JSONDecoder().raw_decode(chunk.split("Result was: ", 1)[1])[0] for chunk in retry_lines]
    assert rounds and all(r["waiting_for"] == "claim_pods_gone" for r in rounds)
    assert set(rounds[0]["pending"]) <= set(claim_pods) and rounds[0]["pending"]
    assert "waiting for the evicted pods that use ResourceClaims to be gone" in rounds[0]["progress"]
    assert [r["elapsed"] for r in rounds] == sorted(r["elapsed"] for r in rounds)
    assert got["wait"]["waiting_for"] != "claim_pods_gone" and got["wait"]["attempts"] == len(retry_lines) + 1
    assert got["driver"]["waiting_for"] is None and got["driver"]["pending"] == []

    # The result is the one call's: same phases, plan and outcome, in the same order on the API.
    result = got["result"]
    assert result["changed"] is True and result["claim_pods"] == claim_pods
    assert result["eviction_order"] == result["claim_pods"] + result["other_pods"]
    assert result["driver_pods"] == [driver_pod]
    assert set(result["phases"]) == {"preflight", "cordon", "evict_claim_pods", "evict_other_pods",
                                     "wait_claims_released", "remove_driver"}
    evicted = [recorder.deletion_started("pod", p) for p in claim_pods]
    claims = sorted(set(event[3] for event in recorder.events if event[1] == "claim"))
    released = [recorder.released(c) for c in claims]
    driver_gone = recorder.deletion_started("pod", driver_pod)
    assert None not in evicted and claims and None not in released and driver_gone is not None
    assert max(evicted) < max(released) < driver_gone
    after = node_state(cluster, node)
    assert after["unschedulable"] is True and after["labels"][EXCLUSION] == "true"

    again = cluster.run_playbook(str(playbook), *role_vars[:-1])
    assert again.returncode == 0, again.stdout[-4000:]
    assert json.loads(out.read_text())["result"]["changed"] is False
    # Only the test's own copy task changed something.
    assert re.search(r"localhost\s+: ok=\d+\s+changed=1\s", again.stdout), again.stdout[-2000:]


PREVIEW_LABEL = "dra.admin.test/preview"


def counted_template(api_version, namespace, name, count):
    body = {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": count}
    request = dict(name="gpu", **body) if api_version == "v1beta1" else {"name": "gpu", "exactly": body}
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [request]}}}}


def labelled_deployment(namespace, name, template):
    """A claim workload on the nodes labelled PREVIEW_LABEL (only the drained node when it starts)."""
    deployment = claim_deployment(namespace, name, "unused", 1, template)
    deployment["spec"]["template"]["spec"]["nodeSelector"] = {PREVIEW_LABEL: "yes"}
    return deployment


def test_preview_names_the_workload_that_would_stay_pending_and_the_role_refuses(cluster, namespace, drain_node,
                                                                                 tmp_path):
    """The drained node's 8 devices: `big` holds 7, `small` 1; each other node has 2 taken by a filler, so 6
    free: `small` would find a device elsewhere, `big` would not. The preview says so and changes nothing; the
    role with dra_drain_refuse_pending refuses to start (the node stays schedulable, every pod in place)."""
    api = cluster.resource_version
    nodes = [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]
    others = [n for n in nodes if n != drain_node]
    cluster.apply([counted_template(api, namespace, "seven", 7), counted_template(api, namespace, "one", 1),
                   counted_template(api, namespace, "two", 2)])
    cluster.kubectl("label", "node", drain_node, f"{PREVIEW_LABEL}=yes", "--overwrite")
    try:
        cluster.apply([labelled_deployment(namespace, "big", "seven"), labelled_deployment(namespace, "small", "one")]
                      + [claim_deployment(namespace, f"filler-{i}", n, 1, "two") for i, n in enumerate(others)])
        running_count(cluster, namespace, drain_node, 2)
        for n in others:
            running_count(cluster, namespace, n, 1)
        for n in others:  # the replacements may go anywhere labelled now
            cluster.kubectl("label", "node", n, f"{PREVIEW_LABEL}=yes", "--overwrite")
        before = sorted(p["metadata"]["name"] for p in pods_on(cluster, namespace, drain_node))
        result = cluster.run_module("dra.admin.dra_node_drain", drain_args(drain_node, preview=True))
        assert result["changed"] is False
        preview = result["preview"]
        by_app = {w["pod"].split("/")[1].split("-")[0]: w for w in preview["workloads"]}
        assert set(by_app) == {"big", "small"}, preview
        assert by_app["small"]["verdict"] == "fits" and set(by_app["small"]["fits_on"]) == set(others), preview
        assert by_app["big"]["verdict"] == "does_not_fit", preview
        assert preview["would_stay_pending"] == [by_app["big"]["pod"]]
        assert "needs 7 device(s)" in by_app["big"]["message"], by_app["big"]["message"]
        assert by_app["big"]["controller"].startswith("ReplicaSet/big-")
        assert not node_state(cluster, drain_node)["unschedulable"]

        refused = cluster.run_role("dra.admin.drain", tmp_path, {
            "dra_drain_node": drain_node, "dra_drain_driver_daemonsets": [f"{DRIVER_NS}/{DRIVER_DS}"],
            "dra_drain_refuse_pending": True})
        assert refused.returncode != 0
        assert f"not draining {drain_node}" in refused.stdout and by_app["big"]["pod"] in refused.stdout
        assert not node_state(cluster, drain_node)["unschedulable"]
        assert sorted(p["metadata"]["name"] for p in pods_on(cluster, namespace, drain_node)) == before
    finally:
        for n in nodes:
            cluster.kubectl("label", "node", n, f"{PREVIEW_LABEL}-", check=False)
