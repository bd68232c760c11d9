# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Device capacity from ResourceSlices and ResourceClaims: total, allocated, tainted, free and unavailable devices
per driver, pool, node and DeviceClass; per pool its shared counters (capacity, consumed, left); and for devices
with consumable capacity (``allowMultipleAllocations``) each capacity's total, used and left.

Pure functions over the JSON the API returns (v1 and v1beta2 keep a device's fields on the device, v1beta1 under
``basic``: ``kube.slices.device_fields``). Only slices of each pool's newest generation count (``kube.slices``).

Free means the scheduler can allocate the device now to one more claim that asks for a whole device (no capacity
request), as kube-scheduler's allocator (k8s.io/dynamic-resource-allocation/structured) decides it:

- allocated: the device appears in a claim's ``status.allocation.devices.results`` without ``adminAccess``
  (admin access does not take the device); a device shared through consumable capacity counts once however
  many claims share it.
- tainted: the device carries a taint with effect ``NoSchedule`` or ``NoExecute`` in its slice, or a
  DeviceTaintRule with such an effect selects it as kube-scheduler of the release reads the rule
  (``kube.taint_rules.allocator_reader``: a rule without ``deviceSelector`` selects every device up to 1.37.0,
  none from 1.37.1).
- free: not tainted; its pool is allocatable (complete, and valid); not allocated, or shared with every
  capacity still holding what a claim without a capacity request takes (``requestPolicy.default``, else the
  whole capacity); and every counter it consumes (``consumesCounters``) still has at least that much left after
  the allocated devices' consumption.
- unavailable: neither allocated, tainted nor free (its pool is incomplete or invalid, or its counters are
  used up by other devices: the partitions of one physical device).

The allocator's rules differ by release (``allocator_rules``): from 1.35 a pool's counter sets are shared by all
its slices (a slice carries devices or ``sharedCounters``, not both), an incomplete pool (fewer current slices
than ``resourceSliceCount``) or an invalid one (a device name twice, a counter set name twice, a device consuming
a counter set or counter no slice of the pool defines) is never allocated from, and a device that consumes
counters is refused while any counter of its pool is overdrawn. Up to 1.34 a device consumes the counter sets of
its own slice and an incomplete pool is still allocated from (only ``allocationMode: All`` waits for it).
Counters exist where the DRAPartitionableDevices gate is on (beta, on from 1.36; alpha before): the rules assume
the scheduler runs with the API server's gates, as the collection sets them.

