"""Real nodes: device health as the kubelet reports it (pods' status.containerStatuses[].allocatedResourcesStatus),
read by dra_device_health_info and acted on by dra_device_remediation, on the kind cluster of each pinned release
(conftest.py's `kind_cluster`).

The health comes from the project's test driver (hack/healthdriver, built by hack/cluster/build and loaded with
`kind load image-archive`): a kubelet plugin on the kubeletplugin helper of k8s.io/dynamic-resource-allocation that
publishes dev-0..dev-3 per worker and reports each device's health from a file on the node,
/var/lib/dra-admin-health/<device> (Healthy, Unhealthy, Unknown, or `silent` to leave it out of the reports).

Where the kubelet has the gate ResourceHealthStatus on (1.36 and later) a device flipped to Unhealthy shows in
its pod's status, is named unhealthy with the pod, gets one remediation rule, is lifted after it is healthy again,
and turns Unknown once the driver stops reporting it. Where the gate is off (1.33) the kubelet never watches the
driver's health, the module says the source is not available, and the remediation refuses with the catalog's
reason.

Not part of `make integration` (it needs podman and the kind build): `make integration-kind-nodes`.
"""
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kindlib  # noqa: E402
from cluster_harness import run_module  # noqa: E402
from dra_objects import claim_template, device_class  # noqa: E402
from kind_nodes import claim_device, is_ready, wait_until  # noqa: E402
from kube import WaitTimeout  # noqa: E402

HEALTH_DRIVER = "health.dra-admin.test"
NAMESPACE = "dra-health-test"
HEALTH_DIR = "/var/lib/dra-admin-health"
DEVICES = ["dev-0", "dev-1", "dev-2", "dev-3"]
REMEDIATION_LABEL = "dra.admin/purpose=device-health-remediation"


def driver_manifests(image):
    """ServiceAccount, RBAC (its node's ResourceSlices, the claims it prepares, its node) and the DaemonSet."""
    meta = {"name": "health-driver", "namespace": NAMESPACE}
    rules = [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
              "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
             {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    paths = {"plugins": "/var/lib/kubelet/plugins", "registry": "/var/lib/kubelet/plugins_registry",
             "health": HEALTH_DIR, "cdi": "/var/run/cdi"}
    container = {"name": "plugin", "image": image, "imagePullPolicy": "IfNotPresent",
                 "args": ["-v=3", "-driver-name", HEALTH_DRIVER, "-devices", str(len(DEVICES)), "-interval", "5s"],
                 "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                 "securityContext": {"privileged": True},
                 "volumeMounts": [{"name": name, "mountPath": path} for name, path in paths.items()]}
    pod_spec = {"serviceAccountName": "health-driver", "terminationGracePeriodSeconds": 5, "containers": [container],
                "volumes": [{"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}
                            for name, path in paths.items()]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "health-driver"},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "health-driver"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "health-driver"},
         "subjects": [{"kind": "ServiceAccount", "name": "health-driver", "namespace": NAMESPACE}]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
         "spec": {"selector": {"matchLabels": {"app": "health-driver"}},
                  "template": {"metadata": {"labels": {"app": "health-driver"}}, "spec": pod_spec}}},
    ]


def published(c, node):
    api = c.resource_version
    slices = [s for s in c.get_json(f"resourceslices.{api}.resource.k8s.io")["items"]
              if s["spec"].get("driver") == HEALTH_DRIVER and s["spec"].get("nodeName") == node]
    return sorted(d["name"] for s in slices for d in s["spec"].get("devices") or [])


