"""Real nodes: the kind cluster of each pinned Kubernetes version (conftest.py's `kind_cluster`).

The collection's driver role installs the dra-example-driver image built here (`kind_driver`); a pod
with a template claim then runs a real container, which must see the device the driver injected
through CDI.

Not part of `make integration` (it needs podman and the kind build): `make integration-kind`.
A host where kind cannot run fails these tests; nothing is skipped.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kindlib  # noqa: E402
from dra_objects import DRIVER, EXCLUSION_LABEL, claim_template  # noqa: E402
from prometheus_server import PrometheusServer, render_rules  # noqa: E402
from kind_nodes import (DRIVER_NAMESPACE, cdi_specs_naming, claim_device, container_environment,  # noqa: E402
                        device_uuid, is_ready, live_driver_pods, node_slices, restart_count, role_task_results,
                        running_pod, wait_for_earlier_tests_to_leave, wait_until)


@pytest.mark.every_release("a claim prepared by the release's real kubelet")
def test_pod_with_template_claim_sees_its_cdi_device(kind_cluster, kind_driver):
    c = kind_cluster
    ns = "itk-cdi"
    c.fresh_namespace(ns)
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu"),
             c.claim_pod("uses-gpu", ns, ["sh", "-c", "env | sort; sleep 3600"])])

    running = wait_until(lambda: running_pod(c, ns, "uses-gpu"), 180, "the pod to run")
    node = running["spec"]["nodeName"]
    assert node in c.nodes[1:], f"pod on {node}, expected a worker of {c.nodes}"
    claim_name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = c.get_json(f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns)
    uid = claim["metadata"]["uid"]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [r["driver"] for r in results] == [DRIVER]
    device = results[0]["device"]
    assert results[0]["pool"] == node

    # The container's environment comes from the CDI spec the driver wrote for this claim.
    env_key = "GPU_DEVICE_" + "".join(ch if ch.isalnum() else "_" for ch in device).upper()

    logs, env = container_environment(c, ns, "uses-gpu")
    assert env.get(f"{env_key}_RESOURCE_CLAIM") == uid, f"no {env_key}_RESOURCE_CLAIM={uid} in:\n{logs}"
    assert env.get("KUBERNETES_NODE_NAME") == node
    assert env.get("DRA_RESOURCE_DRIVER_NAME") == DRIVER

    specs = cdi_specs_naming(c, node, uid)
    assert specs, f"no CDI spec on {node} names claim {uid}"

    # Deleting the pod deletes its claim, and the driver removes the claim's CDI spec from the node.
    c.kubectl("delete", "pod", "uses-gpu", "-n", ns, "--wait=true", "--timeout=120s")
    wait_until(lambda: c.kubectl("get", f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns,
                                 check=False).returncode != 0, 120, f"claim {claim_name} to be deleted")
    wait_until(lambda: not cdi_specs_naming(c, node, uid), 60, f"the CDI spec of claim {uid} to leave {node}")
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_liveness_probe_restarts_a_plugin_that_stopped_answering(kind_cluster, kind_driver):
    """SIGSTOP of the plugin process: its gRPC health service stops answering, the kubelet's liveness probe
    fails and the kubelet restarts the container; the restarted plugin publishes the node's slices again
    (they are deleted while it is stopped, so only the new process can have written them)."""
    c = kind_cluster
    node = c.nodes[-1]
    pod = wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120,
                     f"a ready driver pod on {node}")[0]
    uid, before = pod["metadata"]["uid"], restart_count(pod)
    stop = c.on_node(node, "sh", "-c", "kill -STOP $(crictl inspect -o go-template --template '{{.info.pid}}' "
                                       f"$(crictl ps -q --name '^plugin$' --label io.kubernetes.pod.uid={uid}))")
    assert stop.returncode == 0, f"could not stop the plugin: {stop.stdout}{stop.stderr}"
    api = c.resource_version
    for s in node_slices(c, node):
        c.kubectl("delete", f"resourceslices.{api}.resource.k8s.io", s["metadata"]["name"], "--wait=true")

    def restarted():
        same = [p for p in live_driver_pods(c, node) if p["metadata"]["uid"] == uid]
        return same[0] if same and restart_count(same[0]) > before and is_ready(same[0]) else None
    # The role's default probe: every 10 s, 3 failures, 5 s timeout.
    restarted_pod = wait_until(restarted, 240, f"the kubelet to restart the stopped plugin on {node}")
    events = c.get_json("events", "-n", DRIVER_NAMESPACE, "--field-selector", f"involvedObject.uid={uid}")["items"]
    assert any(e.get("reason") == "Unhealthy" and "Liveness probe failed" in e.get("message", "") for e in events), \
        [(e.get("reason"), e.get("message")) for e in events]
    assert restarted_pod["metadata"]["uid"] == uid
    wait_until(lambda: node_slices(c, node), 120, f"the restarted plugin to publish {node}'s slices")


@pytest.mark.every_release("a drain on the release's real nodes")
def test_drain_unprepares_claims_before_the_driver_leaves_then_returns_to_service(kind_cluster, kind_driver, tmp_path):
    """dra_node_drain on a real node: the claim pod's container is stopped and its claim unprepared by the
    driver (its CDI spec leaves the node) while the driver still runs there; only then is the driver taken
    off; state=in_service brings the driver back, its slices published, and uncordons."""
    c = kind_cluster
    node = c.nodes[-1]
    wait_for_earlier_tests_to_leave(c, node)
    ns = "itk-drain"
    c.fresh_namespace(ns)
    api = c.resource_version
    template = c.claim_pod("trainer", ns, ["sleep", "3600"], node=node)
    template["metadata"] = {"labels": {"app": "trainer"}}
    template["spec"]["restartPolicy"] = "Always"  # a Deployment's pods (an unmanaged pod is refused by the drain)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": ns},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer"}},
                           "template": {"metadata": template["metadata"], "spec": template["spec"]}}}
    c.apply([claim_template(api, ns, "one-gpu"), deployment])

    def running_trainer():
        pods = c.get_json("pods", "-n", ns, "-l", "app=trainer")["items"]
        return [p for p in pods if p["status"].get("phase") == "Running"]
    running = wait_until(running_trainer, 180, "the claim pod to run")[0]
    pod_name = running["metadata"]["name"]
    claim_name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim_uid = c.get_json(f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns)["metadata"]["uid"]
    assert cdi_specs_naming(c, node, claim_uid), f"no CDI spec on {node} for claim {claim_uid}"
    driver_pods = [p["metadata"]["uid"] for p in live_driver_pods(c, node)]
    assert len(driver_pods) == 1

    driver_daemonsets = [f"{DRIVER_NAMESPACE}/gpu-example-com-kubeletplugin"]
    drained = c.run_module("dra.admin.dra_node_drain", {
        "node": node, "driver_daemonsets": driver_daemonsets, "timeout": 240}, tmp_path)
    assert not drained.get("failed"), json.dumps(drained, indent=1)[:4000]
    assert drained["claim_pods"] == [f"{ns}/{pod_name}"] and drained["driver_pods"], drained
    # The evicted pod and its template claim are gone; the driver unprepared the claim on the node (its CDI
    # spec is gone) before it was taken off. The replacement pod waits: the node is cordoned.
    assert c.kubectl("get", "pod", pod_name, "-n", ns, check=False).returncode != 0
    assert not cdi_specs_naming(c, node, claim_uid), f"claim {claim_uid} still prepared on {node}"
    assert live_driver_pods(c, node) == []
    state = c.get_json("node", node)
    assert state["spec"].get("unschedulable") is True

    back = c.run_module("dra.admin.dra_node_drain", {
        "node": node, "state": "in_service", "driver_daemonsets": driver_daemonsets, "drivers": [DRIVER],
        "timeout": 240}, tmp_path)
    assert not back.get("failed") and back["uncordon"] is True, json.dumps(back, indent=1)[:4000]
    assert [p for p in live_driver_pods(c, node) if is_ready(p)]
    assert node_slices(c, node)
    assert not c.get_json("node", node)["spec"].get("unschedulable")
    c.kubectl("delete", "namespace", ns, "--wait=false")


@pytest.mark.per_release("device_taint_rule_support", key="usable")
def test_device_maintenance_takes_one_real_device_out_of_service_and_returns_it(kind_cluster, kind_driver, tmp_path):
    """The device_maintenance role on a real worker, with only the release's defaults (1.37: DeviceTaintRule
    is GA and on; nothing is switched on for it). Its dry run names exactly the pod of one device and writes
    nothing; NoExecute evicts that pod (its container stops, the driver unprepares its claim: the CDI spec
    leaves the node) while the pod on another device of the same node keeps running; a pod asking for that
    very device stays unscheduled until the rule is lifted, then runs on it. Where the release cannot serve
    the rule without gates (1.33), the role fails with the catalog's reason and writes nothing."""
    c = kind_cluster
    support = clusterlib.catalog().device_taint_rule_support(c.version)
    node = c.nodes[-1]
    ns = "itk-devmaint"
    c.fresh_namespace(ns)
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu"),
             c.claim_pod("user", ns, ["sleep", "3600"], node=node),
             c.claim_pod("neighbour", ns, ["sleep", "3600"], node=node)])
    user = wait_until(lambda: running_pod(c, ns, "user"), 180, "the first claim pod to run")
    neighbour = wait_until(lambda: running_pod(c, ns, "neighbour"), 180, "the second claim pod to run")
    claim_uid, drv, pool, device = claim_device(c, ns, user)
    assert claim_device(c, ns, neighbour)[3] != device
    assert cdi_specs_naming(c, node, claim_uid)
    target = {"dra_device_maintenance_driver": drv, "dra_device_maintenance_pool": pool,
              "dra_device_maintenance_device": device, "dra_device_maintenance_wait_timeout": 180}
    rules = f"devicetaintrules.{support['api_version']}.resource.k8s.io"

    if not support["usable"]:
        rc, results = role_task_results(c, "dra.admin.device_maintenance", tmp_path,
                                        dict(target, dra_device_maintenance_state="tainted"))
        assert rc != 0
        assert any("not available" in (r.get("msg") or "") for r in results if r.get("failed")), results
        assert running_pod(c, ns, "user")["metadata"]["uid"] == user["metadata"]["uid"]
        c.kubectl("delete", "namespace", ns, "--wait=false")
        return

    before = c.get_json(rules)["items"]
    rc, results = role_task_results(c, "dra.admin.device_maintenance", tmp_path, target)  # the default: dry run
    assert rc == 0, results
    planned = [r for r in results if "would_evict" in r][0]
    assert planned["would_evict"] == [f"{ns}/user"], planned
    assert c.get_json(rules)["items"] == before, "the dry run wrote a DeviceTaintRule"

    rc, results = role_task_results(c, "dra.admin.device_maintenance", tmp_path,
                                    dict(target, dra_device_maintenance_state="tainted",
                                         dra_device_maintenance_effect="NoExecute"))  # the role's default is Evict
    assert rc == 0, results
    wait_until(lambda: c.kubectl("get", "pod", "user", "-n", ns, check=False).returncode != 0, 120,
               "the pod of the tainted device to be evicted")
    wait_until(lambda: not cdi_specs_naming(c, node, claim_uid), 60, f"claim {claim_uid} to be unprepared on {node}")
    still = running_pod(c, ns, "neighbour")
    assert still and still["metadata"]["uid"] == neighbour["metadata"]["uid"] and restart_count(still) == 0

    # A pod asking for exactly that device waits while the rule is there, and runs once it is lifted.
    selector = f'device.attributes["{DRIVER}"].uuid == "{device_uuid(c, pool, device)}"'
    c.apply([claim_template(api, ns, "that-gpu", selector=selector)])
    waiting = c.claim_pod("waits", ns, ["sh", "-c", "env | sort; sleep 3600"], node=node)
    waiting["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "that-gpu"
    c.apply([waiting])

    def unschedulable():
        conditions = c.get_json("pod", "waits", "-n", ns)["status"].get("conditions") or []
        return any(x["type"] == "PodScheduled" and x.get("reason") == "Unschedulable" for x in conditions)
    wait_until(unschedulable, 120, "the scheduler to find no device for the pod asking for the tainted one")
    # Deleting a DeviceTaintRule is no scheduler event (a pending pod is retried at the unschedulable
    # timeout, up to 5 minutes; docs/decisions.md): the waiting pod goes, a new one comes after the lift.
    c.kubectl("delete", "pod", "waits", "-n", ns, "--wait=true", "--timeout=60s")

    rc, results = role_task_results(c, "dra.admin.device_maintenance", tmp_path,
                                    dict(target, dra_device_maintenance_state="absent"))
    assert rc == 0, results
    assert c.get_json(rules)["items"] == before
    waiting["metadata"]["name"] = "returned"
    c.apply([waiting])
    running = wait_until(lambda: running_pod(c, ns, "returned"), 180, "a pod to run on the returned device")
    assert claim_device(c, ns, running)[3] == device
    env_key = "GPU_DEVICE_" + "".join(ch if ch.isalnum() else "_" for ch in device).upper()
    logs, env = container_environment(c, ns, "returned")
    assert env.get(f"{env_key}_RESOURCE_CLAIM") == claim_device(c, ns, running)[0], logs
    c.kubectl("delete", "namespace", ns, "--wait=false")


@pytest.mark.per_release("gate_info", "DRAExtendedResource", key="default")
def test_extended_resource_pod_is_a_claim_workload_on_real_nodes(kind_cluster, kind_driver, tmp_path):
    """A pod that asks for an extended resource backed by DRA (a DeviceClass with extendedResourceName; GA in
    1.37) names no claim in its spec: the scheduler makes one and records it in the pod's status. On a real
    worker its container sees the device, and the collection treats that claim like any other: the claims
    report shows it reserved by the pod on its node, the taint dry run names the pod, the doctor finds nothing
    while the pod runs, and the drain evicts the pod first and waits for the driver to unprepare the claim
    before the driver leaves. Where the release has no such field (1.33), the DeviceClass is refused or stored
    without it."""
    c = kind_cluster
    api = c.resource_version
    node = c.nodes[-1]
    ns = "itk-extres"
    c.fresh_namespace(ns)
    resource = "example.com/gpu"
    device_class = {"apiVersion": f"resource.k8s.io/{api}", "kind": "DeviceClass", "metadata": {"name": "itk-extres"},
                    "spec": {"extendedResourceName": resource,
                             "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    try:
        if not clusterlib.catalog().gate_info(c.version, "DRAExtendedResource"):
            # The release does not know the field: kubectl's strict validation refuses it, or the server
            # drops it.
            res = c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(device_class), check=False)
            if res.returncode != 0:
                assert "extendedResourceName" in res.stderr, res.stderr
            else:
                stored = c.get_json(f"deviceclasses.{api}.resource.k8s.io", "itk-extres")
                assert "extendedResourceName" not in stored["spec"], stored
            return
        c.apply([device_class])
        stored = c.get_json(f"deviceclasses.{api}.resource.k8s.io", "itk-extres")
        assert stored["spec"]["extendedResourceName"] == resource

        template = c.claim_pod("ext", ns, ["sh", "-c", "env | sort; sleep 3600"], node=node)
        spec = template["spec"]
        del spec["resourceClaims"]
        spec["restartPolicy"] = "Always"
        spec["containers"][0]["resources"] = {"limits": {resource: "1"}}
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ext", "namespace": ns},
                      "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "ext"}},
                               "template": {"metadata": {"labels": {"app": "ext"}}, "spec": spec}}}
        c.apply([deployment])

        def running_ext():
            pods = [p for p in c.get_json("pods", "-n", ns, "-l", "app=ext")["items"]
                    if p["status"].get("phase") == "Running" and p["status"].get("extendedResourceClaimStatus")]
            return pods[0] if pods else None
        pod = wait_until(running_ext, 180, "the extended-resource pod to run")
        pod_name = pod["metadata"]["name"]
        claim_name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        claim = c.get_json(f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns)
        uid = claim["metadata"]["uid"]
        result = claim["status"]["allocation"]["devices"]["results"][0]
        env_key = "GPU_DEVICE_" + "".join(ch if ch.isalnum() else "_" for ch in result["device"]).upper()
        logs, env = container_environment(c, ns, pod_name)
        assert env.get(f"{env_key}_RESOURCE_CLAIM") == uid, logs
        assert cdi_specs_naming(c, node, uid)

        report = c.run_module("dra.admin.dra_claims_info", {"namespaces": [ns]}, tmp_path)
        assert not report.get("failed"), report.get("msg")
        mine = [x for x in report["claims"] if x["name"] == claim_name][0]
        assert mine["state"] == "reserved" and mine["extended_resource_claim"] and not mine["orphaned"], mine
        assert [(x["kind"], x["name"], x["node"]) for x in mine["consumers"]] == [("pod", pod_name, node)], mine

        support = clusterlib.catalog().device_taint_rule_support(c.version)
        if support["usable"]:
            dry = c.run_module("dra.admin.dra_device_taint", {
                "state": "dry_run", "effect": "NoExecute", "driver": result["driver"], "pool": result["pool"],
                "device": result["device"]}, tmp_path)
            assert not dry.get("failed") and not dry["changed"], dry.get("msg")
            assert dry["would_evict"] == [f"{ns}/{pod_name}"], dry

        doctor = c.run_module("dra.admin.dra_claims_doctor", {"namespaces": [ns]}, tmp_path)
        assert not doctor.get("failed"), doctor.get("msg")
        assert claim_name not in json.dumps(doctor["findings"]) and doctor["actions"] == [], doctor

        driver_daemonsets = [f"{DRIVER_NAMESPACE}/gpu-example-com-kubeletplugin"]
        drained = c.run_module("dra.admin.dra_node_drain", {
            "node": node, "driver_daemonsets": driver_daemonsets, "wait_timeout": 240}, tmp_path)
        assert not drained.get("failed"), json.dumps(drained, indent=1)[:4000]
        assert f"{ns}/{pod_name}" in drained["claim_pods"], drained
        assert not cdi_specs_naming(c, node, uid), f"claim {uid} still prepared on {node}"
        assert live_driver_pods(c, node) == []
        back = c.run_module("dra.admin.dra_node_drain", {
            "node": node, "state": "in_service", "driver_daemonsets": driver_daemonsets, "drivers": [DRIVER],
            "wait_timeout": 240}, tmp_path)
        assert not back.get("failed") and back["uncordon"] is True, json.dumps(back, indent=1)[:4000]
    finally:
        c.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False)
        c.kubectl("delete", f"deviceclasses.{api}.resource.k8s.io", "itk-extres", check=False)


