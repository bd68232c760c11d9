# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Views over ResourceSlices: pools, completeness, devices per node and driver.

Pure functions over the JSON objects the API returns (any served
resource.k8s.io version: v1, v1beta2 and v1beta1 share these fields).

Where devices are (see _locations): the slice's ``nodeName``, or with
``perDeviceNodeSelection`` each device's own ``nodeName``; devices offered to
several nodes (``allNodes``, a ``nodeSelector``, at slice or device level) are
shared and reported under a marker, not under any node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils._locations import (
    SLICE_ALL_NODES, SLICE_NODE_SELECTOR, is_marker,
)


def _spec(resource_slice):
    return resource_slice.get("spec") or {}


def _where(holder):
    """The location of a slice spec or a per-device entry: a node name or a marker (None when it says nothing)."""
    if holder.get("nodeName"):
        return holder["nodeName"]
    if holder.get("allNodes"):
        return SLICE_ALL_NODES
    if holder.get("nodeSelector"):
        return SLICE_NODE_SELECTOR
    return None


def device_fields(device):
    """A published device's own fields (attributes, capacity, taints, its node): v1beta1 keeps them under
    ``basic``, v1beta2 and v1 on the device."""
    return device.get("basic") or device


def device_location(resource_slice, device):
    """Where one device of the slice is: a node name, SLICE_ALL_NODES or SLICE_NODE_SELECTOR."""
    spec = _spec(resource_slice)
    if spec.get("perDeviceNodeSelection"):
        return _where(device_fields(device)) or SLICE_NODE_SELECTOR
    return _where(spec) or SLICE_NODE_SELECTOR


def slice_locations(resource_slice):
    """{location: devices there} of one slice. A node-bound slice without devices still names its node."""
    spec = _spec(resource_slice)
    counts = {}
    if not spec.get("perDeviceNodeSelection"):
        counts[_where(spec) or SLICE_NODE_SELECTOR] = 0
    for device in spec.get("devices") or []:
        location = device_location(resource_slice, device)
        counts[location] = counts.get(location, 0) + 1
    return counts


def slice_nodes(resource_slice):
    """Sorted node names the slice's devices belong to (markers left out)."""
    return sorted(k for k in slice_locations(resource_slice) if not is_marker(k))


def device_names(resource_slice):
    return [d.get("name") for d in _spec(resource_slice).get("devices") or []]


def pool_key(resource_slice):
    spec = _spec(resource_slice)
    return spec.get("driver"), (spec.get("pool") or {}).get("name")


def pool_generation(resource_slice):
    return int((_spec(resource_slice).get("pool") or {}).get("generation") or 0)


def newest_by_pool(generations):
    """{pool key: newest generation} of (pool key, generation) pairs: the one rule of which slices count."""
    newest = {}
    for key, generation in generations:
        newest[key] = max(newest.get(key, generation), generation)
    return newest


def newest_generations(slices):
    """{(driver, pool): newest generation seen}."""
    return newest_by_pool((pool_key(item), pool_generation(item)) for item in slices)


def current_slices(slices):
    """The slices of each pool's newest generation (older ones are being replaced)."""
    slices = list(slices)
    newest = newest_generations(slices)
    return [s for s in slices if pool_generation(s) == newest[pool_key(s)]]


def slices_for_node(slices, node, driver=None):
    """Current slices (of the driver, if given) with at least one device, or the slice itself, on the node."""
    return [s for s in current_slices(slices)
            if (driver is None or _spec(s).get("driver") == driver) and node in slice_locations(s)]


def device_index(slices):
    """({(driver, pool, device): location}, set of (driver, pool) published), newest generations only.

    Reads the slices once, keeping only names and locations (not the slices).
    """
    read = [(pool_key(item), pool_generation(item),
             [(d.get("name"), device_location(item, d)) for d in _spec(item).get("devices") or []])
            for item in slices]
    newest = newest_by_pool((key, generation) for key, generation, dummy in read)
    locations = {}
    for (driver, pool), generation, devices in read:
        if generation == newest[(driver, pool)]:
            for name, location in devices:
                locations[(driver, pool, name)] = location
    return locations, set(newest)


def _new_pool_entry(key, generation):
    return {"driver": key[0], "pool": key[1], "generation": generation, "slices_expected": 0,
            "slices_seen": 0, "stale_slices": 0, "devices": 0, "scopes": [], "devices_at": {},
            "slice_names": []}


def _add_current_slice(entry, item):
    pool = _spec(item).get("pool") or {}
    entry["slices_seen"] += 1
    entry["slices_expected"] = max(entry["slices_expected"], int(pool.get("resourceSliceCount") or 1))
    entry["devices"] += len(device_names(item))
    entry["slice_names"].append((item.get("metadata") or {}).get("name"))
    for location, count in slice_locations(item).items():
        entry["devices_at"][location] = entry["devices_at"].get(location, 0) + count
        if location not in entry["scopes"]:
            entry["scopes"].append(location)


def summarize_pools(slices):
    """One entry per (driver, pool): generation, slices seen vs expected, devices, where they are.

    Only slices of the newest generation count; a pool with fewer slices than
    ``resourceSliceCount`` is flagged incomplete. ``scopes`` lists the node names
    and markers the pool's devices are at, ``devices_at`` the devices at each.
    """
    slices = list(slices)
    newest = newest_generations(slices)
    pools = {}
    for item in slices:
        key = pool_key(item)
        entry = pools.setdefault(key, _new_pool_entry(key, newest[key]))
        if pool_generation(item) < newest[key]:
            entry["stale_slices"] += 1
        else:
            _add_current_slice(entry, item)
    result = []
    for key in sorted(pools, key=lambda k: (k[0] or "", k[1] or "")):
        entry = pools[key]
        entry["complete"] = entry["slices_seen"] >= entry["slices_expected"]
        entry["slice_names"].sort()
        result.append(entry)
    return result


def devices_by_node(pools):
    """{node or marker: {driver: {"pools": [...], "devices": n, "slices": n, "complete": bool}}}.

    ``devices`` counts only the pool's devices at that node (or marker); ``slices``
    is the pool's slice count, once per location the pool reaches.
    """
    by_node = {}
    for pool in pools:
        for location in pool["scopes"]:
            driver = by_node.setdefault(location, {}).setdefault(
                pool["driver"], {"pools": [], "devices": 0, "slices": 0, "complete": True})
            driver["pools"].append(pool["pool"])
            driver["devices"] += pool["devices_at"].get(location, 0)
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
