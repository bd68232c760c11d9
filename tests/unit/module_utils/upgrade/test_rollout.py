"""upgrade.rollout: the rolling upgrade's plan, on kubeadm-config recorded from the real local clusters
(tests/unit/fixtures/kubeadm-v*/) and nodes recorded from a kind cluster (tests/unit/fixtures/upgrade/)."""
import copy
import json
import os

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain import CORDON_ANNOTATION
from ansible_collections.dra.admin.plugins.module_utils.upgrade import rollout as r
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import UpgradeInputError
from conftest import FIXTURES


def cluster_configuration(release):
    with open(os.path.join(FIXTURES, "kubeadm-%s" % release, "kubeadm-config.yaml")) as fh:
        return yaml.safe_load(yaml.safe_load(fh)["data"]["ClusterConfiguration"])


def kind_nodes():
    with open(os.path.join(FIXTURES, "upgrade", "nodes-kind-v1.37.2.json")) as fh:
        return json.load(fh)["items"]


def with_apiserver_args(config, flags):
    """The recorded ClusterConfiguration (v1beta4: extraArgs a list) with the API server's flags added."""
    config = copy.deepcopy(config)
    config["apiServer"]["extraArgs"] = list(config["apiServer"].get("extraArgs") or []) + [
        {"name": name, "value": value} for name, value in flags.items()]
    return config


@pytest.mark.parametrize("current,target,release", [
    ("v1.36.3", "v1.37.2", "v1.37.2"), ("v1.37.2", "v1.37.2", "v1.37.2"), ("v1.37.2", "", ""),
    ("v1.37.0", "1.37.2", "v1.37.2"), ("v1.37.2", "v1.38.0", "v1.38.0")])
def test_the_target_is_the_same_or_the_next_minor_written_as_kubeadm_takes_it(current, target, release):
    assert r.release_target(current, target) == release


@pytest.mark.parametrize("current,target,words", [
    ("v1.36.3", "v1.38.0", "one minor release at a time"),
    ("v1.37.2", "v1.36.3", "never downgraded"),
    ("v1.37.2", "v1.37.1", "never downgraded"),
    ("v1.36.3", "v1.37", "not a released version"),
    ("v1.37.2", "v1.38.0-rc.1", "is a pre-release: set allow_pre_release"),
    ("v1.37.2", "v1.38.0-beta", "not a released version"),
    ("v1.36.3", "latest", "not a released version")])
def test_a_target_kubeadm_cannot_reach_is_refused_naming_the_field(current, target, words):
    with pytest.raises(UpgradeInputError) as err:
        r.release_target(current, target)
    assert str(err.value).startswith("target_version: ") and words in str(err.value)


@pytest.mark.parametrize("current,target,release,flags", [
    ("v1.37.2", "v1.38.0-beta.0", "v1.38.0-beta.0", ["--allow-experimental-upgrades"]),
    ("v1.37.2", "1.38.0-alpha.2", "v1.38.0-alpha.2", ["--allow-experimental-upgrades"]),
    ("v1.37.2", "v1.38.0-rc.1", "v1.38.0-rc.1", ["--allow-release-candidate-upgrades"]),
    ("v1.38.0-beta.0", "v1.38.0", "v1.38.0", []),
    ("v1.38.0-beta.0", "v1.38.0-rc.0", "v1.38.0-rc.0", ["--allow-release-candidate-upgrades"])])
def test_a_pre_release_is_a_target_when_asked_for_with_the_kubeadm_flag_of_its_stage(current, target, release, flags):
    assert r.release_target(current, target, allow_pre_release=True) == release
    assert r.kubeadm_apply_flags(release) == flags


@pytest.mark.parametrize("current,target,words", [
    ("v1.38.0", "v1.38.0-rc.1", "never downgraded"),
    ("v1.38.0-rc.0", "v1.38.0-beta.0", "never downgraded"),
    ("v1.36.3", "v1.38.0-beta.0", "one minor release at a time")])
def test_a_pre_release_before_the_cluster_or_two_minors_on_is_refused(current, target, words):
    with pytest.raises(UpgradeInputError) as err:
        r.release_target(current, target, allow_pre_release=True)
    assert str(err.value).startswith("target_version: ") and words in str(err.value)


