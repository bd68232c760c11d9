"""Roles feature_gates and control_plane_tuning on a real kubeadm control plane.

For each release in hack/cluster/versions.env the real kubeadm writes the static Pod
manifests (`init phase certs/kubeconfig/control-plane/etcd --rootfs`) into a scratch root;
the real etcd, kube-apiserver, kube-controller-manager and kube-scheduler are started from
those manifests' command lines and restarted whenever a manifest changes (see
control_plane_helpers.StaticPods, which stands in for the kubelet). The roles run through
ansible-playbook against localhost with their variables pointing at that root and at the
processes started here. One control plane at a time; everything is stopped afterwards.

Real: kubeadm, etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from
upstream. Not real: there is no kubelet and no container; the static Pods are host processes
(re)started by the stand-in, and the roles' kubelet part is switched off
(dra_feature_gates_manage_kubelet: false).
"""
import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest
import yaml

import control_plane_helpers as helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
from kube import Kubectl, wait_for  # noqa: E402

VERSIONS = clusterlib.supported_k8s_versions()
ETCD_VERSION = clusterlib.load_versions()["ETCD_VERSION"]
GATES = clusterlib.catalog()
PORT_NAMES = ("api", "etcd", "etcd_peer", "etcd_metrics", "kcm", "scheduler")
WAIT = 120  # seconds the roles may wait for a component


def dra_extra_gate(version):
    """A DRA gate that is off by default on the release and can be switched on alone (from the catalog)."""
    dra = GATES.gates_for_dra(version)
    for name, info in sorted(GATES.gate_catalog(version).items()):
        wanted = dict(dra, **{name: True})
        if (name.startswith("DRA") and not info["default"] and not info["locked"]
                and not GATES.validate_gates(version, wanted) and not GATES.runtime_config_for_gates(version, wanted)):
            return name
    raise AssertionError("the catalog has no switchable DRA gate for %s" % version)


