"""Role dra.admin.driver on the real cluster: template and Helm installs, upgrades, fallbacks, bad input.

KWOK runs the DaemonSet pods without containers; `HostPlugins` plays the container runtime:
for every Running pod of the driver's DaemonSet it starts the real dra-example-kubeletplugin on
the host with that pod's node name and UID (as the downward API would give it), and stops it when
the pod goes. Those processes publish the ResourceSlices the role waits for.

A pod whose plugin container drops every capability gets a process without any (setpriv: empty bounding,
inheritable and ambient sets, no_new_privs), and the kubelet plugins directory it is given belongs to another
user, so that only the driver's own directory in it (what the pod mounts) is writable: the example driver
publishing its slices that way is the proof that it needs no more.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import pytest
import yaml

from api_recorder import ApiRecorder
from cluster_harness import recap
from conftest import ROOT
from dra_objects import EXCLUSION_LABEL

sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402

EXCLUSION = EXCLUSION_LABEL
IMAGE = "registry.invalid/dra-example-driver"
OLD_KUBELET = "v1.32.9"
CHART = os.path.join(ROOT, "tests", "charts", "dra-example-driver")


def plugin_binary():
    versions = clusterlib.load_versions()
    return clusterlib.component_bin("dra-example-driver", versions["DRA_EXAMPLE_DRIVER_VERSION"],
                                    "dra-example-kubeletplugin")


def helm_binary():
    versions = clusterlib.load_versions()
    return clusterlib.component_bin("helm", versions["HELM_VERSION"], "helm")


class HostPlugins:
    """The example driver's kubelet plugin on the host, one process per Running DaemonSet pod."""

    def __init__(self, cluster, driver, namespace, skip_nodes=()):
        self.cluster, self.driver, self.namespace = cluster, driver, namespace
        # Unix socket paths are limited to 108 bytes: keep the directories short.
        self.workdir = tempfile.mkdtemp(prefix="drv", dir="/tmp")
        self.node_dirs = {}
        self.skip_nodes = set(skip_nodes)
        self.processes = {}  # pod uid -> (node, Popen)
        self.started = []  # (node, pod uid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)
        for uid in list(self.processes):
            self._kill(uid)
        self.cluster.kubectl("delete", "resourceslices", "--field-selector", f"spec.driver={self.driver}",
                             check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _pods(self):
        res = self.cluster.kubectl("get", "pods", "-n", self.namespace, "-l", f"dra.admin/driver={self.driver}",
                                   "-o", "json", check=False)
        if res.returncode != 0:
            return []
        items = json.loads(res.stdout)["items"]
        if not items:  # charts label their pods their own way
            res = self.cluster.kubectl("get", "pods", "-n", self.namespace, "-o", "json", check=False)
            items = json.loads(res.stdout)["items"] if res.returncode == 0 else []
        return items

    def _start(self, pod):
        node, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
        base = os.path.join(self.workdir, self.node_dirs.setdefault(node, str(len(self.node_dirs))))
        for sub in ("r", "p", "c"):
            os.makedirs(os.path.join(base, sub), exist_ok=True)
        unprivileged = drops_every_capability(pod)
        if unprivileged:
            # The pod mounts only <plugins>/<driver>: the rest of the plugins directory is not the plugin's to write.
            os.makedirs(os.path.join(base, "p", self.driver), exist_ok=True)
            os.chown(os.path.join(base, "p"), 65534, 65534)
        log = open(os.path.join(base, f"plugin-{uid}.log"), "w")
        command = [plugin_binary(), "--node-name", node, "--driver-name", self.driver, "--pod-uid", uid,
                   "--kubeconfig", self.cluster.kubeconfig, "--cdi-root", os.path.join(base, "c"),
                   "--kubelet-registrar-directory-path", os.path.join(base, "r"),
                   "--kubelet-plugins-directory-path", os.path.join(base, "p"),
                   "--num-devices", "2", "--healthcheck-port", "0", "--metrics-port", "-1"]
        proc = subprocess.Popen(
            (UNPRIVILEGED if unprivileged else []) + command,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[uid] = (node, proc)
        self.started.append((node, uid))

    def _kill(self, uid):
        node, proc = self.processes.pop(uid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _loop(self):
        while not self._stop.is_set():
            try:
                pods = self._pods()
            except Exception:  # a failed poll is retried
                pods = []
            live = {}
            for pod in pods:
                running = pod.get("status", {}).get("phase") == "Running"
                if running and not pod["metadata"].get("deletionTimestamp"):
                    live[pod["metadata"]["uid"]] = pod
            for uid, pod in live.items():
                if uid not in self.processes and pod["spec"]["nodeName"] not in self.skip_nodes:
                    self._start(pod)
            for uid in [u for u in self.processes if u not in live]:
                self._kill(uid)
            self._stop.wait(0.5)


# A process as a container that drops every capability and may not escalate: no capability in any set.
UNPRIVILEGED = ["setpriv", "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--"]


def drops_every_capability(pod):
    context = pod["spec"]["containers"][0].get("securityContext") or {}
    return not context.get("privileged") and "ALL" in (context.get("capabilities") or {}).get("drop", [])


def effective_capabilities(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(line.split()[1] for line in status if line.startswith("CapEff:"))


def set_kubelet(cluster, node, version):
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"nodeInfo": {"kubeletVersion": version}}}))


