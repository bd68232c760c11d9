"""A driver's identity bound to its own driver and node, checked by impersonation on the real API server.

What role dra.admin.driver applies with the built-in template (dra_driver_plan_info's manifests and policies: the
plugin's ServiceAccount, its ClusterRole and binding, and the ValidatingAdmissionPolicy with its binding) is applied here without
the DaemonSet; then `kubectl create --dry-run=server` of ResourceSlices, impersonating the plugin's service account
with and without the node-name extra a pod-bound token carries, shows what the API server lets it write: before the
policy, RBAC alone lets it forge any node's slices for any driver; after, only its own driver's slices of its node.
"""
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from dra_objects import resource_slice

sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402

DRIVER = "it-bound.example.com"
NAMESPACE = "it-bound-driver"
NODE_EXTRA = "authentication.kubernetes.io/node-name"
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def a_slice(cluster, name, driver, node=None):
    """A slice of one device for the node, or for every node without one."""
    obj = resource_slice(cluster.resource_version, driver, node or "everywhere", ["dev-0"],
                         **({"nodeName": node} if node else {"allNodes": True}))
    obj["metadata"]["name"] = name
    return obj


# kubectl's --as-user-extra is newer than 1.33's kubectl: the default release's kubectl impersonates on every release.
KUBECTL = clusterlib.component_bin("kubernetes", clusterlib.supported_k8s_versions()[0], "kubectl")


def create_as(cluster, obj, user=None, node=None):
    """`kubectl create --dry-run=server` of obj, as user (with the node-name extra when node); (accepted, output)."""
    args = [KUBECTL, "--kubeconfig", cluster.kubeconfig, "create", "--dry-run=server", "-f", "-"]
    if user:
        args += ["--as", user]
        if node:
            args += ["--as-user-extra", f"{NODE_EXTRA}={node}"]
    res = subprocess.run(args, input=yaml.safe_dump(obj), capture_output=True, text=True, check=False, timeout=60)
    return res.returncode == 0, (res.stdout + res.stderr).strip()


@pytest.fixture
def plugin_objects(cluster):
    """The template's objects but the DaemonSet (and the DeviceClasses), as the driver role renders them for this
    cluster; removed afterwards."""
    nodes = [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]
    plan = cluster.run_module("dra.admin.dra_driver_plan_info", {
        "driver": DRIVER, "method": "template", "namespace": NAMESPACE, "image": "registry.invalid/driver:v1",
        "tolerations": [{"operator": "Exists"}]}, expect_failure=False)
    objects = [o for o in plan["manifests"] if o["kind"] != "DaemonSet"] + plan["policies"]
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    yield nodes, objects
    for obj in reversed(objects):
        cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "-n", NAMESPACE, "--ignore-not-found",
                        check=False)
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


@pytest.mark.every_release("admission: the driver's slice policy against the release's own API server (v1beta1 "
                           "slices on 1.33, v1 later)")
def test_the_plugins_identity_writes_only_its_own_drivers_slices_of_its_own_node(cluster, plugin_objects):
    nodes, objects = plugin_objects
    node_a, node_b = nodes[0], nodes[1]
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"] + list(POLICY_KINDS), kinds
    account = objects[0]["metadata"]
    user = f"system:serviceaccount:{account['namespace']}:{account['name']}"
    own, elsewhere = a_slice(cluster, "it-bound-own", DRIVER, node_a), a_slice(cluster, "it-bound-b", DRIVER, node_b)
    forged = a_slice(cluster, "it-bound-forged", "gpu.other.example.com", node_a)

    rbac = [o for o in objects if o["kind"] not in POLICY_KINDS]
    cluster.apply(rbac)
    last = {}

    def own_accepted():
        accepted, last["output"] = create_as(cluster, own, user, node_a)
        return accepted
    try:
        cluster.wait_until(own_accepted, 60, "RBAC for the plugin's account")
    except Exception:
        raise AssertionError("the plugin's own slice is refused under RBAC alone: %s" % last.get("output"))
    # RBAC alone: the plugin's identity may forge another node's slices and another driver's.
    assert create_as(cluster, elsewhere, user, node_a)[0]
    assert create_as(cluster, forged, user, node_a)[0]

    cluster.apply([o for o in objects if o["kind"] in POLICY_KINDS])
    # The API server enforces a new policy once it has compiled it: wait for the refusal itself.
    cluster.wait_until(lambda: not create_as(cluster, elsewhere, user, node_a)[0], 60, "the slice policy in force")

    accepted, out = create_as(cluster, own, user, node_a)
    assert accepted, out
    accepted, out = create_as(cluster, elsewhere, user, node_a)
    assert not accepted and f"is bound to node {node_a}: it may write only the ResourceSlices of that node" in out, out
    accepted, out = create_as(cluster, forged, user, node_a)
    assert not accepted and f"may write only ResourceSlices of driver {DRIVER}, not of gpu.other.example.com" in out
    # A token without a node (not a pod's) writes no node's slices; a slice for every node is not this driver's.
    accepted, out = create_as(cluster, own, user)
    assert not accepted and "has no node in its token" in out, out
    accepted, out = create_as(cluster, a_slice(cluster, "it-bound-all", DRIVER), user, node_a)
    assert not accepted and "set dra_driver_cluster_slices: true" in out, out
    # Anyone else keeps what RBAC gives: the administrator's request is not the policy's.
    assert create_as(cluster, elsewhere)[0]
    policy = cluster.get_json("validatingadmissionpolicy", f"dra-kubeletplugin.{DRIVER}")
    assert json.dumps(policy["spec"]["matchConditions"]).count(user) == 1
