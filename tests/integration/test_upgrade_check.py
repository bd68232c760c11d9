"""dra_upgrade_check_info on the real local cluster: one cluster state that makes several findings happen,
each found, then fixed and checked gone; bad input fails naming the field; and on a fresh cluster of the test's
own, the check for the next release names exactly the findings that are real there.

The state: a namespace with only the 1.33 admin-access label, a driver DaemonSet whose service account
lacks the 1.36 resourceclaims/driver permission, and a Node whose kubelet reports v1.32.0 (a Node object
KWOK does not manage). On 1.33 also a request to resource.k8s.io/v1beta1, which kube-apiserver's metrics
then show; its counter stays until kube-apiserver restarts, so that finding is not checked gone.

What the target changes in objects the cluster keeps: a DeviceClass whose last-applied-configuration annotation
writes resource.k8s.io/v1beta1 (gone in 1.38), and DeviceTaintRules without deviceSelector (kube-scheduler reads
one as every device up to 1.37.0 and as none from 1.37.1): on the shared cluster where it serves DeviceTaintRule,
and on 1.33 on a cluster of the test's own with the rule's gates.
"""
import json

import pytest

from clusterlib import collection_module, supported_k8s_versions
from conftest import own_cluster

DRIVER = "it-upgrade.example.com"
OLD_LABEL = "resource.k8s.io/admin-access"
NEW_LABEL = "resource.kubernetes.io/admin-access"
OLD_NODE = "it-upgrade-old-kubelet"
ACCOUNT = "it-upgrade-driver"
gate_catalog = collection_module("releases.catalog")
taint_rules = collection_module("kube.taint_rules")
upgrade_checks = collection_module("upgrade.checks")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
STORED_CLASS = "it-upgrade-stored-v1beta1"
# The target of the behaviour checks: v1beta1 is gone there, and a rule without selector selects no device.
BEHAVIOUR_TARGET = "v1.38"


def target_for(minor):
    """The next release with the 1.36 claim status authorization: from 1.33 three steps ahead, later one."""
    return "v1.%d" % max(36, minor + 1)


def by_id(result):
    found = {}
    for item in result["findings"]:
        found.setdefault(item["id"], []).append(item)
    return found


def driver_daemonset(namespace):
    labels = {"app": "it-upgrade-driver"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "it-upgrade-driver", "namespace": namespace, "labels": {"dra.admin/driver": DRIVER}},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"serviceAccountName": ACCOUNT, "nodeSelector": {"it-upgrade": "none"},
                         "containers": [{"name": "plugin", "image": "registry.example/driver:1"}]}}}}


@pytest.fixture
def upgrade_state(cluster, namespace):
    cluster.kubectl("label", "namespace", namespace, f"{OLD_LABEL}=true")
    cluster.kubectl("create", "serviceaccount", ACCOUNT, "-n", namespace)
    cluster.apply(driver_daemonset(namespace))
    cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": OLD_NODE}})
    cluster.kubectl("patch", "node", OLD_NODE, "--subresource=status", "--type=merge", "-p",
                    '{"status": {"nodeInfo": {"kubeletVersion": "v1.32.0"}}}')
    rbac = []
    yield namespace, rbac
    for obj in rbac:
        cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False)
    cluster.kubectl("delete", "node", OLD_NODE, "--ignore-not-found", check=False)


