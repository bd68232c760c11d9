"""dra_claims_doctor on the real cluster: every finding made to happen on one cluster state, found, fixed where
a fix exists, and gone afterwards.

kube-controller-manager is stopped first, so that nothing releases claims behind the test's back:
  orphan-pod (node 0)  force-deleted: its generated claim stays reserved for a pod that is gone (orphaned)
  node 1's driver      its kubelet plugin stopped and its ResourceSlices deleted (what the kubelet does when a
                       plugin is gone): the claims there hold devices no slice publishes (missing_devices)
  term-pod (node 1)    deleted with a 600 s grace period: terminating while its node's driver is gone
                       (pod_stuck_terminating)
  held (node 1)        a claim made by hand, deleted while held-pod uses it: on its finalizer, driver gone
                       (stuck_deletion); the finalizers are not removed while held-pod exists, nor without force
Then the fixes: check mode plans and changes nothing; force removes held's finalizers once held-pod is gone; the
orphan's resync annotation is written, and the restarted controller releases the claim. With the driver back
nothing is found.

A driver that publishes through a nodeSelector or allNodes (its slices created directly, no kubelet plugin: the
scheduler allocates from any published slice) is present on every node its current slices cover: claims the real
scheduler allocated from it, deleted while their pods terminate, are not called stuck, until the driver's pool
publishes for other nodes only.
"""
import json

from components import ControllerManager, restore_driver_plugins, stop_driver_plugin
from conftest import NODES
from dra_objects import claim, claim_template, device_class, hostname_selector, pod, resource_slice

MODULE = "dra.admin.dra_claims_doctor"
RESYNC_ANNOTATION = "dra.admin/resync-requested"


def nodes(cluster):
    return sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])


def claims(cluster, namespace):
    return dict((c["metadata"]["name"], c) for c in cluster.get_json("resourceclaims", "-n", namespace)["items"])


def generated(cluster, namespace, pod_name):
    return next((c for name, c in claims(cluster, namespace).items() if name.startswith(pod_name + "-gpu-")), None)


def pods(cluster, namespace):
    return dict((p["metadata"]["name"], p) for p in cluster.get_json("pods", "-n", namespace)["items"])


def doctor(cluster, namespace, check=False, **args):
    return cluster.run_module(MODULE, dict(args, namespaces=[namespace]), check=check)


def by_kind(result):
    out = {}
    for finding in result["findings"]:
        out.setdefault(finding["kind"], []).append(finding)
    return out


