# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU health as the node reads it: ``nvidia-smi -q -x`` and the kernel log's Xid lines, per GPU UUID.

Pure functions over the texts the node gives (the module dra_gpu_health_facts runs the commands and reads
the files). What each GPU is judged on, from the XML report of the NVIDIA driver:

* uncorrectable ECC errors since the driver loaded (``ecc_errors/volatile``: the SRAM parity and SECDED
  counts and the DRAM count; older drivers: ``double_bit/total``): the GPU needs a reset;
* ``remapped_rows``: a remapping pending (applied at the next GPU reset) or failed (the GPU is to be replaced,
  NVIDIA's row-remapping RMA policy); ``ecc_errors/unrepairable_memory`` and the aggregate SRAM threshold
  exceeded likewise mean a replacement;
* ``retired_pages/pending_retirement`` (GPUs before Ampere retire pages instead of remapping rows): a reset;
* ``gpu_recovery_action`` (drivers from 550 on): None, Reset, Reboot, Drain P2P or Drain and Reset, as the
  driver itself asks;
* a GPU the kernel driver knows (``/proc/driver/nvidia/gpus/*/information``) that nvidia-smi does not report,
  or that nvidia-smi names as lost: it fell off the bus (a node reboot).

Xid lines (``NVRM: Xid (PCI:0000:06:00): 79, ...``) name the GPU by its PCI bus; only those within a window
of seconds before the reading count (dmesg's time since boot against ``/proc/uptime``), since the kernel log
keeps the Xids of GPUs reset since. Each known code has its meaning and NVIDIA's immediate action (the Xid
catalog for Ampere and newer GPUs); a code that the workload causes (13, 31, 43, 94) is a note, not a reason
to take the GPU out of service; an unknown code is a note asking to look it up.

A GPU is ``unhealthy`` when any reading asks for a reset, a reboot, a replacement or a P2P drain; ``unknown``
when nvidia-smi gave no report on it; otherwise ``healthy``. Aggregate (lifetime) counters alone are notes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from xml.etree import ElementTree

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError

HEALTHY = "healthy"
UNHEALTHY = "unhealthy"
UNKNOWN = "unknown"

# What to do, mildest first; the worst of a GPU's readings is its action.
NONE = "none"
WATCH = "watch"
LOOK_UP = "look-up"
RESTART_APP = "restart-app"
DRAIN_P2P = "drain-p2p"
RESET_GPU = "reset-gpu"
REBOOT = "reboot-node"
REPLACE = "replace-gpu"
ACTIONS = (NONE, WATCH, LOOK_UP, RESTART_APP, DRAIN_P2P, RESET_GPU, REBOOT, REPLACE)
OUT_OF_SERVICE = (DRAIN_P2P, RESET_GPU, REBOOT, REPLACE)

# Xid code -> (meaning, NVIDIA's immediate action). Source: NVIDIA's Xid catalog for Ampere and newer GPUs
# (docs.nvidia.com/deploy/xid-errors), the codes a DRA cluster admin meets; docs/decisions.md keeps the list.
XID_MEANINGS = {
    13: ("graphics engine exception (the application's fault)", RESTART_APP),
    31: ("GPU memory page fault (the application's fault)", RESTART_APP),
    43: ("GPU stopped processing (the application's fault)", RESTART_APP),
    45: ("preemptive cleanup after earlier errors", NONE),
    48: ("double-bit ECC error", RESET_GPU),
    63: ("a row remapping or page retirement was recorded; a GPU reset applies it", RESET_GPU),
    64: ("a row remapping or page retirement failed", RESET_GPU),
    74: ("NVLink error", RESET_GPU),
    79: ("the GPU has fallen off the bus", REBOOT),
    92: ("high single-bit ECC error rate", WATCH),
    94: ("contained ECC error (only the application using the memory is affected)", RESTART_APP),
    95: ("uncontained ECC error", RESET_GPU),
    119: ("GSP RPC timeout", RESET_GPU),
    120: ("GSP error", RESET_GPU),
    140: ("unrecovered ECC error", RESET_GPU),
    154: ("the GPU's recovery action changed", NONE),
}
XID_RECOVERY_CODE = 154

# gpu_recovery_action (nvidia-smi -q) and the action it asks for (NVIDIA's error recovery and response flags).
RECOVERY_ACTIONS = {"none": NONE, "reset": RESET_GPU, "reboot": REBOOT, "node reboot": REBOOT,
                    "drain p2p": DRAIN_P2P, "drain and reset": RESET_GPU}

NOT_AVAILABLE = ("n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
                 "requested functionality has been deprecated", "")

_XID_LINE = re.compile(r"^(?:\[\s*(?P<time>\d+(?:\.\d+)?)\]\s*)?.*?NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:"
                       r"[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (?P<code>\d+),\s*(?P<text>.*)$")
_GPU_AT = re.compile(r"NVRM: GPU at (?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?: "
                     r"(?P<uuid>GPU-[0-9A-Fa-f-]+)")
_LOST_BUS = re.compile(r"GPU\s?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?"
                       r"[: ].*(?:is lost|fallen off the bus|Unable to determine the device handle)", re.I)
_UNABLE = re.compile(r"Unable to determine the device handle for GPU\s?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                     r"[0-9A-Fa-f]{2})", re.I)
_RECOVERY_IN_TEXT = re.compile(r"\((?P<action>none|reset|reboot|node reboot|drain p2p|drain and reset)\)\s*\.?\s*$",
                               re.I)


class GpuHealthError(DraAdminError, ValueError):
    """A text that is not what the command gives (the message names it)."""


def bus_key(text):
    """``domain:bus:device`` with a 4-digit domain, lower case: how nvidia-smi, the kernel log and /proc agree.

    ``00000000:00:06.0`` (nvidia-smi), ``0000:00:06`` (Xid lines) and ``0000:00:06.0`` (/proc) give ``0000:00:06``.
    """
    if not text:
        return None
    parts = text.strip().lower().split(":")
    if len(parts) != 3:
        return None
    return "%s:%s:%s" % (parts[0][-4:].rjust(4, "0"), parts[1], parts[2].split(".")[0])


def worst_action(actions):
    """The most severe of the actions (NONE for none)."""
    return max(list(actions) + [NONE], key=ACTIONS.index)


# --- nvidia-smi -q -x -------------------------------------------------------------

def _text(node, path):
    """The text at path below node, None when absent or not available (N/A, Not Supported)."""
    found = node.find(path) if node is not None else None
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value.lower() in NOT_AVAILABLE else value


def _count(node, path):
    value = _text(node, path)
    if value is None:
        return None
    try:
        return int(value.split()[0])
    except ValueError:
        return None


def _yes(node, path):
    value = _text(node, path)
    return None if value is None else value.lower() in ("yes", "true", "enabled", "active")


def _sum(values):
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def ecc_counts(gpu):
    """Uncorrectable and correctable ECC errors, volatile (since the driver loaded) and aggregate (lifetime)."""
    out = {"mode": _text(gpu, "ecc_mode/current_ecc")}
    for period in ("volatile", "aggregate"):
        base = gpu.find("ecc_errors/%s" % period)
        uncorrectable = _sum([_count(base, "sram_uncorrectable_parity"), _count(base, "sram_uncorrectable_secded"),
                              _count(base, "sram_uncorrectable"), _count(base, "dram_uncorrectable"),
                              _count(base, "double_bit/total")])
        correctable = _sum([_count(base, "sram_correctable"), _count(base, "dram_correctable"),
                            _count(base, "single_bit/total")])
        out[period] = {"uncorrectable": uncorrectable, "correctable": correctable}
    out["sram_threshold_exceeded"] = _yes(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")
    out["unrepairable_memory"] = _yes(gpu, "ecc_errors/unrepairable_memory")
    return out


def remapped_rows(gpu):
    """Row remapping (Ampere and newer): counts, pending, failure; None when the GPU has none."""
    base = gpu.find("remapped_rows")
    if base is None or _text(base, "remapped_row_pending") is None:
        return None
    return {"correctable": _count(base, "remapped_row_corr"), "uncorrectable": _count(base, "remapped_row_unc"),
            "pending": _yes(base, "remapped_row_pending"), "failure": _yes(base, "remapped_row_failure")}


def retired_pages(gpu):
    """Page retirement (before Ampere): counts and pending; None where the GPU does not retire pages."""
    base = gpu.find("retired_pages")
    single = _count(base, "multiple_single_bit_retirement/retired_count")
    double = _count(base, "double_bit_retirement/retired_count")
    pending = _yes(base, "pending_retirement")
    if single is None and double is None and pending is None:
        return None
    return {"single_bit": single, "double_bit": double, "pending": pending}


def parse_smi_xml(text):
    """[GPU reading] from ``nvidia-smi -q -x``; raises GpuHealthError on text that is not its XML.

    Lines before the XML (messages nvidia-smi prints about GPUs it cannot reach) are returned as messages.
    """
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        raise GpuHealthError("nvidia-smi -q -x gave no XML report")
    messages = [line.strip() for line in text[:start].splitlines() if line.strip()]
    try:
        root = ElementTree.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text[start:]))
    except ElementTree.ParseError as exc:
        raise GpuHealthError("nvidia-smi -q -x gave XML that does not parse: %s" % exc)
    gpus = []
    for gpu in root.findall("gpu"):
        gpus.append({
            "uuid": _text(gpu, "uuid"), "index": _count(gpu, "minor_number"), "name": _text(gpu, "product_name"),
            "pci_bus_id": _text(gpu, "pci/pci_bus_id") or gpu.get("id"), "serial": _text(gpu, "serial"),
            "ecc": ecc_counts(gpu), "remapped_rows": remapped_rows(gpu), "retired_pages": retired_pages(gpu),
            "recovery_action": _text(gpu, "gpu_recovery_action"),
        })
    return {"driver_version": _text(root, "driver_version"), "gpus": gpus, "messages": messages}


# --- the kernel log and /proc ---------------------------------------------------------

def parse_xid_lines(text):
    """(xids, uuids by bus, lost buses) from kernel log text (dmesg's, or journalctl -k's).

    xids: [{bus, code, text, time (seconds since boot, None without dmesg's stamp)}].
    """
    xids, uuids, lost = [], {}, set()
    for line in (text or "").splitlines():
        match = _XID_LINE.match(line.strip())
        if match:
            xids.append({"bus": bus_key(match.group("bus")), "code": int(match.group("code")),
                         "text": match.group("text").strip()[:300],
                         "time": float(match.group("time")) if match.group("time") else None})
            continue
        at = _GPU_AT.search(line)
        if at:
            uuids[bus_key(at.group("bus"))] = at.group("uuid")
        gone = _LOST_BUS.search(line)
        if gone:
            lost.add(bus_key(gone.group("bus")))
    return xids, uuids, lost


def parse_proc_information(texts):
    """[{uuid, bus, model}] from the texts of /proc/driver/nvidia/gpus/*/information."""
    gpus = []
    for text in texts:
        fields = {}
        for line in text.splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if fields.get("gpu uuid") or fields.get("bus location"):
            gpus.append({"uuid": fields.get("gpu uuid"), "bus": bus_key(fields.get("bus location")),
                         "model": fields.get("model")})
    return gpus


def smi_lost_buses(messages):
    """Buses nvidia-smi says it cannot reach (its lines before the report, or its error output)."""
    found = (_UNABLE.search(line) or _LOST_BUS.search(line) for line in messages)
    return set(bus_key(m.group("bus")) for m in found if m)


def uptime_seconds(text):
    """The first number of /proc/uptime, None when unreadable."""
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return None


# --- the verdict per GPU -------------------------------------------------------------

def xid_meaning(xid):
    """(meaning, action) of one Xid; 154 carries the new recovery action in its text."""
    code = xid["code"]
    if code == XID_RECOVERY_CODE:
        found = _RECOVERY_IN_TEXT.search(xid["text"])
        return XID_MEANINGS[code][0], RECOVERY_ACTIONS.get(found.group("action").lower()) if found else LOOK_UP
    if code in XID_MEANINGS:
        return XID_MEANINGS[code]
    return "Xid %d is not in this collection's list: look it up in NVIDIA's Xid catalog" % code, LOOK_UP


def recent_xids(xids, uptime, window):
    """The Xids within window seconds before the reading, with their meaning and action (every Xid when the log
    line or /proc/uptime has no time: the age cannot be told)."""
    out = []
    for xid in xids:
        age = None if xid["time"] is None or uptime is None else max(0, int(uptime - xid["time"]))
        if age is None or age <= window:
            meaning, action = xid_meaning(xid)
            out.append(dict(xid, age_seconds=age, meaning=meaning, action=action))
    return out


def smi_findings(gpu):
    """[(reason, action)] from one GPU's nvidia-smi reading: what takes it out of service, then notes."""
    ecc, rows, pages = gpu["ecc"], gpu["remapped_rows"] or {}, gpu["retired_pages"] or {}
    found = []
    if ecc["volatile"]["uncorrectable"]:
        found.append(("%d uncorrectable ECC error(s) since the driver loaded" % ecc["volatile"]["uncorrectable"],
                      RESET_GPU))
    if ecc["unrepairable_memory"]:
        found.append(("memory that cannot be repaired (unrepairable_memory)", REPLACE))
    if ecc["sram_threshold_exceeded"]:
        found.append(("uncorrectable SRAM errors past the threshold (sram_threshold_exceeded)", REPLACE))
    if rows.get("failure"):
        found.append(("row remapping failed", REPLACE))
    if rows.get("pending"):
        found.append(("a row remapping is pending (a GPU reset applies it)", RESET_GPU))
    if pages.get("pending"):
        found.append(("a page retirement is pending (a GPU reset applies it)", RESET_GPU))
    recovery = (gpu["recovery_action"] or "").strip().lower()
    if recovery and recovery != "none":
        found.append(("the driver asks for recovery action %s" % gpu["recovery_action"],
                      RECOVERY_ACTIONS.get(recovery, LOOK_UP)))
    if ecc["aggregate"]["uncorrectable"]:
        found.append(("%d uncorrectable ECC error(s) over the GPU's life" % ecc["aggregate"]["uncorrectable"], WATCH))
    if rows.get("uncorrectable"):
        found.append(("%d row(s) remapped for uncorrectable errors" % rows["uncorrectable"], WATCH))
    return found


def _gpu_entry(bus, reading=None, known=None):
    reading, known = reading or {}, known or {}
    return {"uuid": reading.get("uuid") or known.get("uuid"), "pci_bus": bus, "index": reading.get("index"),
            "name": reading.get("name") or known.get("model"), "reported": bool(reading),
            "ecc": reading.get("ecc"), "remapped_rows": reading.get("remapped_rows"),
            "retired_pages": reading.get("retired_pages"), "recovery_action": reading.get("recovery_action"),
            "xids": [], "findings": []}


def _gpus_by_bus(readings, proc_gpus, uuids_by_bus):
    """Every GPU the node knows, by bus: nvidia-smi's, then the kernel driver's and the kernel log's others."""
    gpus = {}
    for reading in readings:
        gpus[bus_key(reading["pci_bus_id"])] = _gpu_entry(bus_key(reading["pci_bus_id"]), reading)
    for known in proc_gpus:
        if known["bus"] not in gpus:
            gpus[known["bus"]] = _gpu_entry(known["bus"], known=known)
    for bus, uuid in uuids_by_bus.items():
        if bus not in gpus:
            gpus[bus] = _gpu_entry(bus, known={"uuid": uuid})
        elif not gpus[bus]["uuid"]:
            gpus[bus]["uuid"] = uuid
    return gpus


def _judged(entry, smi_ran):
    findings = entry["findings"]
    action = worst_action(f["action"] for f in findings)
    if action in OUT_OF_SERVICE:
        condition = UNHEALTHY
    elif not entry["reported"]:
        condition = UNKNOWN
    else:
        condition = HEALTHY
    if not entry["reported"] and not findings:
        findings.append({"reason": "nvidia-smi %s" % ("does not report it" if smi_ran else "gave no report"),
                         "action": NONE, "source": "nvidia-smi"})
    entry.update(condition=condition, action=action,
                 reasons=[f["reason"] for f in findings if f["action"] in OUT_OF_SERVICE],
                 notes=[f["reason"] for f in findings if f["action"] not in OUT_OF_SERVICE])
    return entry


def judge_gpus(smi, kernel_log, proc_texts, uptime_text, window):
    """The node's GPU health report (see the module dra_gpu_health_facts for every field).

    smi: parse_smi_xml's result, or None when nvidia-smi gave none; kernel_log: its text or None (not read);
    proc_texts: the texts of /proc/driver/nvidia/gpus/*/information; window: seconds an Xid counts.
    """
    xids, uuids_by_bus, lost = parse_xid_lines(kernel_log)
    recent = recent_xids(xids, uptime_seconds(uptime_text), window)
    readings = (smi or {}).get("gpus") or []
    by_bus = dict((bus_key(g["pci_bus_id"]), g) for g in readings)
    gpus = _gpus_by_bus(readings, parse_proc_information(proc_texts), uuids_by_bus)
    lost |= smi_lost_buses((smi or {}).get("messages") or [])
    for bus, entry in gpus.items():
        if entry["reported"]:
            entry["findings"] += [{"reason": r, "action": a, "source": "nvidia-smi"}
                                  for r, a in smi_findings(by_bus[bus])]
        elif smi is not None or bus in lost:
            entry["findings"].append({"reason": "the kernel driver knows it, nvidia-smi cannot reach it (fallen off "
                                                "the bus?)", "action": REBOOT, "source": "nvidia-smi"})
    unmatched = []
    for xid in recent:
        target = gpus.get(xid["bus"])
        if target is None:
            unmatched.append(xid)
            continue
        target["xids"].append(xid)
        target["findings"].append({"reason": "Xid %d: %s" % (xid["code"], xid["meaning"]), "action": xid["action"],
                                   "source": "kernel log"})
    judged = [_judged(gpus[bus], smi is not None) for bus in sorted(gpus)]
    return {"gpus": judged, "unhealthy": [g["uuid"] or g["pci_bus"] for g in judged if g["condition"] == UNHEALTHY],
            "xids": recent, "unmatched_xids": unmatched, "xid_window": window,
            "driver_version": (smi or {}).get("driver_version")}


# --- the GPUs as a device health source ------------------------------------------------

def gpus_by_uuid(gpu_health):
    """{uuid: {node, condition, action, reasons, notes}} from the dra_gpu_health facts of the nodes, or None when
    none is given; raises GpuHealthError naming the entry that is not such a fact."""
    if not gpu_health:
        return None
    if not isinstance(gpu_health, list):
        raise GpuHealthError("gpu_health must be a list of the dra_gpu_health facts of module dra_gpu_health_facts, "
                             "one per node")
    out = {}
    for number, facts in enumerate(gpu_health):
        if not isinstance(facts, dict) or not isinstance(facts.get("gpus"), list):
            raise GpuHealthError("gpu_health[%d] is not a dra_gpu_health fact (a mapping with gpus): pass "
                                 "ansible_facts.dra_gpu_health of each node that ran dra_gpu_health_facts" % number)
        for gpu in facts["gpus"]:
            if not isinstance(gpu, dict) or gpu.get("condition") not in (HEALTHY, UNHEALTHY, UNKNOWN):
                raise GpuHealthError("gpu_health[%d].gpus holds %r, not a GPU of dra_gpu_health_facts" % (number, gpu))
            if gpu.get("uuid"):
                out[gpu["uuid"]] = {"uuid": gpu["uuid"], "node": facts.get("node"), "condition": gpu["condition"],
                                    "action": gpu.get("action"), "reasons": list(gpu.get("reasons") or []),
                                    "notes": list(gpu.get("notes") or [])}
    return out


def gpu_reasons(gpu):
    """What one GPU reading says against its device, as the device report's reasons."""
    where = " on %s" % gpu["node"] if gpu.get("node") else ""
    return ["GPU %s%s: %s (%s)" % (gpu["uuid"], where, reason, gpu["action"]) for reason in gpu["reasons"]]