@pytest.mark.per_release("_STORAGE_VERSIONS")
def test_upgrade_findings_found_and_fixed(cluster, upgrade_state):
    namespace, rbac = upgrade_state
    target = target_for(cluster.minor)
    if cluster.minor == 33:  # a client of a version 1.34+ serves only with --runtime-config
        cluster.kubectl("get", "--raw", "/apis/resource.k8s.io/v1beta1/deviceclasses")

    result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target})
    found = found_before = by_id(result)
    print({k: [f["subject"] for f in v] for k, v in found.items()}, result["api_requests"])

    labels = [f for f in found.get("admin-access-label", []) if f["subject"] == f"namespace {namespace}"]
    assert labels and labels[0]["severity"] == "breaking" and NEW_LABEL in labels[0]["fix"]
    rbac_found = [f for f in found.get("driver-rbac", []) if f["evidence"]["namespace"] == namespace]
    assert rbac_found and rbac_found[0]["evidence"]["service_account"] == ACCOUNT
    assert rbac_found[0]["evidence"]["denied"] == ["associated-node:patch", "associated-node:update"]
    assert "dra.admin.rbac" in rbac_found[0]["fix"]
    skew = found["kubelet-skew"][0]
    assert skew["severity"] == "breaking" and OLD_NODE in skew["evidence"]["nodes"]
    assert OLD_NODE in found["seamless-driver-upgrade"][0]["evidence"]["nodes"]
    assert result["sources"]["feature_gates"] == "kubernetes_feature_enabled"
    assert f"{namespace}/{ACCOUNT}" in result["sources"]["driver_service_accounts"]
    # No node has a host that read its kubelet (KWOK nodes, and the Node object made here; none given): each is
    # named with the reason, and the kubelets were not asked through the node proxy.
    nodes = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])
    assert result["sources"]["kubelet_feature_gates"]["unread"] == nodes
    assert result["sources"]["kubelet_feature_gates"]["read"] == []
    assert result["sources"]["kubelet_feature_gates"]["source"].startswith("each node's host")
    (unread,) = found["kubelet-gates-unread"]
    assert unread["severity"] == "warning" and sorted(unread["evidence"]["nodes"]) == nodes
    assert all("no host of the inventory" in why for why in unread["evidence"]["nodes"].values()), unread
    if cluster.minor == 33:
        in_use = dict(((f["evidence"]["version"], f["evidence"]["resource"]), f)
                      for f in found["api-version-in-use"])
        assert in_use[("v1beta1", "deviceclasses")]["severity"] == "warning"
        assert in_use[("v1beta1", "deviceclasses")]["evidence"]["requests"] >= 1
        storage = dict((f["subject"], f) for f in found["storage-version"])
        assert storage["deviceclasses"]["evidence"]["storage_version"] == "v1beta1"
        assert storage["deviceclasses"]["evidence"]["target_storage_version"] == "v1"
        gate = [f for f in found["feature-gate-locked"] if f["evidence"]["gate"] == "DynamicResourceAllocation"]
        assert gate and gate[0]["severity"] == "info"
        assert found["upgrade-path"][0]["evidence"]["steps"] == ["1.34", "1.35", "1.36"]
    else:
        assert "api-version-in-use" not in found and "storage-version" not in found

    failed = cluster.run_module("dra.admin.dra_upgrade_check_info",
                                {"target_version": target, "fail_on": ["breaking"]}, expect_failure=True)
    assert "breaking" in failed["msg"] and namespace in failed["msg"]

    # The fixes the findings name.
    cluster.kubectl("label", "namespace", namespace, f"{NEW_LABEL}=true")
    rbac += collection_module("rbac.personas").kubelet_plugin_objects(
        DRIVER, namespace, ACCOUNT, ["resourceslices", "resourceclaims", "resourceclaims/status"], True,
        {"app.kubernetes.io/name": "it-upgrade"})[1:]
    cluster.apply(rbac)
    cluster.kubectl("patch", "node", OLD_NODE, "--subresource=status", "--type=merge", "-p",
                    '{"status": {"nodeInfo": {"kubeletVersion": "v1.%d.0"}}}' % cluster.minor)

    # Breaking findings this test did not make (on the shared cluster: e.g. a driver installed by another
    # test's role with 1.33's RBAC, when the target is 1.36) were there before the fixes and stay.
    before = set((f["id"], f["subject"]) for f in sum(found_before.values(), []) if f["severity"] == "breaking")
    result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target})
    found = by_id(result)
    others = [f for f in result["findings"] if f["severity"] == "breaking"]
    assert all((f["id"], f["subject"]) in before for f in others), others
    fail_on = '{"dra_upgrade_fail_on": []}' if others else '{"dra_upgrade_fail_on": ["breaking"]}'
    run = cluster.run_playbook("playbooks/upgrade_check.yml", "-e", f"dra_upgrade_target={target}", "-e", fail_on)
    assert run.returncode == 0, run.stdout
    assert f"Upgrade {cluster.version} -> {target}: breaking={len(others)}" in run.stdout, run.stdout
    assert not [f for f in found.get("admin-access-label", []) if namespace in f["subject"]]
    assert not [f for f in found.get("driver-rbac", []) if f["evidence"]["namespace"] == namespace]
    assert OLD_NODE not in str(found.get("kubelet-skew", [])) + str(found.get("seamless-driver-upgrade", []))
    assert result["summary"]["breaking"] == len(others), result["findings"]


