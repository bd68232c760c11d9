# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The claim doctor: findings over claim views, slices and pods, and the fix each allows.

Pure functions. Findings (``KINDS``):

- ``orphaned``: allocated or reserved with no live consumer (``claims.claims.is_orphaned``).
  kube-controller-manager's resourceclaim controller drops ``reservedFor`` entries of
  pods that are gone or done, and deallocates the claim when none is left, whenever it
  syncs the claim; it syncs a claim on every change to it. So the fix of a stale
  reservation is a metadata change (an annotation) that makes the controller look again;
  a claim generated for a pod (the pod is its controlling owner) that is gone and that
  nothing reserves is deleted, as the garbage collector would. Any other claim that is
  allocated and unused is only reported: it may be waiting for its next pod.
- ``stuck_deletion``: deleted, held by finalizers, and a driver of its devices is gone
  from the claim's node(s). The fix is to bring the driver back; with ``force`` its
  finalizers are removed, never while a consumer pod still exists.
- ``pod_stuck_terminating``: a pod being deleted that holds a claim whose driver is gone
  from the pod's node: the kubelet cannot unprepare the devices, so the pod stays.

A driver is gone from a node only when nothing of it still publishes for the node: no
current slice of it covers the node by ``nodeName``, ``allNodes`` or a ``nodeSelector``
(at slice level or per device), as ``kube.slices.drivers_for_node`` decides with the Node's
labels.
- ``missing_devices``: an allocated device that no current ResourceSlice publishes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.dra.admin.plugins.module_utils.claims.claims import PENDING, RESERVED, view_name
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    device_index, drivers_for_node, node_publishers, publishing_drivers,
)
from ansible_collections.dra.admin.plugins.module_utils.common.times import epoch_seconds

ORPHANED = "orphaned"
STUCK_DELETION = "stuck_deletion"
POD_STUCK_TERMINATING = "pod_stuck_terminating"
MISSING_DEVICES = "missing_devices"
KINDS = (ORPHANED, STUCK_DELETION, POD_STUCK_TERMINATING, MISSING_DEVICES)
FIXABLE = (ORPHANED, STUCK_DELETION)

# Actions of a plan (what the API layer carries out).
RESYNC = "resync"
DELETE = "delete"
REMOVE_FINALIZERS = "remove_finalizers"
RESYNC_ANNOTATION = "dra.admin/resync-requested"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # left out of diffs: long and unchanged

FORCE_RISK = (
    "removing the finalizers lets the API server delete the claim while nothing has released its devices: "
    "the scheduler may give them to another pod while a container still uses them, and the driver, when it "
    "returns, may still hold state (prepared devices, CDI specs, checkpoints) for a claim that no longer exists")


def drivers_present(publishers, node_labels):
    """A function node name -> set of drivers publishing for it (kube.slices.drivers_for_node), each node
    looked up once. node_labels: {name: labels}; a node not in it (deleted) is matched by name only."""
    known = {}

    def present(node):
        if node not in known:
            known[node] = drivers_for_node(publishers, node, node_labels.get(node) or {})
        return known[node]
    return present


def gone_drivers(view, present, anywhere):
    """[(node, driver)] of the claim's drivers that publish nothing for a node the claim is on.

    present: drivers_present(...); anywhere: kube.slices.publishing_drivers. Claims on nodes are
    checked on each of them; a claim on no node (network-attached, no live pod) is checked
    against every node: its driver is gone when it publishes for none.
    """
    gone = []
    for driver in view["drivers"]:
        if view["nodes"]:
            gone.extend((node, driver) for node in view["nodes"] if driver not in present(node))
        elif driver not in anywhere:
            gone.append((None, driver))
    return gone


def missing_devices(view, locations):
    """Allocated devices no current slice publishes (locations: kube.slices.device_index(...)[0])."""
    return [d for d in view["devices"] if (d["driver"], d["pool"], d["device"]) not in locations]


def _device_label(dev):
    return "%s/%s/%s" % (dev["driver"], dev["pool"], dev["device"])


def generated_for_gone_pod(claim_meta, pods):
    """The claim was generated for a pod (its controlling owner) that no longer exists."""
    for ref in claim_meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return ref.get("uid") not in pods
    return False


