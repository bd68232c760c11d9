# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Views over ResourceSlices: pools, completeness, devices per node and driver.

Pure functions over the JSON objects the API returns (any served
resource.k8s.io version: v1, v1beta2 and v1beta1 share these fields).

Where devices are (see kube.locations): the slice's ``nodeName``, or with
``perDeviceNodeSelection`` each device's own ``nodeName``; devices offered to
several nodes (``allNodes``, a ``nodeSelector``, at slice or device level) are
shared and reported under a marker, not under any node.

Who publishes for a node (``drivers_for_node``, ``driver_publishes_for_node``):
a driver is present on a node while some current slice of it covers the node,
through its ``nodeName``, ``allNodes`` or a ``nodeSelector`` admitting the
node's name and labels (at slice level, or per device with
``perDeviceNodeSelection``). Every "is the driver there" decision reads this.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.dra.admin.plugins.module_utils.kube.locations import (
    SLICE_ALL_NODES, SLICE_NODE_SELECTOR, is_marker,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import selector_matches


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


_ATTRIBUTE_KINDS = ("string", "int", "bool", "version")


def device_attributes(device, driver=None):
    """{name: value} of a published device; v1beta1 keeps them under ``basic``.

    A name qualified with the driver's own domain (``gpu.example.com/uuid``) is
    also available unqualified, as in CEL selectors.
    """
    values = {}
    for name, attribute in (device_fields(device).get("attributes") or {}).items():
        value = None
        if isinstance(attribute, dict):
            for kind in _ATTRIBUTE_KINDS:
                if kind in attribute:
                    value = attribute[kind]
                    break
        values[name] = value
        if driver and name.startswith(driver + "/"):
            values.setdefault(name[len(driver) + 1:], value)
    return values


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
    """Current slices (of the driver, if given) with at least one device, or the slice itself, on the node
    (bound to it by name: the node's own devices, not those it shares)."""
    return [s for s in current_slices(slices)
            if (driver is None or _spec(s).get("driver") == driver) and node in slice_locations(s)]


# --- who publishes for a node ---------------------------------------------------------------

def _holders(resource_slice):
    """The entries that say where the slice's devices are: the spec, or with perDeviceNodeSelection each
    device's own fields."""
    spec = _spec(resource_slice)
    if spec.get("perDeviceNodeSelection"):
        return [device_fields(d) for d in spec.get("devices") or []]
    return [spec]


def holder_offers(holder, name, labels):
    """Whether a slice spec or a per-device entry offers its devices to the node (name, labels)."""
    if holder.get("nodeName"):
        return holder["nodeName"] == name
    if holder.get("allNodes"):
        return True
    if holder.get("nodeSelector"):
        return selector_matches(holder["nodeSelector"], name, labels)
    return False


def slice_offered_to(resource_slice, name, labels):
    """Whether kube-scheduler's allocator keeps the slice when it allocates for the node (GatherPools): a slice
    with shared counters always (the counters of devices anywhere), else when its spec, or with
    perDeviceNodeSelection one of its devices, offers devices to the node."""
    spec = _spec(resource_slice)
    if spec.get("sharedCounters"):
        return True
    return any(holder_offers(h, name, labels) for h in _holders(resource_slice))


def device_entry_offered_to(slice_spec, fields, name, labels):
    """Whether one device (its fields) of a slice kept for the node is offered there: with
    perDeviceNodeSelection, by its own entry; else, as its slice is, yes."""
    return holder_offers(fields, name, labels) if slice_spec.get("perDeviceNodeSelection") else True


def node_publishers(slices):
    """Which pools publish for which nodes, from each pool's newest generation: the index that
    pools_for_node and drivers_for_node read.

    ``named``: {node name: pool keys naming it}; ``all_nodes``: pool keys offering devices to every node;
    ``selectors``: [(pool key, nodeSelector)], each distinct pair once; ``pools``: every pool key with a
    current slice that covers some node. Reads each slice once, so answering for many nodes costs one
    pass over the slices plus the distinct selectors per node.
    """
    index = {"named": {}, "all_nodes": set(), "selectors": [], "pools": set()}
    seen_selectors = set()
    for item in current_slices(slices):
        key = pool_key(item)
        for holder in _holders(item):
            if holder.get("nodeName"):
                index["named"].setdefault(holder["nodeName"], set()).add(key)
            elif holder.get("allNodes"):
                index["all_nodes"].add(key)
            elif holder.get("nodeSelector"):
                seen = (key, json.dumps(holder["nodeSelector"], sort_keys=True))
                if seen not in seen_selectors:
                    seen_selectors.add(seen)
                    index["selectors"].append((key, holder["nodeSelector"]))
            else:
                continue
            index["pools"].add(key)
    return index


def pools_for_node(publishers, name, labels):
    """The set of (driver, pool) keys publishing for the node (name, labels: the Node's metadata)."""
    pools = set(publishers["named"].get(name) or ()) | publishers["all_nodes"]
    pools.update(key for key, selector in publishers["selectors"]
                 if key not in pools and selector_matches(selector, name, labels))
    return pools


def drivers_for_node(publishers, name, labels):
    """The set of drivers publishing for the node (name, labels: the Node's metadata), from node_publishers."""
    return set(driver for driver, dummy in pools_for_node(publishers, name, labels))


def publishing_drivers(publishers):
    """Every driver publishing for some node (what a claim on no node is checked against)."""
    return set(driver for driver, dummy in publishers["pools"])


def driver_publishes_for_node(slices, driver, name, labels):
    """Whether some current slice of the driver covers the node: the driver is present there."""
    return driver in drivers_for_node(node_publishers(slices), name, labels)


def drivers_by_node(slices, node_labels):
    """{node name: set of drivers publishing for it} for every node of node_labels ({name: labels})."""
    publishers = node_publishers(slices)
    return dict((name, drivers_for_node(publishers, name, labels)) for name, labels in node_labels.items())


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


def nodes_without_slices(node_labels, publishers, driver=None):
    """Sorted nodes (of node_labels, {name: labels}) that no driver (or not the given driver) publishes for
    (publishers: node_publishers of the slices)."""
    missing = []
    for name, labels in node_labels.items():
        drivers = drivers_for_node(publishers, name, labels)
        if (driver is None and not drivers) or (driver is not None and driver not in drivers):
            missing.append(name)
    return sorted(missing)


def nodes_with_complete_slices(slices, driver, node_labels):
    """Sorted nodes (of node_labels) the driver publishes for, where every pool of it covering the node has
    all its slices (``resourceSliceCount``)."""
    slices = list(slices)
    publishers = node_publishers(slices)
    complete = dict(((p["driver"], p["pool"]), p["complete"]) for p in summarize_pools(slices))
    ready = []
    for name, labels in node_labels.items():
        pools = [key for key in pools_for_node(publishers, name, labels) if key[0] == driver]
        if pools and all(complete[key] for key in pools):
            ready.append(name)
    return sorted(ready)