def test_upgrade_check_bad_input(cluster):
    """An unknown release, an unreadable one and a downgrade each fail naming target_version, after one request."""
    newest = "1.30 to 1.%d" % gate_catalog.UPGRADE_TARGET_MINORS[-1]  # the targets the catalog knows, named
    for target, words in (("v1.99", ["target_version", newest]), ("yesterday", ["target_version", "v1.33"]),
                          ("v1.%d" % (cluster.minor - 1), ["target_version", "older than the cluster"])):
        result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target},
                                    expect_failure=True)
        assert all(w in result["msg"] for w in words), result["msg"]
        assert result["api_requests"] == 1


def requests_but_reviews(result):
    """The run's API requests less its SubjectAccessReviews (one per associated-node verb per driver service account
    it names): those follow the DaemonSets the run saw, which on the shared cluster may change from one run to the
    next (an earlier test's namespace still terminating keeps its driver for one run, not the next)."""
    accounts = result["sources"]["driver_service_accounts"]
    return result["api_requests"] - len(upgrade_checks.ASSOCIATED_NODE_VERBS) * len(accounts)


def test_kubelet_gates_from_the_node_proxy_only_when_asked(cluster):
    """By default the kubelets' gates come from their hosts: not one request per node. kubelet_gates_from=node_proxy
    (the opt-in) asks each node's /configz through the API server, one request per node (each run's own report of
    the nodes and driver accounts it asked about, not the cluster as the test saw it); KWOK nodes have no kubelet
    behind them, so the proxy's answer is each node's reason. kubelet_gates=false reads none and the sources say so."""
    target = target_for(cluster.minor)
    listed = set(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])
    hosts = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target})
    proxied = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target,
                                                                      "kubelet_gates_from": "node_proxy"})
    skipped = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target,
                                                                      "kubelet_gates": False})
    listed &= set(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])  # there all along
    gates = proxied["sources"]["kubelet_feature_gates"]
    nodes = gates["read"] + gates["unread"]
    assert listed and listed <= set(nodes), (listed, gates)
    assert gates["source"] == "/configz through the API server's node proxy"
    assert all("/proxy/configz" in why for why in by_id(proxied)["kubelet-gates-unread"][0]["evidence"]["nodes"].values())
    assert requests_but_reviews(proxied) - requests_but_reviews(hosts) == len(nodes), [
        (r["api_requests"], r["sources"]["driver_service_accounts"]) for r in (proxied, hosts)]
    assert requests_but_reviews(hosts) == requests_but_reviews(skipped), [
        (r["api_requests"], r["sources"]["driver_service_accounts"]) for r in (hosts, skipped)]
    assert skipped["sources"]["kubelet_feature_gates"]["source"].startswith("not read")
    assert "kubelet-gates-unread" not in by_id(skipped) and "kubelet-gates-unread" in by_id(hosts)


