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

import copy

from ansible_collections.dra.admin.plugins.module_utils.claims.capacity import (
    POOL_WIDE_COUNTERS_FROM, device_consumption, pool_counter_sets,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import allocation
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    device_entry_offered_to, device_fields, holder_offers, pool_key,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import ALLOCATOR
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import tolerates
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import selector_matches
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import SUPPORTED_MINORS
from ansible_collections.dra.admin.plugins.module_utils.kube.cel import selector_expressions

# Scheduler features that change allocation (gate names of releases.catalog).
ADMIN_ACCESS = "DRAAdminAccess"
DEVICE_TAINTS = "DRADeviceTaints"
PRIORITIZED_LIST = "DRAPrioritizedList"
PARTITIONABLE = "DRAPartitionableDevices"
CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
BINDING_CONDITIONS = "DRADeviceBindingConditions"
EXTENDED_RESOURCE = "DRAExtendedResource"
RESOURCE_CLAIM_DEVICE_STATUS = "DRAResourceClaimDeviceStatus"
BINDING_GATES = (BINDING_CONDITIONS, RESOURCE_CLAIM_DEVICE_STATUS)  # the allocator takes such devices with both on

# kube-scheduler runs the first implementation of the structured allocator (stable, incubating, experimental)
# that supports every allocator feature its gates turn on. The features stable lacks, by their gates, with the
# release from which incubating supports each (None: only experimental does); binding conditions need both
# of their gates.
BEYOND_STABLE = {
    BINDING_GATES: 36,
    (CONSUMABLE_CAPACITY,): 36,
    ("DRAFractionalCapacityRange",): 37,
    ("DRAListTypeAttributes",): 38,
    ("DRAOptionalNodeOperations",): 38,
    ("DRADerivedAttributes",): 38,
    ("DRADeviceCompatibilityGroups",): 38,
}
# From these releases stable supports the feature too (k8s.io/dynamic-resource-allocation 0.38: stable has the
# features, and the code, of 1.37's incubating; 1.38's incubating is 1.37's experimental).
STABLE_FROM = {BINDING_GATES: 38, (CONSUMABLE_CAPACITY,): 38, ("DRAFractionalCapacityRange",): 38}
# From this release stable goes through a node's pools in (driver, pool) order and their slices in name order,
# searches pools with binding conditions last and gathers slices of shared counters only where they are offered,
# as incubating did before.
STABLE_AS_INCUBATING_FROM = 38
# From these releases the implementation searches a node's pools that have a device with binding conditions
# after the others (each part in (driver, pool) order).
BINDING_POOLS_LAST_FROM = {"stable": 38, "incubating": 37, "experimental": 36}
# Which implementations of which release gather a slice of shared counters (one without devices, from 1.35) for
# every node, whatever its node selection: a pool whose counters are published for another node is then
# gathered on this one too (incomplete, unless its devices' slices are there as well).
COUNTER_SLICES_EVERYWHERE = {35: ("incubating", "experimental"), 36: ("stable", "incubating", "experimental"),
                             37: ("stable",), 38: ()}
NEWEST_RELEASE = SUPPORTED_MINORS[-1]  # what release None (the newest rules) stands for


class Request:
    """One request or one subrequest of a firstAvailable list."""

    def __init__(self, name, parent, body):
        self.name = name
        self.parent = parent
        self.class_name = body.get("deviceClassName")
        self.selectors = selector_expressions(body.get("selectors"))
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
    """[(request names or None for all, attribute, distinct)] of the claim's constraints: matchAttribute (every
    device the same value, distinct false) and distinctAttribute (every device another value, distinct true); a
    kind this model does not know comes as (names, None, False), which no device satisfies."""
    out = []
    for constraint in ((claim_spec or {}).get("devices") or {}).get("constraints") or []:
        names = constraint.get("requests") or None
        if constraint.get("distinctAttribute"):
            out.append((names, constraint["distinctAttribute"], True))
        else:
            out.append((names, constraint.get("matchAttribute"), False))
    return out


class Device:
    """One published device of a current slice, with where it is offered."""

    def __init__(self, resource_slice, entry, per_pool=True):
        spec = resource_slice.get("spec") or {}
        self.driver, self.pool = pool_key(resource_slice)
        self.name = entry.get("name")
        # Which published entry this is: two generations of a pool may each publish the name, for other nodes.
        self.entry = ((resource_slice.get("metadata") or {}).get("name"), self.name)
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


# A pool as the allocator gathers it for one node (GatherPools).
POOL_OK = "ok"
POOL_INCOMPLETE = "incomplete"   # not every slice of its generation is there: never allocated from (1.35+)
POOL_INVALID = "invalid"         # a device name twice among its slices for the node: never allocated from
# From this release the allocator looks at a pool's slices for other nodes too (checkSlicesInPool): a newer
# generation elsewhere makes the node's slices obsolete (the pool is left out), and the slice count is checked
# over the whole generation; before, only the slices offered to the node count.
POOLS_CHECKED_WHOLE_FROM = 36
# From this release the search skips incomplete and invalid pools (and a node without a fit that has an invalid
# pool is unschedulable); before, incomplete pools are allocated from and the search stops with an error at an
# invalid pool, in an order that changes from one attempt to the next (a Go map's).
POOLS_SKIPPED_FROM = 35
# From this release the incubating and experimental implementations go through a node's pools in (driver, pool)
# order and a pool's slices in name order (first fit is then the same on every attempt); before, and in the stable
# implementation of every release, pools in a Go map's order and slices in the order kube-scheduler's informer
# lists them, both of which change from one attempt to the next.
POOLS_IN_ORDER_FROM = 36
# Before this release the allocator does not give back the devices of a request for all devices when the search
# backtracks past it: they stay taken for the rest of the attempt (1.33's allocateOne drops the deallocation).
ALL_DEVICES_UNDONE_FROM = 34
# From this release a device given for admin access is held for the rest of the attempt: its claim does not get it
# again, and a plain request of another claim does not get it. Before, the allocator does not record it: one
# device may be given to the claim more than once, and to a later claim of the pod besides.
ADMIN_HOLDS_DEVICE_FROM = 34
# From this release a request for all devices that is not the first subrequest of its firstAvailable list fills its
# slots itself; before, the allocator goes on after its first device in the list's first subrequest (its slots,
# its count), so such a subrequest rarely gets its devices.
ALL_SUBREQUEST_KEPT_FROM = 36
# From this release the allocator files each subrequest's selector results under its own key; before, while it
# checks a firstAvailable list, under the previous subrequest's (a request for all devices then gets or gives the
# other's results).
SUBREQUEST_SELECTIONS_APART_FROM = 36
# From this release a request for all devices on a node with a pool being updated or invalid makes that node
# unschedulable (ErrFailedAllocationOnNode: "asks for all devices, but resource pool ... is currently being updated");
# before, the allocator stops with an error, which fails the pod's whole scheduling attempt.
ALL_POOL_PROBLEM_NODE_ONLY_FROM = 38
# From this release the allocator checks a claim's device limit (AllocationResultsMaxSize) after each of its requests,
# before it looks at the next ("adding N devices exceeds the claim limit"); before, once after the claim's last request.
# Which comes first decides between an error and a request for all devices that rules out the node only (1.38).
CLAIM_LIMIT_PER_REQUEST_FROM = 37
# From this release matchAttribute and distinctAttribute compare versions by semver equality (build metadata
# ignored); before, as strings.
VERSION_BUILD_IGNORED_FROM = 38


def slice_relevant(resource_slice, node_name, labels, counters_everywhere=False):
    """Whether the allocator gathers the slice for the node: its nodeName, allNodes or nodeSelector, or with
    perDeviceNodeSelection one of its devices, offers it there; a slice of shared counters the same way, or on
    every node where the implementation gathers those everywhere (`counters_everywhere`)."""
    spec = resource_slice.get("spec") or {}
    if counters_everywhere and spec.get("sharedCounters"):
        return True
    if spec.get("nodeName") or spec.get("allNodes") or spec.get("nodeSelector"):
        return holder_offers(spec, node_name, labels)
    if spec.get("perDeviceNodeSelection"):
        return any(holder_offers(device_fields(d), node_name, labels) for d in spec.get("devices") or [])
    return False


class PoolSlices:
    """Every slice the allocator may read of one pool (of any generation), in name order."""

    def __init__(self, key, slices):
        self.key = key
        self.slices = sorted(slices, key=lambda s: (s.get("metadata") or {}).get("name") or "")

    @property
    def label(self):
        return "%s/%s" % self.key


def _generation(resource_slice):
    return int(((resource_slice.get("spec") or {}).get("pool") or {}).get("generation") or 0)


def _slice_count(resource_slice):
    expected = ((resource_slice.get("spec") or {}).get("pool") or {}).get("resourceSliceCount")
    return int(expected) if expected is not None else None


def _duplicate_device(device_slices):
    """A device name that two device entries of the slices share (the pool is invalid), or None."""
    seen = set()
    for item in device_slices:
        for entry in (item.get("spec") or {}).get("devices") or []:
            if entry.get("name") in seen:
                return entry.get("name")
            seen.add(entry.get("name"))
    return None


class Pool:
    """A pool as the allocator gathers it for one node: its status (POOL_OK, POOL_INCOMPLETE, POOL_INVALID), the
    devices of its slices for the node (newest generation among them), its shared counters (from every slice of
    that generation), and whether the search takes devices from it on this release."""

    def __init__(self, key, mine, every, status, rules, invalid_reason=None, complete=True):
        self.key = key
        self.status = status
        self.invalid_reason = invalid_reason
        self.complete = complete and status != POOL_INCOMPLETE
        self.allocatable = status == POOL_OK or (status == POOL_INCOMPLETE and not rules["pools_skipped"])
        self.per_pool = rules["counters_per_pool"]
        self.slices = mine
        self.devices = [Device(s, e, self.per_pool) for s in mine for e in (s.get("spec") or {}).get("devices") or []]
        self.counter_sets = pool_counter_sets(every, self.per_pool)[0]
        # Whose allocation takes from the shared counters: the node's devices, and when the allocator read the
        # whole generation (the node's slices alone looked incomplete), those of the other nodes too.
        self.counted_devices = self.devices if every is mine else [
            Device(s, e, self.per_pool) for s in every for e in (s.get("spec") or {}).get("devices") or []]

    @property
    def label(self):
        return "%s/%s" % self.key

    def with_slices_in(self, names):
        """A copy whose devices come in the order of the slices named (each slice's devices in their order)."""
        rank = dict((name, i) for i, name in enumerate(names))
        reordered = copy.copy(self)
        reordered.devices = sorted(self.devices, key=lambda d: rank[d.entry[0]])
        return reordered


def node_pool(pool, node_name, labels, rules, counters_everywhere=False):
    """The allocator's view of one pool on a node (GatherPools of the release), or None when the node gathers
    no slice of it or its slices there are obsolete."""
    relevant = [s for s in pool.slices if slice_relevant(s, node_name, labels, counters_everywhere)]
    if not relevant:
        return None
    generation = max(_generation(s) for s in relevant)
    mine = [s for s in relevant if _generation(s) == generation]
    every = mine
    complete = _slice_count(mine[0]) == len(mine)
    if not complete and rules["pools_checked_whole"]:
        if any(_generation(s) > generation for s in pool.slices):
            return None  # a newer generation elsewhere: the driver is replacing these slices
        every = [s for s in pool.slices if _generation(s) == generation]
        complete = _slice_count(mine[0]) == len(every)
    if not complete and rules["pools_skipped"]:
        return Pool(pool.key, mine, every, POOL_INCOMPLETE, rules)  # not looked into further
    duplicate = _duplicate_device(mine)
    if duplicate is not None:  # before 1.35 also in an incomplete pool, and the invalid pool stops the search
        return Pool(pool.key, mine, every, POOL_INVALID, rules, "duplicate device name %s" % duplicate,
                    complete)
    return Pool(pool.key, mine, every, POOL_OK if complete else POOL_INCOMPLETE, rules)


def pool_rules(release, taint_reader=ALLOCATOR):
    """How the release's allocator gathers pools and searches them: {counters_per_pool, pools_checked_whole,
    pools_skipped, all_devices_undone, admin_holds_device, all_subrequest_kept,
    subrequest_selections_apart, all_pool_problem_node_only, claim_limit_per_request, versions_without_build, release,
    taint_reader} (release: the minor, None for the newest
    rules; taint_reader: how it reads DeviceTaintRules, kube.taint_rules.allocator_reader of the release's
    version, which also needs the patch: capacity.allocator_rules gives both)."""
    newest = release is None
    return {"counters_per_pool": newest or release >= POOL_WIDE_COUNTERS_FROM,
            "pools_checked_whole": newest or release >= POOLS_CHECKED_WHOLE_FROM,
            "pools_skipped": newest or release >= POOLS_SKIPPED_FROM,
            "all_devices_undone": newest or release >= ALL_DEVICES_UNDONE_FROM,
            "admin_holds_device": newest or release >= ADMIN_HOLDS_DEVICE_FROM,
            "all_subrequest_kept": newest or release >= ALL_SUBREQUEST_KEPT_FROM,
            "subrequest_selections_apart": newest or release >= SUBREQUEST_SELECTIONS_APART_FROM,
            "all_pool_problem_node_only": newest or release >= ALL_POOL_PROBLEM_NODE_ONLY_FROM,
            "claim_limit_per_request": newest or release >= CLAIM_LIMIT_PER_REQUEST_FROM,
            "versions_without_build": newest or release >= VERSION_BUILD_IGNORED_FROM,
            "release": release, "taint_reader": taint_reader}


def allocator_implementation(release, features):
    """Which implementation of the structured allocator kube-scheduler of the release runs with these gates on:
    "stable", "incubating" or "experimental" (release None: the newest)."""
    release = NEWEST_RELEASE if release is None else release
    beyond = [since for gates, since in BEYOND_STABLE.items() if all(g in features for g in gates)
              and release < STABLE_FROM.get(gates, release + 1)]
    if not beyond:
        return "stable"
    if all(since is not None and release >= since for since in beyond):
        return "incubating"
    return "experimental"


def binding_pools_last(release, features):
    """Whether the release's allocator, with these gates on, searches a node's pools with a device that has
    binding conditions after the others."""
    since = BINDING_POOLS_LAST_FROM.get(allocator_implementation(release, features))
    return since is not None and (NEWEST_RELEASE if release is None else release) >= since


def counter_slices_everywhere(release, features):
    """Whether the release's allocator, with these gates on, gathers slices of shared counters on every node."""
    release = NEWEST_RELEASE if release is None else release
    return allocator_implementation(release, features) in COUNTER_SLICES_EVERYWHERE.get(release, ())


def pools_in_order(release, features):
    """Whether the release's allocator, with these gates on, goes through a node's pools and their slices in a fixed
    order (else in one that changes from one attempt to the next)."""
    release = NEWEST_RELEASE if release is None else release
    return ((allocator_implementation(release, features) != "stable" or release >= STABLE_AS_INCUBATING_FROM)
            and release >= POOLS_IN_ORDER_FROM)


# The implementations that, where a slot would take the claim past its device limit, unwind the search to the nearest
# firstAvailable list of the claim (its next subrequest) or to the claim before (errAllocationResultMaxSizeExceeded),
# instead of trying the slot's other devices: incubating and experimental from 1.34, stable from 1.36.
LIMIT_UNWINDS_FROM = {"stable": 36, "incubating": 34, "experimental": 34}


def limit_unwinds(release, features):
    """Whether the release's allocator, with these gates on, unwinds the search at the claim's device limit
    (LIMIT_UNWINDS_FROM)."""
    release = NEWEST_RELEASE if release is None else release
    return release >= LIMIT_UNWINDS_FROM[allocator_implementation(release, features)]


def has_binding_conditions(pool):
    """Whether the allocator counts the pool among those with binding conditions (searched last): a pool being
    updated or invalid is kept as its name only (GatherPools does not build it, buildPool returns it without its
    slices), so its devices do not count."""
    return pool.status == POOL_OK and any(d.binding_conditions for d in pool.devices)


def gather_pools(slices, features, rules):
    """[PoolSlices] of the slices the allocator reads (those with per-device node selection or shared counters
    left out without the partitionable-devices feature), in (driver, pool) order."""
    by_pool = {}
    for s in slices:
        spec = s.get("spec") or {}
        if PARTITIONABLE not in features and (spec.get("perDeviceNodeSelection") or spec.get("sharedCounters")):
            continue
        by_pool.setdefault(pool_key(s), []).append(s)
    return [PoolSlices(key, by_pool[key]) for key in sorted(by_pool, key=lambda k: (k[0] or "", k[1] or ""))]


class PoolIndex:
    """The pools of each node (node_pool over the pools with a slice there), in the order the allocator searches
    them: the pools whose slices are all bound to one node by name are found by that name, the others (all nodes,
    node selectors, per-device selection) are checked per node."""

    def __init__(self, pools, features, rules):
        self.rules = rules
        self.binding_last = binding_pools_last(rules.get("release"), features)
        self.counters_everywhere = counter_slices_everywhere(rules.get("release"), features)
        self.order = dict((p.key, i) for i, p in enumerate(pools))
        self.by_node = {}
        self.others = []
        for pool in pools:
            names = set((s.get("spec") or {}).get("nodeName") for s in pool.slices)
            everywhere = self.counters_everywhere and any((s.get("spec") or {}).get("sharedCounters")
                                                          for s in pool.slices)
            if len(names) == 1 and None not in names and not everywhere:
                self.by_node.setdefault(names.pop(), []).append(pool)
            else:
                self.others.append(pool)

    def for_node(self, node_name, labels):
        candidates = sorted(self.by_node.get(node_name, []) + self.others, key=lambda p: self.order[p.key])
        found = [p for p in (node_pool(p, node_name, labels, self.rules, self.counters_everywhere)
                             for p in candidates) if p is not None]
        if self.binding_last:
            found.sort(key=has_binding_conditions)  # stable: each part keeps its (driver, pool) order
        return found


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


# ---- nodes (which nodes a pod may run on: kube/selection.pod_refusal) -------------------------------------

def allocation_admits(claim, node_name, labels):
    """Whether an allocated claim can be used on the node (its allocation's nodeSelector; none: any node)."""
    selector = (allocation(claim) or {}).get("nodeSelector")
    return selector is None or selector_matches(selector, node_name, labels)
