"""upgrade.checks: findings from objects and kube-apiserver /metrics recorded from the real local clusters
(tests/unit/fixtures/upgrade/README.md), and the catalog's upgrade facts."""
import gzip
import json
import os

import hypothesis
import hypothesis.strategies as st
import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.upgrade import checks as u
from ansible_collections.dra.admin.plugins.module_utils.drivers import checks as driver_checks
from conftest import FIXTURES


def recorded(name):
    path = os.path.join(FIXTURES, "upgrade", name)
    if name.endswith(".gz"):
        with gzip.open(path, "rt") as handle:
            return handle.read()
    with open(path) as handle:
        return json.load(handle)


def facts_133(**extra):
    discovery = [recorded("discovery-v1.33.13-%s.json" % v) for v in ("v1beta2", "v1beta1")]
    facts = {
        "served_versions": ["v1beta2", "v1beta1"],
        "served_resources": dict((d["groupVersion"].split("/")[1], [r["name"] for r in d["resources"]])
                                 for d in discovery),
        "metrics_text": recorded("kube-apiserver-v1.33.13-metrics.txt.gz"),
        "storage_versions": u.storage_versions_from_discovery(discovery),
        "object_counts": {"deviceclasses": 1, "resourceslices": 2},
        "nodes": recorded("nodes-v1.33.13.json")["items"],
        "admin_namespaces": recorded("namespaces-v1.33.13.json")["items"],
    }
    facts.update(extra)
    return facts


def ids(found):
    return sorted(set(f["id"] for f in found))


def test_recorded_metrics_show_the_v1beta1_client():
    usage = u.api_usage(recorded("kube-apiserver-v1.33.13-metrics.txt.gz"))
    assert usage[("v1beta1", "deviceclasses")]["requests"] >= 1
    assert not any(use["deprecated"] for use in usage.values())  # nothing in resource.k8s.io is deprecated on 1.33
    assert u.api_usage(recorded("kube-apiserver-v1.36.3-metrics.txt.gz")) == {}  # 1.36 serves only v1 here


def test_recorded_storage_versions():
    assert u.storage_versions_from_discovery([recorded("discovery-v1.33.13-v1beta1.json")]) == dict(
        (r, "v1beta1") for r in u.STORED_RESOURCES)
    assert u.storage_versions_from_discovery([recorded("discovery-v1.36.3-v1.json")]) == dict(
        (r, "v1") for r in u.STORED_RESOURCES)
    for minor, version in ((33, "v1beta1"), (34, "v1beta2"), (35, "v1"), (38, "v1")):
        assert catalog.storage_version("1.%d" % minor, "resourceclaims") == version
    assert catalog.storage_version("1.37", "devicetaintrules") == "v1beta2"


def test_storage_version_api_objects():
    items = [{"metadata": {"name": "resource.k8s.io.resourceclaims"},
              "status": {"commonEncodingVersion": "resource.k8s.io/v1beta2"}},
             {"metadata": {"name": "apps.deployments"}, "status": {"commonEncodingVersion": "apps/v1"}}]
    assert u.storage_versions_from_api(items) == {"resourceclaims": "v1beta2"}


def test_the_new_key_set_before_the_rename_is_named_and_every_granting_namespace_listed():
    def ns(name, **labels):
        return {"metadata": {"name": name, "labels": labels}}
    facts = {"admin_namespaces": [ns("old-only", **{catalog.OLD_ADMIN_LABEL: "true"}),
                                  ns("new-only", **{catalog.NEW_ADMIN_LABEL: "true"}),
                                  ns("both", **{catalog.OLD_ADMIN_LABEL: "true", catalog.NEW_ADMIN_LABEL: "true"})]}
    found = [f for f in u.findings(facts, "v1.33.13", "v1.34") if f["id"].startswith("admin-access")]
    by = dict((f["subject"], f) for f in found)
    assert by["namespace old-only"]["severity"] == "breaking"  # loses admin access
    assert by["namespace new-only"]["severity"] == "warning" and "today that key grants nothing" in \
        by["namespace new-only"]["message"]
    assert by["label %s" % catalog.NEW_ADMIN_LABEL]["evidence"]["namespaces"] == ["both", "new-only"]
    # Within 1.34+ nothing changes hands: only the list of namespaces that grant it.
    later = [f["id"] for f in u.findings(facts, "v1.36.3", "v1.37") if f["id"].startswith("admin-access")]
    assert sorted(later) == ["admin-access-label", "admin-access-namespaces"]  # old-only still grants nothing