def orphan_finding(view, claim_meta, pods):
    missing = ", ".join("%s/%s" % (c["resource"], c["name"]) for c in view["missing_consumers"])
    finding = {"kind": ORPHANED, "claim": view_name(view), "namespace": view["namespace"], "name": view["name"],
               "nodes": view["nodes"], "drivers": view["drivers"], "action": None}
    if view["state"] == RESERVED:
        finding["message"] = ("claim %s is reserved for consumers that no longer exist (%s)"
                              % (view_name(view), missing or "none left"))
        finding["action"] = RESYNC
        finding["advice"] = ("kube-controller-manager's resourceclaim controller removes stale reservations and "
                             "deallocates the claim when it syncs it; fix [orphaned] annotates the claim so it does. "
                             "If the claim stays reserved, check that kube-controller-manager runs and is not "
                             "throttled (dra.admin.dra_metrics_advice)")
    elif generated_for_gone_pod(claim_meta, pods):
        finding["message"] = "claim %s was generated for a pod that no longer exists and is still allocated" % view_name(view)
        finding["action"] = DELETE
        finding["advice"] = ("the garbage collector deletes claims whose pod is gone; fix [orphaned] deletes it "
                             "(nothing reserves it)")
    else:
        finding["message"] = "claim %s is allocated but no consumer reserves it" % view_name(view)
        finding["advice"] = ("nothing releases an unused allocation of a claim made by hand; it is kept for its next "
                             "pod. Delete the claim if it is no longer needed")
    return finding


def stuck_deletion_finding(view, claim_meta, gone, force):
    live = [c for c in view["consumers"] if c["exists"] is not False]
    where = ", ".join("%s on %s" % (driver, node or "any node") for node, driver in gone)
    finding = {"kind": STUCK_DELETION, "claim": view_name(view), "namespace": view["namespace"], "name": view["name"],
               "nodes": view["nodes"], "drivers": sorted(set(d for dummy, d in gone)),
               "finalizers": list(claim_meta.get("finalizers") or []), "action": None,
               "message": "claim %s is being deleted, held by finalizer(s) %s, and its driver is gone (%s)"
                          % (view_name(view), ", ".join(claim_meta.get("finalizers") or []), where),
               "advice": ("bring the driver back on %s (role dra.admin.driver; check its DaemonSet pod there): its "
                          "kubelet plugin unprepares the devices, the pods end and the controller removes the "
                          "finalizer" % ", ".join(sorted(set(n or "any node" for n, dummy in gone))))}
    if live:
        finding["refused"] = ("not removing the finalizers: %s still use(s) the claim"
                              % ", ".join("%s/%s" % (c["resource"], c["name"]) for c in live))
    elif force:
        finding["action"] = REMOVE_FINALIZERS
        finding["warning"] = FORCE_RISK
    else:
        finding["refused"] = "removing the finalizers needs force: true (%s)" % FORCE_RISK
    return finding


def missing_devices_finding(view, devices):
    return {"kind": MISSING_DEVICES, "claim": view_name(view), "namespace": view["namespace"], "name": view["name"],
            "nodes": view["nodes"], "drivers": sorted(set(d["driver"] for d in devices)),
            "devices": [_device_label(d) for d in devices], "action": None,
            "message": "claim %s holds device(s) no ResourceSlice publishes any more: %s"
                       % (view_name(view), ", ".join(_device_label(d) for d in devices)),
            "advice": ("the driver withdrew them (driver gone, device removed or renamed); when the driver publishes "
                       "them again the finding goes away. Otherwise end the consumer pods so that a new claim is "
                       "allocated from devices that exist")}


