# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Views over ResourceClaims: state, devices, nodes, consumers, orphans.

Pure functions over the JSON objects the API returns. v1, v1beta2 and
v1beta1 claims share every field read here.

Which nodes a claim is on: the nodes of the pods among its consumers
(``status.reservedFor``); when no consumer is a live pod with a node, the nodes
its allocation is local to (pinned by matchFields, or label-selected). A claim
shared by pods on several nodes is on each of them; a network-attached claim
(no node selector) is on the nodes of its pods, and on none without them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils._locations import (
    CLAIM_CLUSTER_WIDE, CLAIM_PINNED, CLAIM_SELECTOR, CLAIM_UNALLOCATED, claim_marker, is_marker,
)
from ansible_collections.dra.admin.plugins.module_utils._node_selection import matching_nodes, pinned_nodes

PENDING = "pending"
ALLOCATED = "allocated"
RESERVED = "reserved"
DEALLOCATING = "deallocating"


def _meta(obj):
    return obj.get("metadata") or {}


def _status(obj):
    return obj.get("status") or {}


def allocation(claim):
    return _status(claim).get("allocation")


def reserved_for(claim):
    return _status(claim).get("reservedFor") or []


def claim_state(claim):
    """pending, allocated, reserved, or deallocating (deleted while still allocated or reserved)."""
    held = allocation(claim) is not None or bool(reserved_for(claim))
    if _meta(claim).get("deletionTimestamp") and held:
        return DEALLOCATING
    if reserved_for(claim):
        return RESERVED
    if allocation(claim) is not None:
        return ALLOCATED
    return PENDING


def allocated_devices(claim):
    results = ((allocation(claim) or {}).get("devices") or {}).get("results") or []
    return [{"request": r.get("request"), "driver": r.get("driver"), "pool": r.get("pool"),
             "device": r.get("device"), "admin_access": bool(r.get("adminAccess"))} for r in results]


def allocation_nodes(claim, node_labels):
    """Where the claim's allocation can be used: (node_scope, sorted node names).

    node_labels maps every known node name to its labels. Pinned (matchFields on
    metadata.name) or label-selected allocations name their nodes; an allocation
    without a nodeSelector can be used on every node (network-attached devices):
    scope cluster-wide with no node list, never a guess.
    """
    alloc = allocation(claim)
    if alloc is None:
        return CLAIM_UNALLOCATED, []
    selector = alloc.get("nodeSelector")
    if not selector:
        return CLAIM_CLUSTER_WIDE, []
    pinned = pinned_nodes(selector)
    if pinned is not None:
        return CLAIM_PINNED, pinned
    return CLAIM_SELECTOR, matching_nodes(selector, node_labels)


def claim_nodes(local_nodes, consumer_list):
    """The nodes a claim is on: those of its consumer pods; without a live scheduled consumer, its allocation's.

    A shared claim is on every node whose pods use it. A node-local allocation
    counts for its node(s) only while no consumer elsewhere explains it.
    """
    consumer_nodes = sorted(set(c["node"] for c in consumer_list if c.get("node")))
    return consumer_nodes or list(local_nodes)


def slice_cross_check(devices, scope, local_nodes, slice_index):
    """Problems found when comparing a claim's allocation with the slices of its devices.

    slice_index: (device locations, published pools) from _slices.device_index.
    """
    locations, pools = slice_index
    problems = []
    for dev in devices:
        label = "device %s/%s/%s" % (dev["driver"], dev["pool"], dev["device"])
        where = locations.get((dev["driver"], dev["pool"], dev["device"]))
        if (dev["driver"], dev["pool"]) not in pools:
            problems.append("%s: no ResourceSlice publishes pool %s" % (label, dev["pool"]))
        elif scope == CLAIM_PINNED and where is not None and not is_marker(where) and where not in local_nodes:
            problems.append("%s: allocated for node(s) %s but it is published for node %s"
                            % (label, ", ".join(local_nodes), where))
    return problems


def consumer_problems(consumer_list, scope, local_nodes):
    """Consumer pods running outside the nodes a node-local allocation allows."""
    if scope not in (CLAIM_PINNED, CLAIM_SELECTOR):
        return []
    return ["consumer pods/%s runs on node %s, outside the allocation's node(s) %s"
            % (c["name"], c["node"], ", ".join(local_nodes) or "(none)")
            for c in consumer_list if c.get("node") and c["node"] not in local_nodes]


UNSCHEDULED = "<none>"  # the pod table's Node cell of a pod without spec.nodeName


def pod_ref(node_name, owner_references):
    """What the claim views keep of a pod: (its node or None, whether a DaemonSet controls it)."""
    controller = next((r for r in owner_references or [] if r.get("controller")), None)
    node = node_name if node_name and node_name != UNSCHEDULED else None
    return node, bool(controller) and controller.get("kind") == "DaemonSet"


