"""component_flags: the module run through AnsibleModule on copies of real kubeadm manifests."""
import functools
import os
import shutil

import pytest

from ansible_collections.dra.admin.plugins.modules import component_flags

import module_harness
from conftest import FIXTURES

SOURCE = os.path.join(FIXTURES, "kubeadm-v1.36.3")


run_module = functools.partial(module_harness.run_module, component_flags)


@pytest.fixture
def node(tmp_path):
    manifests = tmp_path / "etc" / "kubernetes" / "manifests"
    manifests.mkdir(parents=True)
    for name in ("kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"):
        shutil.copy(os.path.join(SOURCE, name), str(manifests / name))
        os.chmod(str(manifests / name), 0o600)
    return {"manifests": manifests, "backups": tmp_path / "backups"}


def read(path):
    with open(str(path)) as handle:
        return handle.read()


def test_enable_dra_gates_with_backup_then_idempotent(capsys, node):
    path = node["manifests"] / "kube-apiserver.yaml"
    original = read(path)
    args = {"path": str(path), "backup_dir": str(node["backups"]), "kubernetes_version": "v1.33.13",
            "feature_gates": {"DynamicResourceAllocation": True},
            "runtime_config": {"resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"}}
    first = run_module(capsys, args, diff=True)
    assert first["changed"] is True and first["container"] == "kube-apiserver"
    assert first["feature_gates"] == {"DynamicResourceAllocation": "true"}
    assert first["runtime_config"] == {"resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"}
    assert first["flags"]["runtime-config"] == "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
    assert first["diff"]["before"] == original and first["diff"]["after"] == read(path)
    assert read(first["backup_file"]) == original
    assert os.path.dirname(first["backup_file"]) == str(node["backups"])
    assert sorted(os.listdir(str(node["manifests"]))) == [
        "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"]
    assert oct(os.stat(str(path)).st_mode & 0o777) == "0o600"
    second = run_module(capsys, args)
    assert second["changed"] is False and "backup_file" not in second
    assert len(os.listdir(str(node["backups"]))) == 1


def test_check_mode_reports_the_diff_and_writes_nothing(capsys, node):
    path = node["manifests"] / "kube-controller-manager.yaml"
    original = read(path)
    result = run_module(capsys, {"path": str(path), "backup_dir": str(node["backups"]),
                                 "set_flags": {"kube-api-qps": 75, "kube-api-burst": 150}},
                        check_mode=True, diff=True)
    assert result["changed"] is True
    assert "--kube-api-qps=75" in result["diff"]["after"] and result["flags"]["kube-api-burst"] == "150"
    assert read(path) == original and not node["backups"].exists()


@pytest.mark.parametrize("gates,message", [
    ({"DRAControlPlaneController": True}, "DRAControlPlaneController was removed in Kubernetes 1.32"),
    ({"DynamicResourceAllocation": False}, "locked to true on Kubernetes 1.36"),
    ({"DRAFancyGate": True}, "DRAFancyGate is unknown"),
])
def test_catalog_refusals_write_nothing(capsys, node, gates, message):
    path = node["manifests"] / "kube-apiserver.yaml"
    original = read(path)
    result = run_module(capsys, {"path": str(path), "backup_dir": str(node["backups"]),
                                 "kubernetes_version": "v1.36.3", "feature_gates": gates})
    assert result["failed"] is True and message in result["msg"] and "nothing written" in result["msg"]
    assert read(path) == original and not node["backups"].exists()


def test_runtime_config_with_a_version_the_release_lacks_is_refused(capsys, node):
    path = node["manifests"] / "kube-apiserver.yaml"
    result = run_module(capsys, {"path": str(path), "backup_dir": str(node["backups"]),
                                 "kubernetes_version": "1.36", "runtime_config": {"resource.k8s.io/v1alpha2": "true"}})
    assert result["failed"] is True and "has no resource.k8s.io/v1alpha2" in result["msg"]


def test_removing_a_gate_is_allowed_even_when_the_release_no_longer_knows_it(capsys, node):
    path = node["manifests"] / "kube-scheduler.yaml"
    run_module(capsys, {"path": str(path), "backup": False, "kubernetes_version": "1.31",
                        "feature_gates": {"DRAControlPlaneController": True, "DynamicResourceAllocation": True}})
    assert "DRAControlPlaneController=true" in read(path)
    result = run_module(capsys, {"path": str(path), "backup": False, "kubernetes_version": "1.36",
                                 "feature_gates": {"DRAControlPlaneController": None, "DynamicResourceAllocation": None}})
    assert result["changed"] is True and result["feature_gates"] == {}
    assert read(path) == read(os.path.join(SOURCE, "kube-scheduler.yaml"))