def terminating_pod_findings(views, pods, present, now):
    """pod_stuck_terminating findings: pods being deleted whose claims' driver is gone from their node.

    pods: {uid: pod info with namespace, name, node, deletion_timestamp (epoch seconds or None)};
    present: drivers_present(...).
    """
    by_pod = {}
    for view in views:
        for consumer in view["consumers"]:
            pod = pods.get(consumer.get("uid")) if consumer["exists"] else None
            if not pod or pod.get("deletion_timestamp") is None or not pod.get("node"):
                continue
            here = present(pod["node"])
            gone = [d for d in view["drivers"] if d not in here]
            if gone:
                entry = by_pod.setdefault(consumer["uid"], {"pod": pod, "drivers": set(), "claims": []})
                entry["drivers"].update(gone)
                entry["claims"].append(view_name(view))
    findings = []
    for entry in by_pod.values():
        pod = entry["pod"]
        drivers = sorted(entry["drivers"])
        overdue = max(0, int(now - pod["deletion_timestamp"]))
        findings.append({
            "kind": POD_STUCK_TERMINATING, "pod": "%s/%s" % (pod["namespace"], pod["name"]),
            "namespace": pod["namespace"], "name": pod["name"], "nodes": [pod["node"]], "node": pod["node"],
            "drivers": drivers, "claims": sorted(entry["claims"]), "overdue_seconds": overdue, "action": None,
            "message": "pod %s/%s is terminating on node %s, whose driver %s is gone: the kubelet cannot unprepare "
                       "its claim(s) %s%s" % (pod["namespace"], pod["name"], pod["node"], ", ".join(drivers),
                                              ", ".join(sorted(entry["claims"])),
                                              " (%ds past its grace period)" % overdue if overdue else ""),
            "advice": ("bring driver %s back on node %s (role dra.admin.driver); only if the node is lost for good, "
                       "delete the pod with --force --grace-period=0 (its devices are then never unprepared)"
                       % (", ".join(drivers), pod["node"]))})
    return findings


def diagnose(views, claim_metas, pods, slices, node_labels, now, force=False):
    """Every finding, sorted by kind then object.

    views: claims.claims.claim_view of each claim; claim_metas: {namespace/name: metadata};
    pods: {uid: pod info}; slices: the ResourceSlices (every generation); node_labels:
    {node name: labels} of the nodes; now: epoch seconds.
    """
    slices = list(slices)
    locations = device_index(slices)[0]
    publishers = node_publishers(slices)
    present = drivers_present(publishers, node_labels)
    anywhere = publishing_drivers(publishers)
    findings = []
    for view in views:
        meta = claim_metas.get(view_name(view)) or {}
        if view["orphaned"]:
            findings.append(orphan_finding(view, meta, pods))
        if view["deletion_requested"] and meta.get("finalizers"):
            gone = gone_drivers(view, present, anywhere)
            if gone:
                findings.append(stuck_deletion_finding(view, meta, gone, force))
        if view["state"] != PENDING:
            missing = missing_devices(view, locations)
            if missing:
                findings.append(missing_devices_finding(view, missing))
    findings.extend(terminating_pod_findings(views, pods, present, now))
    order = dict((k, i) for i, k in enumerate(KINDS))
    findings.sort(key=lambda f: (order[f["kind"]], f.get("claim") or f.get("pod") or ""))
    return findings


def validate_fix(fix, force):
    """Errors in the fix request (names the field and the fix)."""
    unknown = [k for k in fix if k not in FIXABLE]
    errors = []
    if unknown:
        errors.append("fix: %s cannot be fixed by this module (choose from %s; %s and %s are reported only)"
                      % (", ".join(unknown), ", ".join(FIXABLE), POD_STUCK_TERMINATING, MISSING_DEVICES))
    if force and STUCK_DELETION not in fix:
        errors.append("force: true only applies to fix: [%s]; add it to fix or drop force" % STUCK_DELETION)
    return errors


def plan(findings, fix):
    """The actions to carry out: findings of the asked kinds that have an action."""
    return [f for f in findings if f["kind"] in fix and f.get("action")]


def counts(findings):
    out = dict((k, 0) for k in KINDS)
    for finding in findings:
        out[finding["kind"]] += 1
    return out


def epoch(timestamp):
    """Seconds since the epoch of an API time (None stays None)."""
    return epoch_seconds(timestamp)


def pod_info(meta, node):
    """What the doctor keeps of a pod (from a pod table row's metadata and its Node cell)."""
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "node": node,
            "deletion_timestamp": epoch(meta.get("deletionTimestamp"))}


def claim_diff(finding, meta):
    """(before, after) of the claim's metadata as an action changes it (for --diff)."""
    annotations = dict((k, v) for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED)
    before = {"name": finding["claim"], "annotations": annotations,
              "finalizers": list(meta.get("finalizers") or [])}
    after = {"name": finding["claim"], "annotations": dict(before["annotations"]),
             "finalizers": list(before["finalizers"])}
    if finding["action"] == RESYNC:
        after["annotations"][RESYNC_ANNOTATION] = "<now>"
    elif finding["action"] == REMOVE_FINALIZERS:
        after["finalizers"] = []
    elif finding["action"] == DELETE:
        after = {"name": finding["claim"], "deleted": True}
    return before, after
