"""kubeadm-config's ClusterConfiguration merged as data (control_plane.kubeadm_config) and the kubeadm_config module,
on the ConfigMaps the real kubeadm v1.36.3 and v1.33.13 store (fixtures/kubeadm-*/kubeadm-config.yaml)."""
import json
import os

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.control_plane import kubeadm_config as kc
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import ManifestError
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError
from ansible_collections.dra.admin.plugins.modules import kubeadm_config

import module_harness
from conftest import FIXTURES

VERSIONS = ("kubeadm-v1.37.2", "kubeadm-v1.36.3", "kubeadm-v1.33.13")
SCHEDULER_VOLUME = {"name": "kube-scheduler-config", "hostPath": "/etc/kubernetes/s.yaml",
                    "mountPath": "/etc/kubernetes/s.yaml", "readOnly": True, "pathType": "File"}


def recorded_config_map(version_dir="kubeadm-v1.36.3"):
    with open(os.path.join(FIXTURES, version_dir, "kubeadm-config.yaml")) as handle:
        return yaml.safe_load(handle)


def recorded_text(version_dir="kubeadm-v1.36.3"):
    return recorded_config_map(version_dir)["data"]["ClusterConfiguration"]


def v1beta3_text():
    """The recorded configuration as a kubeadm of v1beta3 (up to 1.30) stored it: extraArgs as maps."""
    config = yaml.safe_load(recorded_text())
    config["apiVersion"] = "kubeadm.k8s.io/v1beta3"
    for section in ("apiServer", "controllerManager"):
        config[section]["extraArgs"] = dict((a["name"], a["value"]) for a in config[section]["extraArgs"])
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=True)


@pytest.mark.parametrize("version_dir", VERSIONS)
def test_flags_go_into_the_v1beta4_list_in_place_and_a_rerun_changes_nothing(version_dir):
    text = recorded_text(version_dir)
    request = {"kube-apiserver": {"feature-gates": {"DRADeviceTaints": "true", "DynamicResourceAllocation": True},
                                  "runtime-config": {}},
               "kube-controller-manager": {"--bind-address": "127.0.0.1", "kube-api-qps": 75}}
    new, changed, before, after, skipped = kc.edit_cluster_configuration_text(text, request)
    assert changed and not skipped
    assert after["apiServer"]["extraArgs"] == [
        {"name": "audit-log-maxage", "value": "7"},
        {"name": "feature-gates", "value": "DRADeviceTaints=true,DynamicResourceAllocation=true"}]
    # an existing flag keeps its place; an empty map (runtime-config) carries nothing
    assert after["controllerManager"]["extraArgs"] == [{"name": "bind-address", "value": "127.0.0.1"},
                                                       {"name": "kube-api-qps", "value": "75"}]
    assert yaml.safe_load(new) == after and before == yaml.safe_load(text)
    # only the changed top-level entries are rewritten
    unchanged = [line for line in text.splitlines() if line.startswith(("etcd:", "networking:", "kubernetesVersion"))]
    assert all(line in new.splitlines() for line in unchanged)
    again, changed_again, dummy, dummy, dummy = kc.edit_cluster_configuration_text(new, request)
    assert not changed_again and again == new


def test_v1beta3_keeps_extra_args_as_a_map():
    new, changed, dummy, after, dummy = kc.edit_cluster_configuration_text(
        v1beta3_text(), {"kube-apiserver": {"feature-gates": {"A": "true"}}, "kube-scheduler": {"config": "/s.yaml"}})
    assert changed
    assert after["apiServer"]["extraArgs"] == {"audit-log-maxage": "7", "feature-gates": "A=true"}
    assert after["scheduler"]["extraArgs"] == {"config": "/s.yaml"}  # an empty section gets the form of its version


def test_a_null_value_removes_a_flag():
    dummy, changed, dummy, after, dummy = kc.edit_cluster_configuration_text(
        recorded_text(), {"kube-apiserver": {"audit-log-maxage": None}, "kube-scheduler": {"v": None}})
    assert changed and after["apiServer"]["extraArgs"] == [] and "extraArgs" not in after["scheduler"]


def test_volumes_are_added_replaced_by_name_and_never_mounted_twice_at_one_path():
    text, changed, dummy, after, skipped = kc.edit_cluster_configuration_text(
        recorded_text(), extra_volumes={"kube-scheduler": [SCHEDULER_VOLUME]})
    assert changed and after["scheduler"]["extraVolumes"] == [SCHEDULER_VOLUME] and not skipped
    moved = dict(SCHEDULER_VOLUME, hostPath="/srv/s.yaml")
    dummy, changed, dummy, after, skipped = kc.edit_cluster_configuration_text(
        text, extra_volumes={"kube-scheduler": [moved]})
    assert changed and after["scheduler"]["extraVolumes"] == [moved] and not skipped
    other = dict(SCHEDULER_VOLUME, name="someone-elses")
    dummy, changed, dummy, after, skipped = kc.edit_cluster_configuration_text(
        text, extra_volumes={"kube-scheduler": [other]})
    assert not changed and skipped == {"kube-scheduler": [other]}


