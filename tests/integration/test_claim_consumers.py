"""Claims the pod's spec does not name, and consumers that are not pods, on the real local cluster.

1. Extended resources backed by DRA (DRAExtendedResource: GA and locked in 1.37, absent before 1.34): a
   DeviceClass with `extendedResourceName`, a Deployment's pod asking for that resource in its limits; the real
   scheduler makes the claim, allocates and reserves it, and records its name only in the pod's
   `status.extendedResourceClaimStatus`. dra_claims_info shows it reserved with the pod as consumer and the
   pod's node; the taint dry run and device health name the pod; the drain evicts the pod in its first phase and
   the claim is released before the driver pod goes; the doctor calls the claim orphaned only once the pod is gone
   (kube-controller-manager stopped, so that the reservation stays), never before. On a release without the gate
   the test asserts the feature is absent (the API server drops the field, the pod stays unschedulable, no claim).
2. Claims reserved for a workload's PodGroup (DRAWorkloadResourceClaims + GenericWorkload, beta and off in 1.37),
   on a 1.37 cluster of the test's own with both gates on: the claim's consumer is the group; the claims report
   shows it as such, the doctor does not call the claim orphaned while the group exists and does once it is gone,
   and the drain evicts the group's pods, does not wait for the reservation and names the group and what to do.
   Where the gates do not exist the test asserts that the catalog refuses them and the API is not served.

With DRA_IT_RECORD=<dir>, the objects are saved for the unit tests (extended-resource-<version>.json,
workload-claims-<version>.json).
"""
import os
import signal

import pytest
import yaml

from cluster_harness import record
from conftest import own_cluster
from dra_objects import DEVICE_CLASS, DRIVER, EXCLUSION_LABEL, claim, device_class
# The drain tests' driver DaemonSet and node fixtures (driver, drain_node) are used here too.
from test_drain import (
    DRIVER_NS, TOLERATE_KWOK, drain_args, driver_daemonset, node_state, pods_on, recorded_drain, running_count,
)
from test_drain import driver, drain_node  # noqa: F401  pylint: disable=unused-import

import clusterlib

GATES = clusterlib.catalog()
POD_GROUPS = ("scheduling.k8s.io", "podgroups")
WORKLOAD_GATES = "GenericWorkload=true,DRAWorkloadResourceClaims=true"


def release(cluster):
    return "1.%d" % cluster.minor


def controller_manager_pid(cluster):
    pid_file = os.path.join(cluster.state_dir, "kwok", "clusters", cluster.name, "pids",
                            "kube-controller-manager.pid")
    with open(pid_file) as fh:
        return int(fh.read().strip())


def claims_of(result):
    return {c["name"]: c for c in result["claims"]}


# ---------------------------------------------------------------------------------------------------------------
# 1. Extended resources backed by DRA
# ---------------------------------------------------------------------------------------------------------------

def extended_class(api, name, resource):
    body = device_class(api, DRIVER)
    body["metadata"]["name"] = name
    body["spec"]["extendedResourceName"] = resource
    return body


def extended_deployment(namespace, name, node, resource):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": {"kubernetes.io/hostname": node},
                         "tolerations": TOLERATE_KWOK, "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "main", "image": "registry.invalid/app:none",
                                         "resources": {"limits": {resource: "1"}}}]}}}}


def scheduled_pod_with_claim(cluster, namespace, app):
    def probe():
        pods = cluster.get_json("pods", "-n", namespace, "-l", f"app={app}")["items"]
        ready = [p for p in pods if p["status"].get("phase") == "Running"
                 and (p["status"].get("extendedResourceClaimStatus") or {}).get("resourceClaimName")]
        return ready[0] if ready else None
    return cluster.wait_until(probe, 90, f"a Running pod of {namespace}/{app} with its extended resources' claim")


