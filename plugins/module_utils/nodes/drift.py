# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Drift between what a node has and what its DRA drivers publish.

Pure functions over the ``dra_hardware`` facts of one node (see nodes.hardware.py)
and ResourceSlice objects as the API returns them. A driver profile says
which PCI functions are the driver's devices and, optionally, which device
attribute carries a hardware id (an NVIDIA GPU uuid, a PCI address), so that
devices are matched one by one instead of counted.

``missing``: the node has it, the driver does not publish it (a driver that
lost a device, a node whose driver publishes nothing). ``extra``: published,
but the node does not have it (a dead GPU still advertised).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    device_attributes, device_location, slices_for_node, summarize_pools,
)

PROFILE_DEFAULTS = {
    "pci_types": ["gpu"],
    "pci_vendors": [],
    "functions": "physical",
    "id_attribute": None,
    "hardware_id": "nvidia_uuid",
    "device_match": {},
}

# Drivers whose mapping to hardware is known. The example driver publishes
# simulated GPUs whose uuids exist nowhere, so it is compared by count.
KNOWN_PROFILES = {
    "gpu.example.com": {"pci_types": ["gpu"]},
    "gpu.nvidia.com": {"pci_types": ["gpu"], "pci_vendors": ["10de"], "id_attribute": "uuid",
                       "hardware_id": "nvidia_uuid", "device_match": {"type": "gpu"}},
}


def driver_profile(name, given=None):
    """A complete profile: defaults, then the known profile for the driver, then what was given."""
    profile = dict(PROFILE_DEFAULTS)
    profile.update(KNOWN_PROFILES.get(name) or {})
    for key, value in (given or {}).items():
        if value is not None and key != "name":
            profile[key] = value
    profile["name"] = name
    profile["pci_vendors"] = [v.lower().replace("0x", "") for v in profile["pci_vendors"]]
    return profile


def _same(value, wanted):
    if isinstance(value, bool) or isinstance(wanted, bool):
        return str(value).lower() == str(wanted).lower()
    return str(value) == str(wanted)


def published_devices(slices, node, profile):
    """Devices of the profile's driver on the node that pass its device_match."""
    devices = []
    for item in slices:
        spec = item.get("spec") or {}
        for device in spec.get("devices") or []:
            if device_location(item, device) != node:
                continue
            attributes = device_attributes(device, profile["name"])
            if all(_same(attributes.get(k), v) for k, v in (profile["device_match"] or {}).items()):
                devices.append({"name": device.get("name"), "pool": (spec.get("pool") or {}).get("name"),
                                "attributes": attributes})
    return devices


def hardware_devices(facts, profile):
    """PCI functions of the node that are the profile's devices."""
    chosen = []
    for dev in facts.get("pci_devices") or []:
        if dev.get("type") not in profile["pci_types"]:
            continue
        if profile["pci_vendors"] and dev.get("vendor_id") not in profile["pci_vendors"]:
            continue
        if profile["functions"] == "physical" and dev.get("virtual_function"):
            continue
        if profile["functions"] == "virtual" and not dev.get("virtual_function"):
            continue
        chosen.append(dev)
    return chosen


def _hardware_ids(facts, profile, pci, notes):
    """Ids of the node's devices of the profile's kind, or None when the node cannot tell."""
    if profile["hardware_id"] == "pci_address":
        return [d["address"] for d in pci]
    nvidia = facts.get("nvidia") or {}
    if not nvidia.get("available"):
        notes.append("nvidia-smi gave no GPU list (%s): compared by count"
                     % (nvidia.get("reason") or "nvidia section not discovered"))
        return None
    uuids = [g["uuid"] for g in nvidia.get("gpus") or [] if g.get("uuid")]
    if len(uuids) != len(pci):
        notes.append("PCI lists %d %s function(s), nvidia-smi %d GPU(s)" % (
            len(pci), "/".join(profile["pci_types"]), len(uuids)))
    for gpu in nvidia.get("gpus") or []:
        if gpu.get("mig_mode") == "Enabled":
            notes.append("MIG is enabled on GPU %s (%s): its MIG devices may be published instead"
                         % (gpu.get("index"), gpu.get("uuid")))
    return uuids


def _status(hardware, published, missing, extra, has_slices):
    if not has_slices and hardware:
        return "no_slices"
    if missing and extra:
        return "missing_and_extra"
    if missing:
        return "missing"
    if extra:
        return "extra"
    return "clean"


