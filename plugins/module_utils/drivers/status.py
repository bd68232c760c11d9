# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_driver_status_info on data: its parameters checked, a driver's state from its DaemonSet, the
nodes and the driver's ResourceSlices (rolled out, which selected nodes publish complete slices), the
progress lines of a wait, and the failure message.

Pure functions on objects read from the API (by driver_status.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.drivers.checks import check_daemonset, rollout_state
from ansible_collections.dra.admin.plugins.module_utils.drivers.inputs import port_problem
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import select_nodes_for_daemonset
from ansible_collections.dra.admin.plugins.module_utils.common.names import dns_label_error, subdomain_error
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import exclusion_label_error, node_label_map
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import nodes_with_complete_slices
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_parameter_errors


def input_errors(params, spec=None):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = wait_parameter_errors(params, spec=spec)
    errors.append(subdomain_error("driver", params["driver"]))
    errors.append(dns_label_error("namespace", params["namespace"]))
    errors.append(subdomain_error("daemonset_name", params["daemonset_name"], "gpu-example-com-kubeletplugin"))
    errors.append(exclusion_label_error(params["exclusion_label"]))
    errors.extend(port_problem(port, "health_ports entry") for port in params["health_ports"])
    return [e for e in errors if e]


def observed(daemonset, nodes, slices, driver):
    """What one look at the cluster saw: the DaemonSet, its rollout, the nodes it selects and which of them
    have complete ResourceSlices of the driver."""
    selected, _excluded = select_nodes_for_daemonset(nodes, daemonset)
    chosen = set(selected)
    with_slices = nodes_with_complete_slices(slices, driver,
                                             node_label_map(n for n in nodes if n["metadata"]["name"] in chosen))
    return {
        "daemonset": daemonset,
        "rollout": rollout_state(daemonset),
        "selected_nodes": selected,
        "nodes_with_slices": with_slices,
        "nodes_without_slices": sorted(set(selected) - set(with_slices)),
    }


def progress_state(seen):
    line = "rollout %s; slices on %d/%d selected nodes" % (
        seen["rollout"]["text"], len(seen["nodes_with_slices"]), len(seen["selected_nodes"]))
    if seen["nodes_without_slices"]:
        line += " (waiting for %s)" % ", ".join(seen["nodes_without_slices"])
    return line


def is_done(seen):
    return seen["rollout"]["done"] and not seen["nodes_without_slices"] and bool(seen["selected_nodes"])


def final_line(params, seen):
    """The last progress line of a wait (without its time)."""
    if is_done(seen):
        return "done: rolled out, every selected node publishes its slices"
    return "stopped waiting (wait_timeout %ss)" % params["wait_timeout"]


def status(seen, params, progress, elapsed, started):
    """The module's result from the last look (observed's, which loses its DaemonSet); elapsed counts from
    started (the call's start, or the wait's: the option since)."""
    daemonset = seen.pop("daemonset")
    seen["daemonset_problems"] = check_daemonset(daemonset, params["exclusion_label"], params["health_ports"],
                                                 params.get("expected_strategy"), params["require_startup_probe"])
    seen["update_strategy"] = (daemonset.get("spec") or {}).get("updateStrategy") or {}
    seen["done"] = is_done(seen)
    seen["progress"] = progress
    seen["elapsed"] = round(elapsed, 1)
    seen["started"] = started
    seen["pending"] = pending(seen)
    return seen


def pending(seen):
    """What the wait still waits for: the rollout while it is not complete, then each node without slices."""
    out = [] if seen["rollout"]["done"] else ["rollout (%s)" % seen["rollout"]["text"]]
    out += ["node %s (no complete ResourceSlices)" % node for node in seen["nodes_without_slices"]]
    return out if seen["selected_nodes"] else out + ["a node the DaemonSet selects (it selects none)"]


def failure(params, result):
    if result["daemonset_problems"]:
        return "DaemonSet %s/%s: %s" % (params["namespace"], params["daemonset_name"],
                                        "; ".join(result["daemonset_problems"]))
    if params["wait"] and not result["done"]:
        parts = []
        if not result["selected_nodes"]:
            parts.append("the DaemonSet selects no node")
        if not result["rollout"]["done"]:
            parts.append("rollout not complete (%s)" % result["rollout"]["text"])
        if result["nodes_without_slices"]:
            parts.append("nodes without complete ResourceSlices of %s: %s"
                         % (params["driver"], ", ".join(result["nodes_without_slices"])))
        return ("driver %s not ready after %ss: %s. Check the driver pods on those nodes (kubectl -n %s get pods -o "
                "wide; their logs and liveness probe) and that they reach the API server"
                % (params["driver"], params["wait_timeout"], "; ".join(parts), params["namespace"]))
    return None
