"""The drain's return to service: which driver DaemonSets place a pod on the node, which have none ready."""
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import select_nodes_for_daemonset
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_service import missing_driver_pods

EXCLUDE = {"key": DEFAULT_EXCLUSION_LABEL, "operator": "DoesNotExist"}


def daemonset(tolerations=None):
    spec = {"containers": [{"name": "c", "image": "x"}], "tolerations": tolerations or [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [EXCLUDE]}]}}}}
    return {"metadata": {"namespace": "dra", "name": "drv"}, "spec": {"template": {"spec": spec}}}


def node(labels=None, taints=None):
    return {"metadata": {"name": "n1", "labels": labels or {}}, "spec": {"taints": taints or []}}


def admits(ds, n):
    return select_nodes_for_daemonset([n], ds)[0] == ["n1"]


def test_the_exclusion_label_keeps_the_driver_off_and_its_removal_lets_it_back_on_a_cordoned_node():
    cordoned = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    assert admits(daemonset(), node({"gpu": "yes"}, cordoned)) is True
    assert admits(daemonset(), node({"gpu": "yes", DEFAULT_EXCLUSION_LABEL: "true"}, cordoned)) is False


def test_a_driver_that_does_not_tolerate_a_node_taint_is_not_waited_for_there():
    taint = [{"key": "maintenance", "effect": "NoExecute"}]
    assert admits(daemonset(), node(taints=taint)) is False
    assert admits(daemonset([{"key": "maintenance", "operator": "Exists"}]), node(taints=taint)) is True


def pod_of(namespace, daemonset_name):
    return {"metadata": {"namespace": namespace, "name": daemonset_name + "-x",
                         "ownerReferences": [{"kind": "DaemonSet", "name": daemonset_name, "controller": True}]}}


def test_missing_driver_pods_names_each_daemonset_without_a_ready_pod():
    assert missing_driver_pods(["dra/a", "dra/b"], [pod_of("dra", "a")]) == ["dra/b"]
    assert missing_driver_pods(["dra/a"], [pod_of("other", "a")]) == ["dra/a"]
    assert missing_driver_pods(["dra/a"], [pod_of("dra", "a")]) == []
