"""What the node knows, on real nodes: the node_doctor role (dra_node_state_info on each worker through the
podman connection, dra_node_state_check_info once against the API, dra_node_state_repair where asked) on the
kind cluster of each pinned release (conftest.py's `kind_cluster`, with the example driver of `kind_driver`).

Each fault is made for real on a worker, found with its cause and next step, repaired by the safe repair only,
and a second run reports nothing on that node and changes nothing. A test that takes the driver away or stops
the kubelet puts it back before it ends.
"""
import calendar
import json
import subprocess
import sys
import time
import uuid

import yaml

from dra_objects import DRIVER, EXCLUSION_LABEL, claim_template
from kind_nodes import (DRIVER_NAMESPACE, ROOT, cdi_specs_naming, is_ready, live_driver_pods, running_pod,  # noqa: E402
                        wait_for_earlier_tests_to_leave, wait_until)
from kube import WaitTimeout
from test_kind_nodes import kubelet_unprepare_failures, write_node_file

DAEMONSET = "gpu-example-com-kubeletplugin"
BACKUP_DIR = "/etc/kubernetes/dra-admin-backups"
REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
CHECKPOINT = "/var/lib/kubelet/dra_manager_state"
DURATIONS = {}  # task name: the json callback's {start, end} of the last run


