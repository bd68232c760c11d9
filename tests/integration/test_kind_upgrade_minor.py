"""playbooks/upgrade.yml upgrades a real kubeadm cluster one minor release, node by node in DRA order: a kind
cluster of K8S_UPGRADE_FROM (hack/cluster/versions.env, the minor before the newest pinned release) with the example
driver and, on its workers, a claim-template pod each, two pods sharing one claim, a pod asking for a DRA-backed
extended resource, and a DeviceTaintRule in force, upgraded to the newest pinned release (a pre-release until its
release is served: the run then sets dra_upgrade_allow_pre_release) with the release's kubeadm, kubelet and kubectl
binaries (built here) and its images loaded into the nodes as a registry would serve them.

Watched from outside: each worker's claim pods are evicted before its driver pod leaves, the driver is back (ready,
the same devices published, a canary claim on its pool passing while it is still cordoned) before the node is
uncordoned, no claim fails to prepare, the tainted device is never allocated, the control plane and every kubelet
report the release, the upgrade check for the release finds nothing breaking, and a second run changes nothing.

Not part of `make test` (a third Kubernetes release to build; docs/decisions.md, "The upgrade test on real nodes"):
`make integration-kind-upgrade`.
"""
import json
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kind_nodes  # noqa: E402
import kindlib  # noqa: E402
from dra_objects import DRIVER, claim, claim_template  # noqa: E402
from kind_nodes import DRIVER_NAMESPACE, is_ready, live_driver_pods, wait_until  # noqa: E402
from test_kind_upgrade import (  # noqa: E402
    DRIVER_DAEMONSET, canary_passed_on, canary_vars, devices_of, first_deletion, node_watch, pod_watch,
    trainer_deployment, uncordoned_at,
)

VERSIONS = clusterlib.load_versions()
CATALOG = clusterlib.catalog()
FROM = VERSIONS["K8S_UPGRADE_FROM"]
TO = max(clusterlib.supported_k8s_versions(), key=CATALOG.release_order)
# kind's nodes run on this host's cgroup v1 (the kubelet allows it: failCgroupV1 false); kubeadm's preflight refuses
# it unless told, as kind's own kubeadm init is.
KUBEADM_ARGS = ["--ignore-preflight-errors=SystemVerification"]
TAINTED_DEVICE = "gpu-0"
EXTENDED_RESOURCE = "example.com/gpu"


def local_checksums(directory):
    """{name: sha256} of the binaries role node_upgrade installs from directory."""
    import hashlib
    sums = {}
    for name in ("kubeadm", "kubelet", "kubectl"):
        with open(os.path.join(directory, name), "rb") as binary:
            sums[name] = hashlib.sha256(binary.read()).hexdigest()
    return sums


@pytest.fixture(scope="module")
def old_cluster(tmp_path_factory):
    name = "itu-%d" % os.getpid()
    up = [sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-up"), "--name", name, "--k8s-version", FROM,
          "--workers", "2", "--enable-dra"]
    res = subprocess.run(up, capture_output=True, text=True, check=False)
    try:
        assert res.returncode == 0, f"kind cluster {FROM} did not come up:\n{res.stdout}\n{res.stderr}"
        c = kind_nodes.KindCluster(name, FROM, 2)
        res = c.run_role("dra.admin.driver", tmp_path_factory.mktemp("driver"), {
            "dra_driver_name": DRIVER, "dra_driver_namespace": DRIVER_NAMESPACE,
            "dra_driver_image": kindlib.driver_image(c.versions), "dra_driver_command": ["dra-example-kubeletplugin"],
            "dra_driver_wait_timeout": 240})
        assert res.returncode == 0, f"driver role failed:\n{res.stdout[-6000:]}\n{res.stderr[-2000:]}"
        # What a registry serves to kubeadm upgrade: the release's control-plane, kube-proxy and pause images.
        kindlib.load_release_images(c.versions, TO, name, log=lambda line: None)
        yield c
    finally:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                       capture_output=True, text=True, check=False)


