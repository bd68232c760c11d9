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

Who uses a claim, seen from either side (the one home of this rule):

- a pod's claims (``pod_claims``) are every claim it names, whichever field names it:
  ``spec.resourceClaims[].resourceClaimName``; for a claim made from
  ``resourceClaimTemplateName``, ``status.resourceClaimStatuses[].resourceClaimName``; for the
  extended resources backed by DRA that its containers request (a DeviceClass's
  ``extendedResourceName``), the claim the scheduler made for it, which only
  ``status.extendedResourceClaimStatus.resourceClaimName`` names; and any claim whose
  ``status.reservedFor`` names the pod's uid;
- a claim's consumers (``consumers``) are its ``status.reservedFor`` entries: pods, and objects
  that are not pods, such as a workload's PodGroup (``scheduling.k8s.io`` ``podgroups``, with
  DRAWorkloadResourceClaims): the claim stays reserved for the group while the group exists, whatever
  happens to its pods, and only the group's pods (which name the claim in their spec) use it on a node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.locations import (
    CLAIM_CLUSTER_WIDE, CLAIM_PINNED, CLAIM_SELECTOR, CLAIM_UNALLOCATED, claim_marker, is_marker,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import matching_nodes, pinned_nodes
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import (
    allocated_devices, allocation, consumer_kind, CONSUMER_OTHER, CONSUMER_POD, CONSUMER_POD_GROUP,
    consumer_resource, EXTENDED_RESOURCE_CLAIM_ANNOTATION, pod_claim_refs, POD_GROUP_API_GROUP, POD_GROUP_RESOURCE,
    reserved_for, SOURCE_SPEC,
)

PENDING = "pending"
ALLOCATED = "allocated"
RESERVED = "reserved"
DEALLOCATING = "deallocating"


def _meta(obj):
    return obj.get("metadata") or {}


def _annotations(meta):
    return meta.get("annotations") or {}


def _status(obj):
    return obj.get("status") or {}


# ---------------------------------------------------------------------------
# Who uses a claim: a pod's claims from every source, a claim's consumers of every kind
# ---------------------------------------------------------------------------


def consumer_label(consumer):
    """How reports name a consumer: pods/<name>, or <resource>.<group>/<name> for objects that are not pods."""
    group = consumer.get("api_group")
    return "%s%s/%s" % (consumer.get("resource"), "." + group if group else "", consumer.get("name"))


def named_claims_recreated(pods):
    """{(namespace, ResourceClaim name): sorted "Kind namespace/name" of the controllers} of the claims these pods
    name by ``resourceClaimName`` while a controller (a ReplicaSet, StatefulSet, Job, ...) owns them.

    The controller replaces an evicted or deleted pod from the same pod template, so the replacement names the
    same ResourceClaim: while the claim stays allocated (the replacement reserves it as soon as it is scheduled,
    wherever the allocated device can be used), evicting the pods does not free its devices. A claim made from
    a template, or for extended resources, belongs to its pod and goes with it; a pod no controller owns is not
    replaced.
    """
    out = {}
    for pod in pods:
        meta = _meta(pod)
        controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if controller is None:
            continue
        label = "%s %s/%s" % (controller.get("kind"), meta.get("namespace"), controller.get("name"))
        for dummy, claim, source in pod_claim_refs(pod):
            if source == SOURCE_SPEC and claim:
                out.setdefault((meta.get("namespace"), claim), set()).add(label)
    return dict((key, sorted(labels)) for key, labels in out.items())


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

    slice_index: (device locations, published pools) from kube.slices.device_index.
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


def pod_group_ref(group):
    """A PodGroup as a consumer reference (the shape of a reservedFor entry)."""
    meta = _meta(group)
    return {"apiGroup": POD_GROUP_API_GROUP, "resource": POD_GROUP_RESOURCE, "name": meta.get("name"),
            "uid": meta.get("uid")}


def pod_group_claim_names(group):
    """The claims a PodGroup lists for its pods to share: spec.resourceClaims[].resourceClaimName, and for claims
    made from templates status.resourceClaimStatuses[].resourceClaimName."""
    names = set(c.get("resourceClaimName") for c in (group.get("spec") or {}).get("resourceClaims") or [])
    names |= set(c.get("resourceClaimName") for c in _status(group).get("resourceClaimStatuses") or [])
    return sorted(n for n in names if n)


def claims_listed_by_groups(groups):
    """{(namespace, claim name): [consumer reference]} of the PodGroups that list each claim."""
    listed = {}
    for group in groups:
        for name in pod_group_claim_names(group):
            listed.setdefault((_meta(group).get("namespace"), name), []).append(pod_group_ref(group))
    return listed