def run_doctor(c, tmp_path, extra_vars=None, check=False):
    """playbooks/node_doctor.yml on the cluster's workers (group dra_nodes, podman connection) with the json
    callback: (return code, {task name: {host: result}}, wall seconds)."""
    inventory = tmp_path / "doctor-nodes.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "k8s_api": {"hosts": {"localhost": {"ansible_connection": "local",
                                            "ansible_python_interpreter": sys.executable}}},
        "kind_nodes": {"vars": {"ansible_connection": "containers.podman.podman",
                                "ansible_python_interpreter": "/usr/bin/python3", "ansible_become": False},
                       "children": {"dra_nodes": {"hosts": dict((n, {}) for n in c.nodes[1:])}}}}}}))
    vars_file = tmp_path / "doctor-vars.json"
    vars_file.write_text(json.dumps(extra_vars or {}))
    argv = ["ansible-playbook", "-i", str(inventory), f"{ROOT}/playbooks/node_doctor.yml", "-e", f"@{vars_file}"]
    env = dict(c.env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    started = time.monotonic()
    res = subprocess.run(argv + (["--check", "--diff"] if check else ["--diff"]), env=env, capture_output=True,
                         text=True, cwd=ROOT, check=False)
    took = time.monotonic() - started
    try:
        plays = json.loads(res.stdout)["plays"]
    except ValueError:
        raise AssertionError(f"cannot read the doctor's output: rc={res.returncode}\n{res.stdout}\n{res.stderr}")
    tasks = {}
    for play in plays:
        for task in play["tasks"]:
            # The json callback names a role's task "<role> : <name>".
            tasks[task["task"]["name"].split(" : ", 1)[-1]] = task["hosts"]
            DURATIONS[task["task"]["name"].split(" : ", 1)[-1]] = task["task"].get("duration") or {}
    return res.returncode, tasks, took


def check_result(tasks):
    """The one dra_node_state_check_info result of the run."""
    hosts = tasks["Compare every node's state with the API, read once"]
    results = [r for r in hosts.values() if "nodes" in r]
    assert len(results) == 1, hosts
    return results[0]


def node_report(tasks, node):
    return [n for n in check_result(tasks)["nodes"] if n["node"] == node][0]


def repair_result(tasks, node):
    name = [t for t in tasks if t.startswith("Repair what is provably stale")][0]
    return tasks[name].get(node) or {}


def changed_hosts(tasks):
    return sorted(set(h for hosts in tasks.values() for h, r in hosts.items() if r.get("changed")))


def assert_clean_second_run(c, tmp_path, node, extra_vars=None):
    rc, tasks, dummy = run_doctor(c, tmp_path, dict(extra_vars or {}, dra_node_doctor_repair=True))
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    assert node_report(tasks, node)["findings"] == [], node_report(tasks, node)
    assert changed_hosts(tasks) == [], changed_hosts(tasks)


def claim_pod_on(c, ns, name, node):
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu"), c.claim_pod(name, ns, ["sleep", "3600"], node=node)])
    running = wait_until(lambda: running_pod(c, ns, name), 180, f"the claim pod {name} to run")
    claim_name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = c.get_json(f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns)
    return running, claim_name, claim["metadata"]["uid"]


def claim_gone(c, ns, claim_name):
    api = c.resource_version
    return c.kubectl("get", f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns, check=False).returncode != 0


def node_text(c, node, *cmd):
    out = c.on_node(node, *cmd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_driver_removed_before_its_claim_pod_the_doctor_names_the_daemonset_to_bring_back(
        kind_cluster, kind_driver, tmp_path):
    """The driver taken off the node (the drain's exclusion label on the node, outside any drain), then a claim pod
    deleted: the pod stays Terminating. The doctor names the cause (driver gone), the DaemonSet that brings the
    driver back and why it does not run there; even asked to repair and to force-delete, it changes nothing (the
    claim is still prepared on the node). Bringing the driver back ends it; a second run finds nothing."""
    c = kind_cluster
    node = c.nodes[-1]
    ns = "itk-ns-driver-gone"
    wait_for_earlier_tests_to_leave(c, node)
    c.fresh_namespace(ns)
    pod, dummy, claim_uid = claim_pod_on(c, ns, "holder", node)
    pod_uid = pod["metadata"]["uid"]
    try:
        c.kubectl("label", "node", node, f"{EXCLUSION_LABEL}=true")
        wait_until(lambda: not c.get_json("pods", "-n", DRIVER_NAMESPACE, "--field-selector",
                                          f"spec.nodeName={node}")["items"], 120, f"the driver pod to leave {node}")
        c.kubectl("delete", "pod", "holder", "-n", ns, "--wait=false")
        wait_until(lambda: kubelet_unprepare_failures(c, node, pod_uid) >= 2, 180,
                   f"two failed unprepare attempts for pod {pod_uid} in {node}'s kubelet journal")

        def stuck_long_enough():
            current = c.get_json("pod", "holder", "-n", ns)
            stamp = calendar.timegm(time.strptime(current["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
            return time.time() - stamp > 31
        # The doctor counts a pod as stuck 30 s after its deletion timestamp (node_check.STUCK_AFTER_SECONDS).
        wait_until(stuck_long_enough, 120, "the pod's deletion timestamp to be over 30 s old")

        rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True,
                                                    "dra_node_doctor_force_delete": True})
        assert rc == 0, json.dumps(tasks, indent=1)[:4000]
        report = node_report(tasks, node)
        stuck = [f for f in report["findings"] if f["kind"] == "pod_stuck_terminating"]
        assert [f["subject"] for f in stuck] == [f"{ns}/holder"], report
        assert stuck[0]["reason"] == "driver gone", stuck[0]
        step = stuck[0]["next_step"]
        assert f"bring driver {DRIVER} back" in step and f"DaemonSet {DRIVER_NAMESPACE}/{DAEMONSET}" in step, step
        assert "does not run on this node" in step and "exclusion label" in step, step
        assert f"{EXCLUSION_LABEL}=true" in step and f"kubectl label node {node} {EXCLUSION_LABEL}-" in step, step
        assert report["force_delete_safe"] == [] and DRIVER not in report["answering_drivers"], report
        assert not [f for f in report["findings"] if f["repair"]], report
        assert changed_hosts(tasks) == []
        current = c.get_json("pod", "holder", "-n", ns)
        assert current["metadata"]["uid"] == pod_uid and current["metadata"].get("deletionTimestamp")
        assert claim_uid in node_text(c, node, "cat", CHECKPOINT)
    finally:
        c.kubectl("label", "node", node, f"{EXCLUSION_LABEL}-")
    wait_until(lambda: c.kubectl("get", "pod", "holder", "-n", ns, check=False).returncode != 0, 240,
               "the stuck pod to go once the driver is back")
    wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120, f"a ready driver pod on {node}")
    wait_until(lambda: not cdi_specs_naming(c, node, claim_uid), 60, f"the CDI spec of claim {claim_uid} to go")
    wait_until(lambda: claim_uid not in node_text(c, node, "cat", CHECKPOINT), 90,
               f"the kubelet to drop claim {claim_uid} from its checkpoint")
    assert_clean_second_run(c, tmp_path, node)
    c.kubectl("delete", "namespace", ns, "--wait=false")


def failed_results(tasks):
    return dict((host, r) for hosts in tasks.values() for host, r in hosts.items() if r.get("failed"))


def test_wrong_paths_and_a_node_the_cluster_does_not_know_are_refused_before_any_finding(
        kind_cluster, kind_driver, tmp_path):
    """On the real workers: a kubelet root directory that does not exist, and a CDI directory that is a file (made
    on the node), fail the node's read naming the option; a node name the cluster does not know fails the
    comparison naming the node. None of them reports a finding or repairs anything, asked to repair or not."""
    c = kind_cluster
    node = c.nodes[-1]
    write_node_file(c, node, "/tmp/dra-admin-not-a-dir", "x")
    # One run with both wrong: the kubelet root on every worker, the CDI path a file on `node` only (absent on
    # the other worker, which reads it as having no specs).
    rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_kubelet_root_dir": "/var/lib/no-kubelet",
                                                "dra_node_doctor_cdi_spec_dirs": ["/etc/cdi", "/tmp/dra-admin-not-a-dir"],
                                                "dra_node_doctor_repair": True})
    assert rc != 0, json.dumps(tasks, indent=1)[:3000]
    failed = failed_results(tasks)
    assert set(failed) == set(c.nodes[1:]), failed
    assert all("kubelet_root_dir /var/lib/no-kubelet does not exist" in r["msg"] for r in failed.values()), failed
    assert [h for h, r in failed.items() if "cdi_spec_dirs: /tmp/dra-admin-not-a-dir is not a directory" in r["msg"]] \
        == [node], failed
    assert not any("nodes" in r for r in tasks.get("Compare every node's state with the API, read once", {}).values())
    assert changed_hosts(tasks) == []
    rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_node_name": "no-such-node",
                                                "dra_node_doctor_repair": True})
    assert rc != 0, json.dumps(tasks, indent=1)[:3000]
    failed = failed_results(tasks)
    assert any("no-such-node" in r["msg"] and "not nodes of this cluster" in r["msg"] for r in failed.values()), failed
    assert changed_hosts(tasks) == []


