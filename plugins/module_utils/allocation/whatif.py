# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What a drain (or a device taint) would leave without devices: the evicted claim workloads re-placed on what
remains, with what is allocated now.

The evicted pods' claims are released as the cluster releases them: a claim made from a template goes with
its pod and comes back unallocated with the same spec when the pod's controller makes a new pod; a claim
named by the pod is deallocated when no pod outside the evicted ones reserves it, and otherwise keeps its
allocation (the new pod must then go where that allocation is). Each workload is then explained like a pending
pod (``explain.explain``) on the nodes left, one after the other in eviction order, each taking the devices its
first fitting node gets, so two workloads do not count the same free device. A pod without a controller is not
made again (it is reported, not placed); DaemonSet pods are not looked at.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.dra.admin.plugins.module_utils.allocation import explain, search
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import controller_of, pod_key
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import (
    SOURCE_TEMPLATE, allocation, pod_claim_refs, reserved_for,
)

NOT_RECREATED = "not_recreated"


def _label(obj):
    return pod_key(obj)


def controller_name(pod):
    """The pod's controller ("Kind/name"), or None for a bare pod."""
    ref = controller_of(pod)
    return "%s/%s" % (ref.get("kind"), ref.get("name")) if ref else None


def released_claims(claims, evicted_pods):
    """Labels of the allocated claims the evictions free: those reserved by no pod outside the evicted ones."""
    evicted = set((p.get("metadata") or {}).get("uid") for p in evicted_pods)
    out = set()
    for claim in claims:
        if allocation(claim) is None:
            continue
        holders = reserved_for(claim)
        if holders and all(h.get("uid") in evicted for h in holders):
            out.add(_label(claim))
    return out


def workload_claims(pod, claims_by_label, released):
    """(claims to allocate again, claims that stay allocated) for the pod a controller makes anew."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    fresh, kept = [], []
    for pod_name, claim_name, source in pod_claim_refs(pod):
        claim = claims_by_label.get("%s/%s" % (namespace, claim_name)) if claim_name else None
        if claim is None:
            continue
        label = _label(claim)
        if source == SOURCE_TEMPLATE:
            fresh.append(search.Claim("%s/<%s>" % (namespace, pod_name), claim.get("spec")))
        elif label in released or allocation(claim) is None:
            fresh.append(search.Claim(label, claim.get("spec")))
        else:
            kept.append(claim)
    return fresh, kept


def replacement_spec(pod):
    """The spec of the pod its controller would make: the same, not bound to a node."""
    spec = copy.deepcopy(pod.get("spec") or {})
    spec.pop("nodeName", None)
    return spec


def take(ctx, chosen, owner):
    """Count the chosen devices as allocated for the next workloads."""
    for dummy, request, device in chosen:
        if not request.admin:
            ctx.allocate(device.key, owner)


def preview(ctx, claims, nodes, evicted_pods, removed_nodes=()):
    """{workloads: [...], would_stay_pending: [pod], summary}: each evicted claim workload re-placed."""
    claims_by_label = dict((_label(c), c) for c in claims)
    released = released_claims(claims, evicted_pods)
    for claim in claims:
        if _label(claim) in released or any(
                _label(claim) == "%s/%s" % ((p.get("metadata") or {}).get("namespace"), name)
                for p in evicted_pods for dummy, name, source in pod_claim_refs(p) if source == SOURCE_TEMPLATE):
            for result in ((allocation(claim) or {}).get("devices") or {}).get("results") or []:
                ctx.release((result.get("driver"), result.get("pool"), result.get("device")))
    remaining = [n for n in nodes if (n.get("metadata") or {}).get("name") not in set(removed_nodes)]
    workloads = []
    for pod in evicted_pods:
        workloads.append(_place(ctx, pod, claims_by_label, released, remaining))
    pending = [w["pod"] for w in workloads if w["verdict"] != search.FITS]
    return {"workloads": workloads, "would_stay_pending": pending,
            "summary": "%d of %d claim workload(s) would find devices again%s" % (
                len(workloads) - len(pending), len(workloads),
                "; would stay pending: %s" % ", ".join(pending) if pending else "")}


def _place(ctx, pod, claims_by_label, released, nodes):
    owner = controller_name(pod)
    subject = {"pod": _label(pod), "controller": owner}
    if owner is None:
        return dict(subject, verdict=NOT_RECREATED, message="a pod without a controller is not made again")
    fresh, kept = workload_claims(pod, claims_by_label, released)
    result = explain.explain(ctx, subject, fresh, kept, [], nodes, replacement_spec(pod), explain.DETAIL_NODES)
    if result["verdict"] == search.FITS:
        first = next(o for o in result["nodes"] if o["verdict"] == search.FITS)
        verdict, chosen, dummy = search.node_verdict(ctx, fresh, first["name"],
                                                     _labels(nodes, first["name"]))
        if verdict == search.FITS:
            take(ctx, chosen, subject["pod"])
    result.pop("nodes", None)
    result.pop("problems", None)
    return result


def _labels(nodes, name):
    for node in nodes:
        meta = node.get("metadata") or {}
        if meta.get("name") == name:
            return meta.get("labels") or {}
    return {}