def test_a_node_at_the_pre_release_of_the_target_is_upgraded_and_one_at_the_target_is_done():
    node = copy.deepcopy(kind_nodes()[0])
    node["status"]["nodeInfo"]["kubeletVersion"] = "v1.38.0-beta.0"
    assert r.node_action(node, r.UPGRADE, "v1.38.0", []) == r.ACTION_UPGRADE
    assert r.node_action(node, r.UPGRADE, "v1.38.0-beta.0", []) == r.ACTION_DONE
    with pytest.raises(UpgradeInputError) as err:
        r.node_action(node, r.UPGRADE, "v1.38.0-alpha.1", [])
    assert "newer than v1.38.0-alpha.1" in str(err.value)


def test_control_plane_first_then_workers_in_the_order_given():
    nodes = kind_nodes()
    names = sorted(n["metadata"]["name"] for n in nodes)
    control_plane, workers = r.order_nodes(nodes, [names[2], names[0], names[1], names[2]])
    assert [r.node_name(n) for n in control_plane] == [n for n in names if n.endswith("control-plane")]
    assert [r.node_name(n) for n in workers] == [names[2], names[1]]
    with pytest.raises(UpgradeInputError) as err:
        r.order_nodes(nodes, ["no-such-node"])
    assert str(err.value).startswith("nodes: ") and "no-such-node" in str(err.value)


def test_node_action_skips_a_node_at_the_target_unless_a_drain_left_it_out():
    node = kind_nodes()[0]
    assert r.kubelet_version(node) == "v1.37.2"
    assert r.node_action(node, r.UPGRADE, "v1.37.2", []) == r.ACTION_DONE
    assert r.node_action(node, r.UPGRADE, "v1.37.2", ["label %s" % DEFAULT_EXCLUSION_LABEL]) == r.ACTION_FINISH
    assert r.node_action(node, r.MAINTENANCE, "", []) == r.ACTION_MAINTAIN
    older = copy.deepcopy(node)
    older["status"]["nodeInfo"]["kubeletVersion"] = "v1.36.3"
    assert r.node_action(older, r.UPGRADE, "v1.37.2", []) == r.ACTION_UPGRADE
    with pytest.raises(UpgradeInputError) as err:
        r.node_action(node, r.UPGRADE, "v1.37.1", [])
    assert "newer than v1.37.1" in str(err.value)
    kwok = copy.deepcopy(node)
    kwok["status"]["nodeInfo"]["kubeletVersion"] = "kwok-0.8.0"  # what the KWOK clusters' nodes report
    with pytest.raises(UpgradeInputError) as err:
        r.node_action(kwok, r.UPGRADE, "v1.37.2", [])
    assert str(err.value).startswith("nodes: ") and "'kwok-0.8.0'" in str(err.value)
    assert r.node_action(kwok, r.MAINTENANCE, "", []) == r.ACTION_MAINTAIN


def test_drain_marks_are_the_exclusion_label_and_the_cordon_annotation():
    node = copy.deepcopy(kind_nodes()[0])
    assert r.drain_marks(node, DEFAULT_EXCLUSION_LABEL, CORDON_ANNOTATION) == []
    node["metadata"]["labels"][DEFAULT_EXCLUSION_LABEL] = "true"
    node["metadata"].setdefault("annotations", {})[CORDON_ANNOTATION] = "false"
    assert len(r.drain_marks(node, DEFAULT_EXCLUSION_LABEL, CORDON_ANNOTATION)) == 2


def test_kubeadm_apply_runs_once_on_the_first_control_plane_node_to_upgrade():
    entries = [{"node": "cp-1", "control_plane": True, "action": r.ACTION_UPGRADE},
               {"node": "cp-2", "control_plane": True, "action": r.ACTION_UPGRADE},
               {"node": "w-1", "control_plane": False, "action": r.ACTION_UPGRADE}]
    run = copy.deepcopy(entries)
    assert r.kubeadm_steps(run, r.UPGRADE, "v1.36.3", "v1.37.2") is None
    assert [e["kubeadm_step"] for e in run] == ["apply", "node", "node"]
    # The control plane already at the target (a run that stopped at a worker): no second apply.
    run = copy.deepcopy(entries)
    assert r.kubeadm_steps(run, r.UPGRADE, "v1.37.2", "v1.37.2") is None
    assert [e["kubeadm_step"] for e in run] == ["node", "node", "node"]
    run = copy.deepcopy(entries)
    assert r.kubeadm_steps(run, r.MAINTENANCE, "v1.37.2", "") is None
    assert [e["kubeadm_step"] for e in run] == [None, None, None]


