# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the scheduler's allocator reads, as plain records: requests, devices, pools, nodes, features.

Built from the API's JSON (any served resource.k8s.io version: v1beta1 keeps a request's fields on the
request and a device's under ``basic``; v1beta2 and v1 put a request's under ``exactly``). The rules are
those of k8s.io/dynamic-resource-allocation/structured (GatherPools, the allocator's validation of a
request) on the cluster's release; ``allocation.search`` uses them.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.claims.capacity import device_consumption, pool_counter_sets
from ansible_collections.dra.admin.plugins.module_utils.claims.claims import allocation
from ansible_collections.dra.admin.plugins.module_utils.claims.slices import (
    current_slices, device_entry_offered_to, device_fields, pool_key, slice_offered_to,
)
from ansible_collections.dra.admin.plugins.module_utils.common.tolerations import tolerates
from ansible_collections.dra.admin.plugins.module_utils.nodes.selection import selector_matches

# Scheduler features that change allocation (gate names of releases.catalog).
ADMIN_ACCESS = "DRAAdminAccess"
DEVICE_TAINTS = "DRADeviceTaints"
PRIORITIZED_LIST = "DRAPrioritizedList"
PARTITIONABLE = "DRAPartitionableDevices"
CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
BINDING_CONDITIONS = "DRADeviceBindingConditions"
EXTENDED_RESOURCE = "DRAExtendedResource"


class Request:
    """One request or one subrequest of a firstAvailable list."""

    def __init__(self, name, parent, body):
        self.name = name
        self.parent = parent
        self.class_name = body.get("deviceClassName")
        self.selectors = [(s.get("cel") or {}).get("expression") for s in body.get("selectors") or []]
        self.mode = body.get("allocationMode") or "ExactCount"
        self.count = int(body.get("count") or 1) if self.mode == "ExactCount" else None
        self.admin = bool(body.get("adminAccess"))
        self.tolerations = list(body.get("tolerations") or [])
        self.capacity = (body.get("capacity") or {}).get("requests") or {}
        # What decides a device's static reason for this request (two pods asking alike share it).
        self.signature = (self.class_name, tuple(self.selectors), self.admin,
                          tuple(sorted(tuple(sorted((k, str(v)) for k, v in t.items())) for t in self.tolerations)))

    @property
    def label(self):
        return "%s/%s" % (self.parent, self.name) if self.parent else self.name

    @property
    def base(self):
        return self.parent or self.name

    def tolerates(self, taint):
        return any(tolerates(t, taint) for t in self.tolerations)


def claim_requests(claim_spec):
    """[[Request, ...] per request of the claim]: one entry for a plain request, one per subrequest of a
    firstAvailable list (in its order)."""
    out = []
    for request in ((claim_spec or {}).get("devices") or {}).get("requests") or []:
        if request.get("firstAvailable"):
            out.append([Request(s.get("name"), request.get("name"), s) for s in request["firstAvailable"]])
        else:
            out.append([Request(request.get("name"), None, request.get("exactly") or request)])
    return out


def claim_constraints(claim_spec):
    """[(request names or None for all, attribute)] of matchAttribute constraints; other kinds are returned
    as (names, None) so the caller can say it does not model them."""
    out = []
    for constraint in ((claim_spec or {}).get("devices") or {}).get("constraints") or []:
        out.append((constraint.get("requests") or None, constraint.get("matchAttribute")))
    return out


class Device:
    """One published device of a current slice, with where it is offered."""

    def __init__(self, resource_slice, entry, per_pool=True):
        spec = resource_slice.get("spec") or {}
        self.driver, self.pool = pool_key(resource_slice)
        self.name = entry.get("name")
        self.fields = device_fields(entry)
        self.slice_spec = spec
        self.taints = list(self.fields.get("taints") or [])
        self.consumes = device_consumption(resource_slice, entry, per_pool)
        self.binding_conditions = list(self.fields.get("bindingConditions") or [])
        self.multiple = bool(self.fields.get("allowMultipleAllocations"))

    @property
    def key(self):
        return (self.driver, self.pool, self.name)

    @property
    def label(self):
        return "%s/%s/%s" % self.key