def test_kubelet_gates_given_by_the_hosts_are_judged_for_their_nodes(cluster):
    """The hosts' results (as dra_kubelet_gates_info returns them) for the cluster's Nodes: a node whose kubelet
    switches off a gate the next release locks on is a breaking finding naming it, a node read with no gates is
    passed, a host that found no kubelet leaves its node unread with that reason. The kubelets are not real here
    (KWOK): the host read itself is unit-tested on kubeadm's files and run on real nodes by test_kind_upgrade_minor."""
    nodes = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])
    target = "v1.38" if cluster.minor == 37 else target_for(cluster.minor)
    target_minor = gate_catalog.parse_minor(target)
    locked = [g for g in sorted(gate_catalog.upgrade_sensitive_gates("v1.%d" % cluster.minor, target))
              if gate_catalog.validate_gates("v1.%d" % cluster.minor, {g: False}) == []]
    if not locked:
        pytest.skip("no gate the target locks that this release lets a kubelet switch off alone")
    bad, good, empty = nodes[0], nodes[1], nodes[2] if len(nodes) > 2 else None
    host_gates = [{"node": bad, "gates": {locked[0]: False}, "error": ""}, {"node": good, "gates": {}, "error": ""}]
    if empty:
        host_gates.append({"node": empty, "gates": None, "error": "no kubelet process runs on h3"})
    result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target,
                                                                     "kubelet_host_gates": host_gates})
    assert not result.get("failed"), result
    kubelet_findings = [f for f in result["findings"] if f["subject"].startswith("kubelet on ")]
    assert kubelet_findings and all(f["evidence"]["nodes"] == [bad] for f in kubelet_findings), kubelet_findings
    assert any(f["severity"] == "breaking" for f in kubelet_findings) or target_minor < 35, kubelet_findings
    gates = result["sources"]["kubelet_feature_gates"]
    assert sorted(gates["read"]) == sorted([bad, good])
    if empty:
        (unread,) = by_id(result)["kubelet-gates-unread"]
        assert unread["evidence"]["nodes"][empty] == "no kubelet process runs on h3"


def serves(cluster, api_version, resource):
    """Whether kube-apiserver serves resource.k8s.io/`api_version` `resource` (discovery)."""
    res = cluster.kubectl("get", "--raw", f"/apis/resource.k8s.io/{api_version}", check=False)
    return res.returncode == 0 and any(r["name"] == resource for r in json.loads(res.stdout)["resources"])


def no_selector_rules(api_version):
    """A NoSchedule DeviceTaintRule without deviceSelector, and one with the empty selector (every device on every
    release: never a finding)."""
    taint = {"key": "example.com/it-upgrade", "effect": "NoSchedule"}
    return [{"apiVersion": f"resource.k8s.io/{api_version}", "kind": "DeviceTaintRule",
             "metadata": {"name": "it-upgrade-no-selector"}, "spec": {"taint": taint}},
            {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "DeviceTaintRule",
             "metadata": {"name": "it-upgrade-empty-selector"}, "spec": {"deviceSelector": {}, "taint": taint}}]


def assert_taint_rule_findings(cluster, found):
    """The rule without selector is named exactly when the reading changes between the cluster's release and
    BEHAVIOUR_TARGET; the rule with the empty selector never."""
    rules = dict((f["evidence"]["rule"], f) for f in found.get("taint-rule-without-selector", []))
    assert "it-upgrade-empty-selector" not in rules, rules
    before = taint_rules.allocator_reader(cluster.version)
    if before == taint_rules.allocator_reader(BEHAVIOUR_TARGET):
        assert "it-upgrade-no-selector" not in rules, rules
        return
    item = rules["it-upgrade-no-selector"]
    assert item["severity"] == "warning" and item["subject"] == "DeviceTaintRule it-upgrade-no-selector"
    assert item["evidence"] == {"rule": "it-upgrade-no-selector", "effect": "NoSchedule",
                                "current_reader": taint_rules.ALLOCATOR,
                                "target_reader": taint_rules.ALLOCATOR_NO_SELECTOR_NONE}
    assert "deviceSelector: {}" in item["fix"] and "1.37.1" in item["message"], item