def test_findings_fixes_and_a_clean_cluster(cluster, namespace, tmp_path):
    node0, node1 = nodes(cluster)[:2]
    v = cluster.resource_version
    cluster.apply([claim_template(v, namespace, "gpu"), claim(v, namespace, "held"),
                   pod(namespace, "orphan-pod", template="gpu", node=node0, grace=1),
                   pod(namespace, "ok-pod", template="gpu", node=node0, grace=1),
                   pod(namespace, "term-pod", template="gpu", node=node1, grace=600),
                   pod(namespace, "held-pod", claim_name="held", node=node1, grace=1)])

    def all_reserved():
        found = claims(cluster, namespace)
        return len(found) == 4 and all(c.get("status", {}).get("reservedFor") for c in found.values())
    cluster.wait_until(all_reserved, 120, "four claims reserved")

    clean = doctor(cluster, namespace)
    assert clean["findings"] == [] and not clean["changed"] and clean["api_requests"] <= 6

    kcm = ControllerManager(cluster, str(tmp_path))
    kcm.stop()
    try:
        cluster.kubectl("delete", "pod", "-n", namespace, "orphan-pod", "--force", "--grace-period=0")
        cluster.wait_until(lambda: "orphan-pod" not in pods(cluster, namespace), 30, "orphan-pod gone")
        stop_driver_plugin(cluster, node1)
        cluster.kubectl("delete", "resourceslices", "--field-selector", f"spec.nodeName={node1}")
        cluster.kubectl("delete", "pod", "-n", namespace, "term-pod", "--wait=false")
        cluster.kubectl("delete", "resourceclaim", "-n", namespace, "held", "--wait=false")

        found = by_kind(doctor(cluster, namespace))
        orphan_claim = generated(cluster, namespace, "orphan-pod")["metadata"]["name"]
        assert [f["claim"] for f in found["orphaned"]] == [f"{namespace}/{orphan_claim}"]
        (stuck,) = found["stuck_deletion"]
        assert stuck["claim"] == f"{namespace}/held" and stuck["nodes"] == [node1] and "held-pod" in stuck["refused"]
        (terminating,) = found["pod_stuck_terminating"]
        assert (terminating["pod"], terminating["node"], terminating["drivers"]) == (
            f"{namespace}/term-pod", node1, ["gpu.example.com"])
        assert sorted(f["claim"].split("/")[1].split("-gpu-")[0] for f in found["missing_devices"]) == [
            "held", "term-pod"]

        # held-pod still uses held: even with force, the finalizers stay.
        kept = doctor(cluster, namespace, fix=["orphaned", "stuck_deletion"], force=True, check=True)
        assert [a["kind"] for a in kept["actions"]] == ["orphaned"] and kept["changed"]
        assert RESYNC_ANNOTATION not in (generated(cluster, namespace, "orphan-pod")["metadata"].get("annotations")
                                         or {})

        cluster.kubectl("delete", "pod", "-n", namespace, "held-pod", "--force", "--grace-period=0")
        cluster.wait_until(lambda: "held-pod" not in pods(cluster, namespace), 30, "held-pod gone")
        planned = doctor(cluster, namespace, fix=["orphaned", "stuck_deletion"], force=True, check=True)
        assert sorted(a["action"] for a in planned["actions"]) == ["remove_finalizers", "resync"]
        assert "held" in claims(cluster, namespace)

        fixed = doctor(cluster, namespace, fix=["orphaned", "stuck_deletion"], force=True)
        assert fixed["changed"] and any("scheduler may give them" in w for w in fixed["warnings_issued"])
        assert "held" not in claims(cluster, namespace)
        assert "stuck_deletion" not in by_kind(fixed)
        orphan = generated(cluster, namespace, "orphan-pod")
        assert RESYNC_ANNOTATION in orphan["metadata"]["annotations"] and orphan["status"]["reservedFor"]
        # Nothing syncs it while kube-controller-manager is down: still found.
        assert [f["claim"] for f in by_kind(fixed)["orphaned"]] == [f"{namespace}/{orphan_claim}"]
    finally:
        kcm.restore()

    def released():
        left = generated(cluster, namespace, "orphan-pod")
        return left is None or not left.get("status", {}).get("reservedFor")
    cluster.wait_until(released, 120, "the controller to release the orphaned claim")
    restore_driver_plugins(cluster, NODES)
    after = doctor(cluster, namespace, fix=["orphaned"])
    assert after["findings"] == [] and not after["changed"], json.dumps(after["findings"], indent=1)
    cluster.kubectl("delete", "pod", "-n", namespace, "term-pod", "--force", "--grace-period=0")


FABRIC = "fabric.doctor.example.com"


def fabric_slice(api_version, pool, placement, generation=1, **where):
    """A slice of FABRIC whose devices carry the attribute `placement` (what the claims select by)."""
    item = resource_slice(api_version, FABRIC, pool, ["link-0", "link-1"], **where)
    item["metadata"]["name"] += "-%d" % generation
    item["spec"]["pool"]["generation"] = generation
    for device in item["spec"]["devices"]:
        (device["basic"] if "basic" in device else device)["attributes"] = {"placement": {"string": placement}}
    return item


def doctor_kinds(result):
    return sorted((f["kind"], f.get("claim") or f.get("pod")) for f in result["findings"])


