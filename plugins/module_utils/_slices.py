# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Views over ResourceSlices: pools, completeness, devices per node and driver.

Pure functions over the JSON objects the API returns (any served
resource.k8s.io version: v1, v1beta2 and v1beta1 share these fields).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

CLUSTER_WIDE = "<all-nodes>"
NODE_SELECTOR = "<node-selector>"
PER_DEVICE = "<per-device-node-selection>"


def slice_scope(resource_slice):
    """Where a slice's devices are: a node name, or one of the scope markers above."""
    spec = resource_slice.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    if spec.get("allNodes"):
        return CLUSTER_WIDE
    if spec.get("perDeviceNodeSelection"):
        return PER_DEVICE
    return NODE_SELECTOR


def device_names(resource_slice):
    return [d.get("name") for d in (resource_slice.get("spec") or {}).get("devices") or []]


def pool_key(resource_slice):
    spec = resource_slice.get("spec") or {}
    return spec.get("driver"), (spec.get("pool") or {}).get("name")


def summarize_pools(slices):
    """One entry per (driver, pool): generation, slices seen vs expected, devices, scopes.

    Only slices of the newest generation count (older ones are being replaced);
    a pool with fewer slices than ``resourceSliceCount`` is flagged incomplete.
    """
    newest = {}
    for item in slices:
        key = pool_key(item)
        generation = int(((item.get("spec") or {}).get("pool") or {}).get("generation") or 0)
        newest[key] = max(newest.get(key, generation), generation)
    pools = {}
    for item in slices:
        key = pool_key(item)
        pool = (item.get("spec") or {}).get("pool") or {}
        generation = int(pool.get("generation") or 0)
        entry = pools.setdefault(key, {
            "driver": key[0], "pool": key[1], "generation": newest[key], "slices_expected": 0,
            "slices_seen": 0, "stale_slices": 0, "devices": 0, "scopes": [], "slice_names": []})
        if generation < newest[key]:
            entry["stale_slices"] += 1
            continue
        entry["slices_seen"] += 1
        entry["slices_expected"] = max(entry["slices_expected"], int(pool.get("resourceSliceCount") or 1))
        entry["devices"] += len(device_names(item))
        entry["slice_names"].append((item.get("metadata") or {}).get("name"))
        scope = slice_scope(item)
        if scope not in entry["scopes"]:
            entry["scopes"].append(scope)
    result = []
    for key in sorted(pools, key=lambda k: (k[0] or "", k[1] or "")):
        entry = pools[key]
        entry["complete"] = entry["slices_seen"] >= entry["slices_expected"]
        entry["slice_names"].sort()
        result.append(entry)
    return result


def devices_by_node(pools):
    """{scope: {driver: {"pools": [...], "devices": n, "slices": n, "complete": bool}}}."""
    by_node = {}
    for pool in pools:
        for scope in pool["scopes"]:
            driver = by_node.setdefault(scope, {}).setdefault(
                pool["driver"], {"pools": [], "devices": 0, "slices": 0, "complete": True})
            driver["pools"].append(pool["pool"])
            driver["devices"] += pool["devices"]
            driver["slices"] += pool["slices_seen"]
            driver["complete"] = driver["complete"] and pool["complete"]
    return by_node


def nodes_without_slices(node_names, by_node, driver=None):
    """Nodes (of node_names) that publish no slice (of the given driver, if any)."""
    missing = []
    for name in node_names:
        drivers = by_node.get(name) or {}
        if (driver is None and not drivers) or (driver is not None and driver not in drivers):
            missing.append(name)
    return sorted(missing)