@pytest.fixture(scope="module")
def nodes(cluster):
    """Every node reports the cluster's kubelet version (KWOK reports kwok-<version>); restored after."""
    def settled():
        found = cluster.get_json("nodes")["items"]
        # A new node carries node.kubernetes.io/not-ready:NoSchedule until the node controller sees it
        # Ready; DaemonSet pods do not tolerate it, so wait as the DaemonSet controller would.
        return found if not any(t["key"].startswith("node.kubernetes.io/") for n in found
                                for t in n["spec"].get("taints", [])) else None
    items = cluster.wait_until(settled, 120, "node controller to remove the not-ready taints")
    before = {n["metadata"]["name"]: n["status"]["nodeInfo"]["kubeletVersion"] for n in items}
    for name in before:
        set_kubelet(cluster, name, cluster.version)
    yield sorted(before)
    for name, version in before.items():
        set_kubelet(cluster, name, version)


@pytest.fixture
def driver_ns(cluster, request):
    name = ("it-drv-" + request.node.name.split("[")[0].replace("test_", "").replace("_", "-"))[:50].rstrip("-")
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def role_vars(driver, namespace, **extra):
    base = {"dra_driver_name": driver, "dra_driver_namespace": namespace, "dra_driver_image": f"{IMAGE}:v1",
            "dra_driver_command": ["dra-example-kubeletplugin"], "dra_driver_termination_grace_period": 2,
            "dra_driver_health_port": 51515, "dra_driver_container_ports": [{"name": "metrics", "containerPort": 8080}],
            "dra_driver_wait_timeout": 90, "dra_driver_poll_interval": 1}
    base.update(extra)
    return base


def run_role(cluster, tmp_path, extra_vars, check=False, verbose=False):
    return cluster.run_role("dra.admin.driver", tmp_path, extra_vars, check, verbose)


def daemonset(cluster, namespace, name):
    return cluster.get_json("daemonset", "-n", namespace, name)


def slices_by_node(cluster, driver):
    items = cluster.get_json("resourceslices", "--field-selector", f"spec.driver={driver}")["items"]
    return sorted({s["spec"]["nodeName"] for s in items})


