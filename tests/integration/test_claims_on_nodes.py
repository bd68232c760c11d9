"""Which claims are on a node, with allocations made by the real scheduler.

- a network-attached device (slice with allNodes, allocation without a node selector):
  the claim is on the node of the pod that uses it, and gates that node only;
- one claim on a pool shared by two nodes, used by a pod on each: draining one node
  succeeds while the pod on the other keeps the claim;
- DaemonSet pods with claims stay on a drained node: their claims are reported, not waited for;
- slices with perDeviceNodeSelection count under the nodes their devices name (1.34+ API;
  on releases where DRAPartitionableDevices is off by default the API refuses such slices).

The made-up drivers below have no kubelet plugin: the scheduler allocates from any
published slice and a KWOK node "runs" any pod, which is all these checks need.
"""
import json

import pytest
import yaml

from cluster_harness import record
from dra_objects import claim, claim_template, device_class, hostname_selector, pod, resource_slice
from test_drain import (  # noqa: F401  pylint: disable=unused-import
    DRIVER_DS, DRIVER_NS, EXCLUSION, TOLERATE_KWOK, drain_args, drain_node, driver, node_state, pods_on, running_count,
)

from kubernetes import config

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog  # noqa: E402  (path set by dra_objects)
from ansible_collections.dra.admin.plugins.module_utils.access.api import TABLE_ACCEPT, DraApi  # noqa: E402

GATE_MODULE = "dra.admin.dra_claims_info"


def scenario_objects(namespace, *cluster_kinds):
    """What record saves of a scenario: the namespace's claims and pods, the cluster-wide kinds named, the nodes,
    and the namespace's pods as the server's Table."""
    def pods_table(cluster):
        raw = DraApi(api_client=config.new_client_from_config(config_file=cluster.kubeconfig))
        return [raw.get(f"/api/v1/namespaces/{namespace}/pods", {"includeObject": "Metadata"}, accept=TABLE_ACCEPT)]
    return (("resourceclaims,pods", "-n", namespace),) + cluster_kinds + ("nodes", pods_table)


def node_names(cluster):
    return sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])


def running(cluster, namespace, name):
    def probe():
        p = cluster.get_json("pod", "-n", namespace, name)
        return p if p["status"].get("phase") == "Running" else None
    return cluster.wait_until(probe, 90, f"pod {namespace}/{name} Running")


def get_claim(cluster, namespace, name):
    return cluster.get_json(f"resourceclaims.{cluster.resource_version}.resource.k8s.io", "-n", namespace, name)


def gate(cluster, namespace, node, expect_failure=False):
    return cluster.run_module(GATE_MODULE, {"node": node, "namespaces": [namespace], "fail_if_any_on_node": True},
                              expect_failure=expect_failure)


def deployment_using_claim(namespace, name, node, claim_name, grace=1):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": TOLERATE_KWOK,
                "terminationGracePeriodSeconds": grace,
                "resourceClaims": [{"name": "dev", "resourceClaimName": claim_name}],
                "containers": [{"name": "main", "image": "registry.invalid/app:none",
                                "resources": {"claims": [{"name": "dev"}]}}]}}},
    }


