"""Which DaemonSets place a pod on a node (selector, affinity, taints), and which driver pods are missing."""
from ansible_collections.dra.admin.plugins.module_utils._node_selection import (
    DEFAULT_EXCLUSION_LABEL, daemonset_admits, toleration_matches,
)
from ansible_collections.dra.admin.plugins.module_utils.drain import missing_driver_pods

EXCLUDE = {"key": DEFAULT_EXCLUSION_LABEL, "operator": "DoesNotExist"}


def daemonset(node_selector=None, terms=None, tolerations=None):
    spec = {"containers": [{"name": "c", "image": "x"}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"namespace": "dra", "name": "drv"}, "spec": {"template": {"spec": spec}}}


def node(labels=None, taints=None, name="n1"):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def test_exclusion_label_keeps_the_daemonset_off_and_its_removal_lets_it_back():
    ds = daemonset(terms=[{"matchExpressions": [EXCLUDE]}])
    assert daemonset_admits(ds, node({"gpu": "yes"})) is True
    assert daemonset_admits(ds, node({"gpu": "yes", DEFAULT_EXCLUSION_LABEL: "true"})) is False


def test_node_selector_and_affinity_must_both_admit():
    ds = daemonset(node_selector={"gpu": "yes"},
                   terms=[{"matchExpressions": [EXCLUDE, {"key": "zone", "operator": "In", "values": ["a"]}]}])
    assert daemonset_admits(ds, node({"gpu": "yes", "zone": "a"})) is True
    assert daemonset_admits(ds, node({"gpu": "yes", "zone": "b"})) is False
    assert daemonset_admits(ds, node({"zone": "a"})) is False


def test_untolerated_taints_keep_it_off_but_cordon_and_prefer_taints_do_not():
    ds = daemonset(terms=[{"matchExpressions": [EXCLUDE]}],
                   tolerations=[{"key": "gpu", "operator": "Equal", "value": "busy", "effect": "NoSchedule"}])
    cordoned = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    prefer = {"key": "other", "effect": "PreferNoSchedule"}
    assert daemonset_admits(ds, node(taints=[cordoned, prefer])) is True
    assert daemonset_admits(ds, node(taints=[{"key": "gpu", "value": "busy", "effect": "NoSchedule"}])) is True
    assert daemonset_admits(ds, node(taints=[{"key": "gpu", "value": "broken", "effect": "NoSchedule"}])) is False
    assert daemonset_admits(ds, node(taints=[{"key": "maint", "effect": "NoExecute"}])) is False


def test_toleration_rules():
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    assert toleration_matches({"operator": "Exists"}, taint)
    assert toleration_matches({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not toleration_matches({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert toleration_matches({"key": "k", "value": "v"}, taint)
    assert not toleration_matches({"key": "k", "value": "w"}, taint)
    assert not toleration_matches({"value": "v"}, taint)


def pod_of(namespace, daemonset_name):
    return {"metadata": {"namespace": namespace, "name": daemonset_name + "-x",
                         "ownerReferences": [{"kind": "DaemonSet", "name": daemonset_name, "controller": True}]}}


def test_missing_driver_pods_names_each_daemonset_without_a_ready_pod():
    assert missing_driver_pods(["dra/a", "dra/b"], [pod_of("dra", "a")]) == ["dra/b"]
    assert missing_driver_pods(["dra/a"], [pod_of("other", "a")]) == ["dra/a"]
    assert missing_driver_pods(["dra/a"], [pod_of("dra", "a")]) == []
