"""Flags of static Pod manifests and keys of component config files, on real kubeadm output."""
import os

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.control_plane import command_line
from ansible_collections.dra.admin.plugins.module_utils.control_plane import config_file
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest as manifest_rules
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest_text

from conftest import FIXTURES

KUBEADM_VERSIONS = sorted(d for d in os.listdir(FIXTURES) if d.startswith("kubeadm-"))


def fixture_text(version_dir, name):
    with open(os.path.join(FIXTURES, version_dir, name)) as handle:
        return handle.read()


def changed_lines(before, after):
    old, new = before.splitlines(), after.splitlines()
    return sorted(set(new) - set(old)), sorted(set(old) - set(new))


def test_fixtures_are_present_for_each_recorded_release():
    assert "kubeadm-v1.36.3" in KUBEADM_VERSIONS
    for version_dir in KUBEADM_VERSIONS:
        for name in ("kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml",
                     "etcd.yaml", "kubelet-config.yaml"):
            assert os.path.isfile(os.path.join(FIXTURES, version_dir, name)), (version_dir, name)


@pytest.mark.parametrize("version_dir", KUBEADM_VERSIONS)
@pytest.mark.parametrize("component", ["kube-apiserver", "kube-controller-manager", "kube-scheduler"])
def test_kubeadm_manifests_read_as_ordered_flags(version_dir, component):
    manifest = manifest_rules.load_manifest(fixture_text(version_dir, component + ".yaml"))
    container = manifest_rules.find_container(manifest)
    assert container["name"] == component
    assert command_line.flag_items(container) == ("command", 1)
    flags = command_line.flags_dict(command_line.read_flags(container))
    names = list(flags)
    assert names == sorted(names)  # kubeadm writes them sorted
    assert flags["kubeconfig" if component != "kube-apiserver" else "secure-port"]


@pytest.mark.parametrize("version_dir", KUBEADM_VERSIONS)
def test_gates_and_runtime_config_go_in_sorted_place_and_nothing_else_moves(version_dir):
    text = fixture_text(version_dir, "kube-apiserver.yaml")
    new, changed, before, after = manifest_text.edit_manifest_text(
        text, feature_gates={"DynamicResourceAllocation": True},
        runtime_config={"resource.k8s.io/v1beta1": "true"})
    assert changed
    added, removed = changed_lines(text, new)
    assert added == ["    - --feature-gates=DynamicResourceAllocation=true",
                     "    - --runtime-config=resource.k8s.io/v1beta1=true"]
    assert removed == []
    command = manifest_rules.find_container(yaml.safe_load(new))["command"]
    assert command[0] == "kube-apiserver" and command[1:] == sorted(command[1:])
    assert after["feature-gates"] == "DynamicResourceAllocation=true"
    assert "feature-gates" not in before
    again, changed_again, dummy, dummy = manifest_text.edit_manifest_text(
        new, feature_gates={"DynamicResourceAllocation": "True"},
        runtime_config={"resource.k8s.io/v1beta1": True})
    assert not changed_again and again == new


def test_feature_gates_merge_as_a_map_keeping_other_gates():
    text = fixture_text("kubeadm-v1.36.3", "kube-scheduler.yaml")
    first, dummy, dummy, dummy = manifest_text.edit_manifest_text(text, feature_gates={"B": True, "A": False})
    assert "    - --feature-gates=A=false,B=true\n" in first
    second, changed, dummy, after = manifest_text.edit_manifest_text(first, feature_gates={"C": True, "A": True})
    assert changed and after["feature-gates"] == "A=true,B=true,C=true"
    third, changed, dummy, after = manifest_text.edit_manifest_text(second, feature_gates={"A": None, "B": None, "C": None})
    assert changed and "feature-gates" not in after
    assert third == text


def test_set_and_remove_flags_keep_untouched_flags_byte_for_byte():
    text = fixture_text("kubeadm-v1.36.3", "kube-controller-manager.yaml")
    new, changed, before, after = manifest_text.edit_manifest_text(
        text, set_flags={"--kube-api-qps": 75, "kube-api-burst": "150", "leader-elect": False})
    assert changed
    added, removed = changed_lines(text, new)
    assert added == ["    - --kube-api-burst=150", "    - --kube-api-qps=75", "    - --leader-elect=false"]
    assert removed == ["    - --leader-elect=true"]
    assert list(after) == sorted(after)
    back, changed, dummy, dummy = manifest_text.edit_manifest_text(
        new, set_flags={"leader-elect": True}, remove_flags=["kube-api-qps", "--kube-api-burst"])
    assert changed and back == text