@pytest.mark.per_release("device_taint_rule_support", key="default_on")
def test_last_applied_annotation_and_taint_rule_without_selector(cluster):
    """A DeviceClass applied as resource.k8s.io/v1beta1 (kubectl apply where the release serves it, else the
    annotation kubectl would write) is named for 1.38, where v1beta1 is gone; the DeviceTaintRules where the
    cluster serves them (assert_taint_rule_findings)."""
    device_class = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass",
                    "metadata": {"name": STORED_CLASS},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    rule_api = gate_catalog.device_taint_rule_support(cluster.version)["api_version"]
    rules = no_selector_rules(rule_api) if rule_api and serves(cluster, rule_api, "devicetaintrules") else []
    applied = serves(cluster, "v1beta1", "deviceclasses")
    try:
        if applied:
            cluster.apply(device_class)
        else:
            cluster.apply(dict(device_class, apiVersion=f"resource.k8s.io/{cluster.resource_version}"))
            cluster.kubectl("annotate", "deviceclass", STORED_CLASS, "--overwrite",
                            f"{LAST_APPLIED}={json.dumps(device_class, sort_keys=True)}")
        if rules:
            cluster.apply(rules)
        stored = cluster.get_json("deviceclass", STORED_CLASS)["metadata"]["annotations"][LAST_APPLIED]
        assert json.loads(stored)["apiVersion"] == "resource.k8s.io/v1beta1", stored
        result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": BEHAVIOUR_TARGET})
        found = by_id(result)
        print("applied as v1beta1:", applied, "rules:", [r["metadata"]["name"] for r in rules],
              [(f["id"], f["subject"]) for f in result["findings"]])
        (item,) = [f for f in found.get("stored-api-version", [])
                   if f["evidence"]["source"].startswith(f"DeviceClass {STORED_CLASS} ")]
        assert item["severity"] == "breaking" and item["evidence"]["api_version"] == "resource.k8s.io/v1beta1"
        assert item["evidence"]["removed_in"] == "1.38" and LAST_APPLIED in item["subject"]
        assert [(d["kind"], d["name"]) for d in item["evidence"]["documents"]] == [("DeviceClass", STORED_CLASS)]
        assert "DeviceClass: v1" in item["fix"], item["fix"]
        if rules:
            assert_taint_rule_findings(cluster, found)
    finally:
        cluster.kubectl("delete", "deviceclass", STORED_CLASS, "--ignore-not-found", check=False)
        for rule in rules:
            cluster.kubectl("delete", "devicetaintrule", rule["metadata"]["name"], "--ignore-not-found", check=False)


@pytest.mark.parametrize("version", [v for v in supported_k8s_versions()
                                     if taint_rules.allocator_reader(v) != taint_rules.allocator_reader(
                                         BEHAVIOUR_TARGET)])
@pytest.mark.per_release("TAINT_RULE_NO_SELECTOR_NONE_FROM")
def test_taint_rule_without_selector_on_a_release_that_reads_it_as_every_device(version):
    """Where the shared cluster does not serve DeviceTaintRule (1.33: an alpha behind its gates), a one-node
    cluster with the catalog's gates for it: the rule without selector is named for 1.38, the empty selector not."""
    support = gate_catalog.device_taint_rule_support(version)
    gates = ",".join(f"{gate}=true" for gate in sorted(support["gates"]))
    with own_cluster("it-upgrade-rules", version, 1, 700, gates) as cluster:
        assert serves(cluster, support["api_version"], "devicetaintrules")
        cluster.apply(no_selector_rules(support["api_version"]))
        result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": BEHAVIOUR_TARGET})
        print(version, [(f["id"], f["subject"]) for f in result["findings"]])
        assert_taint_rule_findings(cluster, by_id(result))
        assert "it-upgrade-no-selector" in str(by_id(result).get("taint-rule-without-selector"))


def fresh_targets(minor):
    """The targets checked on a fresh cluster: the next release with the claim status authorization, 1.37 (the
    release clusters run now) and 1.38 (the planned one)."""
    return sorted(set([target_for(minor), "v1.38"] + (["v1.37"] if minor < 37 else [])))