- A DeviceClass's devices are counted only when each of its selectors is ``device.driver == "<name>"``
  (the form drivers' classes use); other CEL is not evaluated here and the class's ``total`` and
  ``free`` are null. Its ``allocated`` counts the results of requests naming the class.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    VersionError, gate_api_versions, gate_info, parse_minor,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.quantity import QuantityError, quantity
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import (
    ALLOCATOR, KEEPS_ALLOCATIONS_OFF, allocator_reader, keeps_allocations_off, rule_selects,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    current_slices, device_fields, device_location, pool_key, summarize_pools,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import labels_text

# From this release kube-scheduler shares counter sets across a pool's slices and skips incomplete pools.
POOL_WIDE_COUNTERS_FROM = 35
_DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([^"]+)"\s*$')


def plain(value):
    """A Fraction as an int when whole, else a float (for the module's result)."""
    return int(value) if value.denominator == 1 else float(value)


def allocator_rules(server_version):
    """How kube-scheduler of this release (``gitVersion``) allocates: {release (minor or None),
    counters_per_pool, incomplete_pools_allocated, taint_reader}. An unreadable version gets the newest pool rules,
    and the DeviceTaintRule reading before 1.37.1 (``kube.taint_rules.allocator_reader``: a rule without
    deviceSelector selects every device, so no device is counted free that the scheduler may refuse)."""
    try:
        minor = parse_minor(server_version or "")
    except VersionError:
        minor = None
    pool_wide = minor is None or minor >= POOL_WIDE_COUNTERS_FROM
    return {"release": minor, "counters_per_pool": pool_wide, "incomplete_pools_allocated": not pool_wide,
            "taint_reader": allocator_reader(None if minor is None else server_version)}


def _values(entries, field):
    """{name: Fraction} of a map of {name: {field: quantity}} (unparseable values left out)."""
    out = {}
    for name, entry in (entries or {}).items():
        try:
            out[name] = quantity((entry or {}).get(field))
        except QuantityError:
            continue
    return out


def device_capacity(device):
    """{capacity name: Fraction} of a device (unparseable values left out)."""
    return _values(device_fields(device).get("capacity"), "value")


def capacity_taken_without_request(device):
    """{capacity name: Fraction} a claim asking for no capacity takes of a shared device: each capacity's
    ``requestPolicy.default``, else all of it."""
    out = device_capacity(device)
    for name, cap in (device_fields(device).get("capacity") or {}).items():
        default = ((cap or {}).get("requestPolicy") or {}).get("default")
        if default is not None and name in out:
            try:
                out[name] = quantity(default)
            except QuantityError:
                continue
    return out


def counter_set_key(slice_name, set_name, per_pool):
    """How a counter set is named in a pool: by its name where the pool's slices share the sets (1.35+), else
    ``<slice>/<set>`` (a device consumes its own slice's sets)."""
    return set_name if per_pool else "%s/%s" % (slice_name, set_name)


def _slice_name(resource_slice):
    return (resource_slice.get("metadata") or {}).get("name")


def device_consumption(resource_slice, device, per_pool):
    """{counter set key: {counter: Fraction}} the device consumes (``consumesCounters``)."""
    out = {}
    for entry in device_fields(device).get("consumesCounters") or []:
        sums = out.setdefault(counter_set_key(_slice_name(resource_slice), entry.get("counterSet"), per_pool), {})
        for name, value in _values(entry.get("counters"), "value").items():
            sums[name] = sums.get(name, Fraction(0)) + value
    return out


def tainted(device):
    return any(t.get("effect") in KEEPS_ALLOCATIONS_OFF for t in device_fields(device).get("taints") or [])


def blocking_rules(taint_rules):
    """The DeviceTaintRules that keep the scheduler off the devices they select (kube.taint_rules)."""
    return [rule for rule in taint_rules or () if keeps_allocations_off(rule)]


def tainted_by_rules(rules, driver, pool, name, reader=ALLOCATOR):
    """Whether one of `rules` (blocking_rules) selects the device as kube-scheduler reads them
    (kube.taint_rules.rule_selects for `reader`, the release's allocator_rules' ``taint_reader``: a rule without
    selector selects every device up to 1.37.0, none from 1.37.1). A 1.33/1.34 rule that also names a
    DeviceClass or CEL selectors is not evaluated here: it does not count (the explainer evaluates it)."""
    return any(rule_selects(r, driver, pool, name, reader=reader) for r in rules)


def published_devices(slices, rules=None, taint_rules=()):
    """{(driver, pool, device): device record} of the current slices; tainted by a blocking taint in its slice or
    by one of `taint_rules` (DeviceTaintRules, read as the allocator `rules` say)."""
    rules = rules or allocator_rules(None)
    per_pool, reader = rules["counters_per_pool"], rules["taint_reader"]
    blocking = blocking_rules(taint_rules)
    out = {}
    for item in current_slices(slices):
        driver, pool = pool_key(item)
        for device in (item.get("spec") or {}).get("devices") or []:
            out[(driver, pool, device.get("name"))] = {
                "driver": driver, "pool": pool, "name": device.get("name"),
                "location": device_location(item, device),
                "tainted": tainted(device) or tainted_by_rules(blocking, driver, pool, device.get("name"), reader),
                "shared": bool(device_fields(device).get("allowMultipleAllocations")),
                "capacity": device_capacity(device), "takes": capacity_taken_without_request(device),
                "consumes": device_consumption(item, device, per_pool)}
    return out


def pool_counter_sets(pool_slices, per_pool):
    """({counter set key: {counter: Fraction}}, duplicate set keys) of one pool's current slices."""
    sets, duplicates = {}, []
    for item in pool_slices:
        for counter_set in (item.get("spec") or {}).get("sharedCounters") or []:
            key = counter_set_key(_slice_name(item), counter_set.get("name"), per_pool)
            if key in sets:
                duplicates.append(key)
            sets[key] = _values(counter_set.get("counters"), "value")
    return sets, duplicates


def _duplicates(names):
    seen, twice = set(), []
    for name in names:
        if name in seen and name not in twice:
            twice.append(name)
        seen.add(name)
    return twice


def missing_counters(consumes, counter_sets):
    """["set" or "set/counter"] the consumption names that the counter sets lack."""
    missing = []
    for key, counters in sorted(consumes.items()):
        if key not in counter_sets:
            missing.append(key)
            continue
        missing += ["%s/%s" % (key, name) for name in sorted(counters) if name not in counter_sets[key]]
    return missing


def pool_problem(device_names, duplicate_sets, consumptions, counter_sets, per_pool):
    """Why the allocator refuses the whole pool as invalid, or None: a device name twice, and where the counter
    sets are the pool's (1.35+) a counter set name twice or a device consuming a set or counter none defines."""
    twice = _duplicates(device_names)
    if twice:
        return "invalid: device name %s appears twice in the pool's current slices" % twice[0]
    if not per_pool:
        return None
    if duplicate_sets:
        return "invalid: counter set %s is defined twice in the pool" % duplicate_sets[0]
    for name, consumes in consumptions:
        missing = missing_counters(consumes, counter_sets)
        if missing:
            return "invalid: device %s consumes %s, which no slice of the pool defines" % (name, missing[0])
    return None


def pool_states(slices, devices, rules):
    """{(driver, pool): {complete, slices_seen, slices_expected, problem, counter_sets}} of the current slices."""
    per_pool = rules["counters_per_pool"]
    by_pool = {}
    for item in current_slices(slices):
        by_pool.setdefault(pool_key(item), []).append(item)
    pool_devices = devices_by_pool(devices)
    out = {}
    for summary in summarize_pools(slices):
        key = (summary["driver"], summary["pool"])
        sets, duplicate_sets = pool_counter_sets(by_pool.get(key) or [], per_pool)
        names = [d.get("name") for item in by_pool.get(key) or []
                 for d in (item.get("spec") or {}).get("devices") or []]
        consumptions = [(name, device["consumes"]) for name, device in pool_devices.get(key) or []]
        problem = pool_problem(names, duplicate_sets, consumptions, sets, per_pool)
        if problem is None and not summary["complete"]:
            problem = "incomplete: %d of %d slices published" % (summary["slices_seen"], summary["slices_expected"])
        out[key] = {"complete": summary["complete"], "problem": problem, "counter_sets": sets,
                    "allocatable": pool_allocatable(summary["complete"], problem, rules)}
    return out


def devices_by_pool(devices):
    """{(driver, pool): [(device name, device)]} of {(driver, pool, device name): device}, each pool's devices in
    the order of their names: the devices sorted once, for every per-pool look (not a scan of all per pool)."""
    out = {}
    for key, device in sorted(devices.items(), key=_sort_key):
        out.setdefault(key[:2], []).append((key[2], device))
    return out


def pool_allocatable(complete, problem, rules):
    """Whether the allocator takes devices from the pool: valid, and complete unless the release allocates
    from incomplete pools."""
    if complete:
        return problem is None
    return rules["incomplete_pools_allocated"] and problem.startswith("incomplete")


def counters_consumed(devices, used):
    """{(driver, pool): {counter set key: {counter: Fraction}}} consumed by the allocated published devices
    (a shared device once)."""
    out = {}
    for key, device in devices.items():
        if key not in used:
            continue
        sets = out.setdefault(key[:2], {})
        for set_key, counters in device["consumes"].items():
            sums = sets.setdefault(set_key, {})
            for name, value in counters.items():
                sums[name] = sums.get(name, Fraction(0)) + value
    return out


def counters_left(counter_sets, consumed):
    """{counter set key: {counter: Fraction}}: capacity minus consumption (below zero when overdrawn)."""
    return dict((key, dict((name, total - consumed.get(key, {}).get(name, Fraction(0)))
                           for name, total in counters.items()))
                for key, counters in counter_sets.items())


def counters_fit(consumes, left, per_pool):
    """Whether a device consuming `consumes` fits what is left: each counter it consumes exists and has at
    least that much left; where the pool's sets are shared (1.35+), also no counter of the pool is overdrawn."""
    for key, counters in consumes.items():
        have = left.get(key)
        if have is None:
            return False
        for name, need in counters.items():
            if name not in have or have[name] < need:
                return False
    if per_pool and consumes:
        return all(value >= 0 for counters in left.values() for value in counters.values())
    return True


def shared_capacity_fits(device, used):
    """Whether one more claim without a capacity request fits a shared device already in use."""
    return all(device["capacity"].get(name, Fraction(0)) - used.get(name, Fraction(0)) >= need
               for name, need in device["takes"].items())


def device_free(device, used, pool, left, per_pool):
    """Whether the allocator can give the device to one more claim now. used: None when no claim holds it,
    else {capacity: Fraction} the holders consume; pool: pool_states entry; left: counters_left of its pool."""
    if device["tainted"] or not pool["allocatable"]:
        return False
    if used is not None:
        # A shared device in use skips the counter check: its counters are consumed once already.
        return device["shared"] and shared_capacity_fits(device, used)
    return counters_fit(device["consumes"], left, per_pool)


def request_classes(claim):
    """{request name (and request/subrequest): DeviceClass name} from the claim's spec."""
    out = {}
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exact = req.get("exactly") or req
        if exact.get("deviceClassName"):
            out[req.get("name")] = exact["deviceClassName"]
        for sub in req.get("firstAvailable") or []:
            out["%s/%s" % (req.get("name"), sub.get("name"))] = sub.get("deviceClassName")
    return out


def allocations(claims):
    """[(driver, pool, device, class or None, {capacity: Fraction consumed})] of every allocated result."""
    out = []
    for claim in claims:
        alloc = (claim.get("status") or {}).get("allocation")
        if not alloc:
            continue
        classes = request_classes(claim)
        for res in (alloc.get("devices") or {}).get("results") or []:
            if res.get("adminAccess"):
                continue
            consumed = {}
            for name, value in (res.get("consumedCapacity") or {}).items():
                try:
                    consumed[name] = quantity(value)
                except QuantityError:
                    continue
            out.append((res.get("driver"), res.get("pool"), res.get("device"), classes.get(res.get("request")),
                        consumed))
    return out


def class_drivers(device_class):
    """The drivers a DeviceClass selects, or None when its selectors are not all ``device.driver == "x"``."""
    drivers = set()
    for selector in (device_class.get("spec") or {}).get("selectors") or []:
        match = _DRIVER_SELECTOR.match(((selector.get("cel") or {}).get("expression")) or "")
        if not match:
            return None
        drivers.add(match.group(1))
    return drivers if len(drivers) == 1 else None


def _entry():
    return {"total": 0, "allocated": 0, "tainted": 0, "free": 0, "unavailable": 0, "capacity": {}}


def _add_device(entry, device, used):
    entry["total"] += 1
    held = device["key"] in used
    entry["allocated"] += 1 if held else 0
    entry["tainted"] += 1 if device["tainted"] else 0
    entry["free"] += 1 if device["free"] else 0
    entry["unavailable"] += 0 if held or device["tainted"] or device["free"] else 1
    if device["shared"]:
        for name, total in device["capacity"].items():
            cap = entry["capacity"].setdefault(name, {"total": Fraction(0), "used": Fraction(0)})
            cap["total"] += total
            cap["used"] += used.get(device["key"], {}).get(name, Fraction(0))


def _finish(entry):
    entry["capacity"] = dict((name, {"total": plain(c["total"]), "used": plain(c["used"]),
                                     "left": plain(c["total"] - c["used"])})
                             for name, c in sorted(entry["capacity"].items()))
    return entry


def counters_view(counter_sets, consumed):
    """{counter set key: {counter: {capacity, consumed, left}}} of one pool, in plain numbers."""
    left = counters_left(counter_sets, consumed)
    return dict((key, dict((name, {"capacity": plain(total), "consumed": plain(total - left[key][name]),
                                   "left": plain(left[key][name])})
                           for name, total in sorted(counters.items())))
                for key, counters in sorted(counter_sets.items()))


def _sort_key(item):
    return tuple(x or "" for x in item[0])


def allocation_use(claims, devices, driver):
    """(used {device key: {capacity: Fraction}}, {class: set of device keys}, unpublished "d/p/n" list)."""
    used, per_class, unpublished = {}, {}, []
    for dev_driver, pool, name, cls, consumed in allocations(claims):
        key = (dev_driver, pool, name)
        if driver is not None and dev_driver != driver:
            continue
        if key not in devices:
            unpublished.append("%s/%s/%s" % key)
        sums = used.setdefault(key, {})
        for cap, value in consumed.items():
            sums[cap] = sums.get(cap, Fraction(0)) + value
        if cls:
            per_class.setdefault(cls, set()).add(key)
    return used, per_class, sorted(set(unpublished))


def judged_devices(slices, claims, rules, taint_rules=(), driver=None):
    """Every current device (of one driver, if given) judged by the allocator `rules` (allocator_rules):
    {devices: {(driver, pool, device): record with key, free}, used, per_class, unpublished, pools, consumed}.
    The one place that decides whether a device is free (capacity_report, the canary's device choice)."""
    per_pool = rules["counters_per_pool"]
    slices = [s for s in slices if driver is None or (s.get("spec") or {}).get("driver") == driver]
    devices = published_devices(slices, rules, taint_rules)
    used, per_class, unpublished = allocation_use(claims, devices, driver)
    pools = pool_states(slices, devices, rules)
    consumed = counters_consumed(devices, used)
    for key, device in devices.items():
        pool = pools[key[:2]]
        device["key"] = key
        device["free"] = device_free(device, used.get(key), pool, counters_left(
            pool["counter_sets"], consumed.get(key[:2], {})), per_pool)
    return {"devices": devices, "used": used, "per_class": per_class, "unpublished": unpublished, "pools": pools,
            "consumed": consumed}


def capacity_report(slices, claims, device_classes=(), driver=None, server_version=None, taint_rules=()):
    """{by_driver, by_pool, by_node, by_device_class, totals, unpublished_allocations, allocator} (of one driver,
    if given), free devices judged by the allocator rules of `server_version` (``gitVersion``); `taint_rules`: the
    cluster's DeviceTaintRules (their NoSchedule and NoExecute taints count as the slices' own)."""
    rules = allocator_rules(server_version)
    judged = judged_devices(slices, claims, rules, taint_rules, driver)
    devices, used, pools, consumed = judged["devices"], judged["used"], judged["pools"], judged["consumed"]
    per_class_allocated, unpublished = judged["per_class"], judged["unpublished"]
    by_driver, by_pool, by_node, totals = {}, {}, {}, _entry()
    for key, device in sorted(devices.items(), key=_sort_key):
        _add_device(by_driver.setdefault(device["driver"], _entry()), device, used)
        _add_device(by_pool.setdefault("%s/%s" % (device["driver"], device["pool"]), _entry()), device, used)
        _add_device(by_node.setdefault(device["location"], _entry()), device, used)
        _add_device(totals, device, used)
    for key, pool in pools.items():
        entry = by_pool.setdefault("%s/%s" % key, _entry())
        entry.update(complete=pool["complete"], problem=pool["problem"],
                     counters=counters_view(pool["counter_sets"], consumed.get(key, {})))
    by_class = {}
    for item in device_classes:
        name = (item.get("metadata") or {}).get("name")
        drivers = class_drivers(item)
        entry = _entry()
        if drivers is None:
            entry.update(total=None, tainted=None, free=None, unavailable=None, selectors_evaluated=False)
        else:
            for key, device in devices.items():
                if device["driver"] in drivers:
                    _add_device(entry, device, used)
            entry["selectors_evaluated"] = True
        entry["allocated"] = len(per_class_allocated.get(name, ()))
        by_class[name] = entry
    return {"by_driver": dict((k, _finish(v)) for k, v in by_driver.items()),
            "by_pool": dict((k, _finish(v)) for k, v in by_pool.items()),
            "by_node": dict((k, _finish(v)) for k, v in by_node.items()),
            "by_device_class": dict((k, _finish(v)) for k, v in by_class.items()),
            "totals": _finish(totals), "unpublished_allocations": unpublished, "allocator": rules}


def summary_lines(report):
    """One line per driver: free of total, allocated, tainted, unavailable (when any), and consumable capacity
    left."""
    lines = []
    for driver, entry in sorted(report["by_driver"].items()):
        caps = "".join("; %s %s left of %s" % (name, c["left"], c["total"]) for name, c in entry["capacity"].items())
        unavailable = ", %d unavailable" % entry["unavailable"] if entry.get("unavailable") else ""
        lines.append("devices of %s: %d free of %d (%d allocated, %d tainted%s)%s"
                     % (driver, entry["free"], entry["total"], entry["allocated"], entry["tainted"], unavailable,
                        caps))
    return lines or ["no driver publishes devices"]


POOL_STATUS_GATE = "DRAResourcePoolStatus"
POOL_STATUS_LIMIT = 1000  # the most pools one ResourcePoolStatusRequest answers for (spec.limit maximum)
POOL_STATUS_NAME_PREFIX = "dra-admin-capacity-"
# A status.pools[] count -> the computed count of the same devices. The controller's availableDevices is
# total - allocated - unavailable (tainted): it does not look at shared counters nor at the pool's state, so it
# is compared with the devices neither allocated nor tainted (pool_status_computed's "idle"), not with free.
# Its unavailableDevices counts the tainted devices (0 on 1.36, which reads no taints).
_POOL_STATUS_FIELDS = (("totalDevices", "total"), ("allocatedDevices", "allocated"),
                       ("availableDevices", "not allocated nor tainted"), ("unavailableDevices", "tainted"))
# From this release each pool's status also has the per-pool views: partitionSummary (with the
# DRAPartitionableDevicesType gate) and shareableSummary (k8s.io/api v0.37 resource/v1alpha3).
POOL_STATUS_VIEWS_FROM = 37


def pool_status_views(server_version):
    """Whether the pool status of this release (``gitVersion``) reports the per-pool views (an unreadable
    version: the newest rules)."""
    try:
        return parse_minor(server_version or "") >= POOL_STATUS_VIEWS_FROM
    except VersionError:
        return True


def pool_status_support():
    """What serves ResourcePoolStatusRequest, from the catalog: the gate, its components and the
    --runtime-config entry per release (one sentence for the module's `skipped`)."""
    needs = gate_api_versions(POOL_STATUS_GATE)
    info = gate_info("v1.%d" % max(needs), POOL_STATUS_GATE)
    by_entry = {}
    for minor in sorted(needs):
        by_entry.setdefault(needs[minor], []).append("1.%d" % minor)
    return ("it needs the feature gate %s=true on %s, and on kube-apiserver %s (role dra.admin.feature_gates "
            "with dra_feature_gates_extra: {%s: true} writes both)" % (
                POOL_STATUS_GATE, " and ".join(info["components"]), "; ".join(
                    "--runtime-config=%s=true (Kubernetes %s)" % (entry, ", ".join(releases))
                    for entry, releases in sorted(by_entry.items())), POOL_STATUS_GATE))


def pool_status_request(driver, api_version="resource.k8s.io/v1alpha3"):
    """The ResourcePoolStatusRequest asking for every pool of `driver` (cluster-scoped, named by the server)."""
    return {"apiVersion": api_version, "kind": "ResourcePoolStatusRequest",
            "metadata": {"generateName": POOL_STATUS_NAME_PREFIX,
                         "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {"driver": driver, "limit": POOL_STATUS_LIMIT}}


def pool_status_answer(item):
    """None while the controller has not answered `item`, else {complete, message, pool_count, truncated, pools}
    with pools keyed ``driver/pool`` (the request's status.pools entries as they are)."""
    status = (item or {}).get("status")
    if not status:
        return None
    conditions = dict((c.get("type"), c) for c in status.get("conditions") or [])
    complete = (conditions.get("Complete") or {}).get("status") == "True"
    failed = conditions.get("Failed") or {}
    pools = dict(("%s/%s" % (p.get("driver"), p.get("poolName")), p) for p in status.get("pools") or [])
    count = status.get("poolCount") or 0
    return {"complete": complete and failed.get("status") != "True",
            "message": (failed if failed.get("status") == "True" else conditions.get("Complete") or {}).get("message"),
            "pool_count": count, "truncated": len(pools) < count, "pools": pools}


def partition_type(driver, device, attribute):
    """The string value of `attribute` on a device, or None. An attribute of the driver's own domain may be
    written without it (as CEL selectors read it); the qualified form wins."""
    attributes = device_fields(device).get("attributes") or {}
    value = attributes.get(attribute)
    if value is None and attribute.startswith(driver + "/"):
        value = attributes.get(attribute[len(driver) + 1:])
    return (value or {}).get("string")


def device_partition_types(slices, default_attribute=None):
    """{(driver, pool, device): (attribute, partition type or None)} of the current slices' devices that have a
    grouping attribute: their slice's ``partitionTypeAttribute`` (1.37, gate DRAPartitionableDevicesType), or
    `default_attribute` (the request's ``defaultPartitionTypeAttribute``) where no slice of the pool declares one."""
    by_pool = {}
    for item in current_slices(slices):
        by_pool.setdefault(pool_key(item), []).append(item)
    out = {}
    for (driver, pool), items in by_pool.items():
        declared = any((i.get("spec") or {}).get("partitionTypeAttribute") for i in items)
        for item in items:
            attribute = (item.get("spec") or {}).get("partitionTypeAttribute") or (
                None if declared else default_attribute)
            if not attribute:
                continue
            for device in (item.get("spec") or {}).get("devices") or []:
                out[(driver, pool, device.get("name"))] = (attribute, partition_type(driver, device, attribute))
    return out


def _plus(consumed, consumes):
    """`consumed` ({set: {counter: Fraction}}) with one more device's consumption added (a new dict)."""
    out = dict((key, dict(counters)) for key, counters in consumed.items())
    for key, counters in consumes.items():
        sums = out.setdefault(key, {})
        for name, value in counters.items():
            sums[name] = sums.get(name, Fraction(0)) + value
    return out


def pool_status_computed(slices, claims, server_version=None, taint_rules=(), default_attribute=None):
    """What the pool status is compared with that the capacity report does not count, per "driver/pool":
    {"idle": devices neither allocated nor tainted (the controller's availableDevices leaves counters and the
    pool's state aside), "partitions": {(attribute, type): {"total", "allocatable"}} or None before
    POOL_STATUS_VIEWS_FROM}. Partitions: the devices that consume shared counters, grouped by
    device_partition_types; allocatable is how many more of a type the scheduler could allocate one after another
    from what the counters have left (the collection's free rule, device_free: not tainted, the pool allocatable,
    the counters fitting), as the 1.37 partitionSummary reports it. A device without its type's attribute leaves
    its type out (the controller flags the pool). `taint_rules`: the cluster's DeviceTaintRules, as for
    capacity_report."""
    rules = allocator_rules(server_version)
    slices = list(slices)
    devices = published_devices(slices, rules, taint_rules)
    used = allocation_use(claims, devices, None)[0]
    pools = pool_states(slices, devices, rules)
    consumed = counters_consumed(devices, used)
    types = device_partition_types(slices, default_attribute) if pool_status_views(server_version) else None
    out = dict(("%s/%s" % pool, {"idle": 0, "partitions": None if types is None else {}}) for pool in pools)
    fresh = {}
    for key, device in sorted(devices.items(), key=_sort_key):
        entry = out["%s/%s" % key[:2]]
        entry["idle"] += 0 if key in used or device["tainted"] else 1
        if types is None or not device["consumes"] or (types.get(key) or (None, None))[1] is None:
            continue
        group = entry["partitions"].setdefault(types[key], {"total": 0, "allocatable": 0})
        group["total"] += 1
        if key not in used:
            fresh.setdefault((key[:2], types[key]), []).append(device)
    for (pool, group), candidates in sorted(fresh.items()):
        state, taken = pools[pool], consumed.get(pool, {})
        for device in candidates:
            if device_free(device, None, state, counters_left(state["counter_sets"], taken), rules["counters_per_pool"]):
                out["%s/%s" % pool]["partitions"][group]["allocatable"] += 1
                taken = _plus(taken, device["consumes"])
    return out


def partition_comparison(key, entries, ours):
    """Differences between a pool's partitionSummary entries and the computed partition types of the pool."""
    diffs = []
    theirs = dict(((e.get("attribute"), e.get("type")), e) for e in entries or [])
    for group in sorted(set(theirs) | set(ours or {})):
        name = "%s: partition type %s=%s" % (key, group[0], group[1])
        if group not in (ours or {}):
            diffs.append("%s: in the pool status, not computed" % name)
        elif group not in theirs:
            diffs.append("%s: computed (%d devices), not in the pool status" % (name, ours[group]["total"]))
        else:
            for field in ("total", "allocatable"):
                if theirs[group].get(field) != ours[group][field]:
                    diffs.append("%s: %s %s, computed %s" % (
                        name, field, theirs[group].get(field), ours[group][field]))
    return diffs


def shareable_comparison(key, summary, capacity):
    """Differences between a pool's shareableSummary capacities (quantities) and the computed consumable capacity
    of its shared devices (total, used, left in base units)."""
    diffs = []
    theirs = dict((c.get("name"), c) for c in (summary or {}).get("capacity") or [])
    for name in sorted(set(theirs) | set(capacity or {})):
        if name not in (capacity or {}):
            diffs.append("%s: shared capacity %s in the pool status, not computed" % (key, name))
            continue
        if name not in theirs:
            diffs.append("%s: shared capacity %s computed, not in the pool status" % (key, name))
            continue
        for field, mine in (("total", "total"), ("consumed", "used"), ("available", "left")):
            try:
                value = plain(quantity(theirs[name].get(field)))
            except QuantityError:
                value = theirs[name].get(field)
            if value != capacity[name][mine]:
                diffs.append("%s: shared capacity %s %s %s, computed %s %s" % (
                    key, name, field, theirs[name].get(field), mine, capacity[name][mine]))
    return diffs


def pool_status_comparison(report, pool_statuses, drivers=None, computed=None):
    """Differences between our counts and ResourcePoolStatusRequest's status.pools entries: each count that differs
    (_POOL_STATUS_FIELDS; availableDevices only given `computed`), a pool only one side has (of `drivers`, when
    given), a pool without counts (an incomplete pool), a validationError beside counts (1.37: a view the controller
    could not compute), and where `computed` (pool_status_computed) has the views (1.37), each partition type and
    each shared capacity that differs."""
    diffs = []
    seen = set()
    for status in pool_statuses:
        key = "%s/%s" % (status.get("driver"), status.get("poolName"))
        seen.add(key)
        ours = report["by_pool"].get(key)
        if ours is None:
            diffs.append("%s: in the pool status, not in the slices read" % key)
            continue
        if status.get("validationError") and status.get("totalDevices") is None:
            diffs.append("%s: the pool status has no counts: %s" % (key, status["validationError"]))
            continue
        if status.get("validationError"):
            diffs.append("%s: the pool status flags the pool: %s" % (key, status["validationError"]))
        extra = (computed or {}).get(key) or {}
        counts = dict(ours)
        if "idle" in extra:
            counts["not allocated nor tainted"] = extra["idle"]
        for theirs, mine in _POOL_STATUS_FIELDS:
            if status.get(theirs) is not None and mine in counts and status[theirs] != counts[mine]:
                diffs.append("%s: %s %s, computed %s %s" % (key, theirs, status[theirs], mine, counts[mine]))
        if extra.get("partitions") is not None and not status.get("validationError"):
            diffs += partition_comparison(key, status.get("partitionSummary"), extra["partitions"])
            diffs += shareable_comparison(key, status.get("shareableSummary"), ours.get("capacity"))
    if drivers is not None:
        for key in sorted(report["by_pool"]):
            if key.split("/", 1)[0] in drivers and key not in seen:
                diffs.append("%s: in the slices read, not in the pool status" % key)
    return diffs


METRIC_DEVICES = "dra_admin_devices"
METRIC_CAPACITY = "dra_admin_device_capacity"
METRIC_DISAGREEMENTS = "dra_admin_pool_status_disagreements"
DEVICE_STATES = ("total", "allocated", "tainted", "free")


def metrics_text(report, disagreements=None):
    """The report's per-pool counts in the Prometheus text exposition format (for a node-exporter textfile
    collector): devices per driver, pool and state; consumable capacity per driver, pool, capacity and kind (base
    units); and, when the pool status was compared, the number of disagreements."""
    lines = ["# HELP %s DRA devices per driver, pool and state (total, allocated, tainted, free), from "
             "dra.admin.dra_capacity_info." % METRIC_DEVICES, "# TYPE %s gauge" % METRIC_DEVICES]
    capacity = []
    for key, entry in sorted(report["by_pool"].items()):
        driver, pool = key.split("/", 1)
        for state in DEVICE_STATES:
            lines.append("%s%s %d" % (METRIC_DEVICES, labels_text(driver=driver, pool=pool, state=state), entry[state]))
        for name, cap in sorted(entry["capacity"].items()):
            for kind in ("total", "used", "left"):
                labels = labels_text(driver=driver, pool=pool, capacity=name, kind=kind)
                capacity.append("%s%s %s" % (METRIC_CAPACITY, labels, cap[kind]))
    if capacity:
        lines += ["# HELP %s Consumable capacity of shared DRA devices per driver, pool, capacity and kind "
                  "(total, used, left), in base units." % METRIC_CAPACITY, "# TYPE %s gauge" % METRIC_CAPACITY]
        lines += capacity
    if disagreements is not None:
        lines += ["# HELP %s Differences between ResourcePoolStatusRequest and the computed pool counts."
                  % METRIC_DISAGREEMENTS, "# TYPE %s gauge" % METRIC_DISAGREEMENTS,
                  "%s %d" % (METRIC_DISAGREEMENTS, len(disagreements))]
    return "\n".join(lines) + "\n"