def unschedulable_pods(cluster, namespace, app):
    def probe():
        pods = cluster.get_json("pods", "-n", namespace, "-l", f"app={app}")["items"]
        return [p for p in pods if any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                                       and c.get("reason") == "Unschedulable"
                                       for c in p["status"].get("conditions") or [])] or None
    return cluster.wait_until(probe, 60, f"the pod of {namespace}/{app} reported Unschedulable")


@pytest.fixture
def extended_resource(cluster, namespace):
    """(DeviceClass name, extended resource name), the class deleted afterwards."""
    name = f"ext-{namespace}"[:60]
    resource = f"example.com/gpu-{abs(hash(namespace)) % 100000}"
    yield name, resource
    cluster.kubectl("delete", "deviceclass", name, "--ignore-not-found", check=False)


def has_extended_resources(cluster):
    """Whether the release has DRA-backed extended resources on by default (the catalog: absent before 1.34,
    alpha and off in 1.34-1.35, beta and on in 1.36, GA and locked in 1.37)."""
    info = GATES.gate_info(release(cluster), "DRAExtendedResource")
    return info is not None and info["default"]


def assert_extended_resources_absent(cluster, namespace, extended_resource):
    """Without the gate on: the API server drops extendedResourceName, the pod asks for a resource no node has."""
    name, resource = extended_resource
    text = yaml.safe_dump(extended_class(cluster.resource_version, name, resource))
    if GATES.gate_info(release(cluster), "DRAExtendedResource") is None:
        refused = cluster.kubectl("apply", "-f", "-", stdin=text, check=False)
        assert refused.returncode != 0 and "extendedResourceName" in refused.stderr, refused.stderr
    cluster.kubectl("apply", "--validate=false", "-f", "-", stdin=text)
    assert "extendedResourceName" not in cluster.get_json("deviceclass", name)["spec"]
    node = cluster.get_json("nodes")["items"][0]["metadata"]["name"]
    cluster.apply(extended_deployment(namespace, "ext", node, resource))
    (pending,) = unschedulable_pods(cluster, namespace, "ext")
    assert "extendedResourceClaimStatus" not in pending["status"]
    claims = cluster.get_json(f"resourceclaims.{cluster.resource_version}.resource.k8s.io", "-n", namespace)
    assert claims["items"] == []


