# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The reports of dra_cluster_info and dra_slices_info on data: pools, devices per node, nodes without
slices and per-driver totals from the ResourceSlices and Nodes read (by slice_reports.py), and the
slices report's problems. Pure functions over _slices'."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.cel import class_expressions
from ansible_collections.dra.admin.plugins.module_utils.kube.locations import is_marker
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    devices_by_node, drivers_by_node, node_publishers, nodes_without_slices, summarize_pools,
)


def driver_totals(by_node, presence):
    """Per driver: the selected nodes it publishes for (presence: {node: drivers}), its devices and pools at
    the reported locations (by_node: devices_by_node, markers included)."""
    totals = {}
    for drivers in by_node.values():
        for name, info in drivers.items():
            entry = totals.setdefault(name, {"nodes": 0, "devices": 0, "pools": 0})
            entry["devices"] += info["devices"]
            entry["pools"] += len(info["pools"])
    for drivers in presence.values():
        for name in drivers:
            totals.setdefault(name, {"nodes": 0, "devices": 0, "pools": 0})["nodes"] += 1
    return totals


def device_class_summary(device_classes):
    """Each DeviceClass's name and its selectors' CEL expressions."""
    return [{"name": dc["metadata"]["name"],
             "selectors": class_expressions(dc)}
            for dc in device_classes]


def cluster_devices(slices, labels):
    """dra_cluster_info's pools, nodes (the selected ones and the markers), nodes_without_slices and drivers
    from the slices and the selected nodes' labels ({node: labels})."""
    pools = summarize_pools(slices)
    by_node = devices_by_node(pools)
    selected = set(labels)
    nodes = dict((k, v) for k, v in by_node.items() if k in selected or is_marker(k))
    return {"pools": pools, "nodes": nodes,
            "nodes_without_slices": nodes_without_slices(labels, node_publishers(slices)),
            "drivers": driver_totals(nodes, drivers_by_node(slices, labels))}


def slice_query(driver):
    return {"fieldSelector": "spec.driver=%s" % driver} if driver else {}


def node_query(params):
    """The Node LIST's query for dra_slices_info's node and node_selector."""
    query = {"labelSelector": params["node_selector"]} if params["node_selector"] else {}
    if params["node"]:
        query["fieldSelector"] = "metadata.name=%s" % params["node"]
    return query


def only_node(pools, by_node, node):
    """Pools and the per-node entry reduced to one node (per-device slices name nodes only inside them)."""
    return [p for p in pools if node in p["scopes"]], dict((k, v) for k, v in by_node.items() if k == node)


def slices_report(slices, labels, params):
    """dra_slices_info's pools, nodes, incomplete_pools and nodes_without_slices."""
    pools = summarize_pools(slices)
    by_node = devices_by_node(pools)
    if params["node"]:
        pools, by_node = only_node(pools, by_node, params["node"])
    return {
        "pools": pools,
        "nodes": by_node,
        "incomplete_pools": ["%s/%s" % (p["driver"], p["pool"]) for p in pools if not p["complete"]],
        "nodes_without_slices": nodes_without_slices(labels, node_publishers(slices), params["driver"]),
    }


def problems_message(result, driver):
    parts = []
    if result["incomplete_pools"]:
        parts.append("incomplete pools (fewer slices than resourceSliceCount): %s"
                     % ", ".join(result["incomplete_pools"]))
    if result["nodes_without_slices"]:
        of_driver = " of " + driver if driver else ""
        parts.append("nodes publishing no slice%s: %s" % (of_driver, ", ".join(result["nodes_without_slices"])))
    return "; ".join(parts) + ". Check the driver pods on those nodes (logs, liveness) and that it can " \
        "reach the API server."