def expected_on_fresh_cluster(minor, target):
    """What a cluster just made by hack/cluster/up (KWOK nodes, the example driver as host processes, DRA switched
    on as the feature_gates role does) has that an upgrade to `target` concerns: {(finding id, severity)}."""
    target_minor = gate_catalog.parse_minor(target)
    # KWOK nodes: no kubelet answers /configz, and the kubelet version is KWOK's own.
    expected = {("kubelet-gates-unread", "warning"), ("kubelet-version-unknown", "warning")}
    if gate_catalog.upgrade_sensitive_gates("v1.%d" % minor, target):
        # No static pods: kube-controller-manager's and kube-scheduler's gates are not visible through the API.
        expected.add(("feature-gates-unread", "warning"))
    if target_minor in gate_catalog.PLANNED_MINORS or target_minor in gate_catalog.PROVISIONAL_MINORS:
        # not released yet: the facts are upstream's plans, or were checked against a pre-release's binaries
        expected.add(("planned-release", "info"))
    if target_minor >= gate_catalog.KUBELET_DOWNGRADE_NOTE_FROM:
        # the note on every upgrade to it: a kubelet binary put back is no undo
        expected.add(("kubelet-downgrade", "info"))
    if target_minor - minor > 1:
        expected.add(("upgrade-path", "warning"))
    if minor >= 34 and any(minor < (gate_catalog.gate_removed_in(name) or 0) <= target_minor
                           for name in gate_catalog.gate_catalog("v1.%d" % minor)):
        # A gate at its default that the target removes (DynamicResourceAllocation in 1.38, DRAAdminAccess in
        # 1.39): kube-apiserver's metrics cannot tell whether --feature-gates names it.
        expected.add(("feature-gate-unknown", "warning"))
    if minor < 34:
        # 1.33: up sets DynamicResourceAllocation=true (GA 1.34, locked 1.35, removed 1.38), stores DRA objects as
        # v1beta1 (v1 from 1.35) and serves v1beta1 and v1beta2 through --runtime-config; kube-scheduler,
        # kube-controller-manager and the example driver use v1beta2 and v1beta1, which 1.34-1.37 serve only with
        # --runtime-config and 1.38 serves v1beta2 only so.
        expected.add(("storage-version", "warning"))
        expected.add(("api-version-in-use", "warning"))
        # up applies the example driver's DeviceClass as v1beta2 (kubectl apply): its last-applied-configuration
        # annotation keeps that version, which 1.39 no longer serves.
        removed = gate_catalog.api_removed_in("v1beta2", "deviceclasses")
        if removed <= target_minor + 1:
            expected.add(("stored-api-version", "breaking" if removed <= target_minor else "warning"))
        if target_minor >= 38:
            expected |= {("feature-gate-removed", "breaking"), ("api-version-removed", "breaking"),
                         ("api-version-in-use", "breaking")}
        elif target_minor >= 35:
            expected.add(("feature-gate-locked", "info"))
    return expected


@pytest.mark.parametrize("version", supported_k8s_versions())
def test_next_releases_name_every_finding_real_on_a_fresh_cluster(version):
    """On a fresh one-node cluster, the check for each of fresh_targets names exactly the findings that are real
    there, each with its severity: 1.37 -> 1.38 on 1.37, and 1.33 -> 1.36, 1.37 and 1.38 on 1.33."""
    minor = gate_catalog.parse_minor(version)
    with own_cluster("it-upgrade", version, 1, 700) as cluster:
        for target in fresh_targets(minor):
            result = cluster.run_module("dra.admin.dra_upgrade_check_info", {"target_version": target})
            found = set((f["id"], f["severity"]) for f in result["findings"])
            print(version, "->", target, [(f["id"], f["severity"], f["subject"]) for f in result["findings"]])
            assert found == expected_on_fresh_cluster(minor, target), (target, result["findings"])
            assert result["summary"]["breaking"] == len([f for f in result["findings"] if f["severity"] == "breaking"])
            for item in result["findings"]:
                if item["id"] == "feature-gates-unread":
                    assert sorted(item["evidence"]["gates"]) == sorted(
                        gate_catalog.upgrade_sensitive_gates(version, target))
                    assert item["evidence"]["components"] == ["kube-controller-manager", "kube-scheduler"]
