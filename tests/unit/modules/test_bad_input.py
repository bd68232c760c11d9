"""Bad input changes nothing: the one check of wait parameters, Kubernetes name syntax, gates given without a
version, and the file modules run on copies of real kubeadm files, whose bytes stay as they were and next to
which no backup appears."""
import os
import shutil

import pytest

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.common import names as k8s_names
from ansible_collections.dra.admin.plugins.module_utils.common import waits
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain import drivers_beyond_daemonsets, drivers_left_on_node
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import (
    DEFAULT_EXCLUSION_LABEL, exclusion_label_error,
)
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_inputs import input_errors as drain_input_errors
from ansible_collections.dra.admin.plugins.modules import (
    component_flags, component_metrics_info, dra_capacity_info, dra_claims_doctor, dra_device_remediation,
    dra_device_taint, dra_driver_status_info, dra_metrics_advice, dra_node_drain, kubelet_config,
)

from conftest import FIXTURES
from module_harness import run_module as run

KUBEADM = os.path.join(FIXTURES, "kubeadm-v1.36.3")
BAD_SECONDS = [float("nan"), float("inf"), float("-inf"), -1, 0, 0.0, -0.5, True, "5", None]


# --- the wait parameters ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [v for v in BAD_SECONDS if v is not None])
def test_every_bad_wait_value_is_refused_naming_the_option_and_an_example(value):
    errors = waits.wait_parameter_errors({"wait_timeout": value, "wait_sleep": value})
    assert len(errors) == 2
    assert errors[0].startswith("wait_timeout must be a finite number of seconds above 0, got ")
    assert errors[0].endswith("give for example wait_timeout: 300")
    assert errors[1].startswith("wait_sleep must be a finite number of seconds above 0, got ")
    assert errors[1].endswith("give for example wait_sleep: 2")


@pytest.mark.parametrize("value", [1, 0.001, 600, 1e6])
def test_finite_positive_waits_pass(value):
    assert waits.wait_parameter_errors({"wait_timeout": value, "wait_sleep": value}) == []


def test_the_message_names_the_aliases_a_task_may_have_used():
    spec = waits.wait_options(600, 1.0, timeout_aliases=["timeout"], sleep_aliases=["poll_interval"])
    assert spec == {"wait_timeout": {"type": "int", "default": 600, "aliases": ["timeout"]},
                    "wait_sleep": {"type": "float", "default": 1.0, "aliases": ["poll_interval"]}}
    errors = waits.wait_parameter_errors({"wait_timeout": 5, "wait_sleep": float("nan")}, spec=spec)
    assert errors == ["wait_sleep (alias poll_interval) must be a finite number of seconds above 0, got nan: give "
                      "for example wait_sleep: 2"]


WAITING_MODULES = [dra_node_drain, dra_device_taint, dra_device_remediation, dra_claims_doctor,
                   dra_driver_status_info, dra_capacity_info]