def test_cdi_spec_left_after_its_claim_was_deleted_is_moved_to_the_backup_directory(
        kind_cluster, kind_driver, tmp_path):
    """A real claim's CDI spec, copied byte for byte while the claim was prepared, written back to the node once
    the claim is deleted and the driver removed it (the spec a driver reload leaves behind). The doctor finds it
    (claim gone, no container uses it, the kubelet no longer holds the claim); check mode moves nothing; the
    repair moves it into the backup directory unchanged; a second run finds nothing."""
    c = kind_cluster
    node = c.nodes[-1]
    ns = "itk-ns-cdi"
    c.fresh_namespace(ns)
    dummy, claim_name, claim_uid = claim_pod_on(c, ns, "user", node)
    specs = cdi_specs_naming(c, node, claim_uid)
    assert len(specs) == 1, specs
    path = specs[0]
    text = node_text(c, node, "cat", path)
    c.kubectl("delete", "pod", "user", "-n", ns, "--wait=true", "--timeout=120s")
    wait_until(lambda: claim_gone(c, ns, claim_name), 120, f"claim {claim_name} to be deleted")
    wait_until(lambda: not cdi_specs_naming(c, node, claim_uid), 60, f"the driver to remove {path}")
    write_node_file(c, node, path, text, then=f"chmod 600 {path}")

    rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True}, check=True)
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    found = [f for f in node_report(tasks, node)["findings"] if f["kind"] == "stale_cdi_spec"]
    assert [f["subject"] for f in found] == [path], node_report(tasks, node)
    assert found[0]["repair"] == {"kind": "cdi_spec", "path": path, "claim_uids": [claim_uid],
                                  "reason": found[0]["repair"]["reason"]}, found[0]
    would = repair_result(tasks, node)
    assert [m["path"] for m in would["moved"]] == [path] and would["changed"], would
    assert node_text(c, node, "cat", path) == text, "check mode moved the spec"

    rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True})
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    moved = repair_result(tasks, node)["moved"]
    assert [m["path"] for m in moved] == [path], moved
    backup = moved[0]["backup"]
    assert backup.startswith(BACKUP_DIR + "/"), backup
    assert not cdi_specs_naming(c, node, claim_uid)
    assert node_text(c, node, "cat", backup) == text, "the backup is not the spec as it was"
    assert_clean_second_run(c, tmp_path, node)
    node_text(c, node, "rm", "-f", backup)
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_dead_registration_socket_is_removed(kind_cluster, kind_driver, tmp_path):
    """A registration socket nobody listens on, named as the example driver's rolling-update sockets are
    (<driver>-<pod uid>-reg.sock) for a pod that does not exist: what a plugin killed without its shutdown
    leaves. It is made by binding a Unix socket on the node and exiting. The doctor finds it (no answer, no such
    pod on the node); the repair removes it; the driver's own socket is left alone; a second run finds nothing."""
    c = kind_cluster
    node = c.nodes[-1]
    path = f"{REGISTRY_DIR}/{DRIVER}-{uuid.uuid4()}-reg.sock"
    made = c.on_node(node, "python3", "-c", f"import socket; socket.socket(socket.AF_UNIX).bind({path!r})")
    assert made.returncode == 0, made.stderr
    before = set(node_text(c, node, "ls", REGISTRY_DIR).split())

    rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True}, check=True)
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    found = [f for f in node_report(tasks, node)["findings"] if f["kind"] == "dead_socket"]
    assert [f["subject"] for f in found] == [path], node_report(tasks, node)
    assert found[0]["repair"]["kind"] == "socket" and "not running on the node" in found[0]["message"], found[0]
    assert set(node_text(c, node, "ls", REGISTRY_DIR).split()) == before, "check mode removed a socket"

    rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True})
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    assert [m["path"] for m in repair_result(tasks, node)["moved"]] == [path]
    assert set(node_text(c, node, "ls", REGISTRY_DIR).split()) == before - {path.rsplit("/", 1)[1]}
    assert [p for p in live_driver_pods(c, node) if is_ready(p)], "the driver's own pod is not ready any more"
    assert_clean_second_run(c, tmp_path, node)