@pytest.mark.per_release("gate_info", "DRAExtendedResource", key="default")
def test_extended_resource_pod_is_a_claim_workload_everywhere(cluster, namespace, drain_node, extended_resource):
    if not has_extended_resources(cluster):
        assert_extended_resources_absent(cluster, namespace, extended_resource)
        return
    api = cluster.resource_version
    node = drain_node
    name, resource = extended_resource
    cluster.apply(extended_class(api, name, resource))
    assert cluster.get_json("deviceclass", name)["spec"]["extendedResourceName"] == resource
    cluster.apply(extended_deployment(namespace, "ext", node, resource))
    pod = scheduled_pod_with_claim(cluster, namespace, "ext")
    pod_name, pod_uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    assert not pod["spec"].get("resourceClaims"), "the pod's spec names no claim"
    claim_name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    stored = cluster.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", namespace, claim_name)
    assert [r["uid"] for r in stored["status"]["reservedFor"]] == [pod_uid]
    device = stored["status"]["allocation"]["devices"]["results"][0]
    record(cluster, "extended-resource", ("resourceclaims,pods", "-n", namespace), "deviceclasses")

    # The claims report: reserved, the pod as consumer, on the pod's node.
    info = claims_of(cluster.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]}))[claim_name]
    assert info["state"] == "reserved" and info["extended_resource_claim"] is True
    assert info["nodes"] == [node] and info["orphaned"] is False
    assert [(c["kind"], c["name"], c["exists"], c["node"]) for c in info["consumers"]] == [
        ("pod", pod_name, True, node)]

    # Device health and the taint dry run name the pod.
    health = cluster.run_module("dra.admin.dra_device_health_info", {"list_devices": "all", "driver": DRIVER})
    entry = next(d for d in health["devices"] if (d["pool"], d["device"]) == (device["pool"], device["device"]))
    assert entry["pods"] == [{"namespace": namespace, "name": pod_name, "node": node}]
    assert entry["claims"] == [f"{namespace}/{claim_name}"]
    if GATES.device_taint_rule_support(cluster.version)["default_on"]:
        dry = cluster.run_module("dra.admin.dra_device_taint", {
            "state": "dry_run", "driver": device["driver"], "pool": device["pool"], "device": device["device"]})
        assert dry["changed"] is False and dry["pods"] == [f"{namespace}/{pod_name}"]
        assert dry["would_evict"] == [f"{namespace}/{pod_name}"]

    # The doctor: nothing while the pod exists.
    doctor = cluster.run_module("dra.admin.dra_claims_doctor", {"namespaces": [namespace]})
    assert [f for f in doctor["findings"] if f.get("claim") == f"{namespace}/{claim_name}"] == []

    # The drain: the pod is a claim workload (first phase), its claim released before the driver leaves.
    planned = cluster.run_module("dra.admin.dra_node_drain", drain_args(node), check=True)
    assert planned["claim_pods"] == [f"{namespace}/{pod_name}"]
    assert planned["eviction_order"][0] == f"{namespace}/{pod_name}"
    assert f"{namespace}/{claim_name}" in planned["claims_held_at_start"]
    driver_pod = pods_on(cluster, DRIVER_NS, node)[0]
    result, recorder = recorded_drain(cluster, namespace, api, node)
    assert result["claim_pods"] == [f"{namespace}/{pod_name}"] and result["non_pod_claims"] == []
    evicted = recorder.deletion_started("pod", f"{namespace}/{pod_name}")
    released = recorder.released(f"{namespace}/{claim_name}")
    driver_gone = recorder.deletion_started("pod", f"{DRIVER_NS}/{driver_pod['metadata']['name']}")
    assert None not in (evicted, released, driver_gone), recorder.events[-8:]
    assert evicted < released < driver_gone
    assert node_state(cluster, node)["labels"][EXCLUSION_LABEL] == "true"


def test_doctor_calls_the_extended_resource_claim_orphaned_only_once_the_pod_is_gone(cluster, namespace,
                                                                                     extended_resource):
    if not has_extended_resources(cluster):
        assert_extended_resources_absent(cluster, namespace, extended_resource)
        return
    api = cluster.resource_version
    name, resource = extended_resource
    node = cluster.get_json("nodes")["items"][0]["metadata"]["name"]
    cluster.apply(extended_class(api, name, resource))
    # A pod of no controller: with kube-controller-manager stopped, nothing may recreate it or wait on it.
    bare = extended_deployment(namespace, "ext", node, resource)["spec"]["template"]
    meta = dict(bare["metadata"], name="ext", namespace=namespace)
    cluster.apply(dict(bare, apiVersion="v1", kind="Pod", metadata=meta))
    pod = scheduled_pod_with_claim(cluster, namespace, "ext")
    claim_key = f"{namespace}/{pod['status']['extendedResourceClaimStatus']['resourceClaimName']}"
    before = cluster.run_module("dra.admin.dra_claims_doctor", {"namespaces": [namespace]})
    assert [f for f in before["findings"] if f.get("claim") == claim_key] == []
    pid = controller_manager_pid(cluster)
    os.kill(pid, signal.SIGSTOP)  # no resourceclaim controller, no garbage collector: the claim stays reserved
    try:
        cluster.kubectl("delete", "pod", "-n", namespace, "ext", "--wait=true", "--timeout=60s")
        after = cluster.run_module("dra.admin.dra_claims_doctor", {"namespaces": [namespace]})
        orphaned = [f for f in after["findings"] if f.get("claim") == claim_key]
        assert [f["kind"] for f in orphaned] == ["orphaned"], after["findings"]
        assert orphaned[0]["action"] == "resync"
    finally:
        os.kill(pid, signal.SIGCONT)
    cluster.wait_until(lambda: cluster.kubectl("get", f"resourceclaims.{api}.resource.k8s.io", "-n", namespace,
                                               claim_key.split("/")[1], check=False).returncode != 0,
                       90, "the garbage collector to delete the claim of the gone pod", interval=1)