def test_workers_never_go_ahead_of_a_control_plane_the_run_does_not_upgrade():
    workers_only = [{"node": "w-1", "control_plane": False, "action": r.ACTION_UPGRADE}]
    why = r.kubeadm_steps(workers_only, r.UPGRADE, "v1.36.3", "v1.37.2")
    assert "control plane runs v1.36.3" in why and "control_plane" in why
    assert r.kubeadm_steps(copy.deepcopy(workers_only), r.UPGRADE, "v1.37.2", "v1.37.2") is None


def test_batches_of_the_size_asked():
    assert r.batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    with pytest.raises(UpgradeInputError) as err:
        r.batches(["a"], 0)
    assert str(err.value).startswith("batch_size: ")


def test_a_gate_the_target_removes_is_not_carried_into_kubeadm_config():
    """DynamicResourceAllocation is locked on from 1.35 and gone in 1.38 (the catalog): kubeadm-config must lose it
    before kubeadm renders 1.38's manifests; a gate the target keeps stays, in its place."""
    config = with_apiserver_args(cluster_configuration("v1.37.2"), {
        "feature-gates": "DynamicResourceAllocation=true,DRADeviceTaintRules=true",
        "runtime-config": "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"})
    carried = r.carried_flags(config, "v1.38.0")
    assert carried["extra_args"] == {"kube-apiserver": {"feature-gates": "DRADeviceTaintRules=true",
                                                        "runtime-config": "resource.k8s.io/v1beta2=true"}}
    assert sorted((d["flag"], d["entry"]) for d in carried["dropped"]) == [
        ("feature-gates", "DynamicResourceAllocation"), ("runtime-config", "resource.k8s.io/v1beta1")]
    # To 1.37 the same flags are carried whole (1.37 still knows the gate, locked to true, and serves v1beta1).
    assert r.carried_flags(config, "v1.37.2")["extra_args"] == {}


def test_a_non_dra_gate_the_target_removes_is_not_carried_either():
    """PodSchedulingReadiness is in 1.37's gate list and in none after (kube_gate_lists); a gate only
    kube-controller-manager knows on 1.38 (the binaries, catalog._KUBE_GATES_UNKNOWN_TO) is dropped from
    kube-apiserver's flags and kept in kube-controller-manager's; client-go's WatchListClient, in no list, stays."""
    gate = "ControllerManagerReleaseLeaderElectionLockOnExit"
    config = with_apiserver_args(cluster_configuration("v1.37.2"), {
        "feature-gates": "PodSchedulingReadiness=true,WatchListClient=true,%s=true" % gate})
    config["controllerManager"] = {"extraArgs": [{"name": "feature-gates", "value": "%s=true" % gate}]}
    carried = r.carried_flags(config, "v1.38.0")
    assert carried["extra_args"] == {"kube-apiserver": {"feature-gates": "WatchListClient=true"}}
    assert sorted((d["component"], d["entry"]) for d in carried["dropped"]) == [
        ("kube-apiserver", gate), ("kube-apiserver", "PodSchedulingReadiness")]
    assert r.carried_flags(config, "v1.37.2")["extra_args"] == {}


def test_a_flag_left_empty_is_removed_and_v1beta3_maps_are_read():
    config = cluster_configuration("v1.33.13")
    config["apiServer"]["extraArgs"] = {"feature-gates": "DynamicResourceAllocation=true"}
    config["apiVersion"] = "kubeadm.k8s.io/v1beta3"
    carried = r.carried_flags(config, "v1.38.0")
    assert carried["extra_args"] == {"kube-apiserver": {"feature-gates": None}}


def test_blockers_leave_out_the_control_plane_gates_the_upgrade_settles():
    settled = {"id": "feature-gate-removed", "severity": "breaking", "evidence": {"component": "kube-apiserver"}}
    kubelet = {"id": "feature-gate-removed", "severity": "breaking", "evidence": {"component": "kubelet"}}
    stored = {"id": "stored-api-version", "severity": "breaking", "evidence": {}}
    warning = {"id": "storage-version", "severity": "warning", "evidence": {}}
    assert r.blockers([settled, kubelet, stored, warning]) == [kubelet, stored]
    # kubespray renders kubeadm's configuration from its own variables: nothing is settled for it.
    assert r.blockers([settled, kubelet, stored, warning], carry_flags=False) == [settled, kubelet, stored]