def test_a_stopped_plugin_is_not_taken_for_an_answering_one(kind_cluster, kind_driver, tmp_path):
    """SIGSTOP of the example driver's plugin process: the kernel still accepts connections on its sockets, but the
    process sends nothing. The doctor asks each socket the first question of gRPC (HTTP/2's SETTINGS) with a
    deadline, so the stopped plugin's sockets are named as not answering, with its running pod, and nothing is made
    eligible for repair; let go on (SIGCONT), a second run finds nothing."""
    c = kind_cluster
    node = c.nodes[-1]
    pod = wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120,
                     f"a ready driver pod on {node}")[0]
    pid = node_text(c, node, "sh", "-c", "crictl inspect -o go-template --template '{{.info.pid}}' "
                    f"$(crictl ps -q --name '^plugin$' --label io.kubernetes.pod.uid={pod['metadata']['uid']})").strip()
    assert pid.isdigit(), pid
    stopped = c.on_node(node, "kill", "-STOP", pid)
    assert stopped.returncode == 0, stopped.stderr
    try:
        rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True}, check=True)
    finally:
        c.on_node(node, "kill", "-CONT", pid)
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    found = [f for f in node_report(tasks, node)["findings"] if f["kind"] == "dead_socket"]
    assert found, node_report(tasks, node)
    for f in found:
        assert "stopped or hung" in f["message"] and f.get("repair") is None, f
        assert "restart the pod" in f["next_step"], f
    assert_clean_second_run(c, tmp_path, node)


def node_ready(c, node):
    conditions = c.get_json("node", node)["status"].get("conditions") or []
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)