# ---------------------------------------------------------------------------------------------------------------
# 2. Consumers that are not pods: a workload's PodGroup
# ---------------------------------------------------------------------------------------------------------------

def workload_gates_exist(version):
    minor = int(version.split(".")[1])
    return all(GATES.gate_info("1.%d" % minor, g) is not None for g in ("GenericWorkload", "DRAWorkloadResourceClaims"))


@pytest.fixture(scope="module")
def workload_cluster(cluster):
    """A cluster of its own, of the shared cluster's release, with DRAWorkloadResourceClaims and GenericWorkload on,
    where they exist; None (after asserting that the catalog refuses them) where not."""
    version = cluster.version
    if not workload_gates_exist(version):
        settings = GATES.dra_settings(version, {"GenericWorkload": True, "DRAWorkloadResourceClaims": True})
        assert any("DRAWorkloadResourceClaims does not exist" in e for e in settings["errors"]), settings
        yield None
        return
    with own_cluster("it-workload", version, 2, 250, WORKLOAD_GATES) as cluster:
        cluster.kubectl("create", "namespace", DRIVER_NS)
        cluster.apply(driver_daemonset())
        for node in [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]:
            running_count(cluster, DRIVER_NS, node, 1)
        yield cluster


def pod_group(namespace, name, claim_name):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingPolicy": {"basic": {}},
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]}}


def group_deployment(namespace, name, node, group, claim_name, replicas=2):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "schedulingGroup": {"podGroupName": group},
                         "nodeSelector": {"kubernetes.io/hostname": node},
                         "tolerations": TOLERATE_KWOK, "terminationGracePeriodSeconds": 1,
                         "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
                         "containers": [{"name": "main", "image": "registry.invalid/app:none",
                                         "resources": {"claims": [{"name": "gpu"}]}}]}}}}


