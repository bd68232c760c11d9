"""playbooks/upgrade.yml on real nodes (conftest.py's `kind_cluster`, the example driver from `kind_driver`): node
maintenance with verification, the rolling run that a Kubernetes upgrade also takes, watched from outside.

- `--check` prints the plan (each node, the drain preview) and changes nothing;
- the run takes each worker in turn: its claim pod is evicted before its driver pod leaves, the user's node work
  runs while the node is drained, the driver comes back and republishes the same devices before the uncordon;
- a node whose kubelet does not come back (the node work gives it a flag it refuses) stops the run there: the
  message names the node and the kubelet's own error, the node stays drained, the cluster keeps serving, and the
  next run finishes it.

Not part of `make integration` (it needs podman and the kind build): `make integration-kind`.
"""
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
from dra_objects import DRIVER, claim_template  # noqa: E402
import kindlib  # noqa: E402
from kind_nodes import DRIVER_NAMESPACE, is_ready, live_driver_pods, node_slices, wait_until  # noqa: E402

DRIVER_DAEMONSET = f"{DRIVER_NAMESPACE}/gpu-example-com-kubeletplugin"
NODE_WORK_FILE = "/var/tmp/dra-admin-node-work"
KUBELET_DEFAULTS = "/etc/default/kubelet"
REFUSED_FLAG = "--dra-admin-no-such-flag"

NODE_WORK = """\
- name: The node work of the test (the node is drained and its driver gone)
  ansible.builtin.shell: date +%s.%N > {work_file}
  changed_when: true

- name: The second worker's kubelet is given a flag it refuses
  ansible.builtin.copy:
    dest: {defaults}
    content: "KUBELET_EXTRA_ARGS={flag}\\n"
    mode: "0644"
  when: inventory_hostname == (refuse_on | default(''))
"""


class Watch(object):
    """`kubectl get --watch` of one resource, each line stamped with the time it arrived. A watch ends when
    kube-apiserver restarts (kubeadm upgrade apply): it is started again at once, and its first lines are the
    objects as they are then."""

    def __init__(self, c, resource, template, *args):
        self.lines = []
        self.argv = ["kubectl", "--kubeconfig", c.kubeconfig, "get", resource, "--watch", "--output-watch-events",
                     "-o", "jsonpath=" + template + "{\"\\n\"}"] + list(args)
        self.env = c.env
        self.stopped = threading.Event()
        self.proc = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.stopped.is_set():
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)
            for line in self.proc.stdout:
                self.lines.append((time.time(), line.split()))
            self.proc.wait()
            self.stopped.wait(0.5)

    def stop(self):
        self.stopped.set()
        for dummy in range(20):
            if self.proc is not None:
                self.proc.terminate()
            self.thread.join(1)
            if not self.thread.is_alive():
                break
        return self.lines


def pod_watch(c):
    return Watch(c, "pods", "{.type} {.object.metadata.namespace} {.object.metadata.name} {.object.spec.nodeName} "
                 "{.object.metadata.deletionTimestamp}", "--all-namespaces")


def node_watch(c):
    return Watch(c, "nodes", "{.type} {.object.metadata.name} {.object.spec.unschedulable}")


def first_deletion(lines, namespace, prefix, node):
    """When the watch first saw a pod of `namespace` named `prefix`... on `node` marked for deletion."""
    for stamp, fields in lines:
        if len(fields) >= 5 and fields[1] == namespace and fields[2].startswith(prefix) and fields[3] == node:
            return stamp
    return None


def uncordoned_at(lines, node, after):
    """When the watch saw `node` schedulable again after `after` (cordoned in between)."""
    cordoned = False
    for stamp, fields in lines:
        if len(fields) >= 2 and fields[1] == node and stamp >= after:
            if len(fields) >= 3 and fields[2] == "true":
                cordoned = True
            elif cordoned:
                return stamp
    return None


def run_upgrade(c, tmp_path, extra_vars, check=False):
    vars_file = tmp_path / "upgrade-vars.json"
    vars_file.write_text(json.dumps(extra_vars))
    argv = ["ansible-playbook", "-i", c.nodes_inventory(tmp_path), f"{ROOT}/playbooks/upgrade.yml", "-e",
            f"@{vars_file}"]
    return subprocess.run(argv + (["--check", "--diff"] if check else ["--diff"]), env=c.env, capture_output=True,
                          text=True, cwd=ROOT, check=False)