def driver_pod(c, node):
    pods = c.get_json("pods", "-n", NAMESPACE, "-l", "app=health-driver", "--field-selector",
                      f"spec.nodeName={node}")["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if len(live) == 1 and is_ready(live[0]) else None


def set_health(c, node, device, state):
    out = c.on_node(node, "sh", "-c", f"mkdir -p {HEALTH_DIR} && echo {state} > {HEALTH_DIR}/{device}.tmp && "
                                      f"mv {HEALTH_DIR}/{device}.tmp {HEALTH_DIR}/{device}")
    assert out.returncode == 0, out.stderr


def driver_diagnostics(c):
    """The driver pods' states and logs (the previous container's too), for a failure message."""
    out = []
    for pod in c.get_json("pods", "-n", NAMESPACE, "-l", "app=health-driver")["items"]:
        name = pod["metadata"]["name"]
        out.append(f"--- {name} on {pod['spec'].get('nodeName')}: {pod['status'].get('containerStatuses')}")
        for previous in ([], ["--previous"]):
            out.append(c.kubectl("logs", "-n", NAMESPACE, name, "--tail=40", *previous, check=False).stdout)
    return "\n".join(out)


def driver_log(c, node):
    return c.kubectl("logs", "-n", NAMESPACE, driver_pod(c, node)["metadata"]["name"]).stdout


@pytest.fixture(scope="module")
def health_driver(kind_cluster):
    """The test driver built (cached by version), loaded into the nodes and running on both workers with its
    DeviceClass; removed afterwards with its slices and health files (other tests share the cluster)."""
    c = kind_cluster
    started = time.time()
    build = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "build"), "--kind", "--only",
                            kindlib.HEALTH_DRIVER], capture_output=True, text=True, check=False)
    assert build.returncode == 0, f"building the health driver failed:\n{build.stdout}\n{build.stderr}"
    built = time.time()
    image = kindlib.load_health_driver_image(c.versions, c.name, log=lambda *args: None)
    print(f"\nhealth driver {c.version}: build {built - started:.0f}s, load {time.time() - built:.0f}s")
    workers = c.nodes[1:]
    try:
        c.apply(driver_manifests(image) + [device_class(c.resource_version, HEALTH_DRIVER)])
        try:
            for node in workers:
                wait_until(lambda: published(c, node) == DEVICES, 180, f"{DEVICES} published on {node}")
                wait_until(lambda: driver_pod(c, node), 60, f"the health driver's pod on {node} to be ready")
        except WaitTimeout as exc:
            raise AssertionError(f"{exc}\n{driver_diagnostics(c)}") from exc
        yield workers
    finally:
        c.kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s", "--ignore-not-found", check=False)
        for kind in ("clusterrolebinding", "clusterrole"):
            c.kubectl("delete", kind, "health-driver", "--ignore-not-found", check=False)
        c.kubectl("delete", f"deviceclasses.{c.resource_version}.resource.k8s.io", HEALTH_DRIVER, "--ignore-not-found",
                  check=False)
        for s in c.get_json(f"resourceslices.{c.resource_version}.resource.k8s.io")["items"]:
            if s["spec"].get("driver") == HEALTH_DRIVER:
                c.kubectl("delete", f"resourceslices.{c.resource_version}.resource.k8s.io", s["metadata"]["name"],
                          "--ignore-not-found", check=False)
        for node in workers:
            c.on_node(node, "rm", "-rf", HEALTH_DIR, f"/var/run/cdi/{HEALTH_DRIVER}.json",
                      f"/var/lib/kubelet/plugins/{HEALTH_DRIVER}")