@pytest.mark.parametrize("module", WAITING_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_waiting_module_names_its_options_wait_timeout_and_wait_sleep(module):
    spec = module.argument_spec()
    assert spec["wait_timeout"]["type"] == "int" and spec["wait_timeout"]["default"] > 0
    if "wait_sleep" in spec:
        assert spec["wait_sleep"]["type"] == "float" and spec["wait_sleep"]["default"] > 0
    for old in ("timeout", "poll_interval", "pool_status_timeout"):
        assert old not in spec, "%s: %s is an alias now, not an option of its own" % (module.__name__, old)
    names = set(spec)
    for option in spec.values():
        names.update(option.get("aliases") or [])
    assert len(names) == len(spec) + sum(len(o.get("aliases") or []) for o in spec.values()), "an alias clashes"


CLUSTER_BAD_WAITS = [
    (dra_node_drain, {"node": "n1", "poll_interval": float("nan")}, "wait_sleep (alias poll_interval)"),
    (dra_node_drain, {"node": "n1", "timeout": 0}, "wait_timeout (alias timeout)"),
    (dra_device_taint, {"driver": "gpu.example.com", "wait_sleep": float("inf")}, "wait_sleep"),
    (dra_device_remediation, {"wait_timeout": -1}, "wait_timeout"),
    (dra_claims_doctor, {"wait_sleep": 0}, "wait_sleep"),
    (dra_driver_status_info, {"driver": "d.example.com", "namespace": "ns", "daemonset_name": "ds", "timeout": -1,
                              "poll_interval": 0}, "wait_timeout (alias timeout)"),
    (dra_capacity_info, {"pool_status_timeout": 0}, "wait_timeout (alias pool_status_timeout)"),
]


@pytest.mark.parametrize("module,args,named", CLUSTER_BAD_WAITS,
                         ids=["%s-%d" % (m.__name__.rsplit(".", 1)[-1], i) for i, (m, a, n) in
                              enumerate(CLUSTER_BAD_WAITS)])
def test_bad_waits_fail_before_any_request(capsys, module, args, named):
    """No cluster is reachable here (the kubeconfig does not exist): the module must fail on the input first."""
    failed = run(module, capsys, dict(args, kubeconfig="/nonexistent/kubeconfig"))
    assert failed["failed"] is True and named in failed["msg"], failed["msg"]
    assert "finite number of seconds above 0" in failed["msg"]
    assert failed.get("api_requests", 0) == 0


@pytest.mark.parametrize("module,args,operation", [
    (dra_node_drain, {"node": "n1", "wait": False}, "drain"),
    (dra_device_taint, {"driver": "gpu.example.com", "wait": False}, "operation"),
    (dra_device_remediation, {"wait": False}, "remediation"),
], ids=["drain", "device_taint", "remediation"])
def test_since_before_the_epoch_is_refused_with_one_message_before_any_request(capsys, module, args, operation):
    failed = run(module, capsys, dict(args, since=-5, kubeconfig="/nonexistent/kubeconfig"), expect_failure=True)
    assert waits.since_error({"since": -5}, operation) in failed["msg"], failed["msg"]
    assert failed.get("api_requests", 0) == 0 and failed["changed"] is False
    assert waits.since_error({"since": None}, operation) is None and waits.since_error({"since": 0}, "x") is None


def test_endpoint_modules_refuse_bad_timeouts_and_intervals(capsys):
    failed = run(component_metrics_info, capsys, {"url": "https://127.0.0.1:1/metrics", "timeout": float("nan")})
    assert failed["failed"] is True and failed["msg"].startswith("timeout must be a finite number")
    failed = run(dra_metrics_advice, capsys, {"prometheus_url": "http://127.0.0.1:1", "interval": -1})
    assert failed["failed"] is True and failed["msg"].startswith("interval must be a finite number")


# --- Kubernetes names, and the drain's inputs ----------------------------------------------------------

@pytest.mark.parametrize("key", [DEFAULT_EXCLUSION_LABEL, "excluded", "example.com/a_b.c-d", "a" * 63,
                                 "x.example.com/" + "n" * 63])
def test_label_keys_kubernetes_accepts(key):
    assert exclusion_label_error(key) is None


@pytest.mark.parametrize("key", ["", "dra.admin/", "/name", "Dra.Admin/x", "dra admin/x", "a/b/c", "-x", "x-",
                                 "a" * 64, "example.com/" + "n" * 64, "%s/x" % ("a" * 254), "dra.admin/excluded=true"])
def test_label_keys_kubernetes_refuses_are_refused_naming_the_option(key):
    error = exclusion_label_error(key)
    assert error and error.startswith("exclusion_label %r" % key) and DEFAULT_EXCLUSION_LABEL in error


def test_object_refs_and_label_maps():
    assert k8s_names.object_ref_error("driver_daemonsets", "dra-system/gpu-driver") is None
    assert "must be namespace/name" in k8s_names.object_ref_error("driver_daemonsets", "gpu-driver")
    assert "namespace" in k8s_names.object_ref_error("driver_daemonsets", "Dra_System/gpu-driver")
    assert k8s_names.label_errors("driver_pod_labels", {"app": "gpu-driver"}) == []
    errors = k8s_names.label_errors("driver_pod_labels", {"app": "bad value", "-x": "ok"})
    assert len(errors) == 2


def drain_params(**extra):
    params = dict((name, option.get("default")) for name, option in dra_node_drain.argument_spec().items())
    params.update(node="gpu-node-7")
    params.update(extra)
    return params


@pytest.mark.parametrize("extra,named", [
    ({"exclusion_label": "dra.admin/driver excluded"}, "exclusion_label"),
    ({"exclusion_label": ""}, "exclusion_label"),
    ({"node": "Gpu_Node"}, "node"),
    ({"driver_daemonsets": ["dra-system/"]}, "driver_daemonsets"),
    ({"driver_pod_labels": {"app": "not a value"}}, "driver_pod_labels"),
    ({"drivers": ["GPU"]}, "drivers entry"),
    ({"drivers_not_in_pods": ["gpu example"]}, "drivers_not_in_pods entry"),
    ({"wait_sleep": float("nan")}, "wait_sleep"),
    ({"wait_timeout": -1}, "wait_timeout"),
    ({"grace_period": -1}, "grace_period"),
])
def test_drain_input_errors_name_the_option(extra, named):
    spec = dra_node_drain.argument_spec()
    errors = drain_input_errors(drain_params(**extra), spec)
    assert len(errors) == 1 and named in errors[0], errors


def test_the_defaults_of_the_drain_are_valid():
    assert drain_input_errors(drain_params(), dra_node_drain.argument_spec()) == []


@pytest.mark.parametrize("extra", [{"device": "gpu-0"}, {"device_pool": "gpu-node-7"}])
def test_a_device_or_pool_without_device_driver_is_refused_by_the_argument_spec(capsys, extra):
    failed = run(dra_node_drain, capsys, dict(extra, node="gpu-node-7", kubeconfig="/nonexistent/kubeconfig"))
    assert failed["failed"] is True and "device_driver" in failed["msg"] and "required by" in failed["msg"]


def pod(namespace, name, daemonset=None):
    refs = [{"kind": "DaemonSet", "name": daemonset, "controller": True}] if daemonset else []
    return {"metadata": {"namespace": namespace, "name": name, "ownerReferences": refs}}


def test_a_driver_publishing_for_the_node_without_a_pod_to_take_off_is_left_on_it():
    assert drivers_left_on_node(["gpu.example.com"], []) == ["gpu.example.com"]
    assert drivers_left_on_node(["gpu.example.com"], [], not_in_pods=["gpu.example.com"]) == []
    assert drivers_left_on_node([], []) == []
    assert drivers_left_on_node(["gpu.example.com"], [pod("dra", "p", "gpu")]) == []


def test_fewer_driver_daemonsets_than_publishing_drivers_are_named():
    one = [pod("dra", "a-1", "gpu"), pod("dra", "a-2", "gpu")]
    assert drivers_beyond_daemonsets(["gpu.example.com", "nic.example.com"], one) == [
        "gpu.example.com", "nic.example.com"]
    two = one + [pod("dra", "b-1", "nic")]
    assert drivers_beyond_daemonsets(["gpu.example.com", "nic.example.com"], two) == []
    assert drivers_beyond_daemonsets(["gpu.example.com", "nic.example.com"], one, ["nic.example.com"]) == []


# --- gates given without a version -------------------------------------------------------------------

def test_a_gate_every_release_accepts_passes_without_a_version():
    assert catalog.validate_without_version({"KubeletPodResourcesDynamicResources": True}) == []
    assert catalog.validate_without_version({"KubeletPodResourcesDynamicResources": "TRUE"}) == []
    assert catalog.validate_without_version({"DRAFooBar": None, "DRAAdminAccess": None}) == []
    # DRA's own gate before 1.34 is unknown to 1.38's components: without a version it is not written.
    assert "refused on Kubernetes 1.38" in catalog.validate_without_version({"DynamicResourceAllocation": True})[0]


def test_without_a_version_every_gate_is_accepted_iff_every_catalogued_release_accepts_it():
    """The rule as stated, over every catalogued gate and both values."""
    versions = ["v1.%d" % m for m in catalog.SUPPORTED_MINORS]
    for name in sorted(catalog._GATES):
        for value in (True, False):
            everywhere = all(not catalog.validate_gates(v, {name: value}) for v in versions)
            assert (catalog.validate_without_version({name: value}) == []) == everywhere, (name, value)


@pytest.mark.parametrize("gates,expected", [
    ({"DRAFooBar": True}, "feature gate DRAFooBar is unknown to every Kubernetes release the DRA catalog knows"),
    ({"DynamicResourceAllocation": "yes"}, "'yes' is not a feature gate value: use true or false"),
    ({"DynamicResourceAllocation": 1}, "is not a feature gate value"),
    ({"DynamicResourceAllocation": False}, "DynamicResourceAllocation=false is refused on Kubernetes 1.35-1.38"),
    ({"DRADeviceTaints": True}, "DRADeviceTaints=true is refused on Kubernetes 1.30-1.33"),
    ({"NodeDeclaredFeatures": True}, "is not a DRA gate"),
])
def test_gates_refused_without_a_version(gates, expected):
    errors = catalog.validate_without_version(gates)
    assert len(errors) == 1 and expected in errors[0], errors


def test_resource_api_entries_need_the_version_other_groups_do_not():
    errors = catalog.validate_without_version({}, {"resource.k8s.io/v1": "true"})
    assert len(errors) == 1 and "refused on Kubernetes 1.30-1.33" in errors[0] and "kubernetes_version" in errors[0]
    assert catalog.validate_without_version({}, {"storage.k8s.io/v1beta1": "true"}) == []
    assert catalog.validate_without_version({}, {"resource.k8s.io/v1": None}) == []


# --- the file modules: nothing written, no backup ---------------------------------------------------------

def snapshot(root):
    """Every file under root with its bytes (backups would show up here too)."""
    found = {}
    for folder, _dirs, files in os.walk(str(root)):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, str(root))] = handle.read()
    return found


