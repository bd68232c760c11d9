"""Real nodes: the canary claims of role dra.admin.canary (module dra.admin.dra_canary) on the kind cluster of each
pinned release (conftest.py's `kind_cluster`, the example driver from `kind_driver`).

A healthy pool passes every phase with its times; a driver whose kubelet plugin is stopped on one node fails
that node's canary in the phase where it stops (prepare) while the other node's passes; the metrics file for
node-exporter's textfile collector is parsed. Nothing the canary made is left behind, and the driver is
healthy again afterwards (other tests share the cluster).
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kindlib  # noqa: E402
from dra_objects import DRIVER, device_request, pod  # noqa: E402
from kind_nodes import (is_ready, live_driver_pods, node_slices, role_task_results,  # noqa: E402
                        wait_until)

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.canary import canary  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import parse_text  # noqa: E402

NAMESPACE = "itk-canary"
PHASES = ["allocation", "prepare", "device", "unprepare"]


def canary_vars(c, tmp_path, **extra):
    out = {"dra_canary_drivers": [DRIVER], "dra_canary_namespace": NAMESPACE,
           "dra_canary_image": kindlib.cluster_images(c.versions, c.version)["local-path-helper"],
           "dra_canary_metrics_file": str(tmp_path / "dra_canary.prom")}
    out.update(extra)
    return out


def canary_task(results):
    (task,) = [r for r in results if "planned" in r]
    return task


def workers(c):
    return sorted(c.nodes[1:])


def leftovers(c):
    api = c.resource_version
    out = []
    for kind in ("pods", f"resourceclaims.{api}.resource.k8s.io", f"resourceclaimtemplates.{api}.resource.k8s.io"):
        out += [f"{kind}/{o['metadata']['name']}" for o in c.get_json(kind, "-n", NAMESPACE)["items"]]
    return out


def samples(path):
    scrape = parse_text(open(path).read())
    return dict(((s.name, tuple(sorted(s.labels.items()))), s.value) for s in scrape.samples)


def sample(found, name, **labels):
    return found.get((name, tuple(sorted(labels.items()))))


def report_times(c, task):
    for r in task["results"]:
        times = ", ".join(f"{p} {r['phases'][p]['seconds']}s{'' if r['phases'][p]['ok'] else ' FAILED'}"
                          for p in PHASES if p in r["phases"])
        details = "; ".join(f"{p}: {e['detail']}" for p, e in r["phases"].items() if e["detail"])
        print(f"\ncanary {c.version} {r['pool']}: {times}{' - ' + details if details else ''}")


def test_check_mode_creates_nothing_and_names_what_it_would_probe(kind_cluster, kind_driver, tmp_path):
    c = kind_cluster
    argv = c.role_command("dra.admin.canary", tmp_path, canary_vars(c, tmp_path)) + ["--check"]
    env = dict(c.env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    res = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    tasks = [t["hosts"]["localhost"] for p in json.loads(res.stdout)["plays"] for t in p["tasks"]]
    task = canary_task(tasks)
    assert task["check_mode"] is True and task["results"] == [] and task["metrics_text"] == ""
    assert sorted(p["pool"] for p in task["planned"]) == workers(c), task["skipped_pools"]
    for probe in task["planned"]:
        assert probe["node"] == probe["pool"] and probe["unique"] is True
        assert probe["selector"].startswith('device.driver == "%s" && device.attributes["%s"].' % (DRIVER, DRIVER))
        assert any(line.startswith("would probe %s/%s" % (DRIVER, probe["pool"])) for line in task["summary"])
    assert not (tmp_path / "dra_canary.prom").exists()
    assert c.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0 or leftovers(c) == []


def test_pools_a_pending_pod_waits_for_are_left_to_it_naming_the_pod(kind_cluster, kind_driver, tmp_path):
    """A pod waits for 9 of the driver's devices (no node has as many, so it stays Pending, its claim not
    allocated): the canary takes none of the pools it may be waiting for, and names it; with
    dra_canary_skip_waited_pools false it would probe them. Check mode: nothing is created either way."""
    c = kind_cluster
    ns = "itk-canary-waiting"
    api = c.resource_version
    claim = {"apiVersion": f"resource.k8s.io/{api}", "kind": "ResourceClaim",
             "metadata": {"name": "nine", "namespace": ns},
             "spec": {"devices": {"requests": [device_request(api, count=9, device_class=DRIVER)]}}}
    c.kubectl("create", "namespace", ns)
    try:
        c.apply([claim, pod(ns, "waits", claim_name="nine")])
        wait_until(lambda: any(cond.get("reason") == "Unschedulable" for cond in
                               (c.get_json("pod", "waits", "-n", ns).get("status") or {}).get("conditions") or []),
                   120, "pod waits reported Unschedulable by the scheduler")
        argv = c.role_command("dra.admin.canary", tmp_path, canary_vars(c, tmp_path)) + ["--check"]
        env = dict(c.env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")

        def planned(extra):
            res = subprocess.run(argv + ["-e", json.dumps(extra)], env=env, capture_output=True, text=True, cwd=ROOT,
                                 check=False)
            assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
            return canary_task([t["hosts"]["localhost"] for p in json.loads(res.stdout)["plays"] for t in p["tasks"]])
        task = planned({})
        assert task["planned"] == [], task["planned"]
        waited = dict((s["pool"], s) for s in task["skipped_pools"] if s.get("waiting_pods"))
        assert sorted(waited) == workers(c), task["skipped_pools"]
        assert all(s["waiting_pods"] == [f"{ns}/waits"] and f"{ns}/waits" in s["reason"] for s in waited.values())
        anyway = planned({"dra_canary_skip_waited_pools": False})
        assert sorted(p["pool"] for p in anyway["planned"]) == workers(c)
        assert c.get_json("pod", "waits", "-n", ns)["status"]["phase"] == "Pending"
    finally:
        c.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False)


@pytest.mark.per_release("default_served_api_versions")
def test_every_healthy_pool_passes_each_phase_with_its_time(kind_cluster, kind_driver, tmp_path):
    c = kind_cluster
    rc, results = role_task_results(c, "dra.admin.canary", tmp_path, canary_vars(c, tmp_path))
    task = canary_task(results)
    report_times(c, task)
    assert rc == 0, json.dumps(task, indent=1)[:4000]
    assert task["resource_api_version"] == c.resource_version
    assert task["ok"] is True and task["failed_pools"] == [] and task["changed"] is False
    assert sorted(r["pool"] for r in task["results"]) == workers(c)
    for r in task["results"]:
        assert sorted(r["phases"]) == sorted(PHASES)
        # A phase lasts at least one look (wait_sleep) unless it ended at the same look as the one before.
        assert all(p["ok"] and p["seconds"] >= 0 for p in r["phases"].values()), r
        assert sum(p["seconds"] for p in r["phases"].values()) > 0
        assert r["allocated"] == {"driver": DRIVER, "pool": r["pool"], "device": r["device"]}
    assert leftovers(c) == []

    found = samples(tmp_path / "dra_canary.prom")
    for r in task["results"]:
        for phase in PHASES:
            labels = dict(driver=DRIVER, pool=r["pool"], phase=phase)
            assert sample(found, canary.METRIC_SUCCESS, **labels) == 1
            assert sample(found, canary.METRIC_PHASE_SECONDS, **labels) == r["phases"][phase]["seconds"]
    assert sample(found, canary.METRIC_LAST_RUN) > 0


def plugin_pid_command(uid):
    return f"crictl inspect -o go-template --template '{{{{.info.pid}}}}' $(crictl ps -q --name '^plugin$' " \
           f"--label io.kubernetes.pod.uid={uid})"


def test_a_stopped_plugin_fails_its_nodes_canary_in_prepare_and_the_other_node_passes(
        kind_cluster, kind_driver, tmp_path):
    """SIGSTOP of one node's kubelet plugin (as test_kind_nodes' liveness test): its slices stay published, so
    the claim is allocated, but nothing prepares it. That node's canary fails in prepare, the other's passes, the
    play fails naming the phase after writing the metrics file; the driver is resumed and healthy afterwards."""
    c = kind_cluster
    node = workers(c)[-1]
    pod = wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120,
                     f"a ready driver pod on {node}")[0]
    uid = pod["metadata"]["uid"]
    stop = c.on_node(node, "sh", "-c", f"kill -STOP $({plugin_pid_command(uid)})")
    assert stop.returncode == 0, f"could not stop the plugin: {stop.stdout}{stop.stderr}"
    try:
        # A prepare timeout below the liveness probe's restart (3 failures 10 s apart), so the stopped plugin is
        # still stopped when the canary gives up on it.
        rc, results = role_task_results(c, "dra.admin.canary", tmp_path, canary_vars(
            c, tmp_path, dra_canary_prepare_timeout=12, dra_canary_unprepare_timeout=240))
    finally:
        # Resume it (if the kubelet has not restarted the container already; then there is nothing to resume).
        c.on_node(node, "sh", "-c", f"kill -CONT $({plugin_pid_command(uid)}) 2>/dev/null || true")
    task = canary_task(results)
    report_times(c, task)
    assert rc != 0
    failure = results[-1]
    assert failure.get("failed") and f"{DRIVER}/{node}: prepare" in failure["msg"], failure
    by_pool = dict((r["pool"], r) for r in task["results"])
    broken, healthy = by_pool[node], by_pool[workers(c)[0]]
    assert broken["ok"] is False and broken["failed_phase"] == "prepare", broken
    assert sorted(broken["phases"]) == ["allocation", "prepare", "unprepare"]
    assert broken["phases"]["allocation"]["ok"] and "did not start within 12s" in broken["phases"]["prepare"]["detail"]
    assert healthy["ok"] is True and sorted(healthy["phases"]) == sorted(PHASES)
    assert task["failed_pools"] == [f"{DRIVER}/{node}: prepare"]

    found = samples(tmp_path / "dra_canary.prom")
    assert sample(found, canary.METRIC_SUCCESS, driver=DRIVER, pool=node, phase="prepare") == 0
    assert sample(found, canary.METRIC_SUCCESS, driver=DRIVER, pool=node, phase="allocation") == 1
    assert sample(found, canary.METRIC_SUCCESS, driver=DRIVER, pool=node, phase="device") is None
    for phase in PHASES:
        assert sample(found, canary.METRIC_SUCCESS, driver=DRIVER, pool=healthy["pool"], phase=phase) == 1

    # The driver is healthy again: its pod ready and its slices published; nothing of the canary is left.
    wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 240, f"the driver on {node} ready")
    wait_until(lambda: node_slices(c, node), 120, f"the slices of {node}")
    wait_until(lambda: leftovers(c) == [], 240, "the canary's pod, claim and template to be gone")
