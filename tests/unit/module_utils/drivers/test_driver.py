"""Driver DaemonSet logic: inputs, node selection, upgrade strategy, manifests, chart values, checks."""
import copy
import os
import subprocess

import pytest

from ansible_collections.dra.admin.plugins.module_utils.drivers import charts
from ansible_collections.dra.admin.plugins.module_utils.drivers import checks
from ansible_collections.dra.admin.plugins.module_utils.drivers import inputs
from ansible_collections.dra.admin.plugins.module_utils.drivers import manifests
from ansible_collections.dra.admin.plugins.module_utils.drivers import nodes as driver_nodes
from ansible_collections.dra.admin.plugins.module_utils.drivers import upgrade
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import (
    DEFAULT_EXCLUSION_LABEL, daemonset_excludes as excludes_label, with_exclusion,
)

EXCL = DEFAULT_EXCLUSION_LABEL
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def node(name, labels=None, kubelet="v1.36.3", taints=None, unschedulable=False):
    return {"metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
            "spec": {"taints": taints if taints is not None else [KWOK_TAINT], "unschedulable": unschedulable},
            "status": {"nodeInfo": {"kubeletVersion": kubelet}}}


def params(**extra):
    base = {"driver": "gpu.example.com", "method": "template", "namespace": "dra-system",
            "daemonset_name": "gpu-example-com-kubeletplugin", "image": "registry.example/driver:v1",
            "image_pull_policy": "IfNotPresent", "command": ["dra-example-kubeletplugin"], "args": ["-v", "4"],
            "env": {"NUM_DEVICES": 4}, "health_port": 51515,
            "container_ports": [{"name": "metrics", "containerPort": 8080}],
            "plugin_dir": "/var/lib/kubelet/plugins", "registrar_dir": "/var/lib/kubelet/plugins_registry",
            "cdi_dir": "/var/run/cdi", "privileged": False, "capabilities": [], "resources": {}, "priority_class": "system-node-critical",
            "service_account": "gpu-example-com-kubeletplugin", "termination_grace_period": 30,
            "node_selector": {}, "node_affinity": [], "tolerations": [KWOK_TOLERATION],
            "exclusion_label": EXCL, "seamless_upgrade": "auto", "max_unavailable": 1}
    base.update(extra)
    return base


# --- inputs -------------------------------------------------------------------------------

@pytest.mark.parametrize("port", [0, 65536, -1, "abc", "51515x", None, True, 1.5])
def test_invalid_health_port_is_refused(port):
    problems = inputs.validate_inputs(params(health_port=port))
    assert any("health_port must be a port number 1-65535" in p for p in problems), problems


@pytest.mark.parametrize("port", [1, 65535, "51515", 8081])
def test_valid_health_ports_pass(port):
    assert inputs.validate_inputs(params(health_port=port)) == []


def test_a_socket_path_the_kubelet_refuses_is_refused_before_anything_is_planned():
    """The kubeletplugin helper's socket: <plugin_dir>/<driver>/dra.sock, dra-<pod UID>.sock in a seamless upgrade;
    1.38's kubelet refuses an endpoint of 108 bytes or more (and Linux binds none)."""
    driver = "a" * 30 + ".example.com"  # 42 characters: dra.sock fits, the seamless upgrade's socket does not
    assert inputs.validate_inputs(params(driver=driver, seamless_upgrade="disabled")) == []
    problems = inputs.validate_inputs(params(driver=driver))
    assert len(problems) == 1 and "seamless upgrade socket 113 bytes long" in problems[0], problems
    assert "shorter than 108 bytes" in problems[0] and "seamless_upgrade: disabled" in problems[0]
    long_dir = "/" + "d" * 90
    problems = inputs.validate_inputs(params(plugin_dir=long_dir, seamless_upgrade="disabled"))
    assert problems == ["plugin_dir %r and driver 'gpu.example.com' make the plugin's socket 116 bytes long "
                        "(%s/gpu.example.com/dra.sock): a Unix socket path must be shorter than 108 bytes (Linux "
                        "cannot bind a longer one, and from Kubernetes 1.38 the kubelet refuses it at registration); "
                        "use a shorter plugin_dir" % (long_dir, long_dir)]