@pytest.fixture
def host(tmp_path):
    manifests = tmp_path / "etc" / "kubernetes" / "manifests"
    manifests.mkdir(parents=True)
    for name in ("kube-apiserver.yaml", "kube-scheduler.yaml"):
        shutil.copy(os.path.join(KUBEADM, name), str(manifests / name))
    shutil.copy(os.path.join(KUBEADM, "kubelet-config.yaml"), str(tmp_path / "kubelet-config.yaml"))
    (tmp_path / "backups").mkdir()
    return tmp_path


COMPONENT_FLAGS_BAD = [
    ({"feature_gates": {"DRAFooBar": True}}, "DRAFooBar is unknown to every Kubernetes release"),
    ({"feature_gates": {"DynamicResourceAllocation": "yes"}}, "'yes' is not a feature gate value"),
    ({"feature_gates": {"DRADeviceTaints": True}}, "give kubernetes_version"),
    ({"feature_gates": {"DynamicResourceAllocation": False}}, "locked to true"),
    ({"runtime_config": {"resource.k8s.io/v1beta2": "true"}}, "refused on Kubernetes 1.30-1.32"),
    ({"runtime_config": {"resource.k8s.io/v1": "yes"}}, "the value must be true or false"),
    ({"feature_gates": {"DRAFooBar": True}, "kubernetes_version": "v1.37.2"}, "DRAFooBar is unknown"),
    ({"set_flags": {"kube-api-qps": "nan"}}, "kube-api-qps"),
    ({"enable_dra": True}, "enable_dra needs kubernetes_version"),
]


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
@pytest.mark.parametrize("args,expected", COMPONENT_FLAGS_BAD, ids=[str(i) for i in range(len(COMPONENT_FLAGS_BAD))])
def test_component_flags_bad_input_writes_nothing(capsys, host, args, expected, check_mode):
    before = snapshot(host)
    manifest = host / "etc" / "kubernetes" / "manifests" / "kube-apiserver.yaml"
    failed = run(component_flags, capsys, dict(args, path=str(manifest), backup_dir=str(host / "backups")),
                 check_mode=check_mode)
    assert failed["failed"] is True and failed["changed"] is False
    assert expected in failed["msg"], failed["msg"]
    assert snapshot(host) == before, "bytes changed or a backup appeared"