def kubelet_unprepare_failures(c, node, pod_uid):
    """Lines of the node's kubelet journal where syncing the terminating pod failed on its DRA claims
    (1.36: "unprepare dynamic resources: ..."; 1.33: "get gRPC client for DRA driver ...")."""
    out = c.on_node(node, "sh", "-c", "journalctl -u kubelet --no-pager -o cat | grep -F 'Error syncing pod' "
                                      f"| grep -F {pod_uid} | grep -c -i -E 'unprepare|DRA driver' || true")
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip() or 0)


def test_driver_removed_first_leaves_the_claim_pod_terminating_until_it_is_back(kind_cluster, kind_driver):
    """The failure the drain's order prevents, for real: the driver is taken off the node first (its
    DaemonSet's exclusion label, outside the drain), then a claim pod is deleted. Its container stops, but
    the kubelet cannot unprepare the claim without the driver, so the pod stays Terminating and the CDI spec
    stays on the node, attempt after failed attempt, until the driver is back."""
    c = kind_cluster
    node = c.nodes[-1]
    wait_for_earlier_tests_to_leave(c, node)
    ns = "itk-wrong-order"
    c.fresh_namespace(ns)
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu"), c.claim_pod("holder", ns, ["sleep", "3600"], node=node)])
    running = wait_until(lambda: running_pod(c, ns, "holder"), 180, "the claim pod to run")
    pod_uid = running["metadata"]["uid"]
    claim_uid = c.get_json(f"resourceclaims.{api}.resource.k8s.io",
                           running["status"]["resourceClaimStatuses"][0]["resourceClaimName"], "-n", ns)["metadata"]["uid"]
    assert cdi_specs_naming(c, node, claim_uid)
    label = EXCLUSION_LABEL
    try:
        c.kubectl("label", "node", node, f"{label}=true")
        wait_until(lambda: not c.get_json("pods", "-n", DRIVER_NAMESPACE, "--field-selector",
                                          f"spec.nodeName={node}")["items"], 120, f"the driver pod to leave {node}")
        deleted_at = time.monotonic()
        c.kubectl("delete", "pod", "holder", "-n", ns, "--wait=false")
        # Evidence, not a sleep: the kubelet tried to unprepare the claim and failed, twice.
        wait_until(lambda: kubelet_unprepare_failures(c, node, pod_uid) >= 2, 180,
                   f"two failed unprepare attempts for pod {pod_uid} in {node}'s kubelet journal")
        stuck = c.get_json("pod", "holder", "-n", ns)
        assert stuck["metadata"]["uid"] == pod_uid and stuck["metadata"].get("deletionTimestamp")
        assert all("terminated" in (s.get("state") or {}) for s in stuck["status"].get("containerStatuses") or []), \
            stuck["status"].get("containerStatuses")
        assert cdi_specs_naming(c, node, claim_uid), "the claim's CDI spec left the node without its driver"
        stuck_for = time.monotonic() - deleted_at
    finally:
        c.kubectl("label", "node", node, f"{label}-")
    # The driver back: the kubelet unprepares the claim, the pod goes, the CDI spec goes.
    back_at = time.monotonic()
    wait_until(lambda: c.kubectl("get", "pod", "holder", "-n", ns, check=False).returncode != 0, 240,
               "the stuck pod to go once the driver is back")
    released_after = time.monotonic() - back_at
    wait_until(lambda: not cdi_specs_naming(c, node, claim_uid), 60, f"the CDI spec of claim {claim_uid} to go")
    wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120, f"a ready driver pod on {node}")
    print(f"\nclaim pod Terminating for {stuck_for:.0f} s without its driver (1 s grace period); gone "
          f"{released_after:.0f} s after the driver was let back")
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_seamless_upgrade_hands_over_while_a_new_claim_pod_starts(kind_cluster, kind_driver, tmp_path):
    """The driver role moves the driver to a second tag built here. On kubelets >= 1.33 the role rolls out
    with maxSurge 1 / maxUnavailable 0: old and new plugin run side by side on a node, and a claim pod
    started during the rollout on that node is prepared (no FailedPrepareDynamicResources event)."""
    c = kind_cluster
    node = c.nodes[-1]
    ns = "itk-seamless"
    c.fresh_namespace(ns)
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu")])
    old = [p["metadata"]["uid"] for p in live_driver_pods(c, node)]
    # As a user would: the new tag is loaded into the nodes (`kind load image-archive`), nothing is pulled.
    new_image = kindlib.load_driver_upgrade_image(c.versions, c.name)
    command = c.role_command("dra.admin.driver", tmp_path, {
        "dra_driver_name": DRIVER, "dra_driver_namespace": DRIVER_NAMESPACE, "dra_driver_image": new_image,
        "dra_driver_command": ["dra-example-kubeletplugin"], "dra_driver_wait_timeout": 240,
        "dra_driver_seamless_upgrade": "required"})
    role = subprocess.Popen(command, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        def both_plugins():
            pods = live_driver_pods(c, node)
            new = [p for p in pods if p["metadata"]["uid"] not in old]
            return (pods, new) if new and any(p["metadata"]["uid"] in old for p in pods) else None
        pods, new = wait_until(both_plugins, 240, f"a new driver pod beside the old one on {node}", interval=0.2)
        assert [ctr["image"] for ctr in new[0]["spec"]["containers"]] == [new_image]
        c.apply([c.claim_pod("during-upgrade", ns, ["sh", "-c", "env | sort; sleep 3600"], node=node)])
        out = role.communicate(timeout=600)[0]
    finally:
        if role.poll() is None:
            role.kill()
    assert role.returncode == 0, f"driver role failed:\n{out[-6000:]}"
    # The handover time (dra_driver_seamless_min_ready_seconds, 5 by default): the old plugin stops only once the
    # new pod has been Ready that long, after the kubelet registered it.
    assert c.get_json("daemonset", "-n", DRIVER_NAMESPACE, "gpu-example-com-kubeletplugin")["spec"][
        "minReadySeconds"] == 5
    running = wait_until(lambda: running_pod(c, ns, "during-upgrade"), 180,
                         "the claim pod started during the upgrade to run")
    events = c.get_json("events", "-n", ns)["items"]
    failed = [e.get("message") for e in events if e.get("reason") in ("FailedPrepareDynamicResources",)]
    assert not failed, failed
    assert running["status"]["resourceClaimStatuses"], running["status"]
    after = live_driver_pods(c, node)
    assert [p["metadata"]["uid"] for p in after if p["metadata"]["uid"] in old] == []
    assert [ctr["image"] for p in after for ctr in p["spec"]["containers"]] == [new_image]
    c.kubectl("delete", "namespace", ns, "--wait=false")


def client_tls_files(kubeconfig, directory):
    """The kubeconfig's API server URL and its client certificate and key written to files (for prometheus)."""
    config = yaml.safe_load(open(kubeconfig))
    user = config["users"][0]["user"]
    paths = {}
    for key, name in (("client-certificate-data", "client.crt"), ("client-key-data", "client.key")):
        paths[name] = os.path.join(directory, name)
        with open(paths[name], "wb") as handle:
            handle.write(base64.b64decode(user[key]))
    return config["clusters"][0]["cluster"]["server"], paths["client.crt"], paths["client.key"]


def test_prometheus_records_the_kubelets_prepare_and_unprepare_durations(kind_cluster, kind_driver, tmp_path):
    """The monitoring role's rules in a real prometheus scraping a real kubelet (through the API server's node
    proxy): a claim pod prepared and unprepared on the node shows in dra_operations_duration_seconds, and the
    role's kubelet recording rules give values."""
    c = kind_cluster
    node = c.nodes[-1]
    server, cert, key = client_tls_files(c.kubeconfig, str(tmp_path))
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    render_rules(lambda playbook: subprocess.run(["ansible-playbook", "-i", c.local_inventory(tmp_path), playbook],
                                                 env=c.env, capture_output=True, text=True, cwd=ROOT, check=False),
                 str(rules_dir))
    scrape = {"job_name": "kubelet", "scheme": "https", "metrics_path": f"/api/v1/nodes/{node}/proxy/metrics",
              "tls_config": {"insecure_skip_verify": True, "cert_file": cert, "key_file": key},
              "static_configs": [{"targets": [urllib.parse.urlparse(server).netloc], "labels": {"node": node}}]}
    prometheus = PrometheusServer([scrape], str(rules_dir), str(tmp_path), wait_until)
    try:
        wait_until(lambda: prometheus.value('up{job="kubelet"}') == 1, 60, f"prometheus scraping {node}'s kubelet")
        count = 'sum(dra_operations_duration_seconds_count{operation_name="%s"}) or vector(0)'
        before = {op: prometheus.value(count % op) for op in ("PrepareResources", "UnprepareResources")}
        ns = "itk-monitoring"
        c.fresh_namespace(ns)
        c.apply([claim_template(c.resource_version, ns, "one-gpu"),
                 c.claim_pod("measured", ns, ["sleep", "3600"], node=node)])
        wait_until(lambda: running_pod(c, ns, "measured"), 180, "the claim pod to run")
        c.kubectl("delete", "pod", "measured", "-n", ns, "--wait=true", "--timeout=120s")
        for op in ("PrepareResources", "UnprepareResources"):
            wait_until(lambda op=op: prometheus.value(count % op) > before[op], 60,
                       f"a scrape showing the kubelet's {op} of the claim")
        for record in ("dra:kubelet_prepare_resources_duration_seconds:p99_5m",
                       "dra:kubelet_unprepare_resources_duration_seconds:p99_5m"):
            # NaN (no rate yet) and no sample both keep it waiting; a value is a p99 bucket bound above 0.
            wait_until(lambda record=record: (prometheus.value(record) or 0) > 0, 60, f"{record} above 0")
        c.kubectl("delete", "namespace", ns, "--wait=false")
    finally:
        prometheus.stop()


def test_discovery_on_a_real_node_compares_its_hardware_with_the_drivers_slices(kind_cluster, kind_driver, tmp_path):
    """The discovery role on a worker container: the PCI functions it counts are the ones the node sees in
    /sys, and its comparison with the example driver counts what the driver publishes for that node. The
    example driver's GPUs are simulated, so the node's hardware does not back them: that is drift, and with
    dra_discovery_fail_on_drift the host fails naming the node and both counts."""
    c = kind_cluster
    worker = c.nodes[1]
    published = sum(len(s["spec"].get("devices") or []) for s in node_slices(c, worker))
    assert published > 0, "the example driver publishes no device on %s" % worker
    listed = c.on_node(worker, "ls", "/sys/bus/pci/devices")
    assert listed.returncode == 0, listed.stderr
    functions = len(listed.stdout.split())
    res = node_playbook(c, tmp_path, worker, "dra.admin.discovery", {
        "dra_discovery_include": ["pci", "cpu", "numa"], "dra_discovery_fail_on_drift": True})
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-4000:]
    assert f"{worker}: hardware and ResourceSlices disagree" in out, out[-4000:]
    summary = re.search(re.escape(worker) + r": ((?:[a-z_]+ \d+(?:\+\d+ VF)?(?:, )?)*)\"", out)
    assert summary, out[-4000:]
    counts = dict((t, sum(int(n) for n in re.findall(r"\d+", rest)))
                  for t, rest in (part.split(" ", 1) for part in summary.group(1).split(", ") if part))
    assert sum(counts.values()) == functions, (counts, listed.stdout)
    line = re.search(r"gpu\.example\.com: (\w+) - (\d+) on the node, (\d+) published, \d+ matching, "
                     r"(\d+) missing, (\d+) extra", out)
    assert line, out[-4000:]
    status, hardware, seen, missing, extra = line.group(1), *map(int, line.groups()[1:])
    assert (hardware, seen) == (counts.get("gpu", 0), published), line.group(0)
    assert status != "CLEAN", line.group(0)
    assert extra - missing == published - hardware, line.group(0)