def test_a_pod_group_consumer_is_shown_not_orphaned_and_named_by_the_drain(workload_cluster, cluster):
    if workload_cluster is None:
        # Absent on this release: the shared cluster serves no PodGroup API either.
        assert cluster.kubectl("get", "--raw", "/apis/scheduling.k8s.io/v1beta1", check=False).stdout.count(
            '"podgroups"') == 0
        return
    wc = workload_cluster
    api = wc.resource_version
    namespace = "workload"
    wc.kubectl("create", "namespace", namespace)
    wc.wait_for_default_service_account(namespace)
    node = wc.get_json("nodes")["items"][-1]["metadata"]["name"]
    wc.apply([claim(api, namespace, "gang-gpu", device_class=DEVICE_CLASS), pod_group(namespace, "gang", "gang-gpu"),
              group_deployment(namespace, "trainer", node, "gang", "gang-gpu")])
    group_uid = wc.get_json("podgroups.scheduling.k8s.io", "-n", namespace, "gang")["metadata"]["uid"]
    pods = running_count(wc, namespace, node, 2, "app=trainer")

    def reserved_for_group():
        c = wc.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", namespace, "gang-gpu")
        return c if (c.get("status") or {}).get("reservedFor") else None
    stored = wc.wait_until(reserved_for_group, 60, "the claim reserved")
    assert stored["status"]["reservedFor"] == [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "gang", "uid": group_uid}]
    record(wc, "workload-claims", ("resourceclaims,pods,podgroups.scheduling.k8s.io", "-n", namespace))

    info = claims_of(wc.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]}))["gang-gpu"]
    assert info["state"] == "reserved" and info["orphaned"] is False and info["nodes"] == [node]
    assert [(c["kind"], c["api_group"], c["resource"], c["name"], c["exists"]) for c in info["consumers"]] == [
        ("pod_group", "scheduling.k8s.io", "podgroups", "gang", True)]
    gate = wc.run_module("dra.admin.dra_claims_info", {"node": node, "fail_if_any_on_node": True},
                         expect_failure=True)
    assert "podgroups.scheduling.k8s.io/gang (a workload's PodGroup, not a pod)" in gate["msg"]
    assert "delete the PodGroup" in gate["msg"]
    doctor = wc.run_module("dra.admin.dra_claims_doctor", {"namespaces": [namespace]})
    assert [f for f in doctor["findings"] if f.get("claim") == f"{namespace}/gang-gpu"] == []

    # The drain evicts the group's pods first, then does not wait for the group's reservation: it names it.
    timeout = 120
    result = wc.run_module("dra.admin.dra_node_drain", drain_args(node, timeout=timeout))
    assert sorted(result["claim_pods"]) == sorted(f"{namespace}/{p['metadata']['name']}" for p in pods)
    assert [(r["claim"], r["consumers"]) for r in result["non_pod_claims"]] == [
        (f"{namespace}/gang-gpu", ["podgroups.scheduling.k8s.io/gang"])]
    assert "delete the PodGroup (or its workload)" in result["non_pod_claims"][0]["message"]
    assert any("podgroups.scheduling.k8s.io/gang" in w for w in result.get("warnings", [])), result.get("warnings")
    assert result["phases"]["wait_claims_released"] < timeout / 4, result["phases"]
    assert pods_on(wc, DRIVER_NS, node) == [] and node_state(wc, node)["unschedulable"] is True
    # The group still holds the claim: reserved for it, or - once the scheduler found none of the group's
    # recreated pods placeable (the node is cordoned) - still allocated, reserved for nobody; either way the claims
    # report names the group as its consumer and the claim is not orphaned.
    still = wc.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", namespace, "gang-gpu")["status"]
    assert still.get("allocation") and [r["name"] for r in still.get("reservedFor") or []] in (["gang"], []), still
    held = claims_of(wc.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]}))["gang-gpu"]
    assert held["orphaned"] is False and [(c["kind"], c["name"], c["exists"]) for c in held["consumers"]] == [
        ("pod_group", "gang", True)]

    # With the group gone, the claim is orphaned. The workload ends first: its pods keep the group (PodGroup
    # protection finalizer). kube-controller-manager is then stopped so that the stale reservation stays, and the
    # finalizer removed as its PodGroup protection controller would.
    wc.kubectl("delete", "deployment", "-n", namespace, "trainer", "--wait=true", "--timeout=60s")
    wc.wait_until(lambda: not wc.get_json("pods", "-n", namespace)["items"], 60, "the workload's pods gone")
    pid = controller_manager_pid(wc)
    os.kill(pid, signal.SIGSTOP)
    try:
        wc.kubectl("delete", "podgroup.scheduling.k8s.io", "-n", namespace, "gang", "--wait=false")
        wc.kubectl("patch", "podgroup.scheduling.k8s.io", "-n", namespace, "gang", "--type=merge",
                   "-p", '{"metadata": {"finalizers": null}}')
        wc.wait_until(lambda: wc.kubectl("get", "podgroup.scheduling.k8s.io", "-n", namespace, "gang",
                                         check=False).returncode != 0, 30, "the PodGroup gone")
        gone = claims_of(wc.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]}))["gang-gpu"]
        assert gone["orphaned"] is True and all(c["exists"] is False for c in gone["consumers"]), gone
        reserved = gone["state"] == "reserved"
        doctor = wc.run_module("dra.admin.dra_claims_doctor", {"namespaces": [namespace]})
        assert [(f["kind"], f["action"]) for f in doctor["findings"] if f.get("claim") == f"{namespace}/gang-gpu"] \
            == [("orphaned", "resync" if reserved else None)]
    finally:
        os.kill(pid, signal.SIGCONT)
    if reserved:
        wc.wait_until(lambda: not (wc.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", namespace,
                                               "gang-gpu").get("status") or {}).get("reservedFor"),
                      90, "kube-controller-manager to drop the gone group's reservation", interval=1)