def consumers(claim, pods, others=None, listed=None):
    """A claim's consumers: its reservedFor entries, each with its kind (pod, pod_group, other), whether it
    still exists, its node, whether it is a DaemonSet pod and whether the claim is reserved for it.

    pods: {uid: pod_ref(...)} of the pods that exist. others: {(API group, resource): set of uids} of the
    objects that exist, for consumers that are not pods (a PodGroup); a consumer whose resource is not in it
    cannot be checked and is reported with exists=None (never counted as gone). listed: the PodGroups that list
    the claim (claims_listed_by_groups, for this claim): a group is a consumer of the claims it lists also while
    it holds no reservation (the scheduler drops a group's reservation, keeping the allocation, while none of
    its pods can be placed), reported with reserved=False.
    """
    refs = [(ref, True) for ref in reserved_for(claim)]
    uids = set(ref.get("uid") for ref, dummy in refs)
    refs += [(ref, False) for ref in listed or () if ref.get("uid") not in uids]
    out = []
    for ref, reserved in refs:
        kind = consumer_kind(ref)
        if kind == CONSUMER_POD:
            known = pods.get(ref.get("uid"))
            exists = known is not None
        else:
            known = None
            index = (others or {}).get(consumer_resource(ref))
            exists = None if index is None else ref.get("uid") in index
            if not reserved and exists is None:
                exists = True  # listed just now by the LIST that found it
        out.append({"kind": kind, "resource": ref.get("resource"), "api_group": ref.get("apiGroup") or "",
                    "name": ref.get("name"), "uid": ref.get("uid"), "reserved": reserved,
                    "exists": exists,
                    "node": known[0] if known else None,
                    "daemonset": known[1] if known else None})
    return out


def live_consumer_pods(claim, pods):
    """Names of the claim's consumer pods that exist (pods: {uid: pod_ref}, or None when every one counts)."""
    return sorted(r.get("name") for r in reserved_for(claim)
                  if consumer_kind(r) == CONSUMER_POD and (pods is None or r.get("uid") in pods))


def non_pod_consumers(consumer_list):
    """The consumers that are not pods and may exist (a workload's PodGroup): no eviction ends them."""
    return [c for c in consumer_list if c["kind"] != CONSUMER_POD and c["exists"] is not False]


def held_for_non_pods_only(view):
    """Held, and every consumer that may still exist is not a pod (a PodGroup reserving or listing the claim):
    the claim stays held while that object exists, whatever happens to pods."""
    live = [c for c in view["consumers"] if c["exists"] is not False]
    return bool(live) and all(c["kind"] != CONSUMER_POD for c in live)


def is_orphaned(state, consumer_list):
    """Allocated or reserved, yet no consumer is (or may be) alive."""
    if state not in (ALLOCATED, RESERVED):
        return False
    return not any(c["exists"] is not False for c in consumer_list)


CLAIM_METADATA_READ = ("namespace", "name", "uid", "deletionTimestamp")
CLAIM_STATUS_READ = ("allocation", "reservedFor")


def claim_fields(claim):
    """The parts of a claim that claim_view, claim_state and the consumer indexes read: metadata's identity and
    deletion timestamp, the extended-resource annotation, status's allocation and reservedFor. Kept instead of the
    whole object (spec, labels, managedFields), so a LIST's objects need not stay alive while the views are made."""
    meta = _meta(claim)
    kept = dict((k, meta[k]) for k in CLAIM_METADATA_READ if k in meta)
    annotations = _annotations(meta)
    if EXTENDED_RESOURCE_CLAIM_ANNOTATION in annotations:
        kept["annotations"] = {EXTENDED_RESOURCE_CLAIM_ANNOTATION: annotations[EXTENDED_RESOURCE_CLAIM_ANNOTATION]}
    status = _status(claim)
    return {"metadata": kept, "status": dict((k, status[k]) for k in CLAIM_STATUS_READ if k in status)}


# The keys of claim_view, in its order: what dra_claims_info's claim_keys may choose from.
VIEW_KEYS = ("namespace", "name", "uid", "state", "node_scope", "nodes", "allocation_nodes", "devices", "drivers",
             "consumers", "missing_consumers", "non_pod_consumers", "extended_resource_claim", "orphaned",
             "deletion_requested", "problems")
# What every view keeps, whichever keys are asked for: which claim it is.
VIEW_IDENTITY = ("namespace", "name")


def view_keeping(view, keys):
    """The view with only the asked keys and its namespace and name, in claim_view's order; the view itself when
    no key is asked for."""
    if not keys:
        return view
    kept = set(keys).union(VIEW_IDENTITY)
    return dict((k, view[k]) for k in VIEW_KEYS if k in kept)


def claim_view(claim, node_labels, pods, slice_index, others=None, listed=None):
    """Everything the reports say about one claim.

    node_labels: {node: labels}; pods: {uid: pod_ref}; slice_index: kube.slices.device_index(slices);
    others: the index of consumers that are not pods, listed: {(namespace, claim name): [consumer reference]}
    of the PodGroups listing claims (see consumers).
    """
    meta = _meta(claim)
    state = claim_state(claim)
    devices = allocated_devices(claim)
    scope, local_nodes = allocation_nodes(claim, node_labels)
    consumer_list = consumers(claim, pods, others, (listed or {}).get((meta.get("namespace"), meta.get("name"))))
    return {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
        "state": state, "node_scope": scope, "nodes": claim_nodes(local_nodes, consumer_list),
        "allocation_nodes": local_nodes, "devices": devices,
        "drivers": sorted(set(d["driver"] for d in devices)),
        "consumers": consumer_list,
        "missing_consumers": [c for c in consumer_list if c["exists"] is False],
        "non_pod_consumers": non_pod_consumers(consumer_list),
        "extended_resource_claim": _annotations(meta).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true",
        "orphaned": is_orphaned(state, consumer_list),
        "deletion_requested": bool(meta.get("deletionTimestamp")),
        "problems": (slice_cross_check(devices, scope, local_nodes, slice_index)
                     + consumer_problems(consumer_list, scope, local_nodes)),
    }