def node_work_time(c, node):
    res = c.on_node(node, "cat", NODE_WORK_FILE)
    assert res.returncode == 0, f"the node work did not run on {node}: {res.stderr}"
    return float(res.stdout.strip())


def trainer_deployment(c, ns, node):
    template = c.claim_pod("trainer", ns, ["sleep", "3600"])
    template["metadata"] = {"labels": {"app": "trainer"}}
    template["spec"]["restartPolicy"] = "Always"
    template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"trainer-{node}", "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer", "node": node}},
                     "template": {"metadata": {"labels": {"app": "trainer", "node": node}}, "spec": template["spec"]}}}


def running_trainers(c, ns, workers):
    """A probe for wait_until: the namespace's trainer pods when one runs (not terminating) per worker."""
    def probe():
        pods = c.get_json("pods", "-n", ns, "-l", "app=trainer")["items"]
        running = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get(
            "deletionTimestamp")]
        return running if len(running) == len(workers) else None
    return probe


def canary_vars(c):
    """The canary on each node before its uncordon, with the node images' busybox."""
    return {"dra_node_upgrade_canary": True, "dra_canary_namespace": "itk-upgrade-canary",
            "dra_canary_image": kindlib.cluster_images(c.versions, c.version)["local-path-helper"]}


def said_of(res):
    return " ".join(res.stdout.split())  # the callback wraps long lines


def canary_passed_on(said, node):
    """Whether the canary's report names a probe of the node's pool that passed while the node was cordoned."""
    return f"{DRIVER}/{node} (device " in said and f" on {node}): ok - " in said


def devices_of(c, node):
    return sorted(d["name"] for s in node_slices(c, node) for d in s["spec"].get("devices") or [])


def trainers_on_workers(c, ns):
    """(the workers, {worker: its devices}) once a claim pod of a fresh namespace `ns` runs on each worker."""
    workers = c.nodes[1:]
    c.fresh_namespace(ns)
    c.apply([claim_template(c.resource_version, ns, "one-gpu")] + [trainer_deployment(c, ns, n) for n in workers])
    wait_until(running_trainers(c, ns, workers), 180, "a claim pod running on each worker")
    before = dict((n, devices_of(c, n)) for n in workers)
    assert all(before.values()), before
    return workers, before