@pytest.mark.parametrize("args,volumes,words", [
    ({"etcd": {"v": "2"}}, {}, ["extra_args", "'etcd'", "kube-apiserver, kube-controller-manager, kube-scheduler"]),
    ({"kube-apiserver": {"v": ["1", "2"]}}, {}, ["--v is given a list", "one string"]),
    ({"kube-apiserver": {"--v=2": "3"}}, {}, ["not a flag name"]),
    ({"kube-apiserver": "v=2"}, {}, ["extra_args.kube-apiserver must be a mapping"]),
    ({}, {"kube-scheduler": [{"name": "x", "hostPath": "/x"}]}, ["extra_volumes.kube-scheduler[0] has no mountPath"]),
    ({}, {"kube-scheduler": {"name": "x"}}, ["extra_volumes.kube-scheduler must be a list"]),
])
def test_bad_requests_name_the_field(args, volumes, words):
    with pytest.raises(ManifestError) as info:
        kc.edit_cluster_configuration_text(recorded_text(), args, volumes)
    for word in words:
        assert word in str(info.value)


def test_a_config_map_without_cluster_configuration_is_refused():
    with pytest.raises(ManifestError, match="has no ClusterConfiguration key"):
        kc.edit_cluster_configuration_text(None, {"kube-apiserver": {"v": "2"}}, where="kube-system/kubeadm-config")
    with pytest.raises(ManifestError, match="expected ClusterConfiguration"):
        kc.edit_cluster_configuration_text("kind: InitConfiguration\n", {"kube-apiserver": {"v": "2"}})


# ---- the module, against a stand-in for DraApi holding the recorded ConfigMap ----

class FakeApi:
    def __init__(self, config_map, put_status=None):
        self.config_map = config_map
        self.put_status = put_status
        self.puts = []
        self.requests = 0

    def get_or_none(self, path):
        self.requests += 1
        assert path == "/api/v1/namespaces/kube-system/configmaps/kubeadm-config"
        return json.loads(json.dumps(self.config_map)) if self.config_map else None

    def request(self, method, path, body=None, content_type=None, **kwargs):
        self.requests += 1
        if self.put_status:
            raise DraApiError("PUT failed", status=self.put_status)
        assert isinstance(body, dict)  # the client serialises it: a string would be sent as a JSON string
        self.puts.append((method, path, json.loads(json.dumps(body))))
        self.config_map = json.loads(json.dumps(body))


def run_module(monkeypatch, capsys, api, args, check_mode=False, diff=False):
    # The shared run_module, with the module's API client replaced by the fake one (no cluster here).
    monkeypatch.setattr(kubeadm_config, "DraApi", lambda module: api)
    return module_harness.run_module(kubeadm_config, capsys, args, check_mode, diff)


def test_module_check_mode_then_write_with_backup_then_nothing(monkeypatch, capsys, tmp_path):
    config_map = dict(recorded_config_map(), metadata={"name": "kubeadm-config", "namespace": "kube-system",
                                                       "resourceVersion": "42"})
    api = FakeApi(config_map)
    args = {"extra_args": {"kube-scheduler": {"config": "/etc/kubernetes/s.yaml"}},
            "extra_volumes": {"kube-scheduler": [SCHEDULER_VOLUME]}, "backup_dir": str(tmp_path / "backups")}
    checked = run_module(monkeypatch, capsys, api, args, check_mode=True, diff=True)
    assert checked["changed"] and checked["found"] and not api.puts and not (tmp_path / "backups").exists()
    assert "kube-scheduler-config" in checked["diff"]["after"] and "kube-scheduler-config" not in checked["diff"]["before"]

    written = run_module(monkeypatch, capsys, api, args)
    assert written["changed"] and len(api.puts) == 1
    method, path, body = api.puts[0]
    assert method == "PUT" and body["metadata"]["resourceVersion"] == "42"  # a replace of what was read
    stored = yaml.safe_load(body["data"]["ClusterConfiguration"])
    assert stored["scheduler"] == {"extraArgs": [{"name": "config", "value": "/etc/kubernetes/s.yaml"}],
                                   "extraVolumes": [SCHEDULER_VOLUME]}
    with open(written["backup_file"]) as handle:
        assert handle.read() == recorded_text()  # reversible: the text from before
    assert os.stat(written["backup_file"]).st_mode & 0o077 == 0

    again = run_module(monkeypatch, capsys, api, args)
    assert not again["changed"] and len(api.puts) == 1 and "backup_file" not in again


def test_module_without_the_config_map_changes_nothing_but_still_checks_input(monkeypatch, capsys):
    api = FakeApi(None)
    result = run_module(monkeypatch, capsys, api, {"extra_args": {"kube-apiserver": {"v": "2"}}})
    assert result["changed"] is False and result["found"] is False and not api.puts
    bad = run_module(monkeypatch, capsys, api, {"extra_args": {"kubelet": {"v": "2"}}})
    assert bad["failed"] and "'kubelet' is not a control-plane component" in bad["msg"]


def test_module_reports_a_concurrent_change(monkeypatch, capsys, tmp_path):
    api = FakeApi(recorded_config_map(), put_status=409)
    result = run_module(monkeypatch, capsys, api, {"extra_args": {"kube-apiserver": {"v": "2"}},
                                                   "backup_dir": str(tmp_path)})
    assert result["failed"] and "changed while this task ran" in result["msg"] and "run the task again" in result["msg"]