def assert_spec(ds, port, strategy):
    spec = ds["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["livenessProbe"]["grpc"] == {"port": port, "service": "liveness"}
    assert container["startupProbe"]["grpc"] == {"port": port, "service": "liveness"}
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == strategy
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms and all({"key": EXCLUSION, "operator": "DoesNotExist"} in t["matchExpressions"] for t in terms)
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert paths["plugins"] == "/var/lib/kubelet/plugins/" + ds["metadata"]["labels"]["dra.admin/driver"]
    assert paths["plugins-registry"] == "/var/lib/kubelet/plugins_registry"


def pods_per_node_over_time(recorder, namespace):
    """Largest number of pods of the namespace that existed at once on one node, per node."""
    alive, peak = {}, {}
    for _stamp, kind, event_type, key, obj in recorder.events:
        if kind != "pod" or not key.startswith(namespace + "/"):
            continue
        node = (obj.get("spec") or {}).get("nodeName")
        if event_type == "DELETED":
            alive.pop(key, None)
        elif node:
            alive[key] = node
        for n in set(alive.values()):
            peak[n] = max(peak.get(n, 0), sum(1 for v in alive.values() if v == n))
    return peak


def test_template_install_rollout_slices_idempotency_check_mode(cluster, nodes, driver_ns, tmp_path):
    driver = "it-tmpl.example.com"
    with HostPlugins(cluster, driver, driver_ns) as hosts:
        res = run_role(cluster, tmp_path, role_vars(driver, driver_ns))
        assert res.returncode == 0, res.stdout[-5000:]
        ds = daemonset(cluster, driver_ns, "it-tmpl-example-com-kubeletplugin")
        assert_spec(ds, 51515, {"maxSurge": 1, "maxUnavailable": 0})
        assert ds["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
            "privileged": False, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}
        assert ds["status"]["numberAvailable"] == len(nodes)
        assert slices_by_node(cluster, driver) == nodes
        # Every node's slices came from a plugin without any capability, writing only its own plugin directory.
        assert {effective_capabilities(proc.pid) for _node, proc in hosts.processes.values()} == {"0000000000000000"}
        assert "done: rolled out, every selected node publishes its slices" in res.stdout
        dc = cluster.get_json(f"deviceclasses.{cluster.resource_version}.resource.k8s.io", driver)
        assert dc["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{driver}"'}}]
        role = cluster.get_json("clusterrole", f"dra-kubeletplugin:{driver}")
        assert any("resourceslices" in r["resources"] for r in role["rules"])

        again = run_role(cluster, tmp_path, role_vars(driver, driver_ns))
        assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-4000:]

        generation = ds["metadata"]["generation"]
        planned = run_role(cluster, tmp_path, role_vars(driver, driver_ns, dra_driver_image=f"{IMAGE}:v2"), check=True)
        assert planned.returncode == 0, planned.stdout[-4000:]
        assert recap(planned)["changed"] >= 1
        after = daemonset(cluster, driver_ns, "it-tmpl-example-com-kubeletplugin")
        assert after["metadata"]["generation"] == generation, "check mode changed the DaemonSet"


def test_seamless_upgrade_surges_one_pod_per_node(cluster, nodes, driver_ns, tmp_path):
    """The surge, node by node. Without the handover time (dra_driver_seamless_min_ready_seconds 0): it waits for a
    real kubelet's plugin registration, which KWOK nodes do not have (test_kind_nodes.py's seamless test runs with it
    on real kubelets); here it is shown to be left out of the DaemonSet."""
    driver = "it-surge.example.com"
    no_handover = {"dra_driver_seamless_min_ready_seconds": 0}
    with HostPlugins(cluster, driver, driver_ns) as hosts:
        assert run_role(cluster, tmp_path, role_vars(driver, driver_ns, **no_handover)).returncode == 0
        recorder = ApiRecorder(cluster.kubeconfig)
        recorder.watch_pods(driver_ns)
        try:
            res = run_role(cluster, tmp_path, role_vars(driver, driver_ns, dra_driver_image=f"{IMAGE}:v2",
                                                        **no_handover))
        finally:
            recorder.stop()
        assert res.returncode == 0, res.stdout[-5000:]
        ds = daemonset(cluster, driver_ns, "it-surge-example-com-kubeletplugin")
        assert "minReadySeconds" not in ds["spec"], ds["spec"]
        assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == f"{IMAGE}:v2"
        assert ds["status"]["updatedNumberScheduled"] == len(nodes) == ds["status"]["numberAvailable"]
        peak = pods_per_node_over_time(recorder, driver_ns)
        assert any(v == 2 for v in peak.values()), f"no node had old and new pod at once: {peak}"
        assert max(peak.values()) <= 2
        assert len(hosts.started) == 2 * len(nodes), "each node ran the old and then the new plugin"
        assert slices_by_node(cluster, driver) == nodes


def test_one_old_kubelet_falls_back_with_warning(cluster, nodes, driver_ns, tmp_path):
    driver = "it-old.example.com"
    old = nodes[0]
    set_kubelet(cluster, old, OLD_KUBELET)
    try:
        with HostPlugins(cluster, driver, driver_ns):
            res = run_role(cluster, tmp_path, role_vars(driver, driver_ns, dra_driver_max_unavailable=1))
            assert res.returncode == 0, res.stdout[-5000:]
            output = " ".join((res.stdout + res.stderr).split())  # warnings are wrapped to the terminal width
            assert ("[WARNING]: not using a seamless upgrade: seamless upgrades need kubelet >= 1.33 on every "
                    f"selected node; {old} runs {OLD_KUBELET}; updating with maxSurge 0, maxUnavailable 1") in output
            ds = daemonset(cluster, driver_ns, "it-old-example-com-kubeletplugin")
            assert_spec(ds, 51515, {"maxSurge": 0, "maxUnavailable": 1})

            recorder = ApiRecorder(cluster.kubeconfig)
            recorder.watch_pods(driver_ns)
            try:
                upgraded = run_role(cluster, tmp_path, role_vars(driver, driver_ns, dra_driver_image=f"{IMAGE}:v2"))
            finally:
                recorder.stop()
            assert upgraded.returncode == 0, upgraded.stdout[-5000:]
            peak = pods_per_node_over_time(recorder, driver_ns)
            assert peak and max(peak.values()) == 1, f"a node ran two driver pods without a seamless upgrade: {peak}"
            assert daemonset(cluster, driver_ns, "it-old-example-com-kubeletplugin")["status"][
                "updatedNumberScheduled"] == len(nodes)

        required = run_role(cluster, tmp_path, role_vars("it-required.example.com", driver_ns + "-req",
                                                         dra_driver_seamless_upgrade="required"))
        assert required.returncode != 0
        assert "a seamless upgrade was required" in required.stdout and f"{old} runs {OLD_KUBELET}" in required.stdout
        assert cluster.kubectl("get", "namespace", driver_ns + "-req", check=False).returncode != 0, \
            "something was installed after a failed plan"
    finally:
        set_kubelet(cluster, old, cluster.version)


@pytest.mark.parametrize("bad,message", [
    ({"dra_driver_image": ""}, "image is required with method template"),
    ({"dra_driver_health_port": 70000}, "health_port must be a port number 1-65535, got 70000"),
    ({"dra_driver_health_port": 8080}, "health_port 8080 collides with another container port"),
    ({"dra_driver_node_selector": {"no-such-label": "x"}}, "no node matches the driver's selection"),
    ({"dra_driver_method": "helm"}, "chart_ref is required with method helm"),
    ({"dra_driver_method": "helm", "dra_driver_chart_ref": CHART}, "chart_version is required with method helm"),
    ({"dra_driver_method": "helm", "dra_driver_chart_ref": CHART, "dra_driver_chart_version": "9.9.9"},
     "chart_version 9.9.9 is not the version of the chart at %s (its Chart.yaml says 0.1.0)" % CHART),
])
def test_bad_input_fails_before_installing(cluster, nodes, driver_ns, tmp_path, bad, message):
    res = run_role(cluster, tmp_path, role_vars("it-bad.example.com", driver_ns, **bad))
    assert res.returncode != 0
    assert message in res.stdout, res.stdout[-3000:]
    assert "nothing was installed" in res.stdout
    assert cluster.kubectl("get", "namespace", driver_ns, check=False).returncode != 0
    assert cluster.kubectl("get", "clusterrole", "dra-kubeletplugin:it-bad.example.com", check=False).returncode != 0


def test_wait_fails_naming_the_node_without_slices(cluster, nodes, driver_ns, tmp_path):
    driver = "it-missing.example.com"
    silent = nodes[-1]
    with HostPlugins(cluster, driver, driver_ns, skip_nodes=[silent]):
        res = run_role(cluster, tmp_path, role_vars(driver, driver_ns, dra_driver_wait_timeout=15))
    assert res.returncode != 0
    assert f"nodes without complete ResourceSlices of {driver}: {silent}." in res.stdout, res.stdout[-3000:]
    assert f"(waiting for {silent})" in res.stdout, "progress was not printed"


SECRET_VALUE = "s3cr3t-value-of-the-chart"


def test_helm_chart_install_and_upgrade(cluster, nodes, driver_ns, tmp_path):
    helm = helm_binary()
    assert os.access(helm, os.X_OK), f"helm not built at {helm}: run hack/cluster/build"
    driver = "it-helm.example.com"
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    # A chart that renders differently each time: only when Helm applies the rendering the role checked does the
    # cluster hold the value of that rendering.
    (chart / "templates" / "rendered.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: it-helm-rendered\n  namespace: {{ .Release.Namespace }}\n"
        "data:\n  rendering: {{ randAlphaNum 24 | quote }}\n")
    # The role's helm, recording every rendering it checks (helm template --validate).
    renderings = tmp_path / "renderings.yaml"
    recording = tmp_path / "helm"
    recording.write_text(
        "#!/bin/sh\n"
        "case \" $* \" in *\" template \"*\" --validate \"*)\n"
        f"  out=$({helm} \"$@\") || exit $?\n"
        f"  printf '%s\\n---\\n' \"$out\" >> {renderings}; printf '%s\\n' \"$out\"; exit 0;;\n"
        "esac\n"
        f"exec {helm} \"$@\"\n")
    recording.chmod(0o755)

    def checked_value():
        """The ConfigMap's value in the last rendering the role checked."""
        found = [d["data"]["rendering"] for d in yaml.safe_load_all(renderings.read_text())
                 if d and d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "it-helm-rendered"]
        return found[-1]

    def live_value():
        return cluster.get_json("configmap", "-n", driver_ns, "it-helm-rendered")["data"]["rendering"]

    settings = {"dra_driver_method": "helm", "dra_driver_chart_ref": str(chart), "dra_driver_helm_binary": str(recording),
                "dra_driver_chart_version": "0.1.0", "dra_driver_health_port": 50515,
                "dra_driver_release_name": "it-helm", "dra_driver_chart_values": {"image": {"tag": "v1"}}}
    other = dict(settings)
    other["dra_driver_chart_kind"] = "other"
    unknown = run_role(cluster, tmp_path, role_vars(driver, driver_ns, **other))
    assert unknown.returncode != 0
    assert "the chart's DaemonSet is not safe to install, nothing was installed" in unknown.stdout
    assert f"{EXCLUSION} DoesNotExist" in unknown.stdout
    assert cluster.kubectl("get", "namespace", driver_ns, check=False).returncode != 0
    with HostPlugins(cluster, driver, driver_ns) as hosts:
        res = run_role(cluster, tmp_path, role_vars(driver, driver_ns, **settings))
        assert res.returncode == 0, res.stdout[-5000:]
        ds = daemonset(cluster, driver_ns, "it-helm-kubeletplugin")
        container = ds["spec"]["template"]["spec"]["containers"][0]
        assert container["livenessProbe"]["grpc"] == {"port": 50515, "service": "liveness"}
        assert {"name": "DRIVER_NAME", "value": driver} in container["env"]
        assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
        terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert all({"key": EXCLUSION, "operator": "DoesNotExist"} in t["matchExpressions"] for t in terms)
        assert slices_by_node(cluster, driver) == nodes
        assert live_value() == checked_value(), "Helm applied another rendering than the one the role checked"
        installed = subprocess.run([helm, "get", "manifest", "it-helm", "-n", driver_ns, "--kubeconfig",
                                    cluster.kubeconfig], capture_output=True, text=True, check=True).stdout
        assert checked_value() in installed

        again = run_role(cluster, tmp_path, role_vars(driver, driver_ns, **settings))
        assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-4000:]

        recorder = ApiRecorder(cluster.kubeconfig)
        recorder.watch_pods(driver_ns)
        try:
            newer = dict(settings)
            newer["dra_driver_chart_values"] = {"image": {"tag": "v2"}, "apiToken": SECRET_VALUE}
            upgraded = run_role(cluster, tmp_path, role_vars(driver, driver_ns, **newer), verbose=True)
        finally:
            recorder.stop()
        assert upgraded.returncode == 0, upgraded.stdout[-5000:]
        assert daemonset(cluster, driver_ns, "it-helm-kubeletplugin")["spec"]["template"]["spec"]["containers"][0][
            "image"].endswith(":v2")
        assert live_value() == checked_value(), "the upgrade applied another rendering than the one checked"
        # What the chart renders and the values it is given may hold secrets: neither is in the -v log.
        assert checked_value() not in upgraded.stdout and SECRET_VALUE not in upgraded.stdout, upgraded.stdout[-3000:]
        peak = pods_per_node_over_time(recorder, driver_ns)
        assert any(v == 2 for v in peak.values()), f"no surge seen: {peak}"
        assert len(hosts.started) == 2 * len(nodes)
    subprocess.run([helm, "uninstall", "it-helm", "-n", driver_ns, "--kubeconfig", cluster.kubeconfig],
                   capture_output=True, check=False)