def test_backup_dir_inside_the_manifest_directory_is_refused(capsys, node):
    path = node["manifests"] / "kube-apiserver.yaml"
    result = run_module(capsys, {"path": str(path), "backup_dir": str(node["manifests"] / "old"),
                                 "set_flags": {"v": 2}})
    assert result["failed"] is True and "the kubelet would start a backup as a second Pod" in result["msg"]
    assert not (node["manifests"] / "old").exists()


def test_missing_manifest_and_unexpected_shape_are_clear_errors(capsys, node, tmp_path):
    missing = run_module(capsys, {"path": str(tmp_path / "nope.yaml"), "set_flags": {"v": 2}})
    assert missing["failed"] is True and "nope.yaml does not exist" in missing["msg"]
    (tmp_path / "other").mkdir()
    odd = tmp_path / "other" / "odd.yaml"
    odd.write_text("apiVersion: apps/v1\nkind: Deployment\nspec: {}\n")
    result = run_module(capsys, {"path": str(odd), "set_flags": {"v": 2}, "backup_dir": str(node["backups"])})
    assert result["failed"] is True and "kind 'Deployment'" in result["msg"]
    assert odd.read_text() == "apiVersion: apps/v1\nkind: Deployment\nspec: {}\n"


def test_unsupported_version_is_refused(capsys, node):
    path = node["manifests"] / "kube-apiserver.yaml"
    result = run_module(capsys, {"path": str(path), "kubernetes_version": "v1.29.0",
                                 "feature_gates": {"DynamicResourceAllocation": True}})
    assert result["failed"] is True and "supported releases are 1.30 to 1.38" in result["msg"]


def test_enable_dra_adds_what_the_catalog_says_per_release_and_container(capsys, node):
    apiserver = node["manifests"] / "kube-apiserver.yaml"
    result = run_module(capsys, {"path": str(apiserver), "backup": False, "kubernetes_version": "v1.33.13",
                                 "enable_dra": True})
    assert result["dra_feature_gates"] == {"DynamicResourceAllocation": True}
    assert result["runtime_config"] == {"resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"}
    scheduler = node["manifests"] / "kube-scheduler.yaml"
    result = run_module(capsys, {"path": str(scheduler), "backup": False, "kubernetes_version": "v1.33.13",
                                 "enable_dra": True})
    assert result["feature_gates"] == {"DynamicResourceAllocation": "true"}
    assert "runtime-config" not in result["flags"]  # only kube-apiserver takes --runtime-config
    on_136 = run_module(capsys, {"path": str(scheduler), "backup": False, "kubernetes_version": "v1.36.3",
                                 "enable_dra": True, "feature_gates": {"DynamicResourceAllocation": None}})
    assert on_136["dra_feature_gates"] == {} and on_136["feature_gates"] == {}
    taints = run_module(capsys, {"path": str(apiserver), "backup": False, "kubernetes_version": "v1.36.3",
                                 "enable_dra": True, "feature_gates": {"DRADeviceTaintRules": True}})
    assert taints["dra_runtime_config"] == {"resource.k8s.io/v1beta2": "true"}


def test_enable_dra_needs_a_version(capsys, node):
    result = run_module(capsys, {"path": str(node["manifests"] / "kube-apiserver.yaml"), "enable_dra": True})
    assert result["failed"] is True and "enable_dra needs kubernetes_version" in result["msg"]


@pytest.mark.parametrize("version,gates,message", [
    ("v1.33.13", {"DynamicResourceAllocation": False}, "DynamicResourceAllocation=false switches DRA off"),
    ("v1.36.3", {"DRAResourceClaimDeviceStatus": False},
     "DRADeviceBindingConditions and DRAResourceClaimGranularStatusAuthorization are on by default"),
])
def test_enable_dra_judges_the_gates_it_writes_as_a_whole(capsys, node, version, gates, message):
    path = node["manifests"] / "kube-apiserver.yaml"
    original = read(path)
    result = run_module(capsys, {"path": str(path), "backup": False, "kubernetes_version": version,
                                 "enable_dra": True, "feature_gates": gates}, check_mode=True)
    assert result["failed"] is True and message in result["msg"], result["msg"]
    assert read(path) == original


def test_enable_dra_on_133_accepts_a_gate_that_needs_dra(capsys, node):
    path = node["manifests"] / "kube-scheduler.yaml"
    result = run_module(capsys, {"path": str(path), "backup": False, "kubernetes_version": "v1.33.13",
                                 "enable_dra": True, "feature_gates": {"DRAPrioritizedList": True}}, check_mode=True)
    assert result.get("failed") is not True, result["msg"]
    assert result["feature_gates"] == {"DRAPrioritizedList": "true", "DynamicResourceAllocation": "true"}