def test_maintenance_run_drains_in_dra_order_verifies_and_stops_at_a_node_that_does_not_come_back(
        kind_cluster, kind_driver, tmp_path):
    c, ns = kind_cluster, "itk-upgrade"
    workers, before = trainers_on_workers(c, ns)
    node_work = tmp_path / "node-work.yml"
    node_work.write_text(NODE_WORK.format(work_file=NODE_WORK_FILE, defaults=KUBELET_DEFAULTS, flag=REFUSED_FLAG))
    common = {"dra_node_upgrade_driver_daemonsets": [DRIVER_DAEMONSET], "dra_node_upgrade_drivers": [DRIVER],
              "dra_node_upgrade_node_tasks": str(node_work), "dra_node_upgrade_restart_kubelet": True,
              "dra_node_upgrade_ready_timeout": 120}
    common.update(canary_vars(c))

    # --check: the plan, each worker with its drain preview; nothing changes.
    res = run_upgrade(c, tmp_path, common, check=True)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    said = " ".join(res.stdout.split())  # the callback wraps long lines
    assert f"node maintenance: {len(workers)} node(s) to take through ({', '.join(workers)})" in said
    for node in workers:
        assert f"worker {node} (kubelet {c.version}): maintain; drain preview:" in said
        assert not c.get_json("node", node)["spec"].get("unschedulable")
        assert c.on_node(node, "test", "-e", NODE_WORK_FILE).returncode != 0

    # The run: each worker in turn, watched from outside.
    pods, nodes = pod_watch(c), node_watch(c)
    started = time.time()
    res = run_upgrade(c, tmp_path, common)
    pod_lines, node_lines = pods.stop(), nodes.stop()
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]
    previous_back = started
    for node in workers:
        evicted = first_deletion(pod_lines, ns, f"trainer-{node}", node)
        driver_left = first_deletion(pod_lines, DRIVER_NAMESPACE, "gpu-example-com-kubeletplugin", node)
        worked = node_work_time(c, node)
        back = uncordoned_at(node_lines, node, previous_back)
        assert evicted and driver_left and back, (node, evicted, driver_left, back)
        assert previous_back <= evicted < driver_left < worked < back, (node, evicted, driver_left, worked, back)
        assert [p for p in live_driver_pods(c, node) if is_ready(p)]
        assert devices_of(c, node) == before[node]
        assert canary_passed_on(said_of(res), node), res.stdout[-8000:]
        previous_back = back
    wait_until(running_trainers(c, ns, workers), 180, "the claim pods running again")

    # The second worker's kubelet refuses its new flag: the run stops there, naming the node and the kubelet's error.
    refused = workers[-1]
    common["dra_node_upgrade_ready_timeout"] = 40
    try:
        res = run_upgrade(c, tmp_path, dict(common, refuse_on=refused))
        assert res.returncode != 0, res.stdout[-6000:]
        said = " ".join(res.stdout.split())
        assert f"{refused} is not back" in said and f"unknown flag: {REFUSED_FLAG}" in said, res.stdout[-6000:]
        assert c.get_json("node", refused)["spec"].get("unschedulable") is True
        assert not c.get_json("node", workers[0])["spec"].get("unschedulable")
        assert c.kubectl("get", "--raw", "/readyz").returncode == 0
    finally:
        c.on_node(refused, "rm", "-f", KUBELET_DEFAULTS)
        c.on_node(refused, "systemctl", "restart", "kubelet")
    # The next run (the flag gone) takes the nodes through again and returns the stopped one.
    res = run_upgrade(c, tmp_path, common)
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]
    assert not c.get_json("node", refused)["spec"].get("unschedulable")
    assert devices_of(c, refused) == before[refused]
    c.kubectl("delete", "namespace", ns, "--timeout=180s")  # gone before the next test: its pods would wait for devices


# kubespray's worker play as its upgrade_cluster.yml runs it, reduced to the steps around the hook: its drain
# (`kubectl drain --force --ignore-daemonsets --delete-emptydir-data`), its node step (here: the kubelet restarted),
# `include_tasks` of each of post_upgrade_hooks, its uncordon; in one run after the collection's playbook.
KUBESPRAY_RUN = """\
- name: DRA checks before kubespray's upgrade
  ansible.builtin.import_playbook: dra.admin.kubespray_upgrade_before

- name: kubespray's worker play, reduced to the steps around its post_upgrade_hooks
  hosts: kube_node
  gather_facts: false
  serial: 1
  any_errors_fatal: true
  tasks:
    - name: Drain node
      ansible.builtin.command: >-
        kubectl drain --force --ignore-daemonsets --grace-period 5 --timeout 120s --delete-emptydir-data
        {{ kube_override_hostname | default(inventory_hostname) }}
      delegate_to: localhost
      changed_when: true
    - name: The node step (the kubelet restarted)
      ansible.builtin.systemd_service:
        name: kubelet
        state: restarted
    - name: Run post upgrade hooks before uncordon
      loop: "{{ post_upgrade_hooks | default([]) }}"
      ansible.builtin.include_tasks: "{{ item }}"
    - name: Uncordon node
      ansible.builtin.command: kubectl uncordon {{ kube_override_hostname | default(inventory_hostname) }}
      delegate_to: localhost
      changed_when: true
"""


# kubespray v2.32 runs on ansible-core 2.19 only (its requirements.txt: ansible-core <2.20), so the hooks run there:
# the oldest line this collection supports (tests/requirements-oldest.txt), whose venv `make` passes in.
KUBESPRAY_ANSIBLE_CORE = "2.19."