class ControlPlane:
    def __init__(self, version, base):
        self.version = version
        self.minor = int(version.split(".")[1])
        self.base = base
        self.root = os.path.join(base, "root")
        self.etc = os.path.join(self.root, "etc")  # what the roles may write (etcd's data under var/ is live)
        self.work = os.path.join(base, "work")
        os.makedirs(self.work)
        self.bin_dir = os.path.dirname(clusterlib.component_bin("kubernetes", version, "kubectl"))
        # Components restart many times here: a listening port in the ephemeral range can be taken meanwhile.
        clusterlib.ensure_outside_ephemeral_range(helpers.PORT_RANGE[0], helpers.PORT_RANGE[1],
                                                  "the control-plane test's ports")
        self.ports = dict(zip(PORT_NAMES, helpers.free_ports(len(PORT_NAMES))))
        self.manifests = helpers.generate(os.path.join(self.bin_dir, "kubeadm"), self.root, version, self.ports)
        self.admin_conf = os.path.join(self.root, "etc", "kubernetes", "admin.conf")
        self.super_admin_conf = os.path.join(self.root, "etc", "kubernetes", "super-admin.conf")
        self.backups = os.path.join(self.work, "backups")
        self.scheduler_config = os.path.join(self.root, "etc", "kubernetes", "kube-scheduler-config.yaml")
        binaries = dict((name, os.path.join(self.bin_dir, name))
                        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"))
        binaries["etcd"] = clusterlib.component_bin("etcd", ETCD_VERSION, "etcd")
        self.pods = helpers.StaticPods(self.root, self.work, binaries)
        self.env = dict(os.environ, PATH=os.pathsep.join([self.bin_dir, os.path.dirname(sys.executable),
                                                          os.environ["PATH"]]),
                        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
                        ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
                        K8S_AUTH_KUBECONFIG=self.admin_conf)
        self.env.pop("KUBECONFIG", None)
        self._client = None
        with open(os.path.join(self.base, "inventory.yml"), "w") as handle:
            yaml.safe_dump({"all": {"hosts": {"localhost": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}, handle)

    # ---- the control plane ----
    def kubectl(self, *args, kubeconfig=None):
        return Kubectl(self.admin_conf, self.env, os.path.join(self.bin_dir, "kubectl"), timeout=60).run(
            *args, check=False, kubeconfig=kubeconfig)

    def wait_until(self, probe, timeout, what, interval=0.5):
        return wait_for(probe, timeout, what, interval, retry_on=(),
                        detail=lambda: "apiserver log:\n" + self.pods.log_tail("kube-apiserver"))

    def ready(self):
        return self.kubectl("get", "--raw", "/readyz", kubeconfig=self.super_admin_conf).returncode == 0

    def start(self):
        self.pods.start()
        self.wait_until(self.ready, 120, "kube-apiserver /readyz")
        # What `kubeadm init` does once the API server answers: admin.conf's group gets cluster-admin,
        # and the ClusterConfiguration goes into the kubeadm-config ConfigMap.
        res = self.kubectl("create", "clusterrolebinding", "kubeadm:cluster-admins", "--clusterrole=cluster-admin",
                           "--group=kubeadm:cluster-admins", kubeconfig=self.super_admin_conf)
        assert res.returncode == 0, res.stderr
        res = subprocess.run([os.path.join(self.bin_dir, "kubeadm"), "init", "phase", "upload-config", "kubeadm",
                              "--rootfs", self.root, "--config", "/kubeadm-config.yaml"],
                             capture_output=True, text=True, check=False, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        for component in ("kube-controller-manager", "kube-scheduler"):
            self.wait_until(lambda c=component: self.get(c, "/healthz")[0] == 200, 120, component + " /healthz")
            # /configz is authorized by a SubjectAccessReview to the API server: a component asked before the
            # admin binding above took effect answers 403, and caches that answer for a while.
            self.wait_until(lambda c=component: self.get(c, "/configz")[0] == 200, 120,
                            component + " /configz for the admin client")

    def stop(self):
        self.pods.stop()

    def render_from_kubeadm_config(self):
        """The manifests the real kubeadm renders from the kubeadm-config ConfigMap, as `kubeadm upgrade` would."""
        res = self.kubectl("get", "configmap", "kubeadm-config", "-n", "kube-system", "-o", "json")
        assert res.returncode == 0, res.stderr
        cluster = yaml.safe_load(json.loads(res.stdout)["data"]["ClusterConfiguration"])
        with open(os.path.join(self.root, "kubeadm-config.yaml")) as handle:
            init = next(d for d in yaml.safe_load_all(handle) if d["kind"] == "InitConfiguration")
        root = tempfile.mkdtemp(prefix="render-", dir=self.base)
        with open(os.path.join(root, "kubeadm-config.yaml"), "w") as handle:
            yaml.safe_dump_all([init, cluster], handle, sort_keys=False)
        rendered = {}
        for phase, component in (("controller-manager", "kube-controller-manager"), ("scheduler", "kube-scheduler")):
            res = subprocess.run([os.path.join(self.bin_dir, "kubeadm"), "init", "phase", "control-plane", phase,
                                  "--rootfs", root, "--config", "/kubeadm-config.yaml"],
                                 capture_output=True, text=True, check=False, timeout=120)
            assert res.returncode == 0, res.stdout + res.stderr
            with open(os.path.join(root, "etc", "kubernetes", "manifests", component + ".yaml")) as handle:
                rendered[component] = yaml.safe_load(handle)
        return rendered

    # ---- component endpoints, read with admin.conf's client certificate ----
    def _ssl(self):
        if self._client is None:
            with open(self.admin_conf) as handle:
                user = yaml.safe_load(handle)["users"][0]["user"]
            cert = os.path.join(self.work, "client.crt")
            key = os.path.join(self.work, "client.key")
            for path, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
                with open(path, "wb") as handle:
                    handle.write(base64.b64decode(user[field]))
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.load_cert_chain(cert, key)
            self._client = context
        return self._client

    def port(self, component):
        return {"kube-apiserver": self.ports["api"], "kube-controller-manager": self.ports["kcm"],
                "kube-scheduler": self.ports["scheduler"]}[component]

    def get(self, component, path):
        url = "https://127.0.0.1:%d%s" % (self.port(component), path)
        try:
            with urllib.request.urlopen(url, context=self._ssl(), timeout=10) as response:
                return response.status, response.read().decode()
        except OSError as exc:
            return getattr(exc, "code", 0), str(exc)

    def feature_enabled(self, component):
        status, text = self.get(component, "/metrics")
        assert status == 200, (component, text[:300])
        return dict((name, value == "1") for name, value in
                    re.findall(r'^kubernetes_feature_enabled\{name="([^"]+)",[^}]*\} (\d)', text, re.M))

    def configz_client(self, component):
        status, text = self.get(component, "/configz")
        assert status == 200, (component, text[:300])
        found = re.search(r'"clientConnection":(\{[^{}]*\})', text, re.I)
        assert found, text[:500]
        connection = dict((k.lower(), v) for k, v in json.loads(found.group(1)).items())
        return connection["qps"], connection["burst"]

    # ---- the roles ----
    def role_vars(self):
        endpoints = {"kube-apiserver": {"port": self.ports["api"], "health": "/readyz"},
                     "kube-controller-manager": {"port": self.ports["kcm"], "health": "/healthz"},
                     "kube-scheduler": {"port": self.ports["scheduler"], "health": "/healthz"}}
        common = {"manifest_dir": self.manifests, "ca_file": os.path.join(self.root, "etc", "kubernetes", "pki", "ca.crt"),
                  "pod_log_dir": self.pods.log_dir, "backup_dir": self.backups, "wait_timeout": WAIT,
                  "poll_interval": 1, "endpoint_host": "127.0.0.1"}
        result = dict(("dra_feature_gates_" + k, v) for k, v in common.items())
        result.update(("dra_control_plane_tuning_" + k, v) for k, v in common.items())
        result.update({
            "dra_kubeconfig": self.admin_conf,
            "dra_feature_gates_endpoints": endpoints,
            "dra_feature_gates_manage_kubelet": False,
            "dra_feature_gates_extra": {dra_extra_gate(self.version): True},
            "dra_control_plane_tuning_endpoints": dict((k, v) for k, v in endpoints.items() if k != "kube-apiserver"),
            "dra_control_plane_tuning_scheduler_config": self.scheduler_config,
        })
        return result

    def play(self, tasks, check=False):
        """Run a playbook of `tasks` on localhost, the role variables as play vars; return (rc, json output).

        Play vars rank below include_role vars, so what a role passes to the tasks it includes
        (control_plane_tuning -> the internal role component_restart) is what those tasks see.
        """
        handle, vars_file = tempfile.mkstemp(suffix=".json", dir=self.base)
        with os.fdopen(handle, "w") as out:
            json.dump(self.role_vars(), out)
        handle, playbook = tempfile.mkstemp(suffix=".yml", dir=self.base)
        with os.fdopen(handle, "w") as out:
            yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "vars_files": [vars_file],
                             "tasks": tasks}], out, sort_keys=False)
        cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
               os.path.join(self.base, "inventory.yml"), playbook]
        if check:
            cmd.append("--check")
        res = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=ROOT, check=False, timeout=900)
        try:
            output = json.loads(res.stdout)
        except ValueError:
            raise AssertionError("ansible-playbook gave no JSON (rc %d):\n%s\n%s" % (res.returncode, res.stdout[-3000:],
                                                                                     res.stderr[-3000:]))
        return res.returncode, output

    def roles(self, *names, extra_vars=None, check=False):
        return self.play([{"name": "Role " + name, "ansible.builtin.include_role": {"name": "dra.admin." + name},
                           "vars": extra_vars or {}} for name in names], check)