def test_health_port_colliding_with_another_container_port():
    problems = inputs.validate_inputs(params(health_port=8080))
    assert problems == ["health_port 8080 collides with another container port of the driver (8080): pick a free "
                        "port for the gRPC health service"]


def test_missing_image_or_chart_named():
    assert any("image is required with method template" in p for p in inputs.validate_inputs(params(image="")))
    assert any("chart_ref is required with method helm" in p
               for p in inputs.validate_inputs(params(method="helm", image="", chart_ref=None)))
    assert inputs.validate_inputs(params(method="helm", image="", chart_ref="./charts/x", chart_version="0.1.0")) == []


def test_every_problem_is_reported_at_once():
    problems = inputs.validate_inputs(params(image="", health_port=0, max_unavailable=0, env={"POD_UID": "x"},
                                             plugin_dir="relative", driver="Not_A_Driver"))
    assert len(problems) == 6, problems
    assert any("POD_UID" in p for p in problems)
    assert any("max_unavailable" in p for p in problems)
    assert any("plugin_dir must be an absolute host path" in p for p in problems)


@pytest.mark.parametrize("value,ok", [(1, True), ("2", True), ("25%", True), ("100%", True), (0, False),
                                      ("0%", False), ("101%", False), ("x", False), (True, False)])
def test_max_unavailable(value, ok):
    assert (upgrade.max_unavailable_problem(value) is None) is ok


def test_default_daemonset_name_is_a_valid_name():
    assert inputs.default_daemonset_name("gpu.example.com") == "gpu-example-com-kubeletplugin"
    assert inputs.validate_inputs(params(daemonset_name=inputs.default_daemonset_name("a" * 63))) == []


# --- selection ----------------------------------------------------------------------------