def health_pod(c, namespace, node):
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "one-device"}],
            "containers": [{"name": "ctr", "image": kindlib.cluster_images(c.versions, c.version)["local-path-helper"],
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", "echo DRA_HEALTH_DEVICE=$DRA_HEALTH_DEVICE; sleep 3600"],
                            "resources": {"claims": [{"name": "dev"}]}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user", "namespace": namespace}, "spec": spec}


def start_pod(c, namespace, node):
    """The claim pod on `node`, running: (pod, driver, pool, device); its container got the device's CDI edits."""
    c.fresh_namespace(namespace)
    c.apply([claim_template(c.resource_version, namespace, "one-device", device_class=HEALTH_DRIVER),
             health_pod(c, namespace, node)])

    def ready():
        pod = c.get_json("pod", "user", "-n", namespace)
        return pod if is_ready(pod) else None
    pod = wait_until(ready, 180, f"{namespace}/user to be ready")
    _uid, drv, pool, device = claim_device(c, namespace, pod)
    assert (drv, pool) == (HEALTH_DRIVER, node) and device in DEVICES, (drv, pool, device)
    logs = wait_until(lambda: c.kubectl("logs", "user", "-n", namespace).stdout or None, 60, "the pod's output")
    assert logs.strip() == f"DRA_HEALTH_DEVICE={device}", logs
    return pod, drv, pool, device


def reported(c, namespace):
    """[(resource name, resourceID, health)] of the pod's allocatedResourcesStatus."""
    statuses = c.get_json("pod", "user", "-n", namespace)["status"].get("containerStatuses") or []
    return sorted((entry["name"], r.get("resourceID"), r.get("health"))
                  for s in statuses for entry in s.get("allocatedResourcesStatus") or [] for r in entry["resources"])


def wait_reported(c, namespace, health, timeout=120):
    def probe():
        now = reported(c, namespace)
        return now if now and all(h == health for _n, _r, h in now) else None
    started = time.time()
    found = wait_until(probe, timeout, f"{namespace}/user's allocatedResourcesStatus to say {health}", interval=1)
    return found, time.time() - started


def health_info(c, tmp_path, **args):
    result = c.run_module("dra.admin.dra_device_health_info", dict({"driver": HEALTH_DRIVER}, **args), tmp_path)
    assert not result.get("failed"), result
    return result


def entry(result, device_id):
    found = [d for d in result["devices"] if d["id"] == device_id]
    return found[0] if found else None


def remediation(c, tmp_path, check=False):
    args = {"driver": HEALTH_DRIVER, "effect": "NoSchedule", "healthy_for": 5}
    if check:
        return run_module(c.env, c.local_inventory(tmp_path), "dra.admin.dra_device_remediation", args, check=True)
    return c.run_module("dra.admin.dra_device_remediation", args, tmp_path)


def remediation_rules(c, support):
    rules = c.get_json(f"devicetaintrules.{support['api_version']}.resource.k8s.io", "-l", REMEDIATION_LABEL)["items"]
    return [r for r in rules if r["spec"]["deviceSelector"].get("driver") == HEALTH_DRIVER]


@pytest.mark.every_release("the health stream of the release's real kubelet")
def test_device_health_from_the_kubelet(kind_cluster, health_driver, tmp_path):
    c = kind_cluster
    node = health_driver[-1]
    namespace = "itk-health"
    gate = clusterlib.catalog().gate_info(c.version, "ResourceHealthStatus")
    try:
        if gate and gate["default"]:
            health_reported_and_remediated(c, tmp_path, namespace, node)
        else:
            health_not_watched(c, tmp_path, namespace, node, gate)
    finally:
        c.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
        for device in DEVICES:
            set_health(c, node, device, "Healthy")
        support = clusterlib.catalog().device_taint_rule_support(c.version)
        if support["default_on"]:  # what kind-up --enable-dra serves (see health_reported_and_remediated)
            for rule in remediation_rules(c, support):
                c.kubectl("delete", f"devicetaintrules.{support['api_version']}.resource.k8s.io",
                          rule["metadata"]["name"], "--ignore-not-found", check=False)


def health_not_watched(c, tmp_path, namespace, node, gate):
    """Gate off (1.33): every device of the node Unhealthy before the pod starts; the kubelet prepares the claim
    but never opens the health stream (the driver logs when it does, right after registration), the pod carries no
    report, the module says the source is not available, the remediation refuses with the catalog's reason."""
    assert gate is not None and gate["stage"] == "alpha" and gate["default"] is False, gate
    for device in DEVICES:
        set_health(c, node, device, "Unhealthy")
    _pod, drv, pool, device = start_pod(c, namespace, node)
    log = driver_log(c, node)
    assert "prepared" in log and "kubelet watches the device health" not in log, log[-3000:]
    assert reported(c, namespace) == []

    result = health_info(c, tmp_path, list_devices="all")
    source = result["sources"]["pod_status"]
    assert source["available"] is False and source["gate"] == "ResourceHealthStatus", source
    assert "off by default" in source["detail"], source
    assert result["summary"]["pods_reporting"] == 0 and result["unhealthy_in_use"] == [], result["summary"]
    mine = entry(result, f"{drv}/{pool}/{device}")
    assert mine["condition"] == "not-reported" and mine["in_use"] is True, mine

    refused = remediation(c, tmp_path)
    assert refused.get("failed") and refused.get("changed") is False, refused
    assert clusterlib.catalog().device_taint_rules_unavailable(c.version) in refused["msg"], refused["msg"]


def health_reported_and_remediated(c, tmp_path, namespace, node):
    """Gate on (1.36 and later): Healthy, then Unhealthy (named with its pod, one rule), Healthy again (marked,
    then lifted after healthy_for), then silent (Unknown after the kubelet's timeout), then the pod deleted."""
    _pod, drv, pool, device = start_pod(c, namespace, node)
    device_id = f"{drv}/{pool}/{device}"
    healthy, dummy = wait_reported(c, namespace, "Healthy")
    print(f"\nkubelet {c.version} reports {healthy}")
    # The container names the pod's claim without a request: the kubelet writes claim:<name> alone, and the
    # driver's first CDI device ID as resourceID.
    assert healthy == [("claim:dev", f"{HEALTH_DRIVER}/device={device}", "Healthy")], healthy

    set_health(c, node, device, "Unhealthy")
    unhealthy, seconds = wait_reported(c, namespace, "Unhealthy")
    print(f"Unhealthy in the pod's status {seconds:.0f}s after the file changed")
    result = health_info(c, tmp_path)
    assert result["sources"]["pod_status"]["available"] is True, result["sources"]
    mine = entry(result, device_id)
    assert mine["condition"] == "unhealthy" and mine["health"] == "Unhealthy", mine
    assert [r["resource_id"] for r in mine["reports"]] == [unhealthy[0][1]], mine["reports"]
    in_use = [(u["id"], [(p["namespace"], p["name"]) for p in u["pods"]]) for u in result["unhealthy_in_use"]]
    assert in_use == [(device_id, [(namespace, "user")])], in_use
    assert result["unresolved"] == [], result["unresolved"]
    if clusterlib.catalog().device_taint_rule_support(c.version)["default_on"]:
        remediated(c, tmp_path, namespace, node, device_id)
    else:  # kind-up --enable-dra switches on DRA alone: a release whose DeviceTaintRule is off by default lacks it
        refused = remediation(c, tmp_path)
        assert refused.get("failed") and refused.get("changed") is False, refused
        assert clusterlib.catalog().device_taint_rules_unavailable(c.version) in refused["msg"], refused["msg"]
        set_health(c, node, device, "Healthy")
        wait_reported(c, namespace, "Healthy")
    went_silent(c, tmp_path, namespace, node, device_id)


def remediated(c, tmp_path, namespace, node, device_id):
    """One NoSchedule rule for the unhealthy device; healthy again: marked, then lifted once the module's own plan
    (check mode, polled) says the healthy_for period is over."""
    support = clusterlib.catalog().device_taint_rule_support(c.version)
    assert support["usable"], support
    device = device_id.rsplit("/", 1)[1]
    result = remediation(c, tmp_path)
    assert not result.get("failed") and result["tainted"] == [device_id], result
    rules = remediation_rules(c, support)
    assert len(rules) == 1 and rules[0]["spec"]["deviceSelector"] == {
        "driver": HEALTH_DRIVER, "pool": node, "device": device}, rules
    assert rules[0]["spec"]["taint"]["effect"] == "NoSchedule", rules[0]["spec"]

    set_health(c, node, device, "Healthy")
    wait_reported(c, namespace, "Healthy")
    result = remediation(c, tmp_path)
    assert not result.get("failed") and result["marked_healthy"] == [device_id], result

    def lift_planned():
        plan = remediation(c, tmp_path, check=True)
        assert not plan.get("failed"), plan
        return [a["action"] for a in plan["actions"] if a["id"] == device_id] == ["lift"]
    wait_until(lift_planned, 60, f"the remediation to plan lifting {device_id}", interval=2)
    result = remediation(c, tmp_path)
    assert not result.get("failed") and result["lifted"] == [device_id], result
    assert remediation_rules(c, support) == []


def went_silent(c, tmp_path, namespace, node, device_id):
    """The driver leaves the device out of its reports (the others go on): Unknown after the kubelet's timeout.
    Healthy again, then the driver sends nothing at all (its stream stays open): Unknown too, once the kubelet
    next writes the pod's status. Then the pod is deleted and nobody reports on the device."""
    device = device_id.rsplit("/", 1)[1]
    set_health(c, node, device, "silent")
    unknown, seconds = wait_reported(c, namespace, "Unknown", timeout=180)
    print(f"Unknown in the pod's status {seconds:.0f}s after the driver stopped reporting {device}: {unknown}")
    result = health_info(c, tmp_path)
    mine = entry(result, device_id)
    assert mine["condition"] == "unknown" and mine["health"] == "Unknown", mine

    set_health(c, node, device, "Healthy")
    wait_reported(c, namespace, "Healthy")
    for other in DEVICES:
        set_health(c, node, other, "silent")
    _unknown, seconds = wait_reported(c, namespace, "Unknown", timeout=300)
    print(f"Unknown in the pod's status {seconds:.0f}s after the driver stopped sending any report")

    c.kubectl("delete", "pod", "user", "-n", namespace, "--wait=true", "--timeout=120s")
    result = health_info(c, tmp_path, list_devices="all")
    mine = entry(result, device_id)
    assert mine["condition"] == "not-reported" and mine["in_use"] is False and mine["reports"] == [], mine