KUBELET_CONFIG_BAD = [
    ({"feature_gates": {"DRAFooBar": True}}, "DRAFooBar is unknown to every Kubernetes release"),
    ({"feature_gates": {"DynamicResourceAllocation": "yes"}}, "'yes' is not a feature gate value"),
    ({"merge": {"featureGates": {"ResourceHealthStatus": True}}}, "ResourceHealthStatus=true is refused"),
    ({"merge": {"featureGates": "DRADeviceTaints=true"}}, "merge.featureGates must be a mapping"),
    ({"merge": {"kubeAPIQPS": -1}}, "kubeAPIQPS"),
    ({"feature_gates": {"DRAAdminAccess": False}, "kubernetes_version": "v1.37.2"}, "locked to true"),
]


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
@pytest.mark.parametrize("args,expected", KUBELET_CONFIG_BAD, ids=[str(i) for i in range(len(KUBELET_CONFIG_BAD))])
def test_kubelet_config_bad_input_writes_nothing(capsys, host, args, expected, check_mode):
    before = snapshot(host)
    failed = run(kubelet_config, capsys, dict(args, path=str(host / "kubelet-config.yaml"),
                                              backup_dir=str(host / "backups")), check_mode=check_mode)
    assert failed["failed"] is True and failed["changed"] is False
    assert expected in failed["msg"], failed["msg"]
    assert snapshot(host) == before, "bytes changed or a backup appeared"