def compare_driver(facts, slices, node, profile):
    """Drift of one driver on one node."""
    notes = []
    mine = slices_for_node(slices, node, profile["name"])
    for pool in summarize_pools(mine):
        if not pool["complete"]:
            notes.append("pool %s is incomplete (%d of %d slices): the driver may still be publishing"
                         % (pool["pool"], pool["slices_seen"], pool["slices_expected"]))
    published = published_devices(mine, node, profile)
    pci = hardware_devices(facts, profile)
    if "pci_devices" not in facts:
        notes.append("pci section not discovered: hardware count unknown")
    result = {"driver": profile["name"], "method": "count", "slices": len(mine), "hardware": len(pci),
              "published": len(published), "matching": 0, "missing": 0, "extra": 0,
              "missing_ids": [], "extra_ids": [], "matching_ids": [],
              "hardware_addresses": [d["address"] for d in pci],
              "published_names": sorted(d["name"] for d in published if d["name"] is not None)}
    hardware_ids = None
    if profile["id_attribute"]:
        published_ids = [d["attributes"].get(profile["id_attribute"]) for d in published]
        if any(i is None for i in published_ids):
            notes.append("some published devices have no %r attribute: compared by count" % profile["id_attribute"])
        else:
            hardware_ids = _hardware_ids(facts, profile, pci, notes)
    if hardware_ids is not None:
        have, shown = set(hardware_ids), set(str(i) for i in published_ids)
        result.update(method="id", hardware=len(have),
                      matching_ids=sorted(have & shown), missing_ids=sorted(have - shown),
                      extra_ids=sorted(shown - have))
        result.update(matching=len(result["matching_ids"]), missing=len(result["missing_ids"]),
                      extra=len(result["extra_ids"]))
    else:
        result["matching"] = min(result["hardware"], result["published"])
        result["missing"] = max(0, result["hardware"] - result["published"])
        result["extra"] = max(0, result["published"] - result["hardware"])
    result["drift"] = bool(result["missing"] or result["extra"])
    result["status"] = _status(result["hardware"], result["published"], result["missing"], result["extra"],
                               bool(mine))
    result["notes"] = notes
    return result


def compare_node(facts, slices, node, drivers=None):
    """Drift per driver for one node.

    ``drivers``: profiles (dicts with at least ``name``); when None, every
    driver that publishes any of the given slices, with its known profile.
    """
    if drivers is None:
        names = sorted(set((s.get("spec") or {}).get("driver") for s in slices or []) - {None})
        drivers = [{"name": n} for n in names]
    results = [compare_driver(facts, slices or [], node, driver_profile(d["name"], d)) for d in drivers]
    return {"node": node, "drift": any(r["drift"] for r in results), "drivers": results,
            "hardware_errors": len(facts.get("errors") or [])}


# --- what the role discovery computes around dra_hardware_facts (filters in plugins/filter/discovery.py) ---

def node_slices(slices, node, drivers):
    """The slices the node's comparison reads: for every driver given, ``compare_driver``'s own selection
    (the current generation, with a device or the slice itself on the node). What the role sends to the node
    instead of every slice of the cluster."""
    picked, seen = [], set()
    for driver in drivers or []:
        for item in slices_for_node(slices or [], node, driver["name"]):
            if id(item) not in seen:
                seen.add(id(item))
                picked.append(item)
    return picked


def discovery_record(node, hardware, drift=None):
    """The role's summary of one node (its fact ``dra_discovery``), from the facts dra_hardware_facts set
    (``drift``: ``dra_hardware_drift``, none without the comparison)."""
    hardware, drift = hardware or {}, drift or {}
    return {"node": node, "pci_summary": hardware.get("pci_summary") or {},
            "nvidia_gpus": len((hardware.get("nvidia") or {}).get("gpus") or []),
            "hardware_errors": hardware.get("errors") or [],
            "drift": bool(drift.get("drift")), "drivers": drift.get("drivers") or []}


def drift_summary(records):
    """One line over the nodes' ``discovery_record``s: how many drift, and which."""
    records = list(records or [])
    drifting = [r["node"] for r in records if r.get("drift")]
    line = "%d of %d node(s) with drift" % (len(drifting), len(records))
    return line + (": " + ", ".join(drifting) if drifting else "")


def _driver_disagreement(result):
    ids = "".join("; %s %s" % (word, " ".join(str(i) for i in result.get(key) or []))
                  for word, key in (("missing", "missing_ids"), ("extra", "extra_ids")) if result.get(key))
    return "%s %s on the node, %s published (%s missing, %s extra%s)." % (
        result["driver"], result["hardware"], result["published"], result["missing"], result["extra"], ids)


def drift_message(record):
    """Why a node fails the drift check: each drifting driver's numbers and ids, and where to look."""
    drivers = " ".join(_driver_disagreement(d) for d in record.get("drivers") or [] if d.get("drift"))
    return ("%s: hardware and ResourceSlices disagree: %s Check the driver's pod and logs on the node, the device's "
            "health (nvidia-smi, dmesg), or dra_discovery_drivers if the mapping of devices to hardware is wrong."
            % (record["node"], drivers))
