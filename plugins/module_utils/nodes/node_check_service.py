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


def unknown_nodes_error(states, node_names):
    """InputError when a node state names a node the cluster does not know (a wrong node_name, or a state gathered
    on another cluster's node): judged against this cluster, its live claims would look stale."""
    unknown = sorted(set(s["node"] for s in states) - set(node_names))
    if unknown:
        return InputError("node(s) %s of node_states are not nodes of this cluster (its nodes: %s): gather each "
                          "state on a node of the cluster, with dra.admin.dra_node_state_info's node_name set to "
                          "the node's name where its hostname differs" % (", ".join(unknown), ", ".join(
                              sorted(node_names)[:10]) + (", ..." if len(node_names) > 10 else "")))
    return None


def state_errors(states):
    """InputError when a node state was gathered with errors (directories it could not read): nothing gathered
    from an unreadable path may make a finding or a repair."""
    failed = [(s["node"], s.get("errors")) for s in states if s.get("errors")]
    if not failed:
        return None
    nodes = ", ".join(n for n, dummy in failed)
    errors = "; ".join(e for dummy, errs in failed for e in errs)
    return InputError("the state of %s was gathered with errors (%s): fix the paths or permissions given to "
                      "dra.admin.dra_node_state_info and gather it again" % (nodes, errors))


def read_cluster(api, states):
    """The cluster facts node_check compares with, read once; InputError (before any other read) for a node
    state of a node the cluster does not know."""
    version = api.resource_api_version()
    nodes = [_small_node(n) for n in api.list_items("/api/v1/nodes")]
    labels = dict((n["metadata"]["name"], n["metadata"]["labels"]) for n in nodes)
    problem = unknown_nodes_error(states, labels)
    if problem:
        raise problem
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
    problem = state_errors(states)
    if problem:
        raise problem
    version, cluster = read_cluster(api, states)
    report = node_check.check(states, cluster, time.time() if now is None else now)
    report["resource_api_version"] = version
    return report