def run_upgrade(c, tmp_path, check=False):
    vars_file = tmp_path / "upgrade-vars.json"
    vars_file.write_text(json.dumps({
        "dra_upgrade_version": TO,
        "dra_upgrade_allow_pre_release": CATALOG.is_pre_release(TO),
        "dra_node_upgrade_binaries_dir": os.path.dirname(clusterlib.component_bin("kubernetes", TO, "kubeadm")),
        # Built here, not downloaded: the digests of the local build are the release's published ones for this run.
        "dra_node_upgrade_checksums": local_checksums(os.path.dirname(clusterlib.component_bin("kubernetes", TO, "kubeadm"))),
        "dra_node_upgrade_kubeadm_args": KUBEADM_ARGS,
        "dra_node_upgrade_driver_daemonsets": [DRIVER_DAEMONSET], "dra_node_upgrade_drivers": [DRIVER],
        **canary_vars(c)}))
    argv = ["ansible-playbook", "-i", c.nodes_inventory(tmp_path, control_plane=True), f"{ROOT}/playbooks/upgrade.yml",
            "-e", f"@{vars_file}"]
    return subprocess.run(argv + (["--check"] if check else []), env=c.env, capture_output=True, text=True,
                          cwd=ROOT, check=False)


def control_plane_images(c):
    pods = c.get_json("pods", "-n", "kube-system", "-l", "tier=control-plane")["items"]
    return dict((p["metadata"]["labels"]["component"], p["spec"]["containers"][0]["image"]) for p in pods)


def deployment(c, ns, name, node, replicas, claims=None, limits=None):
    """A Deployment of `replicas` busybox pods on `node`, with the pod's resourceClaims and limits given."""
    spec = c.claim_pod(name, ns, ["sleep", "3600"], node=node)["spec"]
    spec["restartPolicy"] = "Always"
    spec["resourceClaims"] = claims or []
    spec["containers"][0]["resources"] = ({"claims": [{"name": r["name"]} for r in claims]} if claims
                                          else {"limits": limits})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def workloads(c, ns, workers):
    """Besides a claim-template pod per worker: two pods sharing one claim on the first worker, a pod asking for a
    DRA-backed extended resource on the second, and a DeviceTaintRule keeping the first worker's gpu-0 off."""
    version = c.resource_version
    extended_class = {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceClass",
                      "metadata": {"name": "gpu-extended"},
                      "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                               "extendedResourceName": EXTENDED_RESOURCE}}
    rule = {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceTaintRule", "metadata": {"name": "itu-keep-off"},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": workers[0], "device": TAINTED_DEVICE},
                     "taint": {"key": "example.com/maintenance", "value": "firmware", "effect": "NoSchedule"}}}
    return [rule, extended_class, claim_template(version, ns, "one-gpu"), claim(version, ns, "shared-gpu")] + [
        trainer_deployment(c, ns, n) for n in workers] + [
        deployment(c, ns, "sharers", workers[0], 2, claims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}]),
        deployment(c, ns, "extended", workers[1], 1, limits={EXTENDED_RESOURCE: "1"})]


def running(c, ns, counts):
    """A probe for wait_until: the pods of each app running (not terminating) in the numbers given."""
    def probe():
        pods = c.get_json("pods", "-n", ns)["items"]
        have = dict((app, len([p for p in pods if p["metadata"]["labels"].get("app") == app
                               and p["status"].get("phase") == "Running"
                               and not p["metadata"].get("deletionTimestamp")])) for app in counts)
        return have if have == counts else None
    return probe


