"""Real nodes: a kind cluster on podman per pinned Kubernetes version, shared by every real-node test.

`kind_cluster` (in conftest.py) brings up a kind cluster of its own (hack/cluster/kind-up: node images built
here, real kubelets and containerd with CDI) once per session and release, and deletes it afterwards
(hack/cluster/kind-down); `kind_driver` installs the example driver with the collection's driver role.
A test that takes the driver away or changes a node puts it back before it ends.
"""
import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import cluster_harness  # noqa: E402
import kindlib  # noqa: E402
from dra_objects import DRIVER  # noqa: E402
from kube import Kubectl, wait_for  # noqa: E402

VERSIONS = clusterlib.supported_k8s_versions()
DRIVER_NAMESPACE = "dra-system"


def wait_until(probe, timeout, what, interval=1.0):
    """kube.wait_for (the one wait helper of tests, bench and hack/); a failing probe fails at once."""
    return wait_for(probe, timeout, what, interval, retry_on=())


class KindCluster:
    def __init__(self, name, version, workers):
        self.name = name
        self.version = version
        self.versions = clusterlib.load_versions()
        st = clusterlib.cluster_state(name)
        self.kubeconfig = st["kubeconfig"]
        self.nodes = kindlib.node_names(name, workers)
        bin_dir = os.path.dirname(clusterlib.component_bin("kubernetes", version, "kubectl"))
        self.env = kindlib.podman_env(base=dict(
            os.environ, K8S_AUTH_KUBECONFIG=self.kubeconfig, KUBECONFIG=self.kubeconfig,
            PATH=os.pathsep.join([bin_dir, os.path.dirname(sys.executable), os.environ["PATH"]]),
            ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
            ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections")))

    def kubectl(self, *args, stdin=None, check=True):
        return Kubectl(self.kubeconfig, self.env).run(*args, stdin=stdin, check=check)

    def get_json(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, docs):
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def on_node(self, node, *cmd):
        """Run a command inside a node container (as `podman exec`)."""
        return subprocess.run(["podman", "exec", node] + list(cmd), env=self.env, capture_output=True, text=True,
                              check=False)

    @property
    def resource_version(self):
        group = json.loads(self.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
        return group["preferredVersion"]["version"]

    def fresh_namespace(self, name):
        """Create the namespace and wait for its default ServiceAccount (pods are admitted from then on). One of
        that name left by an earlier test (deleted without waiting, or left by a failed test) is deleted and
        waited for first, so one test's leftovers never fail the next."""
        self.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=180s")
        self.kubectl("create", "namespace", name)
        wait_until(lambda: self.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
                   60, f"the default ServiceAccount of {name}")

    def claim_pod(self, name, namespace, command, node=None):
        """A pod of the node images' busybox image using one device through the template claim "one-gpu"."""
        spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "ctr", "image": kindlib.cluster_images(self.versions, self.version)[
                    "local-path-helper"], "imagePullPolicy": "IfNotPresent", "command": command,
                    "resources": {"claims": [{"name": "gpu"}]}}]}
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}

    @staticmethod
    def local_inventory(tmp_path):
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
        return str(inventory)

    def nodes_inventory(self, tmp_path, control_plane=False):
        """An inventory of the cluster's nodes as the collection's playbooks take them: k8s_api (localhost), the
        workers in dra_nodes and, with `control_plane`, the control-plane node in control_plane (podman
        connection)."""
        groups = {"dra_nodes": {"hosts": dict((n, {}) for n in self.nodes[1:])}}
        if control_plane:
            groups["control_plane"] = {"hosts": {self.nodes[0]: {}}}
        inventory = tmp_path / "nodes-inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"children": {
            "k8s_api": {"hosts": {"localhost": {"ansible_connection": "local",
                                                "ansible_python_interpreter": sys.executable}}},
            "kind_nodes": {"vars": {"ansible_connection": "containers.podman.podman",
                                    "ansible_python_interpreter": "/usr/bin/python3", "ansible_become": False},
                           "children": groups}}}}))
        return str(inventory)

    def run_module(self, module, args, tmp_path):
        """One module ad hoc on localhost against the cluster; its result dict (cluster_harness.run_module)."""
        return cluster_harness.run_module(self.env, self.local_inventory(tmp_path), module, args)

    def role_command(self, role, tmp_path, extra_vars):
        """ansible-playbook argv running one role on localhost with extra_vars."""
        playbook = tmp_path / "role.yml"
        playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n  roles:\n    - {role}\n")
        vars_file = tmp_path / "vars.json"
        vars_file.write_text(json.dumps(extra_vars))
        return ["ansible-playbook", "-i", self.local_inventory(tmp_path), str(playbook), "-e", f"@{vars_file}"]

    def run_role(self, role, tmp_path, extra_vars):
        return subprocess.run(self.role_command(role, tmp_path, extra_vars), env=self.env, capture_output=True,
                              text=True, cwd=ROOT, check=False)