def test_plan_lines_name_each_node_and_what_happens_there():
    plan = {"summary": "upgrade to v1.37.2: 1 node(s) to take through (w-1)", "carried_flags": {"dropped": [
        {"component": "kube-apiserver", "flag": "feature-gates", "entry": "A", "why": "removed"}]},
        "control_plane": [{"node": "cp", "control_plane": True, "kubelet_version": "v1.37.2", "action": "done",
                           "drain_marks": [], "kubeadm_step": "node"}],
        "workers": [{"node": "w-1", "control_plane": False, "kubelet_version": "v1.36.3", "action": "upgrade",
                     "drain_marks": [], "kubeadm_step": "node", "drain_preview": {"summary": "1 of 1 fit"}}]}
    lines = r.plan_lines(plan)
    assert lines[1] == "kubeadm-config kube-apiserver --feature-gates: A left out (removed)"
    assert lines[2] == "control plane cp (kubelet v1.37.2): done"
    assert lines[3] == "worker w-1 (kubelet v1.36.3): upgrade, kubeadm upgrade node; drain preview: 1 of 1 fit"
    assert r.node_entry(plan, "w-1")["action"] == "upgrade"
    with pytest.raises(UpgradeInputError):
        r.node_entry(plan, "w-2")


# What getsubids (shadow-utils) prints for a user: "<index>: <user> <first> <count>"; the 1.38 notes' example range.
SUBIDS_REACHING_THE_END = "0: kubelet 65536 4294901760\n"
SUBIDS_CLEAR = "0: kubelet 65536 4294836224\n"


def userns_file(host_id, length=65536):
    """A pod's `userns` file as the kubelet writes it (pkg/kubelet/userns: uid and gid mappings alike)."""
    mapping = [{"hostId": host_id, "containerId": 0, "length": length}]
    return json.dumps({"uidMappings": mapping, "gidMappings": mapping})


def test_the_1_38_kubelet_refuses_a_subordinate_range_that_reaches_the_invalid_id():
    problems = r.kubelet_userns_problems(SUBIDS_REACHING_THE_END, SUBIDS_REACHING_THE_END, {}, "v1.38.0")
    assert len(problems) == 2 and "/etc/subuid" in problems[0] and "/etc/subgid" in problems[1]
    assert "lower the count by at least one idsPerPod" in problems[0]
    assert r.kubelet_userns_problems(SUBIDS_CLEAR, SUBIDS_CLEAR, {}, "v1.38.0-beta.0") == []
    assert r.kubelet_userns_problems("", "", {}, "v1.38.0") == []  # no kubelet user or no getsubids: its default
    # Before 1.38 the kubelet starts with that range (and assigns pods its last block).
    assert r.kubelet_userns_problems(SUBIDS_REACHING_THE_END, SUBIDS_REACHING_THE_END, {}, "v1.37.2") == []


def test_a_pod_directory_holding_the_last_block_stops_the_1_38_kubelet():
    last_block = 2 ** 32 - 65536  # what a 1.37 kubelet could assign: the block that ends at 4294967295
    files = {"/var/lib/kubelet/pods/a/userns": userns_file(last_block),
             "/var/lib/kubelet/pods/b/userns": userns_file(last_block - 65536)}
    problems = r.kubelet_userns_problems("", "", files, "v1.38.0")
    assert len(problems) == 1 and "/var/lib/kubelet/pods/a/userns" in problems[0] and "drain" in problems[0]
    assert r.kubelet_userns_problems("", "", files, "v1.37.2") == []


@pytest.mark.parametrize("output", ["kubelet 65536 4294901760", "0: kubelet 65536\n", "0: kubelet a b",
                                    "0: kubelet 1 2\n1: kubelet 3 4\n"])
def test_getsubids_output_the_kubelet_would_refuse_is_refused(output):
    with pytest.raises(ValueError, match="getsubids printed"):
        r.getsubids_range(output)
