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

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import names_claims

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TERMINAL_PHASES = ("Succeeded", "Failed")
CORDON_ANNOTATION = "dra.admin/cordoned-before-drain"


def pod_key(pod):
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def controller_of(pod):
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


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


def pod_ready(pod):
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def eviction_body(pod, grace_period=None):
    meta = pod.get("metadata") or {}
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}}
    if grace_period is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period}
    return body


NAMESPACE_TERMINATING = "NamespaceTerminating"


def eviction_refusal(status, causes=()):
    """What a refused eviction means for the drain.

    "gone": the pod no longer exists (404).
    "budget": a PodDisruptionBudget does not allow it yet (429): retry until the timeout.
    "namespace": the pod's namespace is being deleted (403 with the NamespaceTerminating cause): no
    eviction can be created there, the namespace controller will delete the pod; retry until it is
    marked for deletion, then wait for it to go.
    "error": anything else; the drain stops on it.
    """
    if status == 404:
        return "gone"
    if status == 429:
        return "budget"
    if status == 403 and NAMESPACE_TERMINATING in causes:
        return "namespace"
    return "error"


def backoff_delays(initial=0.5, factor=2.0, ceiling=5.0):
    """Retry delays for PDB refusals: 0.5, 1, 2, 4, 5, 5, ... seconds."""
    delay = initial
    while True:
        yield delay
        delay = min(delay * factor, ceiling)


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