def view_name(view):
    """namespace/name: how the reports name a claim."""
    return "%s/%s" % (view["namespace"], view["name"])


def view_names(views):
    return [view_name(v) for v in views]


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


def held_for_non_pods_only_off_node(view, used_on_node):
    """Reserved only for consumers that are not pods, and no pod on the node uses it.

    used_on_node: {(namespace, claim name)} the node's pods use (claims_used_by), or None when not known
    (then this is never assumed).
    """
    return used_on_node is not None and held_for_non_pods_only(view) and \
        (view["namespace"], view["name"]) not in used_on_node


def blocks_node(view, node, used_on_node=None):
    """Whether the claim keeps the node's DRA driver from leaving.

    It does while it holds devices on the node, unless only DaemonSet pods use it
    there: those stay on a drained node (kubectl drain rules; their controller
    would recreate them on a cordoned node), so their claims are reported, not waited for.
    Nor does a claim reserved only for consumers that are not pods (a workload's PodGroup) once no pod on
    the node uses it: only pods get devices prepared on a node, and no eviction ends such a reservation
    (non_pod_claims reports it with its consumer).
    """
    return holds_devices(view) and node in view["nodes"] and not held_only_by_daemonset_pods(view, node) \
        and not held_for_non_pods_only_off_node(view, used_on_node)


def daemonset_claims(views, node):
    """Claims holding devices on the node for DaemonSet pods only (reported, not blocking)."""
    return [v for v in views if holds_devices(v) and node in v["nodes"] and held_only_by_daemonset_pods(v, node)]


def non_pod_claims(views, node, used_on_node):
    """Claims holding devices on the node, reserved only for consumers that are not pods, that no pod on the
    node uses (reported with their consumers, not blocking)."""
    return [v for v in views if holds_devices(v) and node in v["nodes"]
            and held_for_non_pods_only_off_node(v, used_on_node)]


NON_POD_ADVICE = {
    CONSUMER_POD_GROUP: ("it stays reserved while the PodGroup exists and its pods cannot run elsewhere while "
                         "its devices are on this node; to free the devices delete the PodGroup (or its workload): "
                         "kube-controller-manager then releases and deallocates the claim"),
    CONSUMER_OTHER: ("it stays reserved while that object exists; end or delete it (or ask its controller to "
                     "release the claim) to free the devices"),
}


def non_pod_message(view):
    """One line per claim held for consumers that are not pods: the consumer and what to do."""
    kinds = sorted(set(c["kind"] for c in view["non_pod_consumers"]))
    return "%s/%s [%s] reserved for %s: %s" % (
        view["namespace"], view["name"], view["state"],
        ", ".join(consumer_label(c) for c in view["non_pod_consumers"]),
        "; ".join(NON_POD_ADVICE[k] for k in kinds))


def _empty_counts():
    return {PENDING: 0, ALLOCATED: 0, RESERVED: 0, DEALLOCATING: 0, "orphaned": 0, "total": 0}


def _count(counts, view):
    counts[view["state"]] += 1
    counts["orphaned"] += 1 if view["orphaned"] else 0
    counts["total"] += 1


def count_view(summary, totals, view):
    """Adds one view to the counts of summarize_by_node (summary) and claim_totals (totals), for counting views
    as they are made instead of keeping them."""
    for key in view["nodes"] or [claim_marker(view["node_scope"])]:
        _count(summary.setdefault(key, _empty_counts()), view)
    _count(totals, view)


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
    if consumer.get("kind", CONSUMER_POD) == CONSUMER_POD_GROUP:
        return " (a workload's PodGroup, not a pod)"
    if consumer.get("kind", CONSUMER_POD) != CONSUMER_POD:
        return " (not a pod)"
    return " on %s" % consumer["node"] if consumer.get("node") else ""


def blocking_message(node, views):
    """The gate-mode failure text: each claim still holding devices on the node, with its consumers."""
    lines = ["%d ResourceClaim(s) still allocated or reserved on node %s:" % (len(views), node)]
    for view in views:
        who = ", ".join("%s%s" % (consumer_label(c), consumer_note(c)) for c in view["consumers"]) or "no consumer"
        lines.append("  %s/%s [%s] held by %s" % (view["namespace"], view["name"], view["state"], who))
    lines.append("Evict or delete the consuming pods first (role dra.admin.drain does this in order), "
                 "then check again.")
    lines.extend("  %s" % non_pod_message(v) for v in views if v["non_pod_consumers"])
    return "\n".join(lines)