def allocated_devices(c, ns):
    return sorted((r["pool"], r["device"]) for cl in c.get_json("resourceclaims", "-n", ns)["items"]
                  for r in ((cl.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []))


def test_upgrade_to_the_next_minor_node_by_node_in_dra_order(old_cluster, tmp_path):
    c = old_cluster
    workers = c.nodes[1:]
    ns = "itu-claims"
    c.fresh_namespace(ns)
    c.apply(workloads(c, ns, workers))
    counts = {"trainer": len(workers), "sharers": 2, "extended": 1}
    wait_until(running(c, ns, counts), 240, "the claim pods running: a trainer per worker, the sharers, extended")
    held = allocated_devices(c, ns)
    assert len(held) == 4 and (workers[0], TAINTED_DEVICE) not in held, held  # the rule is in force
    before = dict((n, devices_of(c, n)) for n in workers)
    assert all(before.values()), before

    planned = run_upgrade(c, tmp_path, check=True)
    assert planned.returncode == 0, planned.stdout[-6000:] + planned.stderr[-2000:]
    said = " ".join(planned.stdout.split())  # the callback wraps long lines
    assert f"upgrade to {TO}: 3 node(s) to take through" in said
    assert f"control plane {c.nodes[0]} (kubelet {FROM}): upgrade, kubeadm upgrade apply" in said
    assert [n["status"]["nodeInfo"]["kubeletVersion"] for n in c.get_json("nodes")["items"]] == [FROM] * 3

    pods, nodes = pod_watch(c), node_watch(c)
    started = time.time()
    res = run_upgrade(c, tmp_path)
    pod_lines, node_lines = pods.stop(), nodes.stop()
    print(f"\nupgrade {FROM} -> {TO} took {time.time() - started:.0f}s")
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-2000:]
    previous_back = started
    for node in workers:
        evicted = first_deletion(pod_lines, ns, f"trainer-{node}", node)
        driver_left = first_deletion(pod_lines, DRIVER_NAMESPACE, "gpu-example-com-kubeletplugin", node)
        back = uncordoned_at(node_lines, node, previous_back)
        assert evicted and driver_left and back, (node, evicted, driver_left, back)
        assert previous_back <= evicted < driver_left < back, (node, evicted, driver_left, back)
        other = first_deletion(pod_lines, ns, "sharers-" if node == workers[0] else "extended-", node)
        assert other and previous_back <= other < driver_left, (node, other, driver_left)
        assert [p for p in live_driver_pods(c, node) if is_ready(p)]
        assert devices_of(c, node) == before[node]
        assert canary_passed_on(" ".join(res.stdout.split()), node), res.stdout[-8000:]
        print(f"{node}: claim pod evicted +{evicted - started:.0f}s, driver pod left +{driver_left - started:.0f}s, "
              f"uncordoned +{back - started:.0f}s")
        previous_back = back
    assert [n["status"]["nodeInfo"]["kubeletVersion"] for n in c.get_json("nodes")["items"]] == [TO] * 3
    assert set(control_plane_images(c).values()) == {
        f"registry.k8s.io/{component}:{TO}" for component in ("kube-apiserver", "kube-controller-manager",
                                                              "kube-scheduler")} | {
        kindlib.cluster_images(c.versions, TO)["etcd"]}
    wait_until(running(c, ns, counts), 240, "the claim pods running again on the upgraded nodes")
    events = c.get_json("events", "-n", ns)["items"]
    assert [e["message"] for e in events if e.get("reason") == "FailedPrepareDynamicResources"] == []
    # The DeviceTaintRule came through and is still in force.
    assert c.get_json("devicetaintrules", "itu-keep-off")["spec"]["deviceSelector"]["device"] == TAINTED_DEVICE
    held = allocated_devices(c, ns)
    assert len(held) == 4 and (workers[0], TAINTED_DEVICE) not in held, held
    check = c.run_module("dra.admin.dra_upgrade_check_info", {"target_version": TO}, tmp_path)
    assert not check.get("failed") and check["summary"].get("breaking", 0) == 0, json.dumps(check, indent=1)[:4000]
    # The playbook reads every upgraded kubelet's gates on its node (its --config file and command line, no
    # nodes/proxy): each node read, none unread, from the hosts.
    report = tmp_path / "upgrade-check.json"
    played = subprocess.run(["ansible-playbook", "-i", c.nodes_inventory(tmp_path, control_plane=True),
                             f"{ROOT}/playbooks/upgrade_check.yml", "-e", f"dra_upgrade_target={TO}",
                             "-e", f"dra_upgrade_report_file={report}"], env=c.env, capture_output=True, text=True,
                            cwd=ROOT, check=False)
    assert played.returncode == 0, played.stdout[-6000:]
    kubelets = json.loads(report.read_text())["sources"]["kubelet_feature_gates"]
    assert sorted(kubelets["read"]) == sorted(c.nodes) and kubelets["unread"] == [], kubelets
    assert kubelets["source"].startswith("each node's host"), kubelets

    again = run_upgrade(c, tmp_path)
    assert again.returncode == 0, again.stdout[-6000:]
    assert "0 node(s) to take through (none)" in " ".join(again.stdout.split())
    recap = again.stdout.split("PLAY RECAP", 1)[1]
    assert re.findall(r"changed=(\d+)", recap) == ["0"] * 4, recap