def test_checkpoint_entry_of_a_claim_deleted_while_the_kubelet_was_stopped(kind_cluster, kind_driver, tmp_path):
    """The kubelet stopped (systemctl stop kubelet in the node), then the claim pod force-deleted from the API and
    its claim deleted by the controllers: the kubelet's checkpoint still holds the claim prepared, its container
    still runs, its CDI spec is still there. The doctor finds the checkpoint entry (claim gone from the API), says
    the kubelet is down and that starting it is the next step; it refuses to move the spec the container still
    uses and changes nothing. Started again (the safe repair the doctor names), the kubelet stops the container and
    unprepares the claim through the driver; a second run finds nothing."""
    c = kind_cluster
    node = c.nodes[-1]
    ns = "itk-ns-checkpoint"
    c.fresh_namespace(ns)
    dummy, claim_name, claim_uid = claim_pod_on(c, ns, "sleeper", node)
    assert claim_uid in node_text(c, node, "cat", CHECKPOINT)
    try:
        node_text(c, node, "systemctl", "stop", "kubelet")
        c.kubectl("delete", "pod", "sleeper", "-n", ns, "--force", "--grace-period=0")
        wait_until(lambda: claim_gone(c, ns, claim_name), 120, f"claim {claim_name} to be deleted")

        rc, tasks, dummy = run_doctor(c, tmp_path, {"dra_node_doctor_repair": True,
                                                    "dra_node_doctor_force_delete": True})
        assert rc == 0, json.dumps(tasks, indent=1)[:4000]
        report = node_report(tasks, node)
        assert report["kubelet_running"] is False, report
        held = [f for f in report["findings"] if f["kind"] == "stale_checkpoint_claim"]
        assert [f["subject"] for f in held] == [claim_uid], report
        assert "gone from the API" in held[0]["message"] and "still run" in held[0]["message"], held[0]
        assert held[0]["next_step"].startswith("start the kubelet"), held[0]
        spec = [f for f in report["findings"] if f["kind"] == "stale_cdi_spec"]
        assert len(spec) == 1 and spec[0]["repair"] is None and "still use it" in spec[0]["next_step"], spec
        assert report["repairs"] == [] and changed_hosts(tasks) == [], report
        assert cdi_specs_naming(c, node, claim_uid)
    finally:
        node_text(c, node, "systemctl", "start", "kubelet")
    wait_until(lambda: node_ready(c, node), 180, f"{node} Ready again after the kubelet's start")
    try:
        wait_until(lambda: claim_uid not in node_text(c, node, "cat", CHECKPOINT), 240,
                   f"the kubelet to unprepare claim {claim_uid} and drop it from its checkpoint")
    except WaitTimeout as exc:
        dummy, tasks, dummy = run_doctor(c, tmp_path, check=True)
        journal = node_text(c, node, "sh", "-c", "journalctl -u kubelet --no-pager -o cat --since -6min | grep -i -E "
                            f"'{claim_name}|{claim_uid}|unprepar|DRA plugin|dra.sock|reg.sock' | tail -40")
        raise AssertionError(f"{exc}\nthe doctor: {json.dumps(node_report(tasks, node), indent=1)}\n"
                             f"the kubelet's journal:\n{journal}")
    wait_until(lambda: not cdi_specs_naming(c, node, claim_uid), 60, f"the CDI spec of claim {claim_uid} to go")
    wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120, f"a ready driver pod on {node}")
    assert_clean_second_run(c, tmp_path, node)
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_cost_per_node_and_one_api_read_per_run(kind_cluster, kind_driver, tmp_path):
    """The scale figures of docs/decisions.md: the check's API requests do not depend on the number of nodes
    (one paginated LIST per resource), and the wall time of a run over the workers."""
    c = kind_cluster
    rc, tasks, took = run_doctor(c, tmp_path)
    assert rc == 0, json.dumps(tasks, indent=1)[:4000]
    result = check_result(tasks)
    # discovery of resource.k8s.io, then nodes, claims, pods, slices, DaemonSets: one page each here.
    assert result["api_requests"] == 6, result["api_requests"]
    node_hosts = tasks["Read the node's DRA state (kubelet checkpoint, plugin sockets, CDI specs, containers)"]
    assert sorted(node_hosts) == sorted(c.nodes[1:])
    sizes = dict((h, len(json.dumps(r["ansible_facts"]["dra_node_state"]))) for h, r in node_hosts.items())

    def seconds(name):
        span = DURATIONS[name]
        stamp = [calendar.timegm(time.strptime(span[k][:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + span[k][19:26])
                 for k in ("start", "end")]
        return stamp[1] - stamp[0]
    gather = seconds("Read the node's DRA state (kubelet checkpoint, plugin sockets, CDI specs, containers)")
    compare = seconds("Compare every node's state with the API, read once")
    print(f"\nnode_doctor over {len(node_hosts)} workers: {took:.1f} s wall, gather task {gather:.1f} s (both nodes "
          f"at once), check task {compare:.1f} s, {result['api_requests']} API requests; node state sizes {sizes} "
          f"bytes")
