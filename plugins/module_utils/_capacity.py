# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Device capacity from ResourceSlices and ResourceClaims: total, allocated, tainted and free devices
per driver, pool, node and DeviceClass, and for devices with consumable capacity
(``allowMultipleAllocations``) each capacity's total, used and left.

Pure functions over the JSON the API returns (v1 and v1beta2 keep a device's fields on the device,
v1beta1 under ``basic``). Only slices of each pool's newest generation count (``_slices``).

- allocated: the device appears in a claim's ``status.allocation.devices.results`` without
  ``adminAccess`` (admin access does not take the device); a device shared through consumable
  capacity counts once however many claims share it.
- tainted: the device carries a taint with effect ``NoSchedule`` or ``NoExecute`` in its slice
  (taints from DeviceTaintRules are not read here).
- free: neither allocated nor tainted.
- A DeviceClass's devices are counted only when each of its selectors is ``device.driver == "<name>"``
  (the form drivers' classes use); other CEL is not evaluated here and the class's ``total`` and
  ``free`` are null. Its ``allocated`` counts the results of requests naming the class.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction

from ansible_collections.dra.admin.plugins.module_utils._slices import (
    current_slices, device_fields, device_location, pool_key,
)

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_SUFFIX = {"": 1, "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
           "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
           "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([^"]+)"\s*$')


class QuantityError(ValueError):
    pass


def quantity(text):
    """A Kubernetes quantity (``80Gi``, ``100``, ``500m``, ``1e3``) as a Fraction."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise QuantityError("not a quantity: %r" % (text,))
    number, suffix = match.groups()
    try:
        value = Fraction(number)
    except ValueError:
        raise QuantityError("not a quantity: %r" % (text,))
    if suffix[:1] in ("e", "E"):
        return value * Fraction(10) ** int(suffix[1:])
    if suffix not in _SUFFIX:
        raise QuantityError("unknown quantity suffix %r in %r" % (suffix, text))
    return value * _SUFFIX[suffix]


def plain(value):
    """A Fraction as an int when whole, else a float (for the module's result)."""
    return int(value) if value.denominator == 1 else float(value)


def device_capacity(device):
    """{capacity name: Fraction} of a device (unparseable values left out)."""
    out = {}
    for name, cap in (device_fields(device).get("capacity") or {}).items():
        try:
            out[name] = quantity((cap or {}).get("value"))
        except QuantityError:
            continue
    return out


def tainted(device):
    return any(t.get("effect") in BLOCKING_EFFECTS for t in device_fields(device).get("taints") or [])


def published_devices(slices):
    """{(driver, pool, device): device record} of the current slices."""
    out = {}
    for item in current_slices(slices):
        driver, pool = pool_key(item)
        for device in (item.get("spec") or {}).get("devices") or []:
            out[(driver, pool, device.get("name"))] = {
                "driver": driver, "pool": pool, "name": device.get("name"),
                "location": device_location(item, device),
                "tainted": tainted(device), "shared": bool(device_fields(device).get("allowMultipleAllocations")),
                "capacity": device_capacity(device)}
    return out


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
    return {"total": 0, "allocated": 0, "tainted": 0, "free": 0, "capacity": {}}


def _add_device(entry, device, used):
    entry["total"] += 1
    held = device["key"] in used
    entry["allocated"] += 1 if held else 0
    entry["tainted"] += 1 if device["tainted"] else 0
    entry["free"] += 0 if held or device["tainted"] else 1
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


def capacity_report(slices, claims, device_classes=(), driver=None):
    """{by_driver, by_pool, by_node, by_device_class, totals, unpublished_allocations} (of one driver, if given)."""
    devices = published_devices(s for s in slices if driver is None or (s.get("spec") or {}).get("driver") == driver)
    used = {}
    per_class_allocated = {}
    unpublished = []
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
            per_class_allocated.setdefault(cls, set()).add(key)
    by_driver, by_pool, by_node, totals = {}, {}, {}, _entry()
    for key, device in sorted(devices.items(), key=lambda kv: tuple(x or "" for x in kv[0])):
        device["key"] = key
        _add_device(by_driver.setdefault(device["driver"], _entry()), device, used)
        _add_device(by_pool.setdefault("%s/%s" % (device["driver"], device["pool"]), _entry()), device, used)
        _add_device(by_node.setdefault(device["location"], _entry()), device, used)
        _add_device(totals, device, used)
    by_class = {}
    for item in device_classes:
        name = (item.get("metadata") or {}).get("name")
        drivers = class_drivers(item)
        entry = _entry()
        if drivers is None:
            entry.update(total=None, tainted=None, free=None, selectors_evaluated=False)
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
            "totals": _finish(totals), "unpublished_allocations": sorted(set(unpublished))}