def kubespray_venv():
    """The venv of kubespray's Ansible line (DRA_IT_KUBESPRAY_VENV, set by `make integration-kind-nodes`); the test
    fails, naming the variable, without it."""
    venv = os.environ.get("DRA_IT_KUBESPRAY_VENV", "")
    assert venv and os.path.exists(os.path.join(venv, "bin", "ansible-playbook")), (
        "DRA_IT_KUBESPRAY_VENV=%r: give the venv of ansible-core %sx (make venv-oldest; make integration-kind-nodes "
        "sets it)" % (venv, KUBESPRAY_ANSIBLE_CORE))
    found = subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import ansible; print(ansible.__version__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert found.startswith(KUBESPRAY_ANSIBLE_CORE), f"{venv} has ansible-core {found}, not {KUBESPRAY_ANSIBLE_CORE}x"
    return venv


def run_kubespray(c, tmp_path, extra_vars):
    venv = kubespray_venv()
    inventory = tmp_path / "kubespray-inventory.yml"
    nodes = {"ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3",
             "ansible_become": False}
    inventory.write_text(json.dumps({"all": {"children": {
        "k8s_api": {"hosts": {"localhost": {"ansible_connection": "local",
                                            "ansible_python_interpreter": os.path.join(venv, "bin", "python")}}},
        "k8s_cluster": {"vars": nodes, "children": {
            "kube_control_plane": {"hosts": {c.nodes[0]: {}}},
            "kube_node": {"hosts": dict((n, {}) for n in c.nodes[1:])}}}}}}))
    playbook = tmp_path / "kubespray-run.yml"
    playbook.write_text(KUBESPRAY_RUN)
    vars_file = tmp_path / "kubespray-vars.json"
    vars_file.write_text(json.dumps(extra_vars))
    env = dict(c.env, PATH=os.pathsep.join([os.path.join(venv, "bin"), c.env["PATH"]]))
    return subprocess.run([os.path.join(venv, "bin", "ansible-playbook"), "-i", str(inventory), str(playbook), "-e",
                           f"@{vars_file}"], env=env, capture_output=True, text=True, cwd=ROOT, check=False)


def test_kubespray_runs_the_dra_verification_in_its_post_upgrade_hooks_and_stops_at_a_node_not_back(
        kind_cluster, kind_driver, tmp_path):
    c, ns = kind_cluster, "itk-kubespray"
    workers, before = trainers_on_workers(c, ns)
    common = {"kube_version": c.version.lstrip("v"), "dra_node_upgrade_drivers": [DRIVER],
              "dra_node_upgrade_driver_daemonsets": [DRIVER_DAEMONSET], "dra_node_upgrade_ready_timeout": 120}
    common.update(canary_vars(c))

    nodes = node_watch(c)
    res = run_kubespray(c, tmp_path, common)
    node_lines = nodes.stop()
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]
    said = " ".join(res.stdout.split())
    # The hook ran on each worker between kubespray's node step and its uncordon, with the devices read before.
    assert said.count("TASK [dra.admin.node_upgrade : The driver's pod is back and publishes the same devices for "
                      "the node]") == len(workers), res.stdout[-8000:]
    for node in workers:
        assert canary_passed_on(said, node), res.stdout[-8000:]
        assert uncordoned_at(node_lines, node, 0), node
        assert devices_of(c, node) == before[node]
        assert [p for p in live_driver_pods(c, node) if is_ready(p)]
    wait_until(running_trainers(c, ns, workers), 180, "the claim pods running again")

    # A node not back (kube_version a release its kubelet is not at) fails in the hook: kubespray stops with the
    # node cordoned, before its uncordon and before the next worker.
    ahead = "%s.%d" % (c.version.lstrip("v").rsplit(".", 1)[0], int(c.version.rsplit(".", 1)[1]) + 1)
    try:
        res = run_kubespray(c, tmp_path, dict(common, kube_version=ahead, dra_node_upgrade_ready_timeout=10))
        assert res.returncode != 0, res.stdout[-6000:]
        said = " ".join(res.stdout.split())
        assert f"{workers[0]} is not back" in said and f"not v{ahead}" in said, res.stdout[-6000:]
        assert c.get_json("node", workers[0])["spec"].get("unschedulable") is True
        assert not c.get_json("node", workers[1])["spec"].get("unschedulable")
        assert "Drain node" not in said.split(f"{workers[0]} is not back", 1)[1]
    finally:
        c.kubectl("uncordon", workers[0])
        # The restarted kubelet removed the node's slices until the driver registers again: left as found.
        wait_until(lambda: devices_of(c, workers[0]) == before[workers[0]], 180,
                   f"the driver's devices published again for {workers[0]}")
    c.kubectl("delete", "namespace", ns, "--timeout=180s")  # gone before the next test: its pods would wait for devices