def node_inventory(c, tmp_path, host_vars=None):
    """An inventory of this cluster's node containers (the podman connection, as inventory/local.yml reaches
    them), with the API reachable from localhost; host_vars: node name to its variables."""
    host_vars = host_vars or {}
    inventory = tmp_path / "nodes.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "k8s_api": {"hosts": {"localhost": {"ansible_connection": "local",
                                            "ansible_python_interpreter": sys.executable}}},
        "kind_nodes": {"vars": {"ansible_connection": "containers.podman.podman",
                                "ansible_python_interpreter": "/usr/bin/python3", "ansible_become": False},
                       "children": {"control_plane": {"hosts": {c.nodes[0]: host_vars.get(c.nodes[0], {})}},
                                    "dra_nodes": {"hosts": dict((n, host_vars.get(n, {}))
                                                                for n in c.nodes[1:])}}}}}}))
    return inventory


def node_playbook(c, tmp_path, hosts, role, extra_vars):
    """ansible-playbook running one role on node containers of this cluster, with the API reachable from
    localhost (node_inventory); its CompletedProcess."""
    inventory = node_inventory(c, tmp_path)
    playbook = tmp_path / "nodes-play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": hosts, "gather_facts": True, "serial": 1,
                                         "roles": [{"role": role}]}]))
    vars_file = tmp_path / "nodes-vars.json"
    vars_file.write_text(json.dumps(extra_vars))
    return subprocess.run(["ansible-playbook", "-i", str(inventory), str(playbook), "-e", f"@{vars_file}"],
                          env=dict(c.env, ANSIBLE_CALLBACK_RESULT_FORMAT="json"), capture_output=True, text=True,
                          cwd=ROOT, check=False)


