# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Which nodes a driver DaemonSet runs on, decided the way the DaemonSet controller does.

nodeSelector, required node affinity (with the drain's exclusion label added to EVERY nodeSelectorTerm), the
cordon and NoSchedule/NoExecute taints against the pod's tolerations plus those the DaemonSet controller adds
itself: `kube/selection.pod_refusal` with `DAEMONSET_TOLERATIONS`.

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import (
    AFFINITY_REFUSAL, pod_refusal, with_exclusion,
)


# Tolerations the DaemonSet controller adds to every DaemonSet pod.
DAEMONSET_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


class NoSelectedNodesError(DraAdminError, ValueError):
    """No node matches the driver's node selection."""


def node_affinity(terms, label):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": with_exclusion(terms, label)}}}


def pod_spec_of(daemonset):
    return (((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})


def why_not_selected(node, pod_spec):
    """None when a DaemonSet pod with this spec would run on the node, else the reason."""
    reason = pod_refusal(node, pod_spec, DAEMONSET_TOLERATIONS)
    return reason + " (labels or exclusion label)" if reason == AFFINITY_REFUSAL else reason


def _split(nodes, pod_spec):
    """(selected names, {excluded name: reason}), both sorted by name."""
    selected, excluded = [], {}
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        name = (node.get("metadata") or {}).get("name")
        reason = why_not_selected(node, pod_spec)
        if reason:
            excluded[name] = reason
        else:
            selected.append(name)
    return selected, excluded


def select_nodes(nodes, node_selector=None, terms=None, tolerations=None):
    """Split nodes into (selected names, {excluded name: reason}), both sorted by name, for a DaemonSet pod with
    this nodeSelector, required nodeSelectorTerms (None: no affinity) and tolerations."""
    pod_spec = {"nodeSelector": node_selector, "tolerations": tolerations}
    if terms is not None:
        pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return _split(nodes, pod_spec)


def select_nodes_for_daemonset(nodes, daemonset):
    spec = pod_spec_of(daemonset)
    return _split(nodes, dict((k, spec.get(k)) for k in ("nodeSelector", "affinity", "tolerations")))
