# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Which nodes a driver DaemonSet runs on, decided the way the DaemonSet controller does.

nodeSelector, required node affinity (through `nodes.selection`, with the drain's exclusion
label added to EVERY nodeSelectorTerm) and NoSchedule/NoExecute taints against the pod's
tolerations plus those the DaemonSet controller adds itself.

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.common.tolerations import tolerates
from ansible_collections.dra.admin.plugins.module_utils.nodes.selection import required_terms, term_matches, with_exclusion


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


def untolerated_taints(node, tolerations):
    """NoSchedule/NoExecute taints of the node that the tolerations (plus the DaemonSet's own) miss."""
    all_tolerations = list(tolerations or []) + list(DAEMONSET_TOLERATIONS)
    missing = []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in all_tolerations):
            missing.append("%s=%s:%s" % (taint.get("key"), taint.get("value") or "", taint.get("effect")))
    return missing


def pod_spec_of(daemonset):
    return (((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})


def why_not_selected(node, node_selector, terms, tolerations):
    """None when a DaemonSet pod with this selection would run on the node, else the reason."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    mismatched = sorted(k for k, v in (node_selector or {}).items() if labels.get(k) != str(v))
    if mismatched:
        return "nodeSelector %s does not match" % ", ".join("%s=%s" % (k, node_selector[k]) for k in mismatched)
    if terms is not None and not any(term_matches(t, meta.get("name"), labels) for t in terms):
        return "no required node affinity term matches (labels or exclusion label)"
    taints = untolerated_taints(node, tolerations)
    if taints:
        return "taints not tolerated: %s" % ", ".join(taints)
    return None


def select_nodes(nodes, node_selector=None, terms=None, tolerations=None):
    """Split nodes into (selected names, {excluded name: reason}), both sorted by name."""
    selected, excluded = [], {}
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        name = (node.get("metadata") or {}).get("name")
        reason = why_not_selected(node, node_selector, terms, tolerations)
        if reason:
            excluded[name] = reason
        else:
            selected.append(name)
    return selected, excluded


def select_nodes_for_daemonset(nodes, daemonset):
    spec = pod_spec_of(daemonset)
    return select_nodes(nodes, spec.get("nodeSelector"), required_terms(spec), spec.get("tolerations"))