def test_network_attached_claim_gates_the_node_of_its_pod(cluster, namespace, cluster_objects):
    api = cluster.resource_version
    here, elsewhere = node_names(cluster)[:2]
    drv = "net.example.com"
    cluster_objects([device_class(api, drv), resource_slice(api, drv, "fabric", ["nic-0", "nic-1"], allNodes=True)])
    cluster.apply([claim(api, namespace, "nic", device_class=drv),
                   pod(namespace, "uses-nic", claim_name="nic", node=here)])
    running(cluster, namespace, "uses-nic")
    allocation = get_claim(cluster, namespace, "nic")["status"]["allocation"]
    assert not allocation.get("nodeSelector"), "network-attached: the allocator writes no node selector"

    record(cluster, "network-attached", *scenario_objects(namespace, "resourceslices", "deviceclasses"))
    failed = gate(cluster, namespace, here, expect_failure=True)
    assert failed["blocking"] == [f"{namespace}/nic"]
    assert f"pods/uses-nic on {here}" in failed["msg"]
    assert gate(cluster, namespace, elsewhere)["blocking"] == []

    report = cluster.run_module(GATE_MODULE, {"namespaces": [namespace]})
    view = report["claims"][0]
    assert view["node_scope"] == "cluster-wide" and view["nodes"] == [here] and view["allocation_nodes"] == []
    assert [c["node"] for c in view["consumers"]] == [here]
    assert report["summary"][here]["reserved"] == 1 and "<cluster-wide>" not in report["summary"]

    cluster.kubectl("delete", "pod", "-n", namespace, "uses-nic", "--wait=true", "--timeout=60s")
    cluster.wait_until(lambda: not cluster.run_module(GATE_MODULE, {"node": here, "namespaces": [namespace]})[
        "blocking"], 60, "the gate to pass once the pod is gone")
    assert gate(cluster, namespace, here)["blocking"] == []


def test_drain_leaves_a_claim_shared_with_a_pod_on_another_node(cluster, namespace, drain_node, cluster_objects):
    api = cluster.resource_version
    a = drain_node
    b = next(n for n in node_names(cluster) if n != a)
    drv = "shared.example.com"
    cluster_objects([device_class(api, drv),
                     resource_slice(api, drv, "shared-pool", ["dev-0"], nodeSelector=hostname_selector(a, b))])
    cluster.apply([claim(api, namespace, "shared", device_class=drv),
                   deployment_using_claim(namespace, "on-a", a, "shared"),
                   deployment_using_claim(namespace, "on-b", b, "shared")])
    running_count(cluster, namespace, a, 1, "app=on-a")
    on_b = running_count(cluster, namespace, b, 1, "app=on-b")[0]
    assert len(get_claim(cluster, namespace, "shared")["status"]["reservedFor"]) == 2
    record(cluster, "shared-pool", *scenario_objects(namespace, "resourceslices"))

    for node in (a, b):
        assert gate(cluster, namespace, node, expect_failure=True)["blocking"] == [f"{namespace}/shared"]
    summary = cluster.run_module(GATE_MODULE, {"namespaces": [namespace]})["summary"]
    assert summary[a]["reserved"] == 1 and summary[b]["reserved"] == 1

    result = cluster.run_module("dra.admin.dra_node_drain", drain_args(a, timeout=90))
    assert result["claims_held_at_start"] == [f"{namespace}/shared"]
    assert pods_on(cluster, namespace, a, "app=on-a") == []
    assert node_state(cluster, a)["labels"].get(EXCLUSION) == "true", "the drain finished: driver taken off"
    reserved = get_claim(cluster, namespace, "shared")["status"]["reservedFor"]
    assert [r["uid"] for r in reserved] == [on_b["metadata"]["uid"]], "the pod on the other node keeps the claim"
    assert gate(cluster, namespace, a)["blocking"] == []
    assert gate(cluster, namespace, b, expect_failure=True)["blocking"] == [f"{namespace}/shared"]


def daemonset_with_claims(namespace, name, node, template):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": TOLERATE_KWOK,
                "terminationGracePeriodSeconds": 1,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                "containers": [{"name": "agent", "image": "registry.invalid/agent:none",
                                "resources": {"claims": [{"name": "gpu"}]}}]}}},
    }