def consumers(claim, pods):
    """reservedFor entries with whether each consumer still exists, its node and whether it is a DaemonSet pod.

    pods: {uid: pod_ref(...)} of the pods that exist. Consumers of other resources
    cannot be checked here and are reported with exists=None (never counted as gone).
    """
    out = []
    for ref in reserved_for(claim):
        is_pod = ref.get("resource") == "pods" and not ref.get("apiGroup")
        known = pods.get(ref.get("uid")) if is_pod else None
        out.append({"resource": ref.get("resource"), "api_group": ref.get("apiGroup") or "",
                    "name": ref.get("name"), "uid": ref.get("uid"),
                    "exists": (known is not None) if is_pod else None,
                    "node": known[0] if known else None,
                    "daemonset": known[1] if known else None})
    return out


def is_orphaned(state, consumer_list):
    """Allocated or reserved, yet no consumer is (or may be) alive."""
    if state not in (ALLOCATED, RESERVED):
        return False
    return not any(c["exists"] is not False for c in consumer_list)


def claim_view(claim, node_labels, pods, slice_index):
    """Everything the reports say about one claim.

    node_labels: {node: labels}; pods: {uid: pod_ref}; slice_index: _slices.device_index(slices).
    """
    meta = _meta(claim)
    state = claim_state(claim)
    devices = allocated_devices(claim)
    scope, local_nodes = allocation_nodes(claim, node_labels)
    consumer_list = consumers(claim, pods)
    return {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
        "state": state, "node_scope": scope, "nodes": claim_nodes(local_nodes, consumer_list),
        "allocation_nodes": local_nodes, "devices": devices,
        "drivers": sorted(set(d["driver"] for d in devices)),
        "consumers": consumer_list,
        "missing_consumers": [c for c in consumer_list if c["exists"] is False],
        "orphaned": is_orphaned(state, consumer_list),
        "deletion_requested": bool(meta.get("deletionTimestamp")),
        "problems": (slice_cross_check(devices, scope, local_nodes, slice_index)
                     + consumer_problems(consumer_list, scope, local_nodes)),
    }


def claim_selected(view, node=None, driver=None):
    if node is not None and node not in view["nodes"]:
        return False
    if driver is not None and driver not in view["drivers"]:
        return False
    return True


def holds_devices(view):
    """Still allocated or reserved (what blocks taking a node's driver away)."""
    return view["state"] in (ALLOCATED, RESERVED, DEALLOCATING)


def held_only_by_daemonset_pods(view, node):
    """The claim's consumers on the node are all DaemonSet pods (which a drain leaves in place)."""
    here = [c for c in view["consumers"] if c.get("node") == node]
    return bool(here) and all(c.get("daemonset") for c in here)


def blocks_node(view, node):
    """Whether the claim keeps the node's DRA driver from leaving.

    It does while it holds devices on the node, unless only DaemonSet pods use it
    there: those stay on a drained node (kubectl drain rules; their controller
    would recreate them on a cordoned node), so their claims are reported, not waited for.
    """
    return holds_devices(view) and node in view["nodes"] and not held_only_by_daemonset_pods(view, node)


def daemonset_claims(views, node):
    """Claims holding devices on the node for DaemonSet pods only (reported, not blocking)."""
    return [v for v in views if holds_devices(v) and node in v["nodes"] and held_only_by_daemonset_pods(v, node)]


def _empty_counts():
    return {PENDING: 0, ALLOCATED: 0, RESERVED: 0, DEALLOCATING: 0, "orphaned": 0, "total": 0}


def _count(counts, view):
    counts[view["state"]] += 1
    counts["orphaned"] += 1 if view["orphaned"] else 0
    counts["total"] += 1


def summarize_by_node(views):
    """{node: counts}; a shared claim counts under each of its nodes, a claim on no node under
    its scope's marker (<cluster-wide>, <unallocated>)."""
    summary = {}
    for view in views:
        for key in view["nodes"] or [claim_marker(view["node_scope"])]:
            _count(summary.setdefault(key, _empty_counts()), view)
    return summary


def claim_totals(views):
    """Counts by state over every view."""
    totals = _empty_counts()
    for view in views:
        _count(totals, view)
    return totals


def consumer_note(consumer):
    if consumer["exists"] is False:
        return " (gone)"
    return " on %s" % consumer["node"] if consumer.get("node") else ""


def blocking_message(node, views):
    """The gate-mode failure text: each claim still holding devices on the node, with its consumers."""
    lines = ["%d ResourceClaim(s) still allocated or reserved on node %s:" % (len(views), node)]
    for view in views:
        who = ", ".join("%s/%s%s" % (c["resource"], c["name"], consumer_note(c))
                        for c in view["consumers"]) or "no consumer"
        lines.append("  %s/%s [%s] held by %s" % (view["namespace"], view["name"], view["state"], who))
    lines.append("Evict or delete the consuming pods first (role dra.admin.drain does this in order), "
                 "then check again.")
    return "\n".join(lines)