def node_file(c, node, path):
    out = c.on_node(node, "cat", path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_apiserver_that_does_not_come_back_is_rolled_back_by_the_real_kubelet(kind_cluster, tmp_path):
    """feature_gates writes a runtime-config kube-apiserver refuses into the real static pod manifest; the
    kubelet restarts the API server, which exits; the role puts the manifest back byte for byte and the
    kubelet brings the old API server back."""
    c = kind_cluster
    manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
    original = node_file(c, c.nodes[0], manifest)
    res = node_playbook(c, tmp_path, "control_plane", "dra.admin.feature_gates", {
        "dra_feature_gates_runtime_config_extra": {"nosuch.example.com/v1": "true"},
        "dra_feature_gates_components": ["kube-apiserver"], "dra_feature_gates_manage_kubelet": False,
        "dra_feature_gates_wait_timeout": 90})
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-4000:]
    assert "did not come back" in out and "was put back" in out, out[-4000:]
    assert "nosuch.example.com" in out, out[-4000:]  # the API server's own last log lines
    assert node_file(c, c.nodes[0], manifest) == original
    wait_until(lambda: c.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 180,
               "kube-apiserver ready again after the rollback")
    flags = c.get_json("pod", "-n", "kube-system", f"kube-apiserver-{c.nodes[0]}")["spec"]["containers"][0]["command"]
    assert not [f for f in flags if "nosuch.example.com" in f], flags