def test_daemonset_pods_keep_their_claims_and_do_not_hold_the_drain(cluster, namespace, drain_node):
    api = cluster.resource_version
    node = drain_node
    cluster.apply([claim_template(api, namespace, "one-gpu"), daemonset_with_claims(namespace, "agent", node, "one-gpu")])
    agent = running_count(cluster, namespace, node, 1, "app=agent")[0]
    claim_name = agent["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    record(cluster, "daemonset", *scenario_objects(namespace))

    ok = gate(cluster, namespace, node)
    assert ok["blocking"] == [] and ok["daemonset_claims"] == [f"{namespace}/{claim_name}"]

    result = cluster.run_module("dra.admin.dra_node_drain", drain_args(node, timeout=60))
    assert result["daemonset_claims"] == [f"{namespace}/{claim_name}"]
    assert any(claim_name in w and "DaemonSet pods" in w for w in result.get("warnings", []))
    assert [p["metadata"]["uid"] for p in pods_on(cluster, namespace, node, "app=agent")] == [agent["metadata"]["uid"]]
    assert pods_on(cluster, DRIVER_NS, node) == [], "the driver left the node"


def partitionable_devices_on(cluster):
    return catalog.effective_gates(cluster.version, catalog.gates_for_dra(cluster.version))["DRAPartitionableDevices"]


@pytest.mark.per_release("gate_info", "DRAPartitionableDevices", key="default")
def test_per_device_node_selection_counts_under_the_nodes_its_devices_name(cluster, namespace, driver,
                                                                           cluster_objects):
    api = cluster.resource_version
    n0, n1, n2 = node_names(cluster)[:3]
    drv = "part.example.com"
    per_device = resource_slice(api, drv, "partitioned",
                                [("p-0", {"nodeName": n0}), ("p-1", {"nodeName": n0}), ("p-2", {"nodeName": n1}),
                                 ("p-3", {"allNodes": True})], perDeviceNodeSelection=True)
    if not partitionable_devices_on(cluster):
        refused = cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(per_device), check=False)
        assert refused.returncode != 0, "DRAPartitionableDevices is off: the API must not keep per-device placement"
        assert cluster.kubectl("get", "resourceslices", "-o", "name").stdout.count("partitioned") == 0
        return
    cluster_objects([device_class(api, drv), per_device])

    slices = cluster.run_module("dra.admin.dra_slices_info", {"driver": drv})
    assert slices["nodes"][n0][drv]["devices"] == 2 and slices["nodes"][n1][drv]["devices"] == 1
    assert slices["nodes"]["<all-nodes>"][drv]["devices"] == 1
    # p-3 (allNodes) publishes for every node: the driver is present on n2 too, though no device is its own.
    assert slices["nodes_without_slices"] == []
    one = cluster.run_module("dra.admin.dra_slices_info", {"driver": drv, "node": n1})
    assert [p["pool"] for p in one["pools"]] == ["partitioned"] and list(one["nodes"]) == [n1]

    info = cluster.run_module("dra.admin.dra_cluster_info", {})
    assert info["nodes"][n0][drv]["devices"] == 2 and info["drivers"][drv]["devices"] == 4
    assert info["drivers"][drv]["nodes"] == len(node_names(cluster))

    status = cluster.run_module("dra.admin.dra_driver_status_info",
                                {"driver": drv, "namespace": DRIVER_NS, "daemonset_name": DRIVER_DS,
                                 "fail_on_problems": False})
    assert status["nodes_with_slices"] == sorted(status["selected_nodes"]) and n2 in status["nodes_with_slices"]
    assert status["nodes_without_slices"] == []

    back = cluster.run_module("dra.admin.dra_node_drain", drain_args(n1, state="in_service", drivers=[drv], timeout=30))
    assert any(f"{drv} publishes ResourceSlices for {n1}" in e for e in back["events"])

    cluster.apply([claim(api, namespace, "part", device_class=drv),
                   pod(namespace, "uses-part", claim_name="part", node=n1)])
    running(cluster, namespace, "uses-part")
    record(cluster, "per-device", *scenario_objects(namespace, "resourceslices"))
    view = cluster.run_module(GATE_MODULE, {"namespaces": [namespace]})["claims"][0]
    assert view["nodes"] == [n1] and view["problems"] == [], json.dumps(view)