def test_settings_removed_from_the_variables_leave_the_live_daemonset(cluster, nodes, driver_ns, tmp_path):
    """Server-side apply: a toleration, nodeSelector entry or env entry dropped from the variables is gone
    from the live DaemonSet after the next run (a merge patch kept them); unchanged input changes nothing."""
    driver = "it-ssa.example.com"
    name = "it-ssa-example-com-kubeletplugin"
    kwok = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
    extra = {"dra_driver_wait": False,
             "dra_driver_tolerations": [kwok, {"key": "it.example.com/dedicated", "operator": "Exists",
                                               "effect": "NoSchedule"}],
             "dra_driver_node_selector": {"kubernetes.io/os": "linux"},
             "dra_driver_env": {"IT_EXTRA": "1"}}
    first = run_role(cluster, tmp_path, role_vars(driver, driver_ns, **extra))
    assert first.returncode == 0, first.stdout[-5000:]
    spec = daemonset(cluster, driver_ns, name)["spec"]["template"]["spec"]
    assert spec["tolerations"] == extra["dra_driver_tolerations"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "IT_EXTRA" in [e["name"] for e in spec["containers"][0]["env"]]

    plain = role_vars(driver, driver_ns, dra_driver_wait=False, dra_driver_tolerations=[kwok])
    generation = daemonset(cluster, driver_ns, name)["metadata"]["generation"]
    planned = run_role(cluster, tmp_path, plain, check=True)
    assert planned.returncode == 0 and recap(planned)["changed"] >= 1, planned.stdout[-4000:]
    assert daemonset(cluster, driver_ns, name)["metadata"]["generation"] == generation, "check mode wrote"

    second = run_role(cluster, tmp_path, plain)
    assert second.returncode == 0, second.stdout[-5000:]
    spec = daemonset(cluster, driver_ns, name)["spec"]["template"]["spec"]
    assert spec["tolerations"] == [kwok]
    assert "nodeSelector" not in spec
    assert "IT_EXTRA" not in [e["name"] for e in spec["containers"][0]["env"]]

    again = run_role(cluster, tmp_path, plain)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-4000:]