def test_133_to_134():
    found = u.findings(facts_133(), "v1.33.13", "v1.34")
    by = dict((f["id"], f) for f in found)
    assert [f["subject"] for f in found if f["id"] == "admin-access-label"] == ["namespace it-old-label"]
    in_use = [f for f in found if f["id"] == "api-version-in-use"]
    v1beta1 = [f for f in in_use if f["subject"] == "resource.k8s.io/v1beta1 deviceclasses"][0]
    assert v1beta1["severity"] == "warning" and "dra_feature_gates_runtime_config_extra" in v1beta1["fix"]
    assert by["storage-version"]["evidence"]["target_storage_version"] == "v1beta2"
    # DynamicResourceAllocation=true differs from 1.33's default: set on the command line; fine on 1.34.
    assert "feature-gate-removed" not in by and "feature-gate-locked" not in by
    assert by["kubelet-version-unknown"]["severity"] == "warning"  # KWOK nodes report kwok-0.8.0
    assert "upgrade-path" not in by and "driver-rbac" not in by
    assert found[0]["severity"] == "breaking"


def test_133_to_138_is_planned_and_breaks_v1beta1():
    found = u.findings(facts_133(), "v1.33.13", "1.38")
    by = dict((f["id"], f) for f in found)
    v1beta1 = [f for f in found if f["id"] == "api-version-removed"]
    assert [f["subject"] for f in v1beta1] == ["resource.k8s.io/v1beta1"]
    assert by["feature-gate-removed"]["subject"] == "kube-apiserver: DynamicResourceAllocation"
    assert by["planned-release"]["severity"] == "info"
    assert by["upgrade-path"]["evidence"]["steps"] == ["1.34", "1.35", "1.36", "1.37", "1.38"]
    assert "pre-release v1.38.0-beta.0" in by["planned-release"]["message"]


def test_138_to_139_warns_of_the_announced_removals():
    """1.39 is planned: DRAAdminAccess is removed there ("remove in 1.39"), DRAConsumableCapacity and
    DRAFractionalCapacityRange are locked, v1beta2 goes."""
    facts = {"kubelet_gates": kubelets(node_a={"DRAAdminAccess": True, "DRAConsumableCapacity": True})}
    found = u.findings(facts, "v1.38.0", "1.39")
    by = dict((f["subject"], f) for f in found)
    assert by["kubelet on node-a: DRAAdminAccess"]["id"] == "feature-gate-removed"
    assert "not released yet" in by["1.39"]["message"] and "plans" in by["1.39"]["message"]
    # true is what 1.39 locks it to: the setting does nothing there, which breaks nothing.
    assert by["kubelet on node-a: DRAConsumableCapacity"]["severity"] != "breaking"