def stats(output):
    return output["stats"]["localhost"]


def failures(output):
    """Messages of the failed tasks of a playbook run."""
    messages = []
    for play in output["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get("localhost", {})
            if result.get("failed"):
                messages.append("%s: %s" % (task["task"]["name"], result.get("msg")))
    return messages


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def flags_of(argv):
    return dict(item[2:].split("=", 1) for item in argv[1:] if item.startswith("--") and "=" in item)


@pytest.fixture(scope="module", params=VERSIONS)
def cp(request):
    base = tempfile.mkdtemp(prefix="dra-cp-%s-" % request.param)
    plane = ControlPlane(request.param, base)
    started = time.time()
    try:
        plane.start()
        print("\ncontrol plane %s up in %.0fs (ports %s)" % (request.param, time.time() - started, plane.ports))
        yield plane
    finally:
        plane.stop()
        print("\ncontrol plane %s: %.0fs in all" % (request.param, time.time() - started))
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.per_release("gates_for_dra")
def test_feature_gates_switch_dra_on_and_show_on_metrics(cp):
    before = cp.kubectl("get", "deviceclasses")
    dra_gates = GATES.gates_for_dra(cp.version)
    if dra_gates:  # 1.30-1.33: DRA is off until the role switches it on
        assert before.returncode != 0 and "deviceclasses" in before.stderr, before
    else:
        assert before.returncode == 0, before.stderr
    pids = dict((c, cp.pods.pid(c)) for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"))
    extra = dra_extra_gate(cp.version)
    assert cp.feature_enabled("kube-apiserver")[extra] is False

    rc, output = cp.roles("feature_gates")
    assert rc == 0, failures(output)
    assert stats(output)["changed"] > 0

    after = cp.kubectl("get", "deviceclasses")
    assert after.returncode == 0, after.stderr
    wanted = dict(dra_gates, **{extra: True})
    for component, pid in pids.items():
        assert cp.pods.pid(component) not in (None, pid), component + " was not restarted"
        enabled = cp.feature_enabled(component)
        for gate, value in wanted.items():
            assert enabled.get(gate) is value, (component, gate, enabled.get(gate))
        flags = flags_of(cp.pods.cmdline(component))
        assert set("%s=true" % g for g in wanted) <= set(flags["feature-gates"].split(","))
    api_flags = flags_of(cp.pods.cmdline("kube-apiserver"))
    for entry in GATES.runtime_config_for_dra(cp.version):
        assert entry + "=true" in api_flags["runtime-config"].split(",")
    # the kubeadm-config ConfigMap carries the same flags for the next `kubeadm upgrade`
    config = yaml.safe_load(json.loads(cp.kubectl("get", "configmap", "kubeadm-config", "-n", "kube-system",
                                                  "-o", "json").stdout)["data"]["ClusterConfiguration"])
    api_args = dict((a["name"], a["value"]) for a in config["apiServer"]["extraArgs"])
    assert "%s=true" % extra in api_args["feature-gates"].split(",")


def test_control_plane_tuning_reaches_the_running_processes(cp):
    assert cp.configz_client("kube-controller-manager") == (20, 30)  # built-in defaults before
    assert cp.configz_client("kube-scheduler") == (50, 100)
    with open(os.path.join(cp.manifests, "kube-scheduler.yaml")) as handle:
        assert "--config" not in handle.read()  # kubeadm made no scheduler config file
    pids = dict((c, cp.pods.pid(c)) for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"))

    rc, output = cp.roles("control_plane_tuning")
    assert rc == 0, failures(output)
    assert stats(output)["changed"] > 0

    assert cp.pods.pid("kube-apiserver") == pids["kube-apiserver"]
    assert cp.pods.pid("kube-controller-manager") != pids["kube-controller-manager"]
    assert cp.pods.pid("kube-scheduler") != pids["kube-scheduler"]
    # kube-controller-manager: the flags of the running process, and the values it parsed
    kcm_flags = flags_of(cp.pods.cmdline("kube-controller-manager"))
    assert (kcm_flags["kube-api-qps"], kcm_flags["kube-api-burst"]) == ("75", "150")
    assert cp.configz_client("kube-controller-manager") == (75, 150)
    # kube-scheduler: the created file, --config and its mount, and the values the process loaded
    with open(cp.scheduler_config) as handle:
        config = yaml.safe_load(handle)
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["clientConnection"] == {"qps": 75, "burst": 150, "kubeconfig": "/etc/kubernetes/scheduler.conf"}
    with open(os.path.join(cp.manifests, "kube-scheduler.yaml")) as handle:
        manifest = yaml.safe_load(handle)
    container = manifest["spec"]["containers"][0]
    assert "--config=%s" % cp.scheduler_config in container["command"]
    mounts = dict((m["name"], m) for m in container["volumeMounts"])
    volumes = dict((v["name"], v) for v in manifest["spec"]["volumes"])
    assert mounts["kube-scheduler-config"] == {"mountPath": cp.scheduler_config, "name": "kube-scheduler-config",
                                               "readOnly": True}
    assert volumes["kube-scheduler-config"]["hostPath"] == {"path": cp.scheduler_config, "type": "File"}
    assert cp.configz_client("kube-scheduler") == (75, 150)
    # the scheduler still works with the kubeconfig taken over into its file: it holds the leader lease
    lease = cp.kubectl("get", "lease", "kube-scheduler", "-n", "kube-system", "-o", "jsonpath={.spec.renewTime}")
    assert lease.returncode == 0 and lease.stdout, lease.stderr
    # kubeadm-config carries the tuning: what the real kubeadm renders from it (as an upgrade would) keeps it
    rendered = cp.render_from_kubeadm_config()
    kcm = rendered["kube-controller-manager"]["spec"]["containers"][0]
    assert (flags_of(kcm["command"])["kube-api-qps"], flags_of(kcm["command"])["kube-api-burst"]) == ("75", "150")
    scheduler = rendered["kube-scheduler"]["spec"]["containers"][0]
    assert "--config=%s" % cp.scheduler_config in scheduler["command"]
    assert [m for m in scheduler["volumeMounts"] if m["mountPath"] == cp.scheduler_config] == [
        {"mountPath": cp.scheduler_config, "name": "kube-scheduler-config", "readOnly": True}]
    volumes = dict((v["name"], v) for v in rendered["kube-scheduler"]["spec"]["volumes"])
    assert volumes["kube-scheduler-config"]["hostPath"] == {"path": cp.scheduler_config, "type": "File"}


def test_second_run_changes_nothing(cp):
    files = helpers.snapshot(cp.etc)
    pids = dict((c, cp.pods.pid(c)) for c in helpers.COMPONENTS)
    rc, output = cp.roles("feature_gates", "control_plane_tuning")
    assert rc == 0, failures(output)
    assert stats(output)["changed"] == 0, [t["task"]["name"] for p in output["plays"] for t in p["tasks"]
                                           if t["hosts"].get("localhost", {}).get("changed")]
    assert helpers.snapshot(cp.etc) == files
    assert dict((c, cp.pods.pid(c)) for c in helpers.COMPONENTS) == pids


@pytest.mark.per_release("device_taint_rule_support", key="gates")
def test_check_mode_changes_no_file(cp):
    files = helpers.snapshot(cp.etc, cp.backups)
    pids = dict((c, cp.pods.pid(c)) for c in helpers.COMPONENTS)
    other = {"dra_control_plane_tuning_controller_manager_qps": 80,
             "dra_control_plane_tuning_controller_manager_burst": 160,
             "dra_control_plane_tuning_scheduler_qps": 90, "dra_control_plane_tuning_scheduler_burst": 180,
             "dra_feature_gates_extra": {dra_extra_gate(cp.version): False},
             "dra_feature_gates_device_taints": True}
    rc, output = cp.roles("feature_gates", "control_plane_tuning", extra_vars=other, check=True)
    assert rc == 0, failures(output)
    assert stats(output)["changed"] > 0  # there is something it would change ...
    # ... with the DeviceTaintRule API's gates and API version from the catalog (dra_feature_gates_device_taints)
    support = GATES.device_taint_rule_support(cp.version)
    planned = [r for p in output["plays"] for t in p["tasks"]
               if "Check every change against the version catalog" in t["task"]["name"]
               for r in t["hosts"]["localhost"].get("results", []) if r.get("item") == "kube-apiserver"]
    assert planned, [(t["task"]["name"], sorted(t["hosts"].get("localhost", {})))
                     for p in output["plays"] for t in p["tasks"]]
    for gate in support["gates"]:
        assert planned[0]["feature_gates"].get(gate) in (True, "true"), planned[0]["feature_gates"]
    if not support["gates"]:  # on by default (GA from 1.37): the role writes no device-taint gate
        assert not [g for g in planned[0]["feature_gates"] if g.startswith("DRADeviceTaint")], planned[0]
    for entry in support["runtime_config"]:
        assert planned[0]["runtime_config"].get(entry) == "true", planned[0]["runtime_config"]
    assert helpers.snapshot(cp.etc, cp.backups) == files  # ... and nothing was written
    assert dict((c, cp.pods.pid(c)) for c in helpers.COMPONENTS) == pids


def bad_inputs(cp, shape_dir, empty_dir):
    """(name, role, vars, words the message must contain) for every kind of bad input."""
    version = cp.version
    cases = [
        ("unknown gate", "feature_gates", {"dra_feature_gates_extra": {"DRANoSuchGate": True}},
         ["DRANoSuchGate", "check the spelling"]),
        ("unsupported version", "feature_gates", {"dra_feature_gates_kubernetes_version": "v1.29.4"},
         ["v1.29.4", "supported releases are"]),
        ("unsupported version (tuning)", "control_plane_tuning",
         {"dra_control_plane_tuning_kubernetes_version": "v1.29.4"}, ["v1.29.4", "supported releases are"]),
        ("QPS zero", "control_plane_tuning", {"dra_control_plane_tuning_controller_manager_qps": 0},
         ["kube-controller-manager.yaml", "kube-api-qps=0", "greater than 0"]),
        ("QPS negative", "control_plane_tuning", {"dra_control_plane_tuning_scheduler_qps": -5},
         ["kube-scheduler-config.yaml", "clientConnection.qps=-5", "greater than 0"]),
        ("burst below QPS", "control_plane_tuning", {"dra_control_plane_tuning_scheduler_qps": 100,
                                                     "dra_control_plane_tuning_scheduler_burst": 50},
         ["clientConnection.burst=50 is lower than clientConnection.qps=100", "at least 100"]),
        ("burst below QPS (controller-manager)", "control_plane_tuning",
         {"dra_control_plane_tuning_controller_manager_burst": 10},
         ["kube-api-burst=10 is lower than kube-api-qps=75"]),
        ("missing manifest", "control_plane_tuning", {"dra_control_plane_tuning_manifest_dir": empty_dir},
         ["No static Pod manifest for kube-controller-manager, kube-scheduler", empty_dir,
          "dra_control_plane_tuning_manifest_dir"]),
        ("unexpected shape", "control_plane_tuning", {"dra_control_plane_tuning_manifest_dir": shape_dir},
         [os.path.join(shape_dir, "kube-controller-manager.yaml"), "both command and args", "move the flags"]),
    ]
    removed = sorted(GATES.removed_gates(version))
    assert removed, "the catalog knows removed gates on every supported release"
    cases.append(("removed gate", "feature_gates", {"dra_feature_gates_extra": {removed[0]: True}},
                  [removed[0], "was removed in Kubernetes", "remove it"]))
    locked = sorted(n for n, i in GATES.gate_catalog(version).items() if i["locked"])
    if locked:  # no DRA gate is locked before 1.34: there is no wrong value to set there
        info = GATES.gate_info(version, locked[0])
        cases.append(("locked gate", "feature_gates", {"dra_feature_gates_extra": {locked[0]: not info["default"]}},
                      [locked[0], "is locked to %s" % str(info["default"]).lower()]))
    else:
        assert cp.minor < 34
    return cases


def test_bad_input_fails_clearly_and_writes_nothing(cp):
    shape_dir = os.path.join(cp.base, "odd-manifests")
    empty_dir = os.path.join(cp.base, "no-manifests")
    os.makedirs(empty_dir)
    shutil.copytree(cp.manifests, shape_dir)
    path = os.path.join(shape_dir, "kube-controller-manager.yaml")
    with open(path) as handle:
        odd = yaml.safe_load(handle)
    odd["spec"]["containers"][0]["args"] = ["--v=2"]
    with open(path, "w") as handle:
        yaml.safe_dump(odd, handle)
    cases = bad_inputs(cp, shape_dir, empty_dir)
    tasks = []
    for name, role, variables, dummy in cases:
        tasks.append({"name": "Case " + name, "block": [
            {"name": "Run " + role, "ansible.builtin.include_role": {"name": "dra.admin." + role}, "vars": variables},
            {"name": "Record that it passed", "ansible.builtin.set_fact": {
                "bad_input": "{{ bad_input | default({}) | combine({%r: 'NO ERROR'}) }}" % name}},
        ], "rescue": [{"name": "Record the message", "ansible.builtin.set_fact": {
            "bad_input": "{{ bad_input | default({}) | combine({%r: ([ansible_failed_result.msg | default('')] "
                         "+ (ansible_failed_result.results | default([]) | map(attribute='msg', default='') | list))"
                         " | join(' | ')}) }}" % name}}]})
    tasks.append({"name": "Report", "ansible.builtin.debug": {"var": "bad_input"}})
    files = helpers.snapshot(cp.etc, cp.backups, shape_dir)
    pids = dict((c, cp.pods.pid(c)) for c in helpers.COMPONENTS)
    rc, output = cp.play(tasks)
    assert rc == 0, failures(output)
    report = output["plays"][0]["tasks"][-1]["hosts"]["localhost"]["bad_input"]
    problems = []
    for name, dummy, dummy2, words in cases:
        message = report.get(name, "")
        missing = [w for w in words if w not in message]
        if missing:
            problems.append("%s: %r missing from %r" % (name, missing, message[:800]))
    assert not problems, "\n".join(problems)
    assert helpers.snapshot(cp.etc, cp.backups, shape_dir) == files
    assert dict((c, cp.pods.pid(c)) for c in helpers.COMPONENTS) == pids


def test_apiserver_that_does_not_come_back_is_rolled_back_byte_for_byte(cp):
    manifest = os.path.join(cp.manifests, "kube-apiserver.yaml")
    original = read(manifest)
    starts = len(cp.pods.starts)
    bad = {"dra_feature_gates_runtime_config_extra": {"nosuch.example.com/v1": "true"},
           "dra_feature_gates_wait_timeout": 15, "dra_feature_gates_components": ["kube-apiserver"]}
    rc, output = cp.roles("feature_gates", extra_vars=bad)
    assert rc != 0
    message = " ".join(failures(output))
    assert "did not come back" in message and "was put back" in message, message
    assert "is healthy again" in message, message
    assert "nosuch.example.com" in message, message  # the API server's own last log lines
    # the bad command line really ran, then the old one again
    api_starts = [argv for c, dummy, argv in cp.pods.starts[starts:] if c == "kube-apiserver"]
    assert any("nosuch.example.com/v1=true" in flags_of(a).get("runtime-config", "") for a in api_starts)
    assert "nosuch.example.com" not in flags_of(cp.pods.cmdline("kube-apiserver")).get("runtime-config", "")
    assert read(manifest) == original
    cp.wait_until(cp.ready, 60, "kube-apiserver ready after the rollback")
    assert cp.kubectl("get", "deviceclasses").returncode == 0