def test_bare_and_repeated_flags():
    entries = [("a", "1"), ("b", None)]
    assert command_line.change_flags(entries, set_flags={"c": ["x", "y"]}) == [("a", "1"), ("b", None), ("c", "x"), ("c", "y")]
    assert command_line.flags_dict([("c", "x"), ("c", "y"), ("b", None)]) == {"c": ["x", "y"], "b": None}
    assert command_line.change_flags([("z", "1"), ("a", "2")], set_flags={"m": 1}) == [("z", "1"), ("a", "2"), ("m", "1")]


def test_runtime_config_keeps_entries_without_value():
    assert command_line.merge_map("api/all,resource.k8s.io/v1beta1=true", {"resource.k8s.io/v1beta2": "true"}) == \
        "api/all,resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
    assert command_line.merge_map("A=True", {"A": True}) == "A=True"  # same value: spelling kept
    assert command_line.merge_map("A=true", {"A": None}) is None


@pytest.mark.parametrize("manifest,message", [
    ({"kind": "Deployment"}, "expected a static Pod manifest"),
    ({"kind": "Pod", "spec": {}}, "no spec.containers list"),
    ({"kind": "Pod", "spec": {"containers": [{"name": "a", "command": ["x"]}, {"name": "b"}]}},
     "has 2 containers (a, b): name the one"),
    ({"kind": "Pod", "spec": {"containers": [{"name": "a", "image": "x"}]}}, "has no command"),
    ({"kind": "Pod", "spec": {"containers": [{"name": "a", "command": "kube-apiserver --v=2"}]}},
     "not a list of strings"),
    ({"kind": "Pod", "spec": {"containers": [{"name": "a", "command": ["kube-apiserver", "--v", "2"]}]}},
     "'2' is not a --flag or --flag=value item"),
    ({"kind": "Pod", "spec": {"containers": [{"name": "a", "command": ["x", "--v=1"], "args": ["--v=2"]}]}},
     "flags in both command and args"),
])
def test_manifests_of_unexpected_shape_are_refused(manifest, message):
    with pytest.raises(manifest_rules.ManifestError) as info:
        command_line.apply_to_manifest(manifest, set_flags={"v": 3}, where="/x/m.yaml")
    assert message in str(info.value)
    assert str(info.value).startswith("/x/m.yaml"), str(info.value)  # names the file it refused, first


def test_container_must_exist_when_named():
    manifest = manifest_rules.load_manifest(fixture_text("kubeadm-v1.36.3", "etcd.yaml"))
    with pytest.raises(manifest_rules.ManifestError, match="no container named 'kube-apiserver' \\(it has etcd\\)"):
        command_line.apply_to_manifest(manifest, container="kube-apiserver", set_flags={"v": 3})


def test_map_flags_cannot_be_set_as_strings_and_set_and_remove_conflict():
    with pytest.raises(manifest_rules.ManifestError, match="feature_gates option"):
        command_line.change_flags([], set_flags={"--feature-gates": "A=true"})
    with pytest.raises(manifest_rules.ManifestError, match="both set and removed"):
        command_line.change_flags([], set_flags={"v": 1}, remove_flags=["--v"])
    with pytest.raises(manifest_rules.ManifestError, match="not a flag name"):
        command_line.change_flags([], set_flags={"--v=2": 1})


def test_args_only_manifest_is_changed_in_args():
    manifest = {"kind": "Pod", "spec": {"containers": [{"name": "c", "command": ["/bin/app"], "args": ["--v=1"]}]}}
    new, changed, dummy, after = command_line.apply_to_manifest(manifest, set_flags={"v": 2})
    assert changed and new["spec"]["containers"][0]["args"] == ["--v=2"]
    assert manifest["spec"]["containers"][0]["args"] == ["--v=1"]  # input untouched


def test_flow_style_list_falls_back_to_a_full_dump_that_says_the_same():
    text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    command: [app, --v=1]\n"
    new, changed, dummy, dummy = manifest_text.edit_manifest_text(text, set_flags={"v": 2})
    assert changed
    assert yaml.safe_load(new)["spec"]["containers"][0]["command"] == ["app", "--v=2"]


def test_values_needing_quotes_are_quoted():
    text = fixture_text("kubeadm-v1.36.3", "kube-scheduler.yaml")
    new, dummy, dummy, dummy = manifest_text.edit_manifest_text(text, set_flags={"profiling": "a: b #c"})
    assert "--profiling=a: b #c" in manifest_rules.find_container(yaml.safe_load(new))["command"]


