"""dra_device_health_info against the real API server.

What is real: kube-apiserver's validation and storage of both sources (1.36: device taints in a
ResourceSlice, stamped with timeAdded; allocatedResourcesStatus through the pods/status subresource,
checked against the container's claims), the scheduler's allocations, the example driver's slices.
What the test writes itself, because the nodes are KWOK fakes: the health.example.com ResourceSlice with
its taint (as a driver publishes it; the example driver publishes no taints) and the pods'
allocatedResourcesStatus (as the kubelet writes it: there is no kubelet). The resourceID written for the
example driver's device is its first CDI device ID, what the 1.36 kubelet writes for that driver.
"""
import json

import pytest

from dra_objects import DRIVER, claim, claim_template, device_class, pod

HEALTH_DRIVER = "health.example.com"
POOL = "health-pool"
SLICE = "health-example-com-health-pool"
TAINT = {"key": "health.example.com/unhealthy", "value": "ecc-errors", "effect": "NoSchedule"}
EXAMPLE_CDI_ID = "k8s.gpu.example.com/gpu=common"


def _slice(node, taint=None):
    devices = []
    for index in range(2):
        device = {"name": f"dev-{index}", "attributes": {"index": {"int": index}}}
        if taint and index == 0:
            device["taints"] = [taint]
        devices.append(device)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": SLICE},
            "spec": {"driver": HEALTH_DRIVER, "nodeName": node, "devices": devices,
                     "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 1}}}


def _running(cluster, namespace, name):
    def probe():
        p = cluster.get_json("pod", "-n", namespace, name)
        return p if p["status"].get("phase") == "Running" else None
    return cluster.wait_until(probe, 90, f"pod {namespace}/{name} Running")


def _device(cluster, namespace, running_pod):
    name = running_pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    (result,) = cluster.get_json("resourceclaims.v1.resource.k8s.io", "-n", namespace, name)[
        "status"]["allocation"]["devices"]["results"]
    return f"{result['driver']}/{result['pool']}/{result['device']}"


def _report_health(cluster, namespace, name, resource_id, health):
    """What the kubelet writes: the container's allocatedResourcesStatus, through pods/status."""
    value = [{"name": "claim:gpu", "resources": [{"resourceID": resource_id, "health": health}]}]
    cluster.kubectl("patch", "pod", "-n", namespace, name, "--subresource=status", "--type=json", "-p",
                    json.dumps([{"op": "add", "path": "/status/containerStatuses/0/allocatedResourcesStatus",
                                 "value": value}]))


def _ids(entries):
    return sorted(e["id"] for e in entries)


def _nothing_unhealthy(result):
    return (result["unhealthy"], result["unhealthy_in_use"], result["long_unknown"], result["driver_taints"],
            result["unresolved"], result["problems"]) == ([], [], [], [], [], [])


@pytest.mark.per_release("gate_info", "ResourceHealthStatus", key="default")
def test_device_health_from_driver_taints_and_pod_status(cluster, namespace, tmp_path):
    if cluster.minor < 36:
        # Both sources are alpha and off by default: said plainly, and the devices are still reported.
        result = cluster.run_module("dra.admin.dra_device_health_info", {"list_devices": "all"})
        for source, gate in (("pod_status", "ResourceHealthStatus"), ("slice_taints", "DRADeviceTaints")):
            assert result["sources"][source]["available"] is False
            assert f"{gate} is alpha and off by default on 1.{cluster.minor}" in result["sources"][source]["detail"]
        assert result["summary"]["published"] >= 8 and result["summary"]["not_reported"] == result["summary"]["devices"]
        assert _nothing_unhealthy(result) and result["api_requests"] == 5
        return

    node = cluster.get_json("nodes")["items"][0]["metadata"]["name"]
    cluster.apply([device_class("v1", HEALTH_DRIVER), _slice(node)])
    try:
        one = claim("v1", namespace, "tainted", selector=f'device.attributes["{HEALTH_DRIVER}"].index == 0',
                    device_class=HEALTH_DRIVER)
        cluster.apply([one, claim_template("v1", namespace, "one-gpu"),
                       pod(namespace, "on-tainted", claim_name="tainted"),
                       pod(namespace, "on-unhealthy", template="one-gpu"),
                       pod(namespace, "on-unknown", template="one-gpu")])
        _running(cluster, namespace, "on-tainted")
        unhealthy_device = _device(cluster, namespace, _running(cluster, namespace, "on-unhealthy"))
        unknown_device = _device(cluster, namespace, _running(cluster, namespace, "on-unknown"))

        clean = cluster.run_module("dra.admin.dra_device_health_info")
        assert _nothing_unhealthy(clean) and clean["sources"]["pod_status"]["available"]
        assert clean["devices"] == [] and clean["api_requests"] == 5

        # (a) The driver taints dev-0, which the claim already holds (NoSchedule leaves the pod running).
        cluster.apply(_slice(node, TAINT))
        stored = cluster.get_json("resourceslices.v1.resource.k8s.io", SLICE)["spec"]["devices"][0]["taints"]
        assert [(t["key"], t["effect"]) for t in stored] == [(TAINT["key"], TAINT["effect"])] and stored[0]["timeAdded"]
        # (b) The kubelet reports one device Unhealthy, another Unknown.
        _report_health(cluster, namespace, "on-unhealthy", EXAMPLE_CDI_ID, "Unhealthy")
        _report_health(cluster, namespace, "on-unknown", unknown_device, "Unknown")

        first_seen = {unknown_device: {"condition": "unknown", "since": "2020-01-01T00:00:00Z"}}
        result = cluster.run_module("dra.admin.dra_device_health_info",
                                    {"first_seen": first_seen, "unknown_after": 600})
        tainted_device = f"{HEALTH_DRIVER}/{POOL}/dev-0"
        assert _ids(result["unhealthy"]) == sorted([tainted_device, unhealthy_device])
        in_use = dict((d["id"], d) for d in result["unhealthy_in_use"])
        assert sorted(in_use) == sorted([tainted_device, unhealthy_device])
        assert [(p["namespace"], p["name"]) for p in in_use[tainted_device]["pods"]] == [(namespace, "on-tainted")]
        assert in_use[tainted_device]["since_source"] == "taint" and in_use[tainted_device]["since"] == stored[0][
            "timeAdded"]
        assert [p["name"] for p in in_use[unhealthy_device]["pods"]] == ["on-unhealthy"]
        (long_unknown,) = result["long_unknown"]
        assert long_unknown["id"] == unknown_device and long_unknown["since_source"] == "first-seen"
        assert [p["name"] for p in long_unknown["pods"]] == ["on-unknown"]
        assert [(t["device"], t["key"]) for t in result["driver_taints"]] == [("dev-0", TAINT["key"])]
        assert result["unresolved"] == [] and len(result["problems"]) == 3
        assert result["summary"]["unhealthy_in_use"] == 2 and result["summary"]["pods_reporting"] == 2
        assert result["api_requests"] == 5
        assert unhealthy_device in result["first_seen"] and result["first_seen"][unknown_device]["since"] == \
            "2020-01-01T00:00:00Z"

        # playbooks/health.yml: the same findings in its report, since-times kept in its state file.
        state = tmp_path / "device-state.json"
        state.write_text(json.dumps(first_seen))
        report_file = tmp_path / "report.json"
        metrics_file = tmp_path / "dra_capacity.prom"
        run = cluster.run_playbook("playbooks/health.yml", "-e", json.dumps({
            "dra_health_device_state_file": str(state), "dra_health_report_file": str(report_file),
            "dra_health_capacity_metrics_file": str(metrics_file)}))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
        devices = json.loads(report_file.read_text())["devices"]
        assert _ids(devices["unhealthy_in_use"]) == sorted([tainted_device, unhealthy_device])
        assert _ids(devices["long_unknown"]) == [unknown_device]
        assert "devices: 2 unhealthy (2 in use), 1 unknown (1 for long), 1 tainted by drivers" in run.stdout
        # The capacity for node-exporter's textfile collector.
        assert f'dra_admin_devices{{driver="{HEALTH_DRIVER}",pool="{POOL}",state="total"}} 2\n' in \
            metrics_file.read_text()
        kept = json.loads(state.read_text())
        assert kept[unknown_device]["since"] == "2020-01-01T00:00:00Z" and unhealthy_device in kept
        # The report for its owner and group, the state for its owner; the textfile for node-exporter to read.
        assert [oct(p.stat().st_mode & 0o777) for p in (report_file, state, metrics_file)] == [
            oct(0o640), oct(0o600), oct(0o644)]

        failed = cluster.run_module("dra.admin.dra_device_health_info",
                                    {"driver": DRIVER, "first_seen": first_seen, "fail_on_problems": True},
                                    expect_failure=True)
        assert "2 device health problem(s)" in failed["msg"] and tainted_device not in failed["msg"]
    finally:
        cluster.kubectl("delete", "resourceslices.v1.resource.k8s.io", SLICE, "--ignore-not-found")
        cluster.kubectl("delete", "deviceclasses.v1.resource.k8s.io", HEALTH_DRIVER, "--ignore-not-found")
