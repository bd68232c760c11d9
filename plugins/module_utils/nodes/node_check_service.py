# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The API side of the node doctor (module dra_node_state_check_info): the cluster read once per run, for
every node at once, with a fixed number of paginated LISTs (claims, pods, slices, nodes, DaemonSets), each
object compacted as it streams in; the comparison is nodes/node_check.py's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check

STATE_KEYS = ("node", "kubelet_running", "checkpoint", "registration", "plugin_dirs", "cdi_specs", "containers")


def validate_states(states):
    """The node states as given (a list, or {host: state}); InputError naming what is missing."""
    items = list(states.values()) if isinstance(states, dict) else list(states or [])
    if not items:
        raise InputError("node_states is empty: give the dra_node_state fact of each node (gathered by "
                         "dra.admin.dra_node_state_info), for example from hostvars")
    for item in items:
        missing = [k for k in STATE_KEYS if not isinstance(item, dict) or k not in item]
        if missing:
            raise InputError("a node state lacks %s: give the dra_node_state fact that dra.admin.dra_node_state_info "
                             "returns, unchanged" % ", ".join(missing))
    return items


def _small_node(node):
    meta = node.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "labels": meta.get("labels") or {}},
            "spec": {"taints": (node.get("spec") or {}).get("taints") or []}}


def read_cluster(api, states):
    """The cluster facts node_check compares with, read once."""
    version = api.resource_api_version()
    nodes = [_small_node(n) for n in api.list_items("/api/v1/nodes")]
    labels = dict((n["metadata"]["name"], n["metadata"]["labels"]) for n in nodes)
    wanted = set(s["node"] for s in states)
    claims_path = api.resource_path("resourceclaims", version=version)
    claims = [node_check.compact_claim(c, labels) for c in api.list_items(claims_path)]
    pods = [p for p in (node_check.compact_pod(p) for p in api.list_items("/api/v1/pods"))
            if p["node"] in wanted]
    slices = list(api.list_items(api.resource_path("resourceslices", version=version)))
    daemonsets = list(api.list_items("/apis/apps/v1/daemonsets"))
    cluster = node_check.cluster_facts([], pods, slices, nodes, daemonsets, node_check.node_drivers_named(states))
    cluster["claims_by_uid"] = dict((c["uid"], c) for c in claims)
    return version, cluster


def run_check(api, node_states, now=None):
    states = validate_states(node_states)
    version, cluster = read_cluster(api, states)
    report = node_check.check(states, cluster, time.time() if now is None else now)
    report["resource_api_version"] = version
    return report