def device_offered_to(device, node_name, labels):
    """A device of a slice kept for the node is offered there (per device with perDeviceNodeSelection)."""
    return device_entry_offered_to(device.slice_spec, device.fields, node_name, labels)


class Pool:
    """A pool's current slices and devices; whether the allocator takes devices from it on this release
    (claims.capacity's rules: complete, or incomplete where the release allocates from such pools) and its
    shared counters (per pool from 1.35, per slice before)."""

    def __init__(self, key, slices, rules):
        self.key = key
        self.slices = slices
        expected = ((slices[0].get("spec") or {}).get("pool") or {}).get("resourceSliceCount")
        self.complete = expected is not None and int(expected) == len(slices)
        self.allocatable = self.complete or rules["incomplete_pools_allocated"]
        self.per_pool = rules["counters_per_pool"]
        self.devices = [Device(s, e, self.per_pool) for s in slices for e in (s.get("spec") or {}).get("devices") or []]
        self.counter_sets = pool_counter_sets(slices, self.per_pool)[0]

    @property
    def label(self):
        return "%s/%s" % self.key


def gather_pools(slices, features, rules):
    """[Pool] of the current slices (each pool's newest generation), slices the allocator ignores left out
    (per-device node selection or shared counters without the partitionable-devices feature)."""
    by_pool = {}
    for s in current_slices(slices):
        spec = s.get("spec") or {}
        if PARTITIONABLE not in features and (spec.get("perDeviceNodeSelection") or spec.get("sharedCounters")):
            continue
        by_pool.setdefault(pool_key(s), []).append(s)
    return [Pool(key, by_pool[key], rules) for key in sorted(by_pool, key=lambda k: (k[0] or "", k[1] or ""))]


def pools_for_node(pools, node_name, labels):
    """The pools with a slice offered to the node."""
    return [pool for pool in pools
            if any(slice_offered_to(s, node_name, labels) for s in pool.slices)]


class PoolIndex:
    """pools_for_node without looking at every pool for every node: the pools whose slices are all bound to one
    node by name, by that name; the others (all nodes, node selectors, per-device selection, shared counters)
    checked per node."""

    def __init__(self, pools):
        self.pools = pools
        self.order = dict((id(p), i) for i, p in enumerate(pools))
        self.by_node = {}
        self.others = []
        for pool in pools:
            names = set((s.get("spec") or {}).get("nodeName") for s in pool.slices)
            bound = len(names) == 1 and None not in names and not any(
                (s.get("spec") or {}).get("sharedCounters") for s in pool.slices)
            if bound:
                self.by_node.setdefault(names.pop(), []).append(pool)
            else:
                self.others.append(pool)

    def for_node(self, node_name, labels):
        shared = pools_for_node(self.others, node_name, labels)
        own = self.by_node.get(node_name, [])
        if not shared or not own:
            return own or shared
        return sorted(own + shared, key=lambda p: self.order[id(p)])


def allocated_devices(claims, besides=()):
    """{device key: claim "namespace/name"} of every allocated device (admin-access results left out: they
    do not take the device), claims in `besides` (namespace/name) left out."""
    out = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        name = "%s/%s" % (meta.get("namespace"), meta.get("name"))
        if name in besides:
            continue
        for result in ((allocation(claim) or {}).get("devices") or {}).get("results") or []:
            if not result.get("adminAccess"):
                out[(result.get("driver"), result.get("pool"), result.get("device"))] = name
    return out


# ---- nodes (which nodes a pod may run on: nodes/selection.pod_refusal) -------------------------------------

def allocation_admits(claim, node_name, labels):
    """Whether an allocated claim can be used on the node (its allocation's nodeSelector; none: any node)."""
    selector = (allocation(claim) or {}).get("nodeSelector")
    return selector is None or selector_matches(selector, node_name, labels)
