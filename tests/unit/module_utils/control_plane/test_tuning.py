"""Client QPS/Burst checks, the scheduler's config file and its mount, on real kubeadm manifests."""
import difflib
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.control_plane import host_paths
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest as manifest_rules
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest_text
from ansible_collections.dra.admin.plugins.module_utils.control_plane import tuning
from ansible_collections.dra.admin.plugins.modules import component_flags, kubelet_config

from conftest import FIXTURES, ROOT
from module_harness import run_module

KUBEADM_VERSIONS = sorted(d for d in os.listdir(FIXTURES) if d.startswith("kubeadm-"))


# ---- pure checks ----

@pytest.mark.parametrize("qps,burst", [(75, 150), (7.5, 8), ("75", "150"), (1, 1), (0.5, 1)])
def test_good_rates_pass(qps, burst):
    assert tuning.check_rate(qps, burst) == []


@pytest.mark.parametrize("qps,burst,words", [
    (0, 150, ["qps=0 must be greater than 0"]),
    (-1, 150, ["qps=-1 must be greater than 0", "switches the client rate limit off"]),
    ("fast", 150, ["qps='fast' is not a number"]),
    (True, 150, ["is not a number"]),
    (75, 7.5, ["burst=7.5 is not a whole number"]),
    (75, 0, ["burst=0 must be at least 1"]),
    (75, 50, ["burst=50 is lower than qps=75", "set burst to at least 75", "e.g. 150"]),
    (7.5, 5, ["set burst to at least 7.5", "e.g. 15"]),
])
def test_bad_rates_name_the_item_and_the_fix(qps, burst, words):
    errors = tuning.check_rate(qps, burst, "kcm")
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0], (word, errors)


@pytest.mark.parametrize("qps,burst,words", [
    (float("nan"), 150, ["qps=nan is not a number (NaN)"]),
    ("nan", 150, ["qps='nan' is not a number (NaN)"]),
    (float("inf"), 150, ["qps=inf is not a finite number"]),
    ("inf", 150, ["qps='inf' is not a finite number"]),
    ("-inf", 150, ["qps='-inf' is not a finite number"]),
    (75, float("nan"), ["burst=nan is not a number (NaN)"]),
    (75, float("inf"), ["burst=inf is not a finite number"]),
    (75, "Infinity", ["burst='Infinity' is not a finite number"]),
])
def test_nan_and_infinity_are_refused_with_a_message(qps, burst, words):
    errors = tuning.check_rate(qps, burst, "kcm")
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0], (word, errors)
    # the same through the component checks (pair with the current or default values)
    assert len(tuning.check_component_rate("kube-controller-manager", qps, burst)) == 1
    assert len(tuning.config_rate_errors("kube-scheduler", {"clientConnection": {"qps": qps, "burst": burst}})) == 1


def test_a_single_value_is_checked_against_what_stays():
    # only Burst given: the QPS in effect is the current one, else the component's default
    assert tuning.check_component_rate("kube-controller-manager", burst=25) == []  # default QPS 20
    errors = tuning.check_component_rate("kube-controller-manager", burst=25, current_qps="75")
    assert len(errors) == 1 and "current QPS (75) kept" in errors[0] and "lower than qps=75" in errors[0]
    errors = tuning.check_component_rate("kube-scheduler", qps=150)  # default Burst 100
    assert "built-in default Burst (100) kept" in errors[0]
    assert tuning.check_component_rate("kube-scheduler") == []


def test_flag_errors_use_the_flag_names():
    errors = tuning.flag_rate_errors("kube-controller-manager", {"kube-api-burst": 10}, {"kube-api-qps": "75"},
                                     "kcm.yaml")
    assert errors and "kcm.yaml" in errors[0] and "kube-api-burst=10 is lower than kube-api-qps=75" in errors[0]
    assert tuning.flag_rate_errors("kube-controller-manager", {"v": 2}, {}) == []


