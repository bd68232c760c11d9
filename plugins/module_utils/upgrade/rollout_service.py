# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The rolling upgrade's plan against the cluster: the nodes, the upgrade check's findings for the target, the
kubeadm-config flags carried to it, and per node to take out the drain's preview (would each claim workload find
devices on the other nodes). Read only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.allocation.whatif_service import preview_evictions
from ansible_collections.dra.admin.plugins.module_utils.control_plane import kubeadm_config as kc
from ansible_collections.dra.admin.plugins.module_utils.control_plane.config_file import load_config
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain import CORDON_ANNOTATION, plan_drain
from ansible_collections.dra.admin.plugins.module_utils.upgrade import rollout
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks_service import check

KUBEADM_CONFIG_PATH = "/api/v1/namespaces/%s/configmaps/%s" % (kc.CONFIG_MAP_NAMESPACE, kc.CONFIG_MAP_NAME)


def cluster_configuration(api):
    """kubeadm's ClusterConfiguration as a dict, or None when the cluster has no kubeadm-config."""
    config_map = api.get_or_none(KUBEADM_CONFIG_PATH)
    text = ((config_map or {}).get("data") or {}).get(kc.DATA_KEY)
    return load_config(text, kc.KIND, "%s/%s %s" % (kc.CONFIG_MAP_NAMESPACE, kc.CONFIG_MAP_NAME, kc.DATA_KEY)) if text else None


def drain_preview(api, node):
    """The drain's preview for one node: would each of its claim workloads find devices elsewhere."""
    pods = api.list_items("/api/v1/pods", {"fieldSelector": "spec.nodeName=%s" % node})
    claim_pods = plan_drain(pods)["claim_pods"]
    if not claim_pods:
        return {"workloads": [], "would_stay_pending": [], "summary": "no claim workload on the node"}
    return preview_evictions(api, claim_pods, removed_nodes=[node])


def plan(api, params):
    """The module's answer: mode, versions, the refusals, the flags carried, the nodes in order and batches."""
    current = api.server_version().get("gitVersion")
    target = rollout.release_target(current, params.get("target_version") or "")
    mode = rollout.UPGRADE if target else rollout.MAINTENANCE
    control_plane, workers = rollout.order_nodes(list(api.list_items("/api/v1/nodes")), params.get("nodes"))
    batches = rollout.batches([rollout.node_name(n) for n in workers], params["batch_size"])
    result = {"mode": mode, "kubernetes_version": current, "target_version": target or current,
              "findings": [], "refused": [], "carried_flags": {"extra_args": {}, "dropped": []}}
    entries = [rollout.node_plan(n, mode, target, params["exclusion_label"], CORDON_ANNOTATION)
               for n in control_plane + workers]
    config = cluster_configuration(api) if mode == rollout.UPGRADE else None
    # kubeadm's own record of the control plane's release; /version answers from whichever API server it reached.
    control_plane_version = (config or {}).get("kubernetesVersion") or current
    ahead = rollout.kubeadm_steps(entries, mode, control_plane_version, target)
    if mode == rollout.UPGRADE:
        found = check(api, target, kubelet_gates=params["kubelet_gates"])["findings"]
        result["findings"] = found
        result["refused"] = ["%s: %s (fix: %s)" % (f["subject"], f["message"], f["fix"])
                             for f in rollout.blockers(found)] + ([ahead] if ahead else [])
        if config is not None:
            result["carried_flags"] = rollout.carried_flags(config, target)
    if params["preview"]:
        for entry in entries:
            if not entry["control_plane"] and entry["action"] != rollout.ACTION_DONE:
                entry["drain_preview"] = drain_preview(api, entry["node"])
    result["control_plane"] = [e for e in entries if e["control_plane"]]
    result["workers"] = [e for e in entries if not e["control_plane"]]
    result["batches"] = batches
    result["to_do"] = [e["node"] for e in entries if e["action"] != rollout.ACTION_DONE]
    result["summary"] = rollout.summary_line(result)
    return result