def write_node_file(c, node, path, text, then=""):
    res = subprocess.run(["podman", "exec", "-i", node, "sh", "-c", f"cat > {path}" + (f" && {then}" if then else "")],
                         input=text, env=c.env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr


def kubelet_pid(c, node):
    return c.on_node(node, "systemctl", "show", "-p", "MainPID", "--value", "kubelet").stdout.strip()


def wait_kubelet_active(c, node, what):
    wait_until(lambda: c.on_node(node, "systemctl", "is-active", "kubelet").stdout.strip() == "active", 60,
               f"the kubelet of {node} {what}")


def test_kubelet_config_restarts_the_real_kubelet_and_rolls_back_one_that_does_not_come_back(kind_cluster, tmp_path):
    """feature_gates' kubelet step on a real worker. First a change the kubelet takes: the kubelet is
    restarted (a new process) and the role waits for it. Then a kubelet that does not come back: a systemd
    drop-in of the test's own makes the kubelet unit refuse to start while its config holds a second gate;
    the role puts the config file back byte for byte and restarts the kubelet, which comes back."""
    c = kind_cluster
    node = c.nodes[1]
    config = "/var/lib/kubelet/config.yaml"
    original = node_file(c, node, config)
    pid_before = kubelet_pid(c, node)
    gate = "ResourceHealthStatus"  # a kubelet gate both pinned releases know
    first = node_playbook(c, tmp_path, node, "dra.admin.feature_gates", {
        "dra_feature_gates_components": [], "dra_feature_gates_extra": {gate: True},
        "dra_feature_gates_wait_timeout": 120})
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    changed = node_file(c, node, config)
    assert f"{gate}: true" in changed, changed
    assert kubelet_pid(c, node) not in ("0", "", pid_before)

    # A second kubelet gate the release knows and the catalog lets be switched on (turning the first off
    # again is refused where ResourceHealthStatusMessage depends on it: from 1.36, as the catalog says).
    marker = ("ResourceHealthStatusMessage" if clusterlib.catalog().gate_info(c.version, "ResourceHealthStatusMessage")
              else "KubeletPodResourcesDynamicResources")
    dropin = "/etc/systemd/system/kubelet.service.d/99-refuse.conf"
    write_node_file(c, node, dropin, f"[Service]\nExecStartPre=/bin/sh -c '! grep -q {marker} {config}'\n",
                    then="systemctl daemon-reload")
    try:
        second = node_playbook(c, tmp_path, node, "dra.admin.feature_gates", {
            "dra_feature_gates_components": [], "dra_feature_gates_extra": {gate: True, marker: True},
            "dra_feature_gates_wait_timeout": 45})
        out = second.stdout + second.stderr
        assert second.returncode != 0, out[-4000:]
        assert "did not come back" in out and "was put back" in out, out[-4000:]
        assert node_file(c, node, config) == changed
        wait_kubelet_active(c, node, "running again on the restored file")
    finally:
        c.on_node(node, "sh", "-c", f"rm -f {dropin} && systemctl daemon-reload")
        # The node as it was for the other tests: the original file, the kubelet restarted on it.
        write_node_file(c, node, config, original, then="systemctl restart kubelet")
    wait_kubelet_active(c, node, "active again")


def site_feature_gate_plays(c, tmp_path, host_vars):
    """playbooks/site.yml's feature-gate plays on the two workers (json callback): the plays' names to the
    hosts each ran a task on, and each worker's counts in the run's stats."""
    env = dict(c.env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    res = subprocess.run(["ansible-playbook", "-i", str(node_inventory(c, tmp_path, host_vars)), "playbooks/site.yml",
                          "--tags", "feature_gates", "--limit", ",".join(c.nodes[1:])],
                         env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    try:
        report = json.loads(res.stdout)
    except ValueError:
        raise AssertionError(f"cannot read site.yml's output: rc={res.returncode}\n{res.stdout}\n{res.stderr}")
    assert res.returncode == 0, (res.stdout[-6000:], res.stderr[-3000:])
    hosts = {}
    for play in report["plays"]:
        ran = hosts.setdefault(play["play"]["name"], set())
        ran.update(h for task in play["tasks"] for h, result in task["hosts"].items() if not result.get("skipped"))
    return hosts, report["stats"]


@pytest.mark.every_release("site.yml's gate plays on the release's real kubelets")
def test_site_checks_every_kubelet_at_once_and_changes_only_the_one_that_needs_it(kind_cluster, tmp_path):
    """site.yml's kubelet feature gates: every worker's kubelet is checked in one play, and the one-node-at-a-
    time play runs only on the worker whose configuration would change. Here one worker is asked for a gate
    (a host variable); the other already has what it needs, so it is neither restarted nor visited by the
    serial play. A second run finds nothing to change and the serial play matches no host."""
    c = kind_cluster
    untouched, asked = c.nodes[1], c.nodes[2]
    config = "/var/lib/kubelet/config.yaml"
    original = node_file(c, asked, config)
    untouched_config = node_file(c, untouched, config)
    pids = {node: kubelet_pid(c, node) for node in (untouched, asked)}
    gate = "ResourceHealthStatus"  # a kubelet gate both pinned releases know
    host_vars = {asked: {"dra_feature_gates_extra": {gate: True}, "dra_feature_gates_wait_timeout": 120}}
    check = "Which kubelets of the DRA nodes need their gates changed"
    serial = "DRA feature gates on the kubelets of the DRA nodes"
    try:
        first, stats = site_feature_gate_plays(c, tmp_path, host_vars)
        assert first[check] == {untouched, asked}, first
        assert first[serial] == {asked}, first
        assert stats[asked]["changed"] >= 1 and stats[untouched]["changed"] == 0, stats
        assert f"{gate}: true" in node_file(c, asked, config)
        assert kubelet_pid(c, asked) not in ("0", "", pids[asked])
        assert kubelet_pid(c, untouched) == pids[untouched]
        assert node_file(c, untouched, config) == untouched_config

        second, stats = site_feature_gate_plays(c, tmp_path, host_vars)
        assert second[check] == {untouched, asked} and second.get(serial, set()) == set(), second
        assert stats[asked]["changed"] == 0 and stats[untouched]["changed"] == 0, stats
    finally:
        # The node as it was for the other tests: the original file, the kubelet restarted on it.
        write_node_file(c, asked, config, original, then="systemctl restart kubelet")
    wait_kubelet_active(c, asked, "active again")
    wait_until(lambda: is_ready(c.get_json("node", asked)), 120, f"{asked} Ready again")


def upstream_chart(c, tmp_path):
    """A copy of the example driver's own chart (deployments/helm in its module, the release pinned here)."""
    chart = tmp_path / "dra-example-driver"
    source = os.path.join(kindlib.module_dir("sigs.k8s.io/dra-example-driver", c.versions["DRA_EXAMPLE_DRIVER_VERSION"]),
                          "deployments", "helm", "dra-example-driver")
    shutil.copytree(source, chart)
    return str(chart)


def test_upstream_chart_installed_by_the_driver_role_serves_a_claim(kind_cluster, kind_driver, tmp_path):
    """The driver role's chart path with the example driver's own Helm chart, as a user installs it: a second
    driver name beside the template-installed one, its DaemonSet with the role's probe and update strategy,
    slices on every worker, and a claim of its DeviceClass prepared on a real node (the container's
    environment names the chart's driver). Uninstalled at the end; the template driver is left alone."""
    c = kind_cluster
    name, namespace, release = "chart.example.com", "itk-chart", "itk-chart"
    chart = upstream_chart(c, tmp_path)
    settings = {"dra_driver_name": name, "dra_driver_namespace": namespace, "dra_driver_method": "helm",
                "dra_driver_chart_ref": chart, "dra_driver_release_name": release,
                "dra_driver_chart_version": yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))["version"],
                "dra_driver_helm_binary": clusterlib.component_bin("helm", c.versions["HELM_VERSION"], "helm"),
                "dra_driver_wait_timeout": 240}
    res = c.run_role("dra.admin.driver", tmp_path, settings)
    assert res.returncode == 0, f"chart install failed:\n{res.stdout[-6000:]}\n{res.stderr[-2000:]}"
    try:
        daemonsets = c.get_json("daemonsets", "-n", namespace)["items"]
        assert len(daemonsets) == 1, [d["metadata"]["name"] for d in daemonsets]
        container = daemonsets[0]["spec"]["template"]["spec"]["containers"][0]
        assert container["livenessProbe"]["grpc"]["service"] == "liveness"
        assert {"name": "DRIVER_NAME", "value": name} in container["env"]
        assert daemonsets[0]["spec"]["updateStrategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
        api = c.resource_version
        slices = c.get_json(f"resourceslices.{api}.resource.k8s.io")["items"]
        assert sorted({s["spec"]["nodeName"] for s in slices if s["spec"]["driver"] == name}) == c.nodes[1:]

        again = c.run_role("dra.admin.driver", tmp_path, settings)
        assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-4000:]

        c.fresh_namespace("itk-chart-use")
        c.apply([claim_template(api, "itk-chart-use", "one-gpu", device_class=name),
                 c.claim_pod("uses-chart", "itk-chart-use", ["sh", "-c", "env | sort; sleep 3600"])])
        wait_until(lambda: running_pod(c, "itk-chart-use", "uses-chart"), 180, "the chart driver's claim pod to run")

        env = container_environment(c, "itk-chart-use", "uses-chart")[1]
        assert env.get("DRA_RESOURCE_DRIVER_NAME") == name, env
        c.kubectl("delete", "namespace", "itk-chart-use", "--wait=true", "--timeout=120s")
    finally:
        subprocess.run([settings["dra_driver_helm_binary"], "uninstall", release, "-n", namespace, "--wait",
                        "--kubeconfig", c.kubeconfig], capture_output=True, check=False)
    assert [p["metadata"]["name"] for p in live_driver_pods(c, c.nodes[1])], "the template driver is still there"