def test_config_errors_use_the_config_names():
    config = {"clientConnection": {"qps": 100, "burst": 50}}
    errors = tuning.config_rate_errors("kube-scheduler", config, "/x/sched.yaml")
    assert errors == ["/x/sched.yaml clientConnection.burst=50 is lower than clientConnection.qps=100: the client "
                      "could never reach its QPS; set clientConnection.burst to at least 100 (twice the QPS is "
                      "usual, e.g. 200)"]
    assert tuning.config_rate_errors("kube-scheduler", {"clientConnection": {"qps": 120}}) != []  # default 100
    assert tuning.config_rate_errors("kube-scheduler", {"clientConnection": {"qps": 75}}) == []
    assert "not a mapping" in tuning.config_rate_errors("kube-scheduler", {"clientConnection": 5})[0]


def test_new_scheduler_config_takes_over_the_deprecated_flags():
    flags = {"kubeconfig": "/etc/kubernetes/scheduler.conf", "kube-api-qps": "30", "kube-api-burst": "60",
             "profiling": "false", "contention-profiling": None, "leader-elect": "true"}
    assert tuning.scheduler_config_from_flags(flags) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 30.0, "burst": 60},
        "enableProfiling": False, "enableContentionProfiling": True}


# ---- manifest structure helpers ----

