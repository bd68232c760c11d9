# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The rolling upgrade's plan against the cluster: the nodes, the upgrade check's findings for the target, the
kubeadm-config flags carried to it, and per node to take out the drain's preview (would each claim workload find
devices on the other nodes). Read only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.allocation.whatif_service import eviction_previewer
from ansible_collections.dra.admin.plugins.module_utils.control_plane import kubeadm_config as kc
from ansible_collections.dra.admin.plugins.module_utils.control_plane.config_file import load_config
from ansible_collections.dra.admin.plugins.module_utils.control_plane.kubeadm_config_service import PATH, WHERE
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain import CORDON_ANNOTATION, plan_drain
from ansible_collections.dra.admin.plugins.module_utils.upgrade import rollout
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks_service import check


def cluster_configuration(api):
    """kubeadm's ClusterConfiguration as a dict, or None when the cluster has no kubeadm-config."""
    config_map = api.get_or_none(PATH)
    text = ((config_map or {}).get("data") or {}).get(kc.DATA_KEY)
    return load_config(text, kc.KIND, WHERE) if text else None


def drain_previews(api, nodes):
    """{node: the drain's preview}: would each claim workload of the node find devices elsewhere. The cluster is
    read once for all of them, and only when a node has claim workloads."""
    previews, previewer = {}, None
    for node in nodes:
        pods = api.list_items("/api/v1/pods", {"fieldSelector": "spec.nodeName=%s" % node})
        claim_pods = plan_drain(pods)["claim_pods"]
        if not claim_pods:
            previews[node] = {"workloads": [], "would_stay_pending": [], "summary": "no claim workload on the node"}
            continue
        previewer = previewer or eviction_previewer(api)
        previews[node] = previewer(claim_pods, removed_nodes=[node])
    return previews


def plan(api, params):
    """The module's answer: mode, versions, the refusals, the flags carried, the nodes in order and batches."""
    current = api.server_version().get("gitVersion")
    target = rollout.release_target(current, params.get("target_version") or "", params["allow_pre_release"])
    mode = rollout.UPGRADE if target else rollout.MAINTENANCE
    control_plane, workers = rollout.order_nodes(list(api.list_items("/api/v1/nodes")), params.get("nodes"))
    batches = rollout.batches([rollout.node_name(n) for n in workers], params["batch_size"])
    result = {"mode": mode, "kubernetes_version": current, "target_version": target or current,
              "kubeadm_apply_args": rollout.kubeadm_apply_flags(target),
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
                             for f in rollout.blockers(found, params["carry_flags"])] + ([ahead] if ahead else [])
        if config is not None and params["carry_flags"]:
            result["carried_flags"] = rollout.carried_flags(config, target)
    if params["preview"]:
        taken_out = [e for e in entries if not e["control_plane"] and e["action"] != rollout.ACTION_DONE]
        previews = drain_previews(api, [e["node"] for e in taken_out])
        for entry in taken_out:
            entry["drain_preview"] = previews[entry["node"]]
    result["control_plane"] = [e for e in entries if e["control_plane"]]
    result["workers"] = [e for e in entries if not e["control_plane"]]
    result["batches"] = batches
    result["to_do"] = [e["node"] for e in entries if e["action"] != rollout.ACTION_DONE]
    result["summary"] = rollout.summary_line(result)
    return result