def test_exclusion_label_is_added_to_every_term():
    terms = [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a"]}]},
             {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b"]}]}]
    original = copy.deepcopy(terms)
    result = with_exclusion(terms, EXCL)
    assert terms == original, "input must not be modified"
    assert len(result) == 2
    for term in result:
        assert {"key": EXCL, "operator": "DoesNotExist"} in term["matchExpressions"]
    assert with_exclusion([], EXCL) == [{"matchExpressions": [{"key": EXCL, "operator": "DoesNotExist"}]}]
    assert with_exclusion(result, EXCL) == result, "adding twice must not duplicate"


def test_select_nodes_follows_selector_affinity_taints_and_exclusion():
    nodes = [node("a", {"gpu": "yes"}), node("b", {"gpu": "yes", EXCL: "true"}), node("c"),
             node("d", {"gpu": "yes"}, taints=[{"key": "dedicated", "value": "x", "effect": "NoExecute"}]),
             node("e", {"gpu": "yes"}, unschedulable=True,
                  taints=[KWOK_TAINT, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])]
    terms = with_exclusion([], EXCL)
    selected, excluded = driver_nodes.select_nodes(nodes, {"gpu": "yes"}, terms, [KWOK_TOLERATION])
    assert selected == ["a", "e"], "cordoned nodes keep their DaemonSet pods"
    assert "exclusion" in excluded["b"] and "nodeSelector gpu=yes" in excluded["c"]
    assert excluded["d"] == "node taint dedicated=x:NoExecute not tolerated"


# --- strategy -----------------------------------------------------------------------------

def test_seamless_when_every_kubelet_is_new_enough():
    result = upgrade.decide_strategy([node("a", kubelet="v1.33.0"), node("b", kubelet="v1.36.3")])
    assert result["seamless"] is True and result["warning"] is None
    assert result["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_one_old_kubelet_falls_back_with_a_warning_naming_it():
    result = upgrade.decide_strategy([node("a"), node("old", kubelet="v1.32.9")], max_unavailable="25%")
    assert result["seamless"] is False
    assert result["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}}
    assert "old runs v1.32.9" in result["warning"] and "kubelet >= 1.33" in result["warning"]


def test_unreadable_kubelet_version_counts_as_old():
    result = upgrade.decide_strategy([node("a", kubelet="kwok-v0.8.0")])
    assert not result["seamless"] and "a runs kwok-v0.8.0" in result["warning"]


def test_required_seamless_with_old_kubelet_is_an_error():
    with pytest.raises(upgrade.SeamlessUpgradeError) as err:
        upgrade.decide_strategy([node("a"), node("b", kubelet="v1.31.1")], mode="required")
    assert "b runs v1.31.1" in str(err.value) and "seamless_upgrade=auto" in str(err.value)


def test_driver_without_support_falls_back_or_fails_when_required():
    result = upgrade.decide_strategy([node("a")], driver_supports=False, max_unavailable=2)
    assert result["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 2}
    assert "does not support seamless upgrades" in result["warning"]
    with pytest.raises(upgrade.SeamlessUpgradeError):
        upgrade.decide_strategy([node("a")], mode="required", driver_supports=False)


def test_disabled_uses_max_unavailable_without_warning():
    result = upgrade.decide_strategy([node("a")], mode="disabled", max_unavailable=3)
    assert result["warning"] is None and result["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 3}


def test_only_a_seamless_update_waits_for_the_new_plugin_before_the_old_one_stops():
    assert upgrade.decide_strategy([node("a")])["min_ready_seconds"] == upgrade.DEFAULT_HANDOVER_SECONDS == 5
    assert upgrade.decide_strategy([node("a")], handover_seconds=12)["min_ready_seconds"] == 12
    assert upgrade.decide_strategy([node("a")], handover_seconds=0)["min_ready_seconds"] == 0
    # Without a surge there is no old plugin beside the new one to wait for.
    assert upgrade.decide_strategy([node("a", kubelet="v1.32.9")], handover_seconds=12)["min_ready_seconds"] == 0
    assert upgrade.decide_strategy([node("a")], mode="disabled")["min_ready_seconds"] == 0


@pytest.mark.parametrize("value", [0, 5, 300, "7"])
def test_usable_handover_times(value):
    assert upgrade.handover_seconds_problem(value) is None


@pytest.mark.parametrize("value", [-1, 301, True, "five", 1.5, None])
def test_unusable_handover_times_are_named_with_their_range(value):
    problem = upgrade.handover_seconds_problem(value)
    assert problem.startswith("seamless_min_ready_seconds must be an integer of seconds from 0 to 300, got %r"
                              % (value,))
    assert problem in inputs.validate_inputs(params(seamless_min_ready_seconds=value))


# --- manifests ----------------------------------------------------------------------------

def test_daemonset_has_probes_paths_downward_env_affinity_and_strategy():
    strategy = upgrade.decide_strategy([node("a")])["strategy"]
    ds = manifests.build_daemonset(params(node_affinity=[
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "accel", "operator": "Exists"}]}]), strategy)
    assert ds["spec"]["updateStrategy"] == strategy
    assert excludes_label(ds, EXCL), "the drain role's check must accept the DaemonSet"
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"] == {"grpc": {"port": 51515, "service": "liveness"}, "periodSeconds": 10,
                                          "failureThreshold": 3, "timeoutSeconds": 5}
    assert container["startupProbe"]["grpc"] == {"port": 51515, "service": "liveness"}
    assert container["startupProbe"]["failureThreshold"] == 600
    env = dict((e["name"], e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"]) for e in container["env"])
    assert env["POD_UID"] == "metadata.uid" and env["NODE_NAME"] == "spec.nodeName"
    assert env["HEALTHCHECK_PORT"] == "51515" and env["NUM_DEVICES"] == "4" and env["DRIVER_NAME"] == "gpu.example.com"
    assert [p["containerPort"] for p in container["ports"]] == [51515, 8080]
    volumes = dict((v["name"], v["hostPath"]["path"]) for v in ds["spec"]["template"]["spec"]["volumes"])
    # Only the driver's own directory of the kubelet's plugins (where its DRA socket is), not the others'.
    assert volumes == {"plugins-registry": "/var/lib/kubelet/plugins_registry",
                       "plugins": "/var/lib/kubelet/plugins/gpu.example.com", "cdi": "/var/run/cdi"}
    mounts = dict((m["name"], m["mountPath"]) for m in container["volumeMounts"])
    assert mounts == volumes
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert checks.check_daemonset(ds, EXCL, [51515], strategy, require_startup=True) == []


def test_daemonset_min_ready_seconds_only_when_there_is_a_handover():
    decision = upgrade.decide_strategy([node("a")])
    ds = manifests.build_daemonset(params(), decision["strategy"], decision["min_ready_seconds"])
    assert ds["spec"]["minReadySeconds"] == 5
    fallback = upgrade.decide_strategy([node("a")], mode="disabled")
    assert "minReadySeconds" not in manifests.build_daemonset(params(), fallback["strategy"],
                                                              fallback["min_ready_seconds"])["spec"]


def test_plugin_container_is_unprivileged_by_default_and_privileged_only_when_asked():
    strategy = upgrade.decide_strategy([node("a")])["strategy"]
    default = manifests.build_daemonset(params(), strategy)["spec"]["template"]["spec"]["containers"][0]
    assert default["securityContext"] == {
        "privileged": False, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}}
    added = manifests.build_daemonset(params(capabilities=["SYS_ADMIN"]), strategy)
    assert added["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"] == {
        "drop": ["ALL"], "add": ["SYS_ADMIN"]}
    privileged = manifests.build_daemonset(params(privileged=True), strategy)
    assert privileged["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {"privileged": True}


@pytest.mark.parametrize("capabilities,privileged,fragment", [
    (["CAP_SYS_ADMIN"], False, "without the CAP_ prefix"),
    (["sys_admin"], False, "upper case"),
    (["SYS_ADMIN"], True, "set privileged: false"),
    ("SYS_ADMIN", False, "must be a list"),
])
def test_capabilities_are_checked(capabilities, privileged, fragment):
    problems = inputs.validate_inputs(params(capabilities=capabilities, privileged=privileged))
    assert any(fragment in p for p in problems), problems


def test_check_daemonset_names_what_is_missing():
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    ds = manifests.build_daemonset(params(), strategy)
    broken = copy.deepcopy(ds)
    spec = broken["spec"]["template"]["spec"]
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].append(
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})
    del spec["containers"][0]["livenessProbe"]
    broken["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    problems = checks.check_daemonset(broken, EXCL, [51515], strategy)
    assert len(problems) == 3
    assert "DoesNotExist" in problems[0] and "livenessProbe on port 51515" in problems[1]
    assert "updateStrategy" in problems[2]


def test_device_classes_match_the_driver_and_add_expressions():
    classes = manifests.build_device_classes("gpu.example.com", [
        {"name": "gpu.example.com"}, {"name": "big-gpu", "expression": "device.capacity['gpu.example.com'].memory"
                                                                       ".compareTo(quantity('40Gi')) >= 0"}], "v1")
    assert [c["metadata"]["name"] for c in classes] == ["gpu.example.com", "big-gpu"]
    assert classes[0]["apiVersion"] == "resource.k8s.io/v1"
    assert classes[0]["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]
    assert len(classes[1]["spec"]["selectors"]) == 2


# --- charts -------------------------------------------------------------------------------

@pytest.mark.parametrize("ref,kind", [
    ("tests/charts/dra-example-driver", "dra-example-driver"),
    ("oci://registry.k8s.io/dra-example-driver/charts/dra-example-driver", "dra-example-driver"),
    ("dra-example-driver-0.4.0.tgz", "dra-example-driver"),
    ("nvidia/nvidia-dra-driver-gpu", "nvidia"),
    ("./something-else", None),
])
def test_chart_kind(ref, kind):
    assert charts.chart_kind(ref) == kind


def test_example_chart_values_overlay_keeps_user_values():
    strategy = upgrade.decide_strategy([node("a")])["strategy"]
    user = {"image": {"tag": "v9"}, "kubeletPlugin": {"numDevices": 2, "containers": {"plugin": {"metricsPort": 9090}}}}
    values, ports = charts.chart_values("dra-example-driver", user, params(health_port=50000,
                                                                           node_selector={"gpu": "yes"}), strategy)
    assert ports == [50000]
    plugin = values["kubeletPlugin"]
    assert plugin["numDevices"] == 2 and plugin["containers"]["plugin"] == {"metricsPort": 9090, "healthcheckPort": 50000}
    assert plugin["updateStrategy"] == strategy and plugin["nodeSelector"] == {"gpu": "yes"}
    assert values["image"] == {"tag": "v9"} and values["driverName"] == "gpu.example.com"
    assert excludes_label({"spec": {"template": {"spec": {"affinity": plugin["affinity"]}}}}, EXCL)


def test_nvidia_overlay_keeps_the_chart_gpu_node_terms_with_exclusion():
    strategy = upgrade.decide_strategy([node("a")], driver_supports=False)["strategy"]
    values, ports = charts.chart_values("nvidia", {}, params(health_port=51516), strategy)
    terms = values["kubeletPlugin"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert len(terms) == 5 and all({"key": EXCL, "operator": "DoesNotExist"} in t["matchExpressions"] for t in terms)
    assert ports == [51516, 51515]
    containers = values["kubeletPlugin"]["containers"]
    assert containers["gpus"]["healthcheckPort"] == 51516 and containers["computeDomains"]["healthcheckPort"] == 51515
    assert "driverName" not in values
    with pytest.raises(inputs.DriverInputError) as err:
        charts.chart_values("nvidia", {}, params(health_port=51515), strategy)
    assert "collides with the health port of another container" in str(err.value)


def test_chart_rendered_against_the_cluster_with_values_on_stdin():
    argv = charts.helm_template_argv("/opt/helm", "gpu", "/charts/dra-example-driver", "dra-system",
                                     version="0.4.0", repo_url="https://charts.example.com",
                                     kubeconfig="/k/config", context="admin@prod")
    prologue = ["/bin/sh", "-c", charts.helm_credentials_script(), "helm-template"]
    assert argv == prologue + [
        "/opt/helm", "template", "gpu", "/charts/dra-example-driver", "--namespace", "dra-system",
        "--values", "-", "--validate", "--version", "0.4.0", "--repo", "https://charts.example.com",
        "--kubeconfig", "/k/config", "--kube-context", "admin@prod"]
    # No helm path: the one on PATH; a kubeconfig given as a dict (kubernetes.core allows it) is not a path.
    bare = charts.helm_template_argv("", "gpu", "oci://r/c", "ns", kubeconfig={"clusters": []})
    assert bare == prologue + ["helm", "template", "gpu", "oci://r/c", "--namespace", "ns", "--values", "-",
                               "--validate"]


def run_prologue(environment):
    """What the argv's shell prologue hands to the program it runs: that program's environment (env -0)."""
    argv = ["/bin/sh", "-c", charts.helm_credentials_script(), "helm-template", "env", "-0"]
    out = subprocess.run(argv, env=environment, capture_output=True, check=True).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if item)


def test_chart_render_gets_the_credentials_awx_injects():
    """AWX's Kubernetes credential sets K8S_AUTH_HOST, _API_KEY, _VERIFY_SSL and _SSL_CA_CERT (no kubeconfig):
    Helm must see them as its own settings, or `helm template --validate` asks localhost:8080."""
    awx = {"PATH": os.environ["PATH"], "K8S_AUTH_HOST": "https://10.0.0.1:6443", "K8S_AUTH_API_KEY": "tok en$1",
           "K8S_AUTH_VERIFY_SSL": "False", "K8S_AUTH_SSL_CA_CERT": "/run/ca.crt"}
    seen = run_prologue(awx)
    assert seen["HELM_KUBEAPISERVER"] == "https://10.0.0.1:6443" and seen["HELM_KUBETOKEN"] == "tok en$1"
    assert seen["HELM_KUBECAFILE"] == "/run/ca.crt" and seen["HELM_KUBEINSECURE_SKIP_TLS_VERIFY"] == "true"
    assert "KUBECONFIG" not in seen and "HELM_KUBECONTEXT" not in seen
    # A kubeconfig and context from the environment (README: export K8S_AUTH_KUBECONFIG); TLS verified.
    seen = run_prologue({"PATH": os.environ["PATH"], "K8S_AUTH_KUBECONFIG": "/home/u/.kube/config",
                         "K8S_AUTH_CONTEXT": "prod", "K8S_AUTH_VERIFY_SSL": "true"})
    assert seen["KUBECONFIG"] == "/home/u/.kube/config" and seen["HELM_KUBECONTEXT"] == "prod"
    assert "HELM_KUBEINSECURE_SKIP_TLS_VERIFY" not in seen and "HELM_KUBETOKEN" not in seen
    # Nothing set: nothing added.
    assert set(run_prologue({"PATH": os.environ["PATH"]})) <= {"PATH", "PWD", "SHLVL", "_"}
    # The token is in no argv.
    argv = charts.helm_template_argv("helm", "gpu", "oci://r/c", "ns")
    assert not [a for a in argv if "tok" in a]


def test_default_release_name_and_the_charts_own_device_classes():
    assert charts.default_release_name("gpu.example.com") == "gpu-example-com"
    assert charts.default_release_name("GPU_x.example.com") == "-x-example-com"
    rendered = [{"kind": "DeviceClass", "metadata": {"name": "chart.example.com"}},
                {"kind": "DaemonSet", "metadata": {"name": "chart-kubeletplugin"}}, None,
                {"kind": "DeviceClass", "metadata": {}}]
    assert charts.chart_device_class_names(rendered) == ["chart.example.com"]


def test_a_charts_daemonsets_get_the_handover_time_unless_the_chart_set_one():
    rendered = [{"kind": "DaemonSet", "metadata": {"name": "plugin"}, "spec": {}},
                {"kind": "DaemonSet", "metadata": {"name": "own"}, "spec": {"minReadySeconds": 30}},
                {"kind": "DaemonSet", "metadata": {"name": "hook", "annotations": {"helm.sh/hook": "pre-install"}},
                 "spec": {}},
                {"kind": "Deployment", "metadata": {"name": "controller"}, "spec": {}}]
    charts.with_handover(rendered, 5)
    assert [d["spec"].get("minReadySeconds") for d in rendered] == [5, 30, None, None]
    untouched = [{"kind": "DaemonSet", "metadata": {"name": "plugin"}, "spec": {}}]
    assert charts.with_handover(untouched, 0) == [{"kind": "DaemonSet", "metadata": {"name": "plugin"}, "spec": {}}]


def test_unknown_chart_values_untouched():
    user = {"a": {"b": 1}}
    values, ports = charts.chart_values(None, user, params(), {"type": "RollingUpdate"})
    assert values == user and ports == [51515]


# --- rollout ------------------------------------------------------------------------------

def test_rollout_state():
    ds = {"metadata": {"generation": 3}, "status": {"observedGeneration": 3, "desiredNumberScheduled": 3,
                                                    "updatedNumberScheduled": 3, "numberAvailable": 3,
                                                    "numberReady": 3}}
    assert checks.rollout_state(ds)["done"] is True
    ds["status"]["numberAvailable"] = 2
    ds["status"]["numberUnavailable"] = 1
    state = checks.rollout_state(ds)
    assert state["done"] is False and state["text"] == "3/3 pods updated, 2/3 available"
    ds["status"].update(numberAvailable=3, numberUnavailable=0, observedGeneration=2)
    assert checks.rollout_state(ds)["done"] is False


def test_a_secret_in_the_environment_is_carried_by_reference_never_by_value():
    env = {"NUM_DEVICES": 4, "API_TOKEN": {"secretKeyRef": {"name": "gpu-api", "key": "token"}},
           "MODE": {"configMapKeyRef": {"name": "gpu-config", "key": "mode", "optional": True}}}
    assert inputs.validate_inputs(params(env=env)) == []
    strategy = upgrade.decide_strategy([node("a")])["strategy"]
    container = manifests.build_daemonset(params(env=env), strategy)["spec"]["template"]["spec"]["containers"][0]
    by_name = dict((e["name"], e) for e in container["env"])
    assert by_name["API_TOKEN"] == {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gpu-api",
                                                                                        "key": "token"}}}
    assert by_name["MODE"]["valueFrom"]["configMapKeyRef"]["optional"] is True
    assert by_name["NUM_DEVICES"] == {"name": "NUM_DEVICES", "value": "4"}


@pytest.mark.parametrize("value,words", [
    ({"secretRef": {"name": "a", "key": "b"}}, "env.API_TOKEN: ['secretRef'] is not a variable's source"),
    ({"secretKeyRef": {"name": "a"}}, "env.API_TOKEN: secretKeyRef needs a name and a key"),
    ({"secretKeyRef": {"name": "a", "key": "b", "optional": "yes"}}, "secretKeyRef needs a name and a key"),
    ({"secretKeyRef": {"name": "a", "key": "b"}, "configMapKeyRef": {"name": "a", "key": "b"}},
     "is not a variable's source")])
def test_an_environment_source_that_is_not_one_key_is_refused_naming_the_variable(value, words):
    problems = inputs.validate_inputs(params(env={"API_TOKEN": value}))
    assert any(words in p and "secretKeyRef: {name:" in p for p in problems), problems