def test_a_good_gate_without_a_version_is_still_written(capsys, host):
    """The refusals above are not the module refusing everything: the one gate every release accepts goes in."""
    manifest = host / "etc" / "kubernetes" / "manifests" / "kube-scheduler.yaml"
    done = run(component_flags, capsys, {"path": str(manifest), "backup_dir": str(host / "backups"),
                                         "feature_gates": {"KubeletPodResourcesDynamicResources": True}})
    assert done["changed"] is True and done["feature_gates"] == {"KubeletPodResourcesDynamicResources": "true"}
    assert len(os.listdir(str(host / "backups"))) == 1


def test_driver_plan_refuses_an_exclusion_label_kubernetes_would_refuse(capsys):
    from ansible_collections.dra.admin.plugins.modules import dra_driver_plan_info
    failed = run(dra_driver_plan_info, capsys, {"driver": "gpu.example.com", "exclusion_label": "dra.admin/driver excluded",
                                                "kubeconfig": "/nonexistent/kubeconfig"})
    assert failed["failed"] is True and failed["problems"] == [exclusion_label_error("dra.admin/driver excluded")]


@pytest.mark.parametrize("flag,value,refused", [
    ("feature-gates", "yes", True), ("feature-gates", "True", False), ("feature-gates", False, False),
    ("runtime-config", "on", True), ("runtime-config", "false", False), ("feature-gates", None, False),
    ("audit-log-maxage", "7", False),
])
def test_kubeadm_config_map_flags_take_true_or_false_only(flag, value, refused):
    from ansible_collections.dra.admin.plugins.module_utils.control_plane.kubeadm_config import ManifestError, normalize_args
    request = {"kube-apiserver": {flag: {"Entry": value}}}
    if refused:
        with pytest.raises(ManifestError, match=r"extra_args.kube-apiserver.%s: Entry=" % flag):
            normalize_args(request)
    else:
        normalize_args(request)