def test_a_driver_publishing_by_node_selector_or_all_nodes_is_not_gone(cluster, namespace, cluster_objects):
    node0, node1, node2 = nodes(cluster)[:3]
    v = cluster.resource_version
    selected = fabric_slice(v, "selected", "selected", nodeSelector=hostname_selector(node0, node1))
    everywhere = fabric_slice(v, "everywhere", "everywhere", allNodes=True)
    cluster_objects([device_class(v, FABRIC), selected, everywhere])
    attribute = 'device.attributes["%s"].placement == "%%s"' % FABRIC
    cluster.apply([claim(v, namespace, "by-selector", selector=attribute % "selected", device_class=FABRIC),
                   claim(v, namespace, "all-nodes", selector=attribute % "everywhere", device_class=FABRIC),
                   pod(namespace, "on-selected", claim_name="by-selector", node=node0, grace=600),
                   pod(namespace, "on-all-nodes", claim_name="all-nodes", node=node1, grace=600)])

    def reserved():
        found = claims(cluster, namespace)
        return len(found) == 2 and all(c.get("status", {}).get("reservedFor") for c in found.values())
    cluster.wait_until(reserved, 120, "both claims allocated by the scheduler and reserved")
    allocated = claims(cluster, namespace)
    assert [r["pool"] for r in allocated["by-selector"]["status"]["allocation"]["devices"]["results"]] == ["selected"]
    assert [r["pool"] for r in allocated["all-nodes"]["status"]["allocation"]["devices"]["results"]] == ["everywhere"]
    assert not allocated["all-nodes"]["status"]["allocation"].get("nodeSelector"), "allNodes: no node selector"

    try:
        # Deleted while in use: the claims wait on their finalizer, the pods terminate for 600 s.
        cluster.kubectl("delete", "resourceclaim", "-n", namespace, "by-selector", "all-nodes", "--wait=false")
        cluster.kubectl("delete", "pod", "-n", namespace, "on-selected", "on-all-nodes", "--wait=false")

        def deleting():
            found = claims(cluster, namespace)
            running = pods(cluster, namespace)
            return (all(c["metadata"].get("deletionTimestamp") and c["metadata"].get("finalizers")
                        for c in found.values()) and len(found) == 2
                    and all(p["metadata"].get("deletionTimestamp") for p in running.values()) and len(running) == 2)
        cluster.wait_until(deleting, 30, "both claims and both pods being deleted")

        served = doctor(cluster, namespace, fix=["stuck_deletion"], force=True, check=True)
        assert served["findings"] == [] and served["actions"] == [] and not served["changed"], json.dumps(
            served["findings"], indent=1)
        assert served["api_requests"] <= 6  # nodes read once, however many selectors

        # The allNodes pool withdrawn: its device is missing, but the driver still publishes for node1
        # through the selector pool, so it is not gone there.
        cluster.kubectl("delete", f"resourceslices.{v}.resource.k8s.io", everywhere["metadata"]["name"])
        cluster.wait_until(lambda: ("missing_devices", f"{namespace}/all-nodes") in doctor_kinds(
            doctor(cluster, namespace)), 30, "the withdrawn device to be missing")
        assert doctor_kinds(doctor(cluster, namespace)) == [("missing_devices", f"{namespace}/all-nodes")]

        # A new generation of the selector pool for node2 only: now nothing of the driver publishes for node0
        # or node1, and the doctor calls it gone there (and would force only without a live pod).
        cluster_objects([fabric_slice(v, "selected", "selected", generation=2, nodeSelector=hostname_selector(node2))])
        gone = doctor(cluster, namespace, fix=["stuck_deletion"], force=True, check=True)
        found = by_kind(gone)
        assert sorted(f["claim"] for f in found["stuck_deletion"]) == [f"{namespace}/all-nodes",
                                                                       f"{namespace}/by-selector"]
        assert all(f["drivers"] == [FABRIC] and f["action"] is None and "still use" in f["refused"]
                   for f in found["stuck_deletion"])
        assert sorted((f["pod"], f["node"]) for f in found["pod_stuck_terminating"]) == [
            (f"{namespace}/on-all-nodes", node1), (f"{namespace}/on-selected", node0)]
        assert gone["actions"] == [] and not gone["changed"]
    finally:
        cluster.kubectl("delete", "pod", "-n", namespace, "on-selected", "on-all-nodes", "--force",
                        "--grace-period=0", "--ignore-not-found", check=False)
    cluster.wait_until(lambda: not claims(cluster, namespace), 60, "the controller to release and remove the claims")