def test_136_gate_set_to_its_default_cannot_be_told_from_metrics():
    found = u.findings({"metrics_text": recorded("kube-apiserver-v1.36.3-metrics.txt.gz")}, "v1.36.3", "v1.38")
    unknown = [f for f in found if f["id"] == "feature-gate-unknown"]
    assert unknown and unknown[0]["evidence"]["gates"] == ["DynamicResourceAllocation"]
    assert not [f for f in found if f["severity"] == "breaking"]
    found = u.findings({"metrics_text": recorded("kube-apiserver-v1.36.3-metrics.txt.gz")}, "v1.36.3", "v1.37")
    # kube-apiserver's gates are all defaults; kube-controller-manager's and kube-scheduler's are not visible.
    assert [(f["id"], f["severity"]) for f in found] == [("feature-gates-unread", "warning")]
    assert found[0]["evidence"]["components"] == ["kube-controller-manager", "kube-scheduler"]
    assert sorted(found[0]["evidence"]["gates"]) == [
        "DRADeviceTaints", "DRAExtendedResource", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"]


def static_pod(component, gates):
    with open(os.path.join(FIXTURES, "kubeadm-v1.36.3", component + ".yaml")) as handle:
        pod = yaml.safe_load(handle)
    pod["metadata"]["name"] = component + "-cp-1"
    pod["spec"]["containers"][0]["command"].append("--feature-gates=" + gates)
    return pod


def test_static_pod_flags_locked_and_removed():
    pods = [static_pod("kube-apiserver", "DRAAdminAccess=false,DynamicResourceAllocation=true"),
            static_pod("kube-scheduler", "DRAPrioritizedList=true")]
    flags = u.flags_from_pods(pods)
    assert flags["kube-scheduler"]["feature-gates"] == {"DRAPrioritizedList": "true"}
    found = u.findings({"control_plane_flags": flags}, "v1.35.2", "v1.36")
    locked = dict((f["subject"], f) for f in found if f["id"] == "feature-gate-locked")
    assert locked["kube-apiserver: DRAAdminAccess"]["severity"] == "breaking"
    assert locked["kube-apiserver: DynamicResourceAllocation"]["severity"] == "info"
    assert "kube-scheduler: DRAPrioritizedList" not in locked  # GA in 1.36, locked only from 1.37
    found = u.findings({"control_plane_flags": flags}, "v1.37.1", "v1.38")
    assert [f["subject"] for f in found if f["id"] == "feature-gate-removed"] == [
        "kube-apiserver: DynamicResourceAllocation"]


def test_every_gate_of_the_release_lists_is_judged_per_component_and_per_kubelet_group():
    """A gate outside the DRA catalog is judged from the releases' own gate lists: 1.38 removes
    PodSchedulingReadiness and SeparateTaintEvictionController (both in 1.37's list, in none after), so a component
    that sets one does not start; AllAlpha, which every release has, is no finding."""
    pods = [static_pod("kube-apiserver", "DRAAdminAccess=true,PodSchedulingReadiness=true,AllAlpha=false"),
            static_pod("kube-scheduler", "DRAPrioritizedList=true")]
    facts = {"control_plane_flags": u.flags_from_pods(pods),
             "kubelet_gates": kubelets(node_a={"SeparateTaintEvictionController": True},
                                       node_b={"SeparateTaintEvictionController": True}, node_c={})}
    found = u.findings(facts, "v1.37.2", "v1.38")
    removed = [f for f in found if f["id"] == "feature-gate-removed"]
    assert [(f["subject"], f["severity"]) for f in removed] == [
        ("kube-apiserver: PodSchedulingReadiness", "breaking"),
        ("kubelet on node-a, node-b: SeparateTaintEvictionController", "breaking")]
    assert "Kubernetes 1.38 no longer knows the gate and the component refuses to start" in removed[0]["message"]
    assert removed[1]["evidence"]["nodes"] == ["node-a", "node-b"]
    assert not [f for f in found if f["id"] == "feature-gate-unchecked"]
    # A non-DRA gate locked on the target to the other value (APIServerTracing: GA and locked to true from 1.34).
    pods = [static_pod("kube-apiserver", "APIServerTracing=false")]
    locked = u.findings({"control_plane_flags": u.flags_from_pods(pods)}, "v1.33.13", "v1.34")
    assert [(f["id"], f["severity"]) for f in locked if f["subject"] == "kube-apiserver: APIServerTracing"] == [
        ("feature-gate-locked", "breaking")]


def test_a_gate_one_component_of_the_target_does_not_know_is_judged_for_that_component():
    """1.38's kube-apiserver, kube-scheduler and kubelet do not know ControllerManagerReleaseLeaderElectionLockOnExit
    (its list has it; the binaries refuse it as unrecognized), kube-controller-manager does."""
    gate = "ControllerManagerReleaseLeaderElectionLockOnExit"
    pods = [static_pod("kube-apiserver", "%s=true" % gate), static_pod("kube-controller-manager", "%s=true" % gate)]
    found = u.findings({"control_plane_flags": u.flags_from_pods(pods)}, "v1.37.2", "v1.38")
    assert [(f["id"], f["severity"], f["subject"]) for f in found if gate in f["subject"]] == [
        ("feature-gate-removed", "breaking", "kube-apiserver: %s" % gate)]
    assert "the kube-apiserver of Kubernetes 1.38 does not know the gate" in [
        f for f in found if gate in f["subject"]][0]["message"]


def test_gates_no_list_has_are_named_per_component_and_per_kubelet_group():
    """client-go's gates (the components register them; the releases' lists do not have them), and any non-DRA
    gate on a target without a list (the announced 1.39), are named as unchecked, never passed as checked."""
    pods = [static_pod("kube-apiserver", "DRAAdminAccess=true,WatchListClient=true,AllAlpha=false")]
    facts = {"control_plane_flags": u.flags_from_pods(pods),
             "kubelet_gates": kubelets(node_a={"ContextualLogging": True}, node_b={"ContextualLogging": True},
                                       node_c={})}
    found = [f for f in u.findings(facts, "v1.37.2", "v1.38") if f["id"] == "feature-gate-unchecked"]
    assert [(f["subject"], f["severity"]) for f in found] == [("kube-apiserver: WatchListClient", "warning")]
    assert "Kubernetes 1.38 no longer knows refuses to start" in found[0]["message"]
    found = [f for f in u.findings(facts, "v1.38.0", "1.39") if f["id"] == "feature-gate-unchecked"]
    assert [(f["subject"], f["severity"]) for f in found] == [
        ("kube-apiserver: WatchListClient", "warning"), ("kubelet on node-a, node-b: ContextualLogging", "warning")]
    assert found[1]["evidence"]["nodes"] == ["node-a", "node-b"]


def test_driver_accounts_and_reviews():
    labelled = {"metadata": {"name": "ds", "namespace": "drivers", "labels": {"dra.admin/driver": "gpu.example.com"}},
                "spec": {"template": {"spec": {"serviceAccountName": "plugin"}}}}
    chart = {"metadata": {"name": "example", "namespace": "dra"},
             "spec": {"template": {"spec": {
                 "volumes": [{"name": "r", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}}],
                 "containers": [{"name": "p", "env": [{"name": "DRIVER_NAME", "value": "gpu.example.com"}]}]}}}}
    unrelated = {"metadata": {"name": "logs", "namespace": "x"},
                 "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["gpu.example.com"]}]}}}}
    accounts = driver_checks.driver_accounts([labelled, chart, unrelated], {"gpu.example.com"})
    assert [(a["namespace"], a["service_account"]) for a in accounts] == [("drivers", "plugin"), ("dra", "default")]
    reviews = u.access_reviews(accounts[:1], ["kube-system/my-scheduler"])
    attrs = [r[1]["spec"]["resourceAttributes"] for r in reviews]
    assert [(a["subresource"], a["verb"]) for a in attrs] == [
        ("driver", "associated-node:patch"), ("driver", "associated-node:update"), ("binding", "update"),
        ("binding", "patch")]
    assert attrs[0]["name"] == "gpu.example.com"
    access = [(r[0], r[0][1] == "resourceclaims/driver") for r in reviews]
    facts = {"driver_accounts": accounts[:1], "schedulers": ["kube-system/my-scheduler"], "access": access}
    found = u.findings(facts, "v1.35.0", "v1.36")
    assert [i for i in ids(found) if "gate" not in i] == ["scheduler-rbac"]
    # before 1.36 neither permission is needed
    assert [f for f in u.findings(facts, "v1.34.0", "v1.35") if "gate" not in f["id"]] == []


def test_kubelet_skew_from_recorded_nodes():
    nodes = recorded("nodes-v1.33.13.json")["items"]
    nodes[0]["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.13"
    nodes[1]["status"]["nodeInfo"]["kubeletVersion"] = "v1.32.4"
    found = dict((f["id"], f) for f in u.findings({"nodes": nodes}, "v1.33.13", "v1.36"))
    assert found["kubelet-skew"]["evidence"]["nodes"] == {nodes[1]["metadata"]["name"]: "v1.32.4"}
    assert found["kubelet-skew"]["evidence"]["oldest_supported_minor"] == 33
    assert list(found["seamless-driver-upgrade"]["evidence"]["nodes"]) == [nodes[1]["metadata"]["name"]]
    assert "kubelet-skew" not in ids(u.findings({"nodes": nodes}, "v1.33.13", "v1.35"))


@pytest.mark.parametrize("current, target, words", [
    ("v1.36.3", "v1.35", ["target_version", "older than the cluster"]),
    ("v1.36.3", "v1.40", ["target_version", "1.30 to 1.39"]),
    ("v1.36.3", "latest", ["target_version", "cannot read"]),
    ("v1.29.4", "v1.30", ["cluster runs Kubernetes v1.29.4", "1.30 on"]),
])
def test_bad_target(current, target, words):
    with pytest.raises(u.UpgradeInputError) as info:
        u.findings({}, current, target)
    assert all(w in str(info.value) for w in words)


def test_api_serving_catalog():
    assert catalog.api_serving("1.34", "v1alpha3", "resourceclaims") is None
    assert catalog.api_serving("1.34", "v1alpha3", "devicetaintrules") == "runtime-config"
    assert catalog.api_serving("1.37", "v1beta1", "resourceclaims") == "runtime-config"
    assert catalog.api_serving("1.38", "v1beta1", "resourceclaims") is None
    assert catalog.api_serving("1.38", "v1", "resourceclaims") == "default"
    assert catalog.api_serving("1.33", "v1", "resourceclaims") is None
    assert catalog.oldest_kubelet_minor("1.36") == 33


def test_metrics_not_readable_is_a_warning_not_a_pass():
    found = u.findings({"metrics_error": "GET /metrics failed: HTTP 403: forbidden"}, "v1.36.3", "v1.37")
    assert [(f["id"], f["severity"]) for f in found] == [("metrics-unreadable", "warning"),
                                                         ("feature-gates-unread", "warning")]
    assert found[1]["evidence"]["components"] == list(u.CONTROL_PLANE)
    assert "system:monitoring" in found[0]["fix"]


# --- the kubelets' gates (and every component's, by the same rule) ----------------------------------------

def kubelet_configz(gates=None, kubeadm="v1.36.3"):
    """A kubelet's /configz answer ({"kubeletconfig": ...}) holding the configuration the real kubeadm wrote
    (tests/unit/fixtures/kubeadm-<release>/kubelet-config.yaml), with `gates` as its featureGates."""
    with open(os.path.join(FIXTURES, "kubeadm-" + kubeadm, "kubelet-config.yaml")) as handle:
        config = yaml.safe_load(handle)
    config.pop("apiVersion")
    config.pop("kind")
    if gates is not None:
        config["featureGates"] = gates
    return {u.KUBELET_CONFIGZ_KEY: config}


def kubelets(**per_node):
    """facts["kubelet_gates"] as upgrade.read_kubelet_gates builds it: {node: {"gates": ...} or {"error": ...}}."""
    out = {}
    for node, gates in per_node.items():
        node = node.replace("_", "-")
        if isinstance(gates, str):
            out[node] = {"error": gates}
        else:
            out[node] = {"gates": u.kubelet_gates_from_configz(kubelet_configz(gates))}
    return out


def test_kubelet_gates_from_configz():
    assert u.kubelet_gates_from_configz(kubelet_configz()) == {}  # kubeadm's file sets no gate
    assert u.kubelet_gates_from_configz(kubelet_configz({"DRAPrioritizedList": False})) == {
        "DRAPrioritizedList": False}
    for other in (None, [], {"componentconfig": {"featureGates": {"X": True}}}, {"kubeletconfig": "text"}):
        assert u.kubelet_gates_from_configz(other) is None


def test_recorded_kubelet_configz_of_a_real_137_kubelet():
    real = recorded("kubelet-configz-v1.37.2-kind.json")
    assert real[u.KUBELET_CONFIGZ_KEY]["kind"] == "KubeletConfiguration"
    assert u.kubelet_gates_from_configz(real) == {}  # kind's kubelet sets no gate
    facts = {"kubelet_gates": {"worker": {"gates": u.kubelet_gates_from_configz(real)}}}
    assert not [f for f in u.findings(facts, "v1.37.2", "v1.38") if "kubelet" in f["id"]]
    # The same kubelet with device taints switched off (allowed on 1.37: both gates GA, not locked) does not start
    # on 1.38, which locks both on.
    gates = {"DRADeviceTaints": False, "DRADeviceTaintRules": False}
    assert catalog.validate_gates("v1.37.2", gates) == []
    real[u.KUBELET_CONFIGZ_KEY]["featureGates"] = gates
    facts = {"kubelet_gates": {"worker": {"gates": u.kubelet_gates_from_configz(real)}}}
    found = [f for f in u.findings(facts, "v1.37.2", "v1.38") if f["subject"].startswith("kubelet on worker")]
    assert [(f["id"], f["severity"], f["subject"]) for f in found] == [
        ("feature-gate-locked", "breaking", "kubelet on worker: DRADeviceTaintRules"),
        ("feature-gate-locked", "breaking", "kubelet on worker: DRADeviceTaints")]
    # Switching off only DRADeviceTaints is refused already on 1.37 (DRADeviceTaintRules is on and needs it).
    facts["kubelet_gates"]["worker"]["gates"] = {"DRADeviceTaints": False}
    assert [f["id"] for f in u.findings(facts, "v1.36.3", "v1.37") if f["severity"] == "breaking"] == [
        "feature-gate-dependency"]


def test_136_to_137_kubelet_gates_the_target_refuses():
    facts = {"kubelet_gates": kubelets(node_a={"DRAPrioritizedList": False}, node_b={"DRADeviceTaints": False},
                                       node_c={"DRADeviceTaints": "false"}, node_d={},
                                       node_e={"DRAPrioritizedList": True, "SomeOtherGate": True},
                                       node_f="GET /api/v1/nodes/node-f/proxy/configz failed: HTTP 503: no route")}
    found = u.findings(facts, "v1.36.3", "v1.37")
    by = dict(((f["id"], f["subject"]), f) for f in found)
    locked = by[("feature-gate-locked", "kubelet on node-a: DRAPrioritizedList")]
    assert locked["severity"] == "breaking" and locked["evidence"]["nodes"] == ["node-a"]
    assert "locked to true" in locked["message"] and "dra_feature_gates_extra: {DRAPrioritizedList: null}" in locked[
        "fix"]
    # DRADeviceTaints=false was fine on 1.36; on 1.37 DRADeviceTaintRules is on by default and needs it.
    dependency = by[("feature-gate-dependency", "kubelet on node-b, node-c: DRADeviceTaintRules")]
    assert dependency["severity"] == "breaking" and dependency["evidence"]["nodes"] == ["node-b", "node-c"]
    assert dependency["evidence"]["missing"] == ["DRADeviceTaints"]
    assert "remove DRADeviceTaints=false" in dependency["fix"] and "DRADeviceTaintRules=false" in dependency["fix"]
    info = by[("feature-gate-locked", "kubelet on node-e: DRAPrioritizedList")]
    assert info["severity"] == "info"
    unread = by[("kubelet-gates-unread", "node-f")]
    assert unread["severity"] == "warning" and "HTTP 503" in unread["evidence"]["nodes"]["node-f"]
    assert "DRAPrioritizedList" in unread["evidence"]["gates"] and "DRADeviceTaints" in unread["evidence"]["gates"]
    assert not [f for f in found if "node-d" in f["subject"]]
    assert [f["severity"] for f in found] == sorted((f["severity"] for f in found), key=u.SEVERITIES.index)


def test_137_to_138_kubelet_gates_the_138_binaries_refuse():
    """What v1.38.0-beta.0's components refuse to start with (the gate matrix): DRADeviceTaints, DRADeviceTaintRules,
    DRAPartitionableDevices and DRADeviceBindingConditions locked on, DynamicResourceAllocation unknown, and
    DRAConsumableCapacity=false under the on-by-default DRAFractionalCapacityRange."""
    facts = {"kubelet_gates": kubelets(node_a={"DRADeviceTaints": False, "DRADeviceTaintRules": False},
                                       node_b={"DynamicResourceAllocation": True},
                                       node_c={"DRAPartitionableDevices": False, "DRADeviceBindingConditions": False},
                                       node_d={"DRAConsumableCapacity": False})}
    found = u.findings(facts, "v1.37.2", "v1.38")
    subjects = dict((f["subject"], f) for f in found if f["severity"] == "breaking")
    assert sorted(subjects) == ["kubelet on node-a: DRADeviceTaintRules", "kubelet on node-a: DRADeviceTaints",
                                "kubelet on node-b: DynamicResourceAllocation",
                                "kubelet on node-c: DRADeviceBindingConditions",
                                "kubelet on node-c: DRAPartitionableDevices",
                                "kubelet on node-d: DRAFractionalCapacityRange"]
    assert subjects["kubelet on node-a: DRADeviceTaints"]["id"] == "feature-gate-locked"
    assert subjects["kubelet on node-c: DRAPartitionableDevices"]["id"] == "feature-gate-locked"
    assert subjects["kubelet on node-b: DynamicResourceAllocation"]["id"] == "feature-gate-removed"
    assert subjects["kubelet on node-d: DRAFractionalCapacityRange"]["id"] == "feature-gate-dependency"
    assert "planned-release" in ids(found)
    # The same settings are fine one release earlier (the gates are GA and not locked on 1.37).
    assert not [f for f in u.findings(facts, "v1.36.3", "v1.37") if f["subject"].startswith("kubelet on node-a")
                and f["id"] == "feature-gate-locked"]


def test_kubelet_gates_not_read_makes_no_kubelet_finding():
    assert "kubelet-gates-unread" not in ids(u.findings({}, "v1.36.3", "v1.37"))
    assert "kubelet-gates-unread" in ids(u.findings({"kubelet_gates": kubelets(n="HTTP 404")}, "v1.36.3", "v1.37"))


def test_control_plane_gates_get_the_kubelets_rule():
    pods = [static_pod("kube-scheduler", "DRADeviceTaints=false")]
    found = u.findings({"control_plane_flags": u.flags_from_pods(pods)}, "v1.36.3", "v1.37")
    assert [(f["id"], f["subject"]) for f in found] == [("feature-gate-dependency", "kube-scheduler: DRADeviceTaintRules")]
    assert "static pod command" in found[0]["message"]


def test_sensitive_gates_follow_the_catalog():
    assert catalog.upgrade_sensitive_gates("1.36", "1.37") == {
        "DRAExtendedResource": "locked to true on 1.37", "DRAPrioritizedList": "locked to true on 1.37",
        "DRAResourceClaimDeviceStatus": "locked to true on 1.37",
        "DRADeviceTaints": "DRADeviceTaintRules is on by default on 1.37 and depends on it"}
    assert catalog.upgrade_sensitive_gates("1.37", "1.38") == {
        "DRADeviceTaintRules": "locked to true on 1.38", "DRADeviceTaints": "locked to true on 1.38",
        "DRAPartitionableDevices": "locked to true on 1.38", "DRADeviceBindingConditions": "locked to true on 1.38",
        "DRAConsumableCapacity": "DRAFractionalCapacityRange is on by default on 1.38 and depends on it",
        "DynamicResourceAllocation": "removed in 1.38"}


PAIRS = [("1.%d" % now, "1.%d" % then) for now in range(33, 39) for then in range(max(now, 35), 39)]


@st.composite
def settings_valid_on(draw, pair):
    """Gate settings a running component of the current release can have (the catalog accepts them there)."""
    current = pair[0]
    names = sorted(catalog.gate_catalog(current))
    settings = draw(st.dictionaries(st.sampled_from(names), st.booleans(), max_size=6))
    hypothesis.assume(catalog.validate_gates(current, settings) == [])
    return settings


@hypothesis.settings(max_examples=300, deadline=None, suppress_health_check=[hypothesis.HealthCheck.filter_too_much])
@hypothesis.given(st.sampled_from(PAIRS).flatmap(lambda pair: st.tuples(st.just(pair), settings_valid_on(pair))))
def test_a_kubelet_breaks_exactly_when_the_catalog_refuses_its_gates(case):
    """The upgrade check and the catalog's validator (what role feature_gates refuses before writing) agree on every
    kubelet setting: a breaking finding for the kubelet iff the target release refuses the settings."""
    (current, target), settings = case
    found = u.findings({"kubelet_gates": {"n1": {"gates": settings}}}, current, target)
    breaking = [f for f in found if f["severity"] == "breaking" and f["subject"].startswith("kubelet on n1")]
    refused = catalog.validate_gates(target, settings)
    assert bool(breaking) == bool(refused), (settings, refused, breaking)