def fixture_text(version_dir, name):
    with open(os.path.join(FIXTURES, version_dir, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("version_dir", KUBEADM_VERSIONS)
def test_kubeadm_files_are_in_the_canonical_layout(version_dir):
    for name in ("kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml", "etcd.yaml"):
        text = fixture_text(version_dir, name)
        assert manifest_text.canonical_manifest(yaml.safe_load(text)) == text


@pytest.mark.parametrize("version_dir", KUBEADM_VERSIONS)
def test_host_paths_through_mounts(version_dir):
    manifest = yaml.safe_load(fixture_text(version_dir, "kube-controller-manager.yaml"))
    assert host_paths.host_path_for(manifest, None, "/etc/kubernetes/pki/ca.crt") == "/etc/kubernetes/pki/ca.crt"
    assert host_paths.host_path_for(manifest, None, "/etc/kubernetes/controller-manager.conf") == \
        "/etc/kubernetes/controller-manager.conf"
    assert host_paths.host_path_for(manifest, None, "/etc/kubernetes/other.yaml") is None
    manifest["spec"]["volumes"][0]["hostPath"]["path"] = "/srv/certs"  # ca-certs: /etc/ssl/certs
    assert host_paths.host_path_for(manifest, None, "/etc/ssl/certs/a/b.pem") == "/srv/certs/a/b.pem"


@pytest.mark.parametrize("version_dir", KUBEADM_VERSIONS)
def test_mount_goes_in_sorted_place_and_only_its_lines_change(version_dir):
    text = fixture_text(version_dir, "kube-scheduler.yaml")
    manifest = yaml.safe_load(text)
    new, changed = host_paths.add_host_path_mount(manifest, None, "kube-scheduler-config", "/etc/k/s.yaml",
                                                  "/etc/k/s.yaml")
    assert changed and manifest == yaml.safe_load(text)  # input untouched
    names = [v["name"] for v in new["spec"]["volumes"]]
    assert names == sorted(names) and "kube-scheduler-config" in names
    diff = list(difflib.ndiff(text.splitlines(), manifest_text.canonical_manifest(new).splitlines()))
    assert [line for line in diff if line.startswith("- ")] == []
    added = [line[2:] for line in diff if line.startswith("+ ")]
    assert len(added) == 7  # 3 lines of the mount, 4 of the volume; every other line as it was
    assert set(added) <= {"    - mountPath: /etc/k/s.yaml", "      name: kube-scheduler-config", "      readOnly: true",
                          "  - hostPath:", "      path: /etc/k/s.yaml", "      type: File",
                          "    name: kube-scheduler-config"}
    again, changed_again = host_paths.add_host_path_mount(new, None, "kube-scheduler-config", "/etc/k/s.yaml",
                                                          "/etc/k/s.yaml")
    assert not changed_again and again == new


def test_mount_conflicts_are_refused():
    manifest = yaml.safe_load(fixture_text("kubeadm-v1.36.3", "kube-scheduler.yaml"))
    with pytest.raises(manifest_rules.ManifestError, match="already has a volume named 'kubeconfig'"):
        host_paths.add_host_path_mount(manifest, None, "kubeconfig", "/etc/k/s.yaml", "/etc/k/s.yaml")
    with pytest.raises(manifest_rules.ManifestError, match="already mounts 'kubeconfig' at /etc/kubernetes/scheduler.conf"):
        host_paths.add_host_path_mount(manifest, None, "other", "/srv/s.conf", "/etc/kubernetes/scheduler.conf")


def test_annotation_set_and_removed():
    manifest = yaml.safe_load(fixture_text("kubeadm-v1.36.3", "kube-scheduler.yaml"))
    new, changed = manifest_rules.set_annotation(manifest, "dra.admin/config-sha256", "abc")
    assert changed and new["metadata"]["annotations"] == {"dra.admin/config-sha256": "abc"}
    same, changed = manifest_rules.set_annotation(new, "dra.admin/config-sha256", "abc")
    assert not changed
    gone, changed = manifest_rules.set_annotation(new, "dra.admin/config-sha256", None)
    assert changed and "annotations" not in gone["metadata"]


# ---- the module with config_file ----

def read(path):
    with open(str(path)) as handle:
        return handle.read()


@pytest.fixture(params=KUBEADM_VERSIONS)
def node(tmp_path, request):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name in ("kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"):
        shutil.copy(os.path.join(FIXTURES, request.param, name), str(manifests / name))
    return {"manifests": manifests, "backups": tmp_path / "backups", "config": tmp_path / "sched.yaml",
            "version": request.param.split("-", 1)[1]}


def scheduler_args(node, qps=75, burst=150):
    return {"path": str(node["manifests"] / "kube-scheduler.yaml"), "backup_dir": str(node["backups"]),
            "kubernetes_version": node["version"],
            "config_file": {"path": str(node["config"]), "merge": {"clientConnection": {"qps": qps, "burst": burst}}}}


def test_scheduler_config_created_mounted_and_idempotent(capsys, node):
    manifest_path = node["manifests"] / "kube-scheduler.yaml"
    original = read(manifest_path)
    first = run_module(component_flags, capsys, scheduler_args(node), diff=True)
    assert first["changed"] is True
    assert first["config_file"]["created"] is True and first["config_file"]["backup_file"] == ""
    config = yaml.safe_load(read(node["config"]))
    assert config == {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                      "clientConnection": {"kubeconfig": "/etc/kubernetes/scheduler.conf", "qps": 75, "burst": 150}}
    assert oct(os.stat(str(node["config"])).st_mode & 0o777) == "0o600"
    manifest = yaml.safe_load(read(manifest_path))
    assert "--config=%s" % node["config"] in manifest["spec"]["containers"][0]["command"]
    assert host_paths.host_path_for(manifest, None, str(node["config"])) == str(node["config"])
    assert len(manifest["metadata"]["annotations"]["dra.admin/config-sha256"]) == 64
    assert read(first["backup_file"]) == original
    assert isinstance(first["diff"], list) and first["diff"][0]["before_header"] == "/dev/null"
    second = run_module(component_flags, capsys, scheduler_args(node))
    assert second["changed"] is False and second["config_file"]["created"] is False


def test_changing_only_the_config_file_changes_the_annotation(capsys, node):
    run_module(component_flags, capsys, scheduler_args(node))
    before = yaml.safe_load(read(node["manifests"] / "kube-scheduler.yaml"))
    config_before = read(node["config"])
    result = run_module(component_flags, capsys, scheduler_args(node, 100, 200))
    assert result["changed"] is True and result["config_file"]["changed"] is True
    assert read(result["config_file"]["backup_file"]) == config_before
    after = yaml.safe_load(read(node["manifests"] / "kube-scheduler.yaml"))
    annotation = "dra.admin/config-sha256"
    assert after["metadata"]["annotations"][annotation] != before["metadata"]["annotations"][annotation]
    assert after["spec"] == before["spec"]  # the kubelet restarts the Pod for the annotation alone


def test_existing_config_found_through_its_mount(capsys, node, tmp_path):
    host_dir = tmp_path / "host-etc"
    host_dir.mkdir()
    (host_dir / "sched.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                                         "kind: KubeSchedulerConfiguration\n"
                                         "clientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\n")
    path = node["manifests"] / "kube-scheduler.yaml"
    manifest = yaml.safe_load(read(path))
    manifest["spec"]["containers"][0]["command"].append("--config=/etc/sched/sched.yaml")
    manifest, dummy = host_paths.add_host_path_mount(manifest, None, "sched", str(host_dir), "/etc/sched", "Directory")
    path.write_text(manifest_text.canonical_manifest(manifest))
    args = scheduler_args(node)
    del args["config_file"]["path"]
    result = run_module(component_flags, capsys, args)
    assert result["config_file"]["path"] == "/etc/sched/sched.yaml"
    assert result["config_file"]["host_path"] == str(host_dir / "sched.yaml")
    assert yaml.safe_load((host_dir / "sched.yaml").read_text())["clientConnection"]["qps"] == 75
    assert not node["config"].exists()


@pytest.mark.parametrize("change,start,words", [
    # refusals of the values name the manifest and say that nothing was written ...
    ({"qps": 0}, "{manifests}/kube-scheduler.yaml: nothing written: ",
     ["sched.yaml clientConnection.qps=0 must be greater than 0"]),
    ({"burst": 10}, "{manifests}/kube-scheduler.yaml: nothing written: ",
     ["clientConnection.burst=10 is lower than clientConnection.qps=75"]),
    ({"set_flags": {"kube-api-qps": 75}}, "{manifests}/kube-scheduler.yaml: nothing written: ",
     ["ignores --kube-api-qps once --config is given"]),
    # ... refusals of the file's path name the option
    ({"config_path": "relative.yaml"}, "config_file.path relative.yaml ", ["is not an absolute path"]),
    ({"config_path": "/nonexistent-dir/s.yaml"}, "config_file.path /nonexistent-dir/s.yaml: ",
     ["directory /nonexistent-dir does not exist"]),
])
def test_scheduler_refusals_write_nothing(capsys, node, change, start, words):
    args = scheduler_args(node, change.get("qps", 75), change.get("burst", 150))
    if "set_flags" in change:
        args["set_flags"] = change["set_flags"]
    if "config_path" in change:
        args["config_file"]["path"] = change["config_path"]
    original = read(node["manifests"] / "kube-scheduler.yaml")
    result = run_module(component_flags, capsys, args)
    assert result["failed"] is True
    assert result["msg"].startswith(start.format(manifests=node["manifests"])), result["msg"]
    for word in words:
        assert word in result["msg"], result["msg"]
    assert read(node["manifests"] / "kube-scheduler.yaml") == original
    assert not node["config"].exists() and not node["backups"].exists()


def test_config_named_but_not_mounted_is_refused(capsys, node):
    path = node["manifests"] / "kube-scheduler.yaml"
    manifest = yaml.safe_load(read(path))
    manifest["spec"]["containers"][0]["command"].append("--config=/etc/elsewhere/s.yaml")
    path.write_text(manifest_text.canonical_manifest(manifest))
    result = run_module(component_flags, capsys, scheduler_args(node))
    assert result["failed"] is True
    assert "--config=/etc/elsewhere/s.yaml is not mounted from the host" in result["msg"]


@pytest.mark.parametrize("flags,words", [
    ({"kube-api-qps": 0}, ["kube-api-qps=0 must be greater than 0"]),
    ({"kube-api-qps": 75, "kube-api-burst": 50}, ["kube-api-burst=50 is lower than kube-api-qps=75"]),
    ({"kube-api-qps": 75}, ["built-in default Burst (30) kept", "kube-api-burst=30 is lower"]),
])
def test_controller_manager_refusals_write_nothing(capsys, node, flags, words):
    path = node["manifests"] / "kube-controller-manager.yaml"
    original = read(path)
    result = run_module(component_flags, capsys, {"path": str(path), "backup_dir": str(node["backups"]),
                                                  "set_flags": flags})
    assert result["failed"] is True
    for word in words:
        assert word in result["msg"], result["msg"]
    assert read(path) == original and not node["backups"].exists()


@pytest.mark.parametrize("qps,burst,words", [
    (float("nan"), 150, "clientConnection.qps=nan is not a number (NaN)"),
    (float("inf"), 150, "clientConnection.qps=inf is not a finite number"),
    (75, float("inf"), "clientConnection.burst=inf is not a finite number"),
])
def test_scheduler_nan_and_infinity_write_nothing(capsys, node, qps, burst, words):
    original = read(node["manifests"] / "kube-scheduler.yaml")
    result = run_module(component_flags, capsys, scheduler_args(node, qps, burst))
    assert result["failed"] is True and words in result["msg"], result
    assert read(node["manifests"] / "kube-scheduler.yaml") == original
    assert not node["config"].exists() and not node["backups"].exists()


@pytest.mark.parametrize("flags,words", [
    ({"kube-api-qps": "nan", "kube-api-burst": 150}, "kube-api-qps='nan' is not a number (NaN)"),
    ({"kube-api-qps": "inf", "kube-api-burst": 150}, "kube-api-qps='inf' is not a finite number"),
    ({"kube-api-qps": 75, "kube-api-burst": "inf"}, "kube-api-burst='inf' is not a finite number"),
])
def test_controller_manager_nan_and_infinity_write_nothing(capsys, node, flags, words):
    path = node["manifests"] / "kube-controller-manager.yaml"
    original = read(path)
    result = run_module(component_flags, capsys, {"path": str(path), "backup_dir": str(node["backups"]),
                                                  "set_flags": flags})
    assert result["failed"] is True and words in result["msg"], result
    assert read(path) == original and not node["backups"].exists()


@pytest.mark.parametrize("merge,words", [
    ({"kubeAPIQPS": float("nan"), "kubeAPIBurst": 100}, "kubeAPIQPS=nan is not a number (NaN)"),
    ({"kubeAPIQPS": float("inf"), "kubeAPIBurst": 100}, "kubeAPIQPS=inf is not a finite number"),
    ({"kubeAPIQPS": 50, "kubeAPIBurst": float("inf")}, "kubeAPIBurst=inf is not a finite number"),
])
def test_kubelet_nan_and_infinity_write_nothing(capsys, tmp_path, merge, words):
    config = tmp_path / "config.yaml"
    shutil.copy(os.path.join(FIXTURES, "kubeadm-v1.36.3", "kubelet-config.yaml"), str(config))
    original = read(config)
    result = run_module(kubelet_config, capsys, {"path": str(config), "backup_dir": str(tmp_path / "b"),
                                                 "merge": merge})
    assert result["failed"] is True and words in result["msg"], result
    assert read(config) == original and not (tmp_path / "b").exists()


def test_kubelet_rates_are_checked(capsys, tmp_path):
    config = tmp_path / "config.yaml"
    shutil.copy(os.path.join(FIXTURES, "kubeadm-v1.36.3", "kubelet-config.yaml"), str(config))
    original = read(config)
    result = run_module(kubelet_config, capsys, {"path": str(config), "backup_dir": str(tmp_path / "b"),
                                                 "merge": {"kubeAPIQPS": 200}})
    assert result["failed"] is True and "kubeAPIBurst=100 is lower than kubeAPIQPS=200" in result["msg"]
    assert read(config) == original
    ok = run_module(kubelet_config, capsys, {"path": str(config), "backup_dir": str(tmp_path / "b"),
                                             "merge": {"kubeAPIQPS": 200, "kubeAPIBurst": 400}})
    assert ok["changed"] is True


# ---- the role ----

CHECK_TASK = "Check every change (values, manifests, release) before writing anything"
ARG_SPEC_TASK = "Validating arguments against arg spec 'main'"


@pytest.mark.parametrize("role_vars,task,words", [
    ("dra_control_plane_tuning_controller_manager_qps: .nan", CHECK_TASK, "kube-api-qps=nan is not a number (NaN)"),
    ("dra_control_plane_tuning_controller_manager_qps: .inf", CHECK_TASK, "kube-api-qps=inf is not a finite number"),
    ("dra_control_plane_tuning_scheduler_qps: .nan", CHECK_TASK, "clientConnection.qps=nan is not a number (NaN)"),
    ("dra_control_plane_tuning_scheduler_qps: .inf", CHECK_TASK, "clientConnection.qps=inf is not a finite number"),
    # Burst is an int in the argument spec: Ansible's own validation refuses it first.
    ("dra_control_plane_tuning_scheduler_burst: .inf", ARG_SPEC_TASK, "cannot convert Infinity to integer"),
])
def test_role_refuses_nan_and_infinity_before_writing(tmp_path, role_vars, task, words):
    """The role fails with a message naming the value; no manifest, config file or backup changes."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name in ("kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"):
        shutil.copy(os.path.join(FIXTURES, "kubeadm-v1.36.3", name), str(manifests / name))
    before = {name: read(manifests / name) for name in os.listdir(str(manifests))}
    (tmp_path / "vars.yml").write_text(
        "dra_control_plane_tuning_manifest_dir: %s\n"
        "dra_control_plane_tuning_backup_dir: %s\n"
        "dra_control_plane_tuning_scheduler_config: %s\n"
        "dra_control_plane_tuning_update_kubeadm_config: false\n%s\n"
        % (manifests, tmp_path / "backups", tmp_path / "sched.yaml", role_vars))
    (tmp_path / "play.yml").write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n"
                                       "    - dra.admin.control_plane_tuning\n")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                          "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                          "-e", "@" + str(tmp_path / "vars.yml"), str(tmp_path / "play.yml")],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    output = res.stdout + res.stderr
    assert res.returncode == 2, output
    failed_task = output.split("fatal: [localhost]")[0].rsplit("TASK [", 1)[-1]
    assert task in failed_task, output
    assert words in output, output
    assert "Traceback" not in output and "OverflowError" not in output, output
    assert {name: read(manifests / name) for name in os.listdir(str(manifests))} == before
    assert not (tmp_path / "sched.yaml").exists() and not (tmp_path / "backups").exists()


def test_component_names_and_the_controller_manager_defaults_have_one_home():
    from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
    from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
    assert set(tuning.DEFAULT_RATES) <= set(catalog.COMPONENTS)
    assert set(diagnosis.SCRAPED_COMPONENTS) - {diagnosis.PLUGIN} <= set(catalog.COMPONENTS)
    assert tuning.DEFAULT_RATES[catalog.KUBE_CONTROLLER_MANAGER] == (20.0, 30)
    assert (diagnosis.DEFAULT_KCM_QPS, diagnosis.DEFAULT_KCM_BURST) == (tuning.DEFAULT_KCM_QPS, tuning.DEFAULT_KCM_BURST)
    assert "defaults are 20 and 30" in diagnosis._advice("kcm_tuning", None, None)


def test_tuning_requests_per_component():
    both = ["kube-controller-manager", "kube-scheduler"]
    requests = tuning.tuning_requests(both, {"qps": 75.0, "burst": "150"}, {"qps": "7.5", "burst": None},
                                      "/etc/kubernetes/sched.yaml")
    kcm = requests["kube-controller-manager"]
    assert kcm["set_flags"] == {"kube-api-qps": 75, "kube-api-burst": 150}
    assert isinstance(kcm["set_flags"]["kube-api-qps"], int) and kcm["config_file"] is None
    sched = requests["kube-scheduler"]
    assert sched == {"set_flags": {}, "configz": [sched["configz"][0]], "config_file": {
        "path": "/etc/kubernetes/sched.yaml", "merge": {"clientConnection": {"qps": 7.5}}}}
    # The /configz patterns match what the running components print, and not another value.
    import re
    assert re.search(kcm["configz"][0], '{"ClientConnection":{"QPS":75,"Burst":150}}')
    assert re.search(kcm["configz"][1], '{"clientConnection":{"qps":75.0,"burst":150}}')
    assert not re.search(kcm["configz"][0], '{"clientConnection":{"qps":750,"burst":150}}')
    assert re.search(sched["configz"][0], '{"clientConnection":{"kubeconfig":"x","qps":7.5}}')
    assert not re.search(sched["configz"][0], '{"clientConnection":{"qps":715}}')


def test_tuning_requests_leave_out_unset_and_unlisted_components_and_pass_non_numbers_on():
    none = {"qps": None, "burst": None}
    assert tuning.tuning_requests(["kube-scheduler"], {"qps": 75, "burst": 150}, none, "/s.yaml") == {}
    refused = tuning.tuning_requests(["kube-controller-manager"], {"qps": "nan", "burst": True}, none, "/s.yaml")
    # component_flags refuses these with a message naming them; they are not turned into numbers here.
    assert refused["kube-controller-manager"]["set_flags"] == {"kube-api-qps": "nan", "kube-api-burst": True}
