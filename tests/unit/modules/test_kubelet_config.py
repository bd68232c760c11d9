"""kubelet_config: the module run through AnsibleModule on a copy of a real kubeadm kubelet config."""
import functools
import os
import shutil

import pytest
import yaml

from ansible_collections.dra.admin.plugins.modules import kubelet_config

import module_harness
from conftest import FIXTURES

SOURCE = os.path.join(FIXTURES, "kubeadm-v1.36.3", "kubelet-config.yaml")


run_module = functools.partial(module_harness.run_module, kubelet_config)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "config.yaml"
    shutil.copy(SOURCE, str(path))
    return path


def test_merge_gates_and_qps_then_idempotent(capsys, config, tmp_path):
    args = {"path": str(config), "backup_dir": str(tmp_path / "bak"), "kubernetes_version": "v1.33.13",
            "feature_gates": {"DynamicResourceAllocation": True}, "merge": {"kubeAPIQPS": 50, "kubeAPIBurst": 100}}
    first = run_module(capsys, args, diff=True)
    assert first["changed"] is True
    written = yaml.safe_load(config.read_text())
    assert written["featureGates"] == {"DynamicResourceAllocation": True}
    assert written["kubeAPIQPS"] == 50 and written["kubeAPIBurst"] == 100
    assert written["staticPodPath"] == "/etc/kubernetes/manifests"
    assert first["feature_gates"] == {"DynamicResourceAllocation": True}
    with open(first["backup_file"]) as handle, open(SOURCE) as source:
        assert handle.read() == source.read()
    assert first["diff"]["after"] == config.read_text()
    second = run_module(capsys, args)
    assert second["changed"] is False


def test_check_mode_writes_nothing(capsys, config, tmp_path):
    result = run_module(capsys, {"path": str(config), "backup_dir": str(tmp_path / "bak"),
                                 "merge": {"kubeAPIQPS": 75}}, check_mode=True, diff=True)
    assert result["changed"] is True and "kubeAPIQPS: 75" in result["diff"]["after"]
    with open(SOURCE) as source:
        assert config.read_text() == source.read()
    assert not (tmp_path / "bak").exists()


def test_gates_given_in_merge_are_validated_too(capsys, config):
    result = run_module(capsys, {"path": str(config), "kubernetes_version": "1.35",
                                 "merge": {"featureGates": {"DynamicResourceAllocation": False}}})
    assert result["failed"] is True and "locked to true on Kubernetes 1.35" in result["msg"]
    with open(SOURCE) as source:
        assert config.read_text() == source.read()


def test_missing_file_and_wrong_kind(capsys, tmp_path):
    missing = run_module(capsys, {"path": str(tmp_path / "none.yaml"), "merge": {"kubeAPIQPS": 1}})
    assert missing["failed"] is True and "none.yaml does not exist" in missing["msg"]
    other = tmp_path / "other.yaml"
    other.write_text("kind: KubeProxyConfiguration\n")
    result = run_module(capsys, {"path": str(other), "merge": {"kubeAPIQPS": 1}})
    assert result["failed"] is True and "expected KubeletConfiguration" in result["msg"]


def test_enable_dra_on_133_and_on_136(capsys, config):
    old = run_module(capsys, {"path": str(config), "backup": False, "kubernetes_version": "v1.33.13",
                              "enable_dra": True})
    assert old["changed"] is True and old["dra_feature_gates"] == {"DynamicResourceAllocation": True}
    assert yaml.safe_load(config.read_text())["featureGates"] == {"DynamicResourceAllocation": True}
    new = run_module(capsys, {"path": str(config), "backup": False, "kubernetes_version": "v1.36.3",
                              "enable_dra": True})
    assert new["changed"] is False and new["dra_feature_gates"] == {}


def test_enable_dra_refuses_switching_dra_off_and_breaking_a_default_on_gate(capsys, config):
    off = run_module(capsys, {"path": str(config), "backup": False, "kubernetes_version": "v1.33.13",
                              "enable_dra": True, "feature_gates": {"DynamicResourceAllocation": False}})
    assert off["failed"] is True and "switches DRA off" in off["msg"]
    health = run_module(capsys, {"path": str(config), "backup": False, "kubernetes_version": "v1.36.3",
                                 "enable_dra": True, "merge": {"featureGates": {"ResourceHealthStatus": False}}})
    assert health["failed"] is True and "ResourceHealthStatusMessage is on by default" in health["msg"]
    with open(SOURCE) as source:
        assert config.read_text() == source.read()
