# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Drain planning: which pods on a node go when, under kubectl-drain rules plus DRA order.

Order (the good-practices page: drain the DRA driver as late as possible):
  1. pods that consume ResourceClaims, whichever field names the claim (claims.claims.pod_claim_refs: the
     spec, claims made from templates, and the claim the scheduler made for extended resources backed
     by DRA, which only the pod's status names);
  2. the other evictable pods;
  3. (after no claim on the node is allocated or reserved) the DRA driver pods.

Pure functions over Pod / DaemonSet JSON.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import named_claims_recreated
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import names_claims
from ansible_collections.dra.admin.plugins.module_utils.kube.locations import CLAIM_PINNED, CLAIM_SELECTOR
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import controller_of, covering_budgets, object_key, pod_key

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TERMINAL_PHASES = ("Succeeded", "Failed")
CORDON_ANNOTATION = "dra.admin/cordoned-before-drain"


def is_mirror(pod):
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def is_daemonset_pod(pod):
    ref = controller_of(pod)
    return bool(ref) and ref.get("kind") == "DaemonSet"


def uses_emptydir(pod):
    return any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def is_terminal(pod):
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_driver_pod(pod, driver_daemonsets, driver_labels):
    """A pod of one of the driver DaemonSets (namespace/name), or matching every driver label."""
    ref = controller_of(pod)
    meta = pod.get("metadata") or {}
    if ref and ref.get("kind") == "DaemonSet" and "%s/%s" % (meta.get("namespace"), ref.get("name")) in driver_daemonsets:
        return True
    labels = meta.get("labels") or {}
    return bool(driver_labels) and all(labels.get(k) == v for k, v in driver_labels.items())


def plan_drain(pods, driver_daemonsets=(), driver_labels=None, evict_daemonset_pods=False,
               delete_emptydir_data=False, force=False):
    """Split a node's pods into the drain phases.

    Returns a dict with lists of pods: claim_pods, other_pods, driver_pods, skipped
    (mirror and DaemonSet pods left in place, with reasons) and blocked (pods that
    need an explicit option, with the option to give).
    """
    plan = {"claim_pods": [], "other_pods": [], "driver_pods": [], "skipped": [], "blocked": [], "unmanaged": []}
    driver_daemonsets = set(driver_daemonsets or ())
    for pod in pods:
        key = pod_key(pod)
        if is_driver_pod(pod, driver_daemonsets, driver_labels or {}):
            plan["driver_pods"].append(pod)
        elif is_mirror(pod):
            plan["skipped"].append({"pod": key, "reason": "mirror (static) pod"})
        elif is_daemonset_pod(pod) and not evict_daemonset_pods:
            plan["skipped"].append({"pod": key, "reason": "DaemonSet pod (set evict_daemonset_pods to evict)"})
        elif not is_terminal(pod) and controller_of(pod) is None and not force:
            plan["blocked"].append({"pod": key, "reason": "not managed by a controller: it would not come "
                                                          "back; set force=true to delete it"})
        elif not is_terminal(pod) and uses_emptydir(pod) and not delete_emptydir_data:
            plan["blocked"].append({"pod": key, "reason": "uses emptyDir: its data is lost; set "
                                                          "delete_emptydir_data=true to evict it"})
        else:
            if controller_of(pod) is None and not is_terminal(pod):
                plan["unmanaged"].append(key)
            plan["claim_pods" if names_claims(pod) else "other_pods"].append(pod)
    return plan


def claims_only_for_node(claim_pods, views, node):
    """The claims (namespace, name) the claim pods name by resourceClaimName under a controller
    (claims.claims.named_claims_recreated) whose allocation can be used on this node alone: {key: controllers}.
    Their replacements can run nowhere else, so they wait (Pending) until the claim is released."""
    recreated = named_claims_recreated(claim_pods)
    return dict(((v["namespace"], v["name"]), recreated[(v["namespace"], v["name"])]) for v in views
                if (v["namespace"], v["name"]) in recreated and v["node_scope"] in (CLAIM_PINNED, CLAIM_SELECTOR)
                and v["allocation_nodes"] == [node])


def claims_drain_cannot_free(claim_pods, views, pdbs, node, candidates=None):
    """The claims the drain's evictions cannot free: [{claim, pods, controllers, pod_disruption_budgets}], sorted.

    A claim allocated for this node alone and named by resourceClaimName by pods a controller replaces
    (claims_only_for_node) is released only once every pod of it on the node is gone: until then each replacement
    waits for it, Pending, and counts as a disruption. When a PodDisruptionBudget covering those pods allows fewer
    disruptions than they are, the budget refuses the remaining evictions for ever (the replacements never become
    ready) and the drain would stop at its timeout. pdbs: the PodDisruptionBudgets of the claims' namespaces;
    candidates: claims_only_for_node's answer when the caller has it already.
    """
    out = []
    if candidates is None:
        candidates = claims_only_for_node(claim_pods, views, node)
    for (namespace, name), controllers in sorted(candidates.items()):
        pods = [p for p in claim_pods if (p.get("metadata") or {}).get("namespace") == namespace
                and any(r.get("resourceClaimName") == name for r in (p.get("spec") or {}).get("resourceClaims") or [])]
        budgets = sorted(set(b for p in pods for b in covering_budgets(p, pdbs)))
        short = [b for b in pdbs if object_key(b) in budgets
                 and ((b.get("status") or {}).get("disruptionsAllowed") or 0) < len(pods)]
        if short:
            out.append({"claim": "%s/%s" % (namespace, name), "pods": sorted(pod_key(p) for p in pods),
                        "controllers": controllers,
                        "pod_disruption_budgets": [{"name": object_key(b), "disruptions_allowed": (
                            b.get("status") or {}).get("disruptionsAllowed") or 0} for b in short]})
    return out


def cannot_free_message(node, not_freed):
    """The drain's refusal for claims_drain_cannot_free."""
    parts = ["ResourceClaim %s (%d pod(s) of %s; PodDisruptionBudget %s)" % (
        c["claim"], len(c["pods"]), ", ".join(c["controllers"]),
        ", ".join("%s allows %d disruption(s)" % (b["name"], b["disruptions_allowed"])
                  for b in c["pod_disruption_budgets"])) for c in not_freed]
    return ("the drain of %s cannot free %s: each claim is allocated for this node alone and named by its pods' "
            "template, so the controller's replacements wait for it (Pending) and the claim is released only once "
            "every one of its pods here is gone, which the budget does not allow; the drain would stop at its "
            "timeout. Nothing was changed. Next: scale the workload to zero replicas (or delete it), relax the "
            "PodDisruptionBudget to allow as many disruptions as the claim has pods, or have the pod template use a "
            "resourceClaimTemplateName so that each pod gets a claim of its own; then run the drain again."
            % (node, "; ".join(parts)))


def drivers_left_on_node(node_drivers, driver_pods, not_in_pods=()):
    """The drivers publishing the node's own devices that the drain could not take off it: every one of them
    when no driver pod is on the node to remove (those named as not running in pods excepted), sorted."""
    if driver_pods:
        return []
    return sorted(set(node_drivers) - set(not_in_pods))


def drivers_beyond_daemonsets(node_drivers, driver_pods, not_in_pods=()):
    """When fewer driver DaemonSets have a pod on the node than drivers publish its devices, those drivers
    (sorted): some of them may have no pod the drain takes off. Empty otherwise."""
    drivers = set(node_drivers) - set(not_in_pods)
    owners = set()
    for pod in driver_pods:
        ref = controller_of(pod)
        owners.add((pod["metadata"].get("namespace"), ref.get("name")) if ref else pod_key(pod))
    return sorted(drivers) if len(owners) < len(drivers) else []