def running_pod(c, namespace, name):
    current = c.get_json("pod", name, "-n", namespace)
    return current if current["status"].get("phase") == "Running" else None


def container_environment(c, namespace, pod):
    """The environment a claim pod's container printed (`env | sort`), once it did: (its log, {name: value})."""
    def printed():
        out = c.kubectl("logs", pod, "-n", namespace, check=False).stdout
        return out if "KUBERNETES_NODE_NAME" in out else None

    logs = wait_until(printed, 60, f"the environment of {namespace}/{pod}")
    return logs, dict(line.split("=", 1) for line in logs.splitlines() if "=" in line)


def live_driver_pods(c, node):
    pods = c.get_json("pods", "-n", DRIVER_NAMESPACE, "--field-selector", f"spec.nodeName={node}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def restart_count(pod):
    return sum(s.get("restartCount", 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])


def is_ready(pod):
    return any(cond.get("type") == "Ready" and cond.get("status") == "True"
               for cond in (pod.get("status") or {}).get("conditions") or [])


def node_slices(c, node):
    api = c.resource_version
    return [s for s in c.get_json(f"resourceslices.{api}.resource.k8s.io")["items"]
            if s["spec"].get("nodeName") == node and s["spec"].get("driver") == DRIVER]


def cdi_specs_naming(c, node, uid):
    out = c.on_node(node, "sh", "-c", f"grep -l {uid} /var/run/cdi/* 2>/dev/null || true")
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def role_task_results(c, role, tmp_path, extra_vars):
    """Run one role on localhost with the json callback: (return code, [each task's result for localhost])."""
    env = dict(c.env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    res = subprocess.run(c.role_command(role, tmp_path, extra_vars), env=env, capture_output=True, text=True,
                         cwd=ROOT, check=False)
    try:
        plays = json.loads(res.stdout)["plays"]
    except ValueError:
        raise AssertionError(f"cannot read the output of {role}: rc={res.returncode}\n{res.stdout}\n{res.stderr}")
    return res.returncode, [t["hosts"]["localhost"] for p in plays for t in p["tasks"] if "localhost" in t["hosts"]]


def claim_device(c, namespace, pod):
    """(claim uid, driver, pool, device) of the one device a running claim pod was allocated."""
    api = c.resource_version
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = c.get_json(f"resourceclaims.{api}.resource.k8s.io", name, "-n", namespace)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    return claim["metadata"]["uid"], result["driver"], result["pool"], result["device"]


def device_uuid(c, pool, device):
    """The example driver's `uuid` attribute of one published device (to select exactly it in a claim)."""
    api = c.resource_version
    for s in c.get_json(f"resourceslices.{api}.resource.k8s.io")["items"]:
        if s["spec"].get("driver") == DRIVER and s["spec"]["pool"]["name"] == pool:
            for entry in s["spec"].get("devices") or []:
                if entry["name"] == device:
                    attributes = (entry.get("basic") or entry).get("attributes") or {}
                    return attributes["uuid"]["string"]
    raise AssertionError(f"device {pool}/{device} of {DRIVER} is not published")


def other_tests_pods_on(c, node, own_namespace=None):
    """Pods of earlier tests' namespaces (itk-*, deleted without waiting) still on the node."""
    pods = c.get_json("pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
    return ["%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods
            if p["metadata"]["namespace"].startswith("itk-") and p["metadata"]["namespace"] != own_namespace]


def wait_for_earlier_tests_to_leave(c, node, own_namespace=None):
    """A test that takes the driver or a whole pool off a node starts once the pods earlier tests left there are
    gone: with the driver away they would stay Terminating too and be counted with the test's own; with the pool
    tainted they would be evicted with the test's own."""
    wait_until(lambda: not other_tests_pods_on(c, node, own_namespace), 240, f"earlier tests' pods gone from {node}")