def summary_lines(report):
    """One line per driver: free of total, allocated, tainted, and consumable capacity left."""
    lines = []
    for driver, entry in sorted(report["by_driver"].items()):
        caps = "".join("; %s %s left of %s" % (name, c["left"], c["total"]) for name, c in entry["capacity"].items())
        lines.append("devices of %s: %d free of %d (%d allocated, %d tainted)%s"
                     % (driver, entry["free"], entry["total"], entry["allocated"], entry["tainted"], caps))
    return lines or ["no driver publishes devices"]


POOL_STATUS_LIMIT = 1000  # the most pools one ResourcePoolStatusRequest answers for (spec.limit maximum)
POOL_STATUS_NAME_PREFIX = "dra-admin-capacity-"
_POOL_STATUS_FIELDS = (("totalDevices", "total"), ("allocatedDevices", "allocated"), ("availableDevices", "free"))


def pool_status_request(driver, api_version="resource.k8s.io/v1alpha3"):
    """The ResourcePoolStatusRequest asking for every pool of `driver` (cluster-scoped, named by the server)."""
    return {"apiVersion": api_version, "kind": "ResourcePoolStatusRequest",
            "metadata": {"generateName": POOL_STATUS_NAME_PREFIX,
                         "labels": {"app.kubernetes.io/managed-by": "dra.admin"}},
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


def pool_status_comparison(report, pool_statuses, drivers=None):
    """Differences between our by_pool counts and ResourcePoolStatusRequest's status.pools entries: each count
    that differs (total, allocated, and available against free), a pool only one side has (of `drivers`, when
    given), and a pool the controller could not validate."""
    diffs = []
    seen = set()
    for status in pool_statuses:
        key = "%s/%s" % (status.get("driver"), status.get("poolName"))
        seen.add(key)
        ours = report["by_pool"].get(key)
        if ours is None:
            diffs.append("%s: in the pool status, not in the slices read" % key)
            continue
        if status.get("validationError"):
            diffs.append("%s: the pool status has no counts: %s" % (key, status["validationError"]))
            continue
        for theirs, mine in _POOL_STATUS_FIELDS:
            if status.get(theirs) is not None and status[theirs] != ours[mine]:
                diffs.append("%s: %s %s, computed %s %s" % (key, theirs, status[theirs], mine, ours[mine]))
    if drivers is not None:
        for key in sorted(report["by_pool"]):
            if key.split("/", 1)[0] in drivers and key not in seen:
                diffs.append("%s: in the slices read, not in the pool status" % key)
    return diffs


METRIC_DEVICES = "dra_admin_devices"
METRIC_CAPACITY = "dra_admin_device_capacity"
METRIC_DISAGREEMENTS = "dra_admin_pool_status_disagreements"
DEVICE_STATES = ("total", "allocated", "tainted", "free")


def _label(value):
    return '"%s"' % str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels):
    return "{%s}" % ",".join("%s=%s" % (k, _label(v)) for k, v in sorted(labels.items()))


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
            lines.append("%s%s %d" % (METRIC_DEVICES, _labels(driver=driver, pool=pool, state=state), entry[state]))
        for name, cap in sorted(entry["capacity"].items()):
            for kind in ("total", "used", "left"):
                labels = _labels(driver=driver, pool=pool, capacity=name, kind=kind)
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
