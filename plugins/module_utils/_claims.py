# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Views over ResourceClaims: state, devices, nodes, consumers, orphans.

Pure functions over the JSON objects the API returns. v1, v1beta2 and
v1beta1 claims share every field read here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils._slices import slice_scope

PENDING = "pending"
ALLOCATED = "allocated"
RESERVED = "reserved"
DEALLOCATING = "deallocating"

SCOPE_NODE = "node"
SCOPE_SELECTOR = "selector"
SCOPE_CLUSTER = "cluster-wide"
SCOPE_NONE = "unallocated"


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


def _requirement_matches(requirement, value_set):
    operator = requirement.get("operator")
    values = requirement.get("values") or []
    if operator == "In":
        return bool(value_set) and any(v in values for v in value_set)
    if operator == "NotIn":
        return not any(v in values for v in value_set)
    if operator == "Exists":
        return bool(value_set)
    if operator == "DoesNotExist":
        return not value_set
    if operator in ("Gt", "Lt") and value_set and values:
        try:
            have, want = int(list(value_set)[0]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def node_matches_term(node_name, node_labels, term):
    """One NodeSelectorTerm: every matchExpression (labels) and matchField (metadata.name) must hold."""
    for expr in term.get("matchExpressions") or []:
        label = node_labels.get(expr.get("key"))
        if not _requirement_matches(expr, set([label]) if label is not None else set()):
            return False
    for field in term.get("matchFields") or []:
        value = node_name if field.get("key") == "metadata.name" else None
        if not _requirement_matches(field, set([value]) if value is not None else set()):
            return False
    return bool(term.get("matchExpressions") or term.get("matchFields"))


def named_nodes(node_selector):
    """Node names an allocator pinned with matchFields metadata.name In [...] (None when it did not)."""
    names = []
    for term in node_selector.get("nodeSelectorTerms") or []:
        fields = [f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name"]
        if not fields or term.get("matchExpressions") or len(fields) != 1 or fields[0].get("operator") != "In":
            return None
        names.extend(fields[0].get("values") or [])
    return sorted(set(names)) if names else None


def claim_nodes(claim, node_labels):
    """Where the claim's devices are: (scope, sorted node names).

    node_labels maps every known node name to its labels. A claim whose
    allocation has no nodeSelector can be used on every node (network-attached
    devices): scope cluster-wide with no node list, never a guess.
    """
    alloc = allocation(claim)
    if alloc is None:
        return SCOPE_NONE, []
    selector = alloc.get("nodeSelector")
    if not selector:
        return SCOPE_CLUSTER, []
    pinned = named_nodes(selector)
    if pinned is not None:
        return SCOPE_NODE, pinned
    matched = [name for name, labels in node_labels.items()
               if any(node_matches_term(name, labels or {}, t) for t in selector.get("nodeSelectorTerms") or [])]
    return SCOPE_SELECTOR, sorted(matched)


def pool_nodes(slices):
    """{(driver, pool): set of slice scopes (node names or scope markers)}."""
    index = {}
    for item in slices:
        spec = item.get("spec") or {}
        key = (spec.get("driver"), (spec.get("pool") or {}).get("name"))
        index.setdefault(key, set()).add(slice_scope(item))
    return index


def slice_cross_check(devices, scope, nodes, pools_index):
    """Problems found when comparing a claim's node with the slices of its devices' pools."""
    problems = []
    for dev in devices:
        scopes = pools_index.get((dev["driver"], dev["pool"]))
        if scopes is None:
            problems.append("device %s/%s/%s: no ResourceSlice publishes pool %s"
                            % (dev["driver"], dev["pool"], dev["device"], dev["pool"]))
        elif scope == SCOPE_NODE:
            slice_nodes = set(s for s in scopes if not s.startswith("<"))
            if slice_nodes and not slice_nodes.intersection(nodes):
                problems.append("device %s/%s/%s: allocated for node(s) %s but its pool is published by %s"
                                % (dev["driver"], dev["pool"], dev["device"], ", ".join(nodes),
                                   ", ".join(sorted(slice_nodes))))
    return problems


def consumers(claim, live_pod_uids):
    """reservedFor entries with whether each consumer still exists.

    live_pod_uids: set of uids of pods that exist. Consumers of other resources
    cannot be checked here and are reported with exists=None (never counted as gone).
    """
    out = []
    for ref in reserved_for(claim):
        is_pod = ref.get("resource") == "pods" and not ref.get("apiGroup")
        out.append({"resource": ref.get("resource"), "api_group": ref.get("apiGroup") or "",
                    "name": ref.get("name"), "uid": ref.get("uid"),
                    "exists": (ref.get("uid") in live_pod_uids) if is_pod else None})
    return out


def is_orphaned(state, consumer_list):
    """Allocated or reserved, yet no consumer is (or may be) alive."""
    if state not in (ALLOCATED, RESERVED):
        return False
    return not any(c["exists"] is not False for c in consumer_list)


def claim_view(claim, node_labels, live_pod_uids, pools_index):
    meta = _meta(claim)
    state = claim_state(claim)
    devices = allocated_devices(claim)
    scope, nodes = claim_nodes(claim, node_labels)
    consumer_list = consumers(claim, live_pod_uids)
    return {
        "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
        "state": state, "node_scope": scope, "nodes": nodes, "devices": devices,
        "drivers": sorted(set(d["driver"] for d in devices)),
        "consumers": consumer_list,
        "missing_consumers": [c for c in consumer_list if c["exists"] is False],
        "orphaned": is_orphaned(state, consumer_list),
        "deletion_requested": bool(meta.get("deletionTimestamp")),
        "problems": slice_cross_check(devices, scope, nodes, pools_index),
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


def _empty_counts():
    return {PENDING: 0, ALLOCATED: 0, RESERVED: 0, DEALLOCATING: 0, "orphaned": 0, "total": 0}


def _count(counts, view):
    counts[view["state"]] += 1
    counts["orphaned"] += 1 if view["orphaned"] else 0
    counts["total"] += 1


def summarize_by_node(views):
    """{node: counts}; claims without a node go under their scope marker (<cluster-wide>, <unallocated>)."""
    summary = {}
    for view in views:
        for key in view["nodes"] or ["<%s>" % view["node_scope"]]:
            _count(summary.setdefault(key, _empty_counts()), view)
    return summary


def claim_totals(views):
    """Counts by state over every view."""
    totals = _empty_counts()
    for view in views:
        _count(totals, view)
    return totals


def blocking_message(node, views):
    """The gate-mode failure text: each claim still holding devices on the node, with its consumers."""
    lines = ["%d ResourceClaim(s) still allocated or reserved on node %s:" % (len(views), node)]
    for view in views:
        who = ", ".join("%s/%s%s" % (c["resource"], c["name"], "" if c["exists"] is not False else " (gone)")
                        for c in view["consumers"]) or "no consumer"
        lines.append("  %s/%s [%s] held by %s" % (view["namespace"], view["name"], view["state"], who))
    lines.append("Evict or delete the consuming pods first (role dra.admin.drain does this in order), "
                 "then check again.")
    return "\n".join(lines)