def test_invalid_yaml_and_empty_files_are_refused():
    with pytest.raises(manifest_rules.ManifestError, match="not valid YAML"):
        manifest_text.edit_manifest_text("a: [", set_flags={"v": 1}, where="/m.yaml")
    with pytest.raises(manifest_rules.ManifestError, match="is empty"):
        manifest_text.edit_manifest_text("", set_flags={"v": 1}, where="/m.yaml")


# ---- config files ----

@pytest.mark.parametrize("version_dir", KUBEADM_VERSIONS)
def test_kubelet_config_merge_touches_only_changed_entries(version_dir):
    text = fixture_text(version_dir, "kubelet-config.yaml")
    new, changed, before, after = config_file.edit_config_text(
        text, "KubeletConfiguration", merge={"kubeAPIQPS": 50, "kubeAPIBurst": 100},
        feature_gates={"DynamicResourceAllocation": "true"})
    assert changed
    added, removed = changed_lines(text, new)
    assert added == ["  DynamicResourceAllocation: true", "featureGates:", "kubeAPIBurst: 100", "kubeAPIQPS: 50"]
    assert removed == []
    keys = [line.split(":")[0] for line in new.splitlines() if line and not line.startswith(" ") and not line.startswith("-")]
    assert keys == sorted(keys)
    assert after["featureGates"] == {"DynamicResourceAllocation": True}
    again, changed_again, dummy, dummy = config_file.edit_config_text(
        new, "KubeletConfiguration", merge={"kubeAPIQPS": 50, "kubeAPIBurst": 100},
        feature_gates={"DynamicResourceAllocation": True})
    assert not changed_again and again == new


def test_kubelet_feature_gates_merge_and_remove():
    text = fixture_text("kubeadm-v1.36.3", "kubelet-config.yaml")
    one, dummy, dummy, dummy = config_file.edit_config_text(text, "KubeletConfiguration", feature_gates={"A": True})
    two, changed, dummy, after = config_file.edit_config_text(one, "KubeletConfiguration", feature_gates={"B": False})
    assert changed and after["featureGates"] == {"A": True, "B": False}
    three, changed, dummy, after = config_file.edit_config_text(two, "KubeletConfiguration", feature_gates={"A": None, "B": None})
    assert changed and "featureGates" not in after and three == text


def test_nested_merge_rewrites_only_that_entry():
    text = fixture_text("kubeadm-v1.36.3", "kubelet-config.yaml")
    new, changed, dummy, after = config_file.edit_config_text(text, "KubeletConfiguration", merge={"logging": {"verbosity": 3}})
    assert changed and after["logging"]["flushFrequency"] == 0 and after["logging"]["verbosity"] == 3
    untouched_before = text.split("logging:")[0]
    assert new.startswith(untouched_before) and new.split("memorySwap:")[1] == text.split("memorySwap:")[1]


def test_config_of_another_kind_or_bad_values_is_refused():
    with pytest.raises(manifest_rules.ManifestError, match="has kind 'Pod': expected KubeletConfiguration"):
        config_file.edit_config_text("kind: Pod\n", "KubeletConfiguration", merge={"a": 1})
    with pytest.raises(manifest_rules.ManifestError, match="must be true or false"):
        config_file.edit_config_text("kind: KubeletConfiguration\n", "KubeletConfiguration", feature_gates={"A": "on"})
    with pytest.raises(manifest_rules.ManifestError, match="not a YAML mapping"):
        config_file.edit_config_text("- a\n", "KubeletConfiguration", merge={"a": 1})
    with pytest.raises(manifest_rules.ManifestError, match="not both"):
        config_file.edit_config_text("kind: KubeletConfiguration\n", "KubeletConfiguration",
                                     merge={"featureGates": {"A": True}}, feature_gates={"B": True})


@pytest.mark.parametrize("value, parsed", [(True, True), (False, False), ("true", True), (" FALSE ", False),
                                           ("True", True), (None, None)])
def test_config_file_gate_values_are_read_as_the_catalog_reads_them(value, parsed):
    assert config_file.normalize_gates({"A": value}) == {"A": parsed}
    if value is not None:
        assert catalog.gate_value(value) is parsed


@pytest.mark.parametrize("value", ["on", "1", 1, "yes", ""])
def test_config_file_gate_values_other_than_true_or_false_are_refused(value):
    with pytest.raises(manifest_rules.ManifestError, match="feature gate A=.*: the value must be true or false"):
        config_file.normalize_gates({"A": value})
    with pytest.raises(ValueError):
        catalog.gate_value(value)
