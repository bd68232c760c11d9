# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU health as the node reads it: ``nvidia-smi -q -x``, the kernel log's Xid lines and ``/proc/driver/nvidia``,
per GPU UUID.

Pure functions over the texts the node gives (the module dra_gpu_health_facts runs the commands and reads
the files). What each GPU is judged on, from the XML report of the NVIDIA driver:

* uncorrectable ECC errors since the driver loaded (``ecc_errors/volatile``: the SRAM parity and SECDED
  counts and the DRAM count; older drivers: ``double_bit/total``);
* ``remapped_rows``: a remapping pending (applied at the next GPU reset) or failed; ``retired_pages/
  pending_retirement`` (GPUs before Ampere retire pages instead of remapping rows); ``ecc_errors/
  channel_repair_pending`` and ``tpc_repair_pending`` (Blackwell: a channel or TPC marked for repair, which the
  driver's message says a node reboot activates). What a pending repair asks for is the ``pending`` policy:
  ``drain`` (DCGM's answer: drain the GPU and reset it) or ``allow`` (NVIDIA's error recovery flags page: new work
  may start, reset when convenient);
* ``remapped_rows/remapped_row_failure``, ``ecc_errors/unrepairable_memory`` and the aggregate SRAM threshold:
  NVIDIA asks to run the field diagnostics (which decide on a return), ``run-field-diagnostics``;
* ``gpu_recovery_action`` (drivers from 550 on): NVML's recovery actions 0-7 (None, GPU Reset, Node Reboot, Drain
  P2P, Drain and Reset, Recover IMEX Domain, Bus Reset, System Reboot), as the driver itself asks;
* a GPU the kernel driver knows (``/proc/driver/nvidia/gpus/*/information``) that nvidia-smi does not report, or
  that nvidia-smi names as lost: it fell off the bus (a node reboot) - unless /proc says ``GPU Excluded: Yes``
  (excluded from use with ``NVreg_ExcludedGpus``: nvidia-smi does not list it, nothing is wrong).

Xid lines (``NVRM: Xid (PCI:0000:06:00): 79, ...``) name the GPU by its PCI bus; only those within a window of
seconds before the reading count (dmesg's time since boot against ``/proc/uptime``). A driver load seen later in
the log (``NVRM: loading NVIDIA ... Kernel Module``), or a later Xid 154 whose recovery action changed to None on
the same GPU, ends a reset-class Xid before the window does.

Each code's action is NVIDIA's Xid catalog's immediate action (Ampere and newer GPUs), ``XID_CATALOG``; the
driver's own text may ask for more (Xid 154 carries the new recovery action; a repair or remapping "to activate"
with a GPU reset or a node reboot - Xid 63, 160 - asks for it under the ``pending`` policy, as nvidia-smi's pending
flags do), never for less. The NVLink5 Xids 144-150 (the catalog's WORKFLOW_NVLINK5_ERR) are decoded from the
kernel line: the sub-code in its IntrInfo word and its error status, ``NVLINK5_UNITS``. A code the catalog sends to
a person (CONTACT_SUPPORT, CHECK_MECHANICALS, ...), a code it has no immediate action for, and a code not in the
catalog are ``look-up``: the GPU is never ``healthy`` by default on such a code, it is ``unknown``.

A GPU is ``unhealthy`` when any reading asks for a drain, a reset, a reboot or the field diagnostics; ``unknown``
when nvidia-smi gave no report on it or a reading needs a person; otherwise ``healthy``. Aggregate (lifetime)
counters alone are notes. docs/decisions.md says where this differs from NVIDIA's DRA driver and device plugin.
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
RESTART_APP = "restart-app"
LOOK_UP = "look-up"
DRAIN_P2P = "drain-p2p"
RECOVER_IMEX = "recover-imex-domain"
RESET_GPU = "reset-gpu"
RESET_BUS = "reset-bus"
REBOOT = "reboot-node"
FIELD_DIAG = "run-field-diagnostics"
ACTIONS = (NONE, WATCH, RESTART_APP, LOOK_UP, DRAIN_P2P, RECOVER_IMEX, RESET_GPU, RESET_BUS, REBOOT, FIELD_DIAG)
OUT_OF_SERVICE = (DRAIN_P2P, RECOVER_IMEX, RESET_GPU, RESET_BUS, REBOOT, FIELD_DIAG)
# Actions a later reset or driver load makes moot (a reboot-class Xid ends only with the boot, which clears the log).
RESET_CLASS = (DRAIN_P2P, RECOVER_IMEX, RESET_GPU, RESET_BUS)

# What a pending memory repair (row remapping, page retirement, channel or TPC repair) and uncorrectable errors
# since the driver loaded ask for: DRAIN (DCGM: drain and reset) or ALLOW (NVIDIA's recovery flags: new work may
# start; a note to reset when convenient).
PENDING_DRAIN = "drain"
PENDING_ALLOW = "allow"
PENDING_POLICIES = (PENDING_DRAIN, PENDING_ALLOW)

# NVIDIA's Xid catalog for Ampere and newer GPUs (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
# column "Resolution Bucket (Immediate Action)", as this collection acts on it: RESET_GPU, WORKFLOW_XID_48 and
# WORKFLOW_NVLINK_ERR (74, Hopper: "a GPU reset or node reboot is needed to clear this error") -> reset-gpu;
# RESTART_BM -> reboot-node; RESTART_APP -> restart-app; IGNORE (160, 161 included) and WORKFLOW_XID_45 ("not solo:
# follow the other Xid") -> none; every bucket that sends a person to look (CONTACT_SUPPORT, CHECK_MECHANICALS,
# CHECK_UVM, UPDATE_SWFW, RESTART_VM) and the codes with no immediate action (162-172) -> look-up. 154 is read
# from its text; WORKFLOW_NVLINK5_ERR (144-150) from its line (nvlink5_action), look-up without one.
XID_NVLINK5 = tuple(range(144, 151))
_BUCKETS = {
    RESTART_APP: (8, 11, 13, 25, 31, 32, 39, 40, 41, 60, 68, 69, 70, 71, 72, 75, 76, 77, 80, 82, 83, 84, 85, 86, 88,
                  89, 94) + tuple(range(96, 106)) + tuple(range(126, 136)) + (139,),
    NONE: (14, 37, 38, 43, 44, 45, 63, 66, 67, 92, 93, 106, 107, 108, 121, 137, 141, 152, 153, 157, 160, 161),
    RESET_GPU: (46, 48, 62, 64, 74, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158),
    REBOOT: (79,),
    LOOK_UP: (54, 78, 142, 151, 159) + XID_NVLINK5 + tuple(range(162, 173)),
}
XID_CATALOG = dict((code, action) for action, codes in _BUCKETS.items() for code in codes)
XID_RECOVERY_CODE = 154
XID_CATALOG_LAST = 172
# What each code is (the catalog's description, shortened); the other catalog codes are unused on every GPU.
XID_NAMES = {
    8: "GPU stopped processing", 11: "invalid or corrupted push buffer stream",
    13: "graphics engine exception (the application's fault)", 31: "GPU memory page fault (the application's fault)",
    32: "invalid or corrupted push buffer stream (PCIe DMA)", 43: "GPU stopped processing (the application's fault)",
    44: "graphics engine fault during context switch", 45: "preemptive cleanup after earlier errors",
    46: "GPU stopped processing", 48: "double-bit ECC error", 54: "auxiliary power is not connected",
    62: "internal micro-controller halt", 63: "a row remapping or page retirement was recorded",
    64: "a row remapping or page retirement failed", 68: "NVDEC0 exception", 74: "NVLink error",
    78: "vGPU start error", 79: "the GPU has fallen off the bus", 92: "high single-bit ECC error rate",
    94: "contained ECC error (only the application using the memory is affected)", 95: "uncontained ECC error",
    109: "context switch timeout", 110: "security fault", 119: "GSP RPC timeout", 120: "GSP error",
    121: "corrected C2C link errors", 136: "NVLink training failed", 137: "NVLink privilege error",
    140: "unrecovered ECC error", 142: "NVENC3 error", 143: "GPU initialization failure", 144: "NVLink SAW error",
    145: "NVLink RLW error", 146: "NVLink TLW error", 147: "NVLink TREX error", 148: "NVLink NVLPW_CTRL error",
    149: "NVLink NETIR error", 150: "NVLink MSE error", 151: "key rotation error",
    154: "the GPU's recovery action changed", 155: "NVLink software-defined error", 156: "resource retirement event",
    157: "resource retirement failure", 158: "GPU fatal timeout", 159: "CHI non-data error",
    160: "channel retirement event", 161: "channel retirement failure",
    162: "power smoothing circuitry re-engaged", 163: "power smoothing circuitry disengaged",
    164: "power smoothing circuitry low lifetime", 165: "power smoothing circuitry lifetime exhausted",
    166: "NVLink secure crypto error", 167: "PCIe fatal timeout", 168: "reduced GPU memory capacity",
    169: "SEC2 micro-controller halt", 170: "NVLink interrupt in CC mode", 171: "uncorrectable DRAM error",
    172: "uncorrectable SRAM error",
}
# NVIDIA's DRA driver (gpu-kubelet-plugin device_health.go) and device plugin (internal/rm/health.go) take every
# Xid as critical except these (docs/decisions.md: where this collection differs).
NVIDIA_DRIVERS_SKIPPED_XIDS = (13, 31, 43, 45, 68, 109)

# NVML's nvmlDeviceGpuRecoveryAction_t (gpu_recovery_action, Xid 154's "0x<n>") and the action each asks for.
RECOVERY_BY_NUMBER = {0: NONE, 1: RESET_GPU, 2: REBOOT, 3: DRAIN_P2P, 4: RESET_GPU, 5: RECOVER_IMEX, 6: RESET_BUS,
                      7: REBOOT}
# The names drivers print (nvidia-smi's gpu_recovery_action; the parenthesised name in Xid 154's text), lower case,
# for a text without the number: the most specific first.
RECOVERY_BY_NAME = (("drain and reset", RESET_GPU), ("drain p2p", DRAIN_P2P), ("imex", RECOVER_IMEX),
                    ("bus reset", RESET_BUS), ("pf flr", RESET_GPU), ("reboot", REBOOT), ("reset", RESET_GPU),
                    ("none", NONE))

# The catalog's "Xid 144-150 Decode" (WORKFLOW_NVLINK5_ERR). The driver prints "<code>, <unit> <Fatal|Nonfatal>
# XC<n> i<n> Link <nn> (<IntrInfo> <ErrorStatus> <debug data>...)". The unit is a sub-code in IntrInfo: bits 6:0
# from driver R575 on (V2), bits 9:5 before it (V1, with bits 4:0 the code less 143). The catalog's "Data Center
# Recovery Action" per error status bit (or value, for the NETIR events): IGNORE -> none, RESET_GPU -> reset-gpu,
# XID_154_EVAL -> watch (the driver says in Xid 154 and gpu_recovery_action, both read here, what it asks for).
# Rows: code, unit, V1 sub-code, V2 sub-code, {status: action} (None: every status).
_SW_STATUS = 0x80000000
_TLW_PIPE = {0x1: NONE, 0x2: NONE, 0x4: RESET_GPU, _SW_STATUS: NONE}
NVLINK5_UNITS = (
    (144, "SAW_MVB", 1, 1, {0x1: NONE, 0x2: RESET_GPU, 0x4: NONE, 0x8: NONE, 0x10: RESET_GPU, 0x20: NONE}),
    (145, "RLW_CTRL", 3, 3, {_SW_STATUS: NONE}),
    (145, "RLW_REMAP", 4, 4, {0x1: WATCH, 0x2: WATCH, 0x4: WATCH, 0x8: WATCH, 0x10: WATCH, 0x20: WATCH,
                              0x40: RESET_GPU, 0x80: RESET_GPU, 0x100: NONE, 0x200: NONE, _SW_STATUS: NONE}),
    (145, "RLW_RSPCOL", 5, 5, {0x1: NONE, 0x2: RESET_GPU, _SW_STATUS: NONE}),
    (145, "RLW_RXPIPE", 6, 6, {0x1: NONE, 0x2: NONE, 0x4: NONE, 0x8: NONE, _SW_STATUS: NONE}),
    (145, "RLW_SRC_TRACK", 7, 7, {0x1: RESET_GPU, 0x2: NONE, 0x4: WATCH, 0x8: WATCH, 0x10: RESET_GPU,
                                  0x20: RESET_GPU, _SW_STATUS: NONE}),
    (145, "RLW_TAGSTATE", 8, 8, {0x1: NONE, 0x2: RESET_GPU, 0x10000: NONE, 0x20000: RESET_GPU, 0x100000: RESET_GPU,
                                 _SW_STATUS: NONE}),
    (146, "TLW_CTRL", 9, 9, _TLW_PIPE),
    (146, "TLW_RX_PIPE0", 10, 10, _TLW_PIPE),
    (146, "TLW_RX_PIPE1", 10, 11, _TLW_PIPE),
    (146, "TLW_TX_PIPE0", 11, 12, _TLW_PIPE),
    (146, "TLW_TX_PIPE1", 11, 13, _TLW_PIPE),
    (147, "TREX", 12, 14, {0x1: NONE, _SW_STATUS: NONE}),
    (148, "NVLPW_CTRL", 0, 15, {_SW_STATUS: NONE}),
    (149, "NETIR_INT", 0, 24, None),
    (149, "NETIR_LINK_EVT", 14, 17, None),
    (149, "NETIR_BER_EVENT", 17, 19, {0x0: NONE, 0x1: NONE, 0x2: NONE, 0x3: NONE}),
    (149, "NETIR_MFDE_EVENT", 18, 20, {0x1: RESET_GPU, 0x3: NONE, 0x4: RESET_GPU, 0x5: RESET_GPU, 0x7: RESET_GPU}),
)
# RLW_RXPIPE's "action 2": with IntrInfo bit 7 (V2; bit 10 in V1) set, its statuses 0x1, 0x2, 0x4 ask for a reset.
_RXPIPE_ACTION2 = {0x1: RESET_GPU, 0x2: RESET_GPU, 0x4: RESET_GPU}
# NETIR_LINK_EVT's link-down reason (IntrInfo bits 25:20): every reason the catalog lists asks for a reset except
# these two (IGNORE).
NVLINK5_LINK_REASONS_IGNORED = (0x26, 0x28)
NVLINK5_LINK_REASONS = (0x00, 0x01, 0x02, 0x04, 0x0a, 0x0f, 0x10, 0x11, 0x12, 0x15, 0x16, 0x20, 0x21, 0x22, 0x23,
                        0x24, 0x25, 0x26, 0x28, 0x2a, 0x2b)
_NVLINK5_WORDS = re.compile(r"[(\[]\s*(0x[0-9a-f]+(?:[\s,]+0x[0-9a-f]+)*)", re.I)
_NVLINK5_SEVERITY = re.compile(r"\b(Fatal|Non-?fatal)\b", re.I)

NOT_AVAILABLE = ("n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
                 "requested functionality has been deprecated", "")

_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
_XID_LINE = re.compile(r"^(?:\[\s*(?P<time>\d+(?:\.\d+)?)\]\s*)?.*?NVRM: Xid \((?:PCI:)?(?P<bus>" + _BUS +
                       r")(?:\.[0-7])?\): (?P<code>\d+),\s*(?P<text>.*)$")
_DRIVER_LOAD = re.compile(r"^(?:\[\s*(?P<time>\d+(?:\.\d+)?)\]\s*)?.*?NVRM: loading NVIDIA .*Kernel Module")
_GPU_AT = re.compile(r"NVRM: GPU at (?:PCI:)?(?P<bus>" + _BUS + r")(?:\.[0-7])?: (?P<uuid>GPU-[0-9A-Fa-f-]+)")
_LOST_BUS = re.compile(r"GPU\s?(?P<bus>" + _BUS + r")(?:\.[0-7])?"
                       r"[: ].*(?:is lost|fallen off the bus|Unable to determine the device handle)", re.I)
_UNABLE = re.compile(r"Unable to determine the device handle for GPU\s?(?P<bus>" + _BUS + ")", re.I)
# Xid 154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".
_RECOVERY_TO = re.compile(r"\bto\s+(?:0x(?P<number>[0-9a-f]+))?\s*(?:\((?P<name>[^)]*)\))?", re.I)
# The driver's own ask in an Xid's text ("Perform node reboot to activate repair", "reset gpu to activate").
_ACTIVATE = re.compile(r"(?P<what>node reboot|gpu reset|reset gpu|reboot)\s+to\s+activate", re.I)


class GpuHealthError(DraAdminError, ValueError):
    """A text that is not what the command gives (the message names it)."""


def bus_key(text):
    """``domain:bus:device`` with the domain's leading zeros cut to four digits, lower case: how nvidia-smi, the
    kernel log and /proc agree.

    ``00000000:00:06.0`` (nvidia-smi), ``0000:00:06`` (Xid lines) and ``0000:00:06.0`` (/proc) give ``0000:00:06``;
    a domain of more than four significant digits keeps them (``00010000:01:00.0`` is ``10000:01:00``, not domain 0).
    """
    if not text:
        return None
    parts = text.strip().lower().split(":")
    if len(parts) != 3:
        return None
    domain = parts[0].lstrip("0").rjust(4, "0")
    return "%s:%s:%s" % (domain, parts[1], parts[2].split(".")[0])


def worst_action(actions):
    """The most severe of the actions (NONE for none)."""
    return max(list(actions) + [NONE], key=ACTIONS.index)


def condition_of(actions, reported=True):
    """The condition the actions make: unhealthy when one takes the GPU out of service, unknown when one needs a
    person (look-up) or the GPU was not read, healthy otherwise."""
    actions = list(actions)
    if any(a in OUT_OF_SERVICE for a in actions):
        return UNHEALTHY
    if LOOK_UP in actions or not reported:
        return UNKNOWN
    return HEALTHY


def pending_action(action, policy):
    """The action of a pending repair or of errors a reset clears, under the pending policy (WATCH when allowed)."""
    return action if policy == PENDING_DRAIN else WATCH


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
    """Uncorrectable and correctable ECC errors, volatile (since the driver loaded) and aggregate (lifetime), and
    the repair flags (Blackwell: channel and TPC repair pending)."""
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
    out["channel_repair_pending"] = _yes(gpu, "ecc_errors/channel_repair_pending")
    out["tpc_repair_pending"] = _yes(gpu, "ecc_errors/tpc_repair_pending")
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
    if pending is None:  # the older drivers' name of the same flag
        pending = _yes(base, "pending_blacklist")
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
    """{xids, uuids, lost, driver_loads} from kernel log text (dmesg's, or journalctl -k's).

    xids: [{bus, code, text, time (seconds since boot, None without dmesg's stamp), line (its number)}];
    uuids: {bus: GPU UUID} (the driver's "GPU at PCI:..." lines); lost: buses the log says fell off;
    driver_loads: [{time, line}] of the driver's "loading NVIDIA ... Kernel Module" lines.
    """
    xids, uuids, lost, loads = [], {}, set(), []
    for number, line in enumerate((text or "").splitlines()):
        line = line.strip()
        match = _XID_LINE.match(line)
        if match:
            xids.append({"bus": bus_key(match.group("bus")), "code": int(match.group("code")),
                         "text": match.group("text").strip()[:300],
                         "time": float(match.group("time")) if match.group("time") else None, "line": number})
            continue
        load = _DRIVER_LOAD.match(line)
        if load:
            loads.append({"time": float(load.group("time")) if load.group("time") else None, "line": number})
            continue
        at = _GPU_AT.search(line)
        if at:
            uuids[bus_key(at.group("bus"))] = at.group("uuid")
        gone = _LOST_BUS.search(line)
        if gone:
            lost.add(bus_key(gone.group("bus")))
    return {"xids": xids, "uuids": uuids, "lost": lost, "driver_loads": loads}


def parse_proc_information(texts):
    """[{uuid, bus, model, excluded}] from the texts of /proc/driver/nvidia/gpus/*/information."""
    gpus = []
    for text in texts:
        fields = {}
        for line in text.splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if fields.get("gpu uuid") or fields.get("bus location"):
            uuid = fields.get("gpu uuid")
            gpus.append({"uuid": uuid if uuid and uuid.startswith("GPU-") else None,
                         "bus": bus_key(fields.get("bus location")), "model": fields.get("model"),
                         "excluded": (fields.get("gpu excluded") or "").lower() == "yes"})
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

def recovery_action(text):
    """The action a recovery action asks for, from its NVML number or its printed name (nvidia-smi's
    gpu_recovery_action, Xid 154's text); LOOK_UP when neither is known, None for no text."""
    if not text or not text.strip():
        return None
    found = _RECOVERY_TO.search(text) if " to " in " %s " % text.lower() else None
    number, name = (found.group("number"), found.group("name")) if found else (None, text)
    if number is not None and int(number, 16) in RECOVERY_BY_NUMBER:
        return RECOVERY_BY_NUMBER[int(number, 16)]
    lowered = (name or "").strip().lower()
    for word, action in RECOVERY_BY_NAME:
        if word in lowered:
            return action
    return LOOK_UP


def _text_action(text):
    """What an Xid's own text asks for to activate a repair or remapping ("Perform node reboot to activate repair",
    "reset gpu to activate"), None when it asks nothing."""
    found = _ACTIVATE.search(text or "")
    if not found:
        return None
    return REBOOT if "reboot" in found.group("what").lower() else RESET_GPU


def _nvlink5_unit(code, intr):
    """(row of NVLINK5_UNITS, action-2 bit set) of an NVLink5 Xid's IntrInfo word: its V2 sub-code (bits 6:0), else
    its V1 sub-code (bits 9:5, when bits 4:0 are the code less 143); (None, False) when neither is the code's."""
    for row in NVLINK5_UNITS:
        if row[0] == code and row[3] == intr & 0x7F:
            return row, bool(intr & 0x80)
    if intr & 0x1F == code - 143:
        for row in NVLINK5_UNITS:
            if row[0] == code and row[2] == (intr >> 5) & 0x1F:
                return row, bool(intr & 0x400)
    return None, False


def _nvlink5_status_action(statuses, status):
    """The catalog's action for an error status: its value when listed, else the worst of its bits; None when the
    status (or one of its bits) is not listed."""
    if status in statuses:
        return statuses[status]
    bits = [1 << n for n in range(32) if status >> n & 1]
    if not bits or any(bit not in statuses for bit in bits):
        return None
    return worst_action(statuses[bit] for bit in bits)


def _nvlink5_decoded(code, intr, status):
    """(unit, what, action) from an NVLink5 Xid's IntrInfo and error status; action None when the catalog's decode
    does not list them."""
    row, action2 = _nvlink5_unit(code, intr)
    if row is None:
        return None, "IntrInfo 0x%08x names no unit of Xid %d" % (intr, code), None
    unit, statuses = row[1], row[4]
    if unit == "NETIR_LINK_EVT":
        reason = (intr >> 20) & 0x3F
        action = None if reason not in NVLINK5_LINK_REASONS else (
            NONE if reason in NVLINK5_LINK_REASONS_IGNORED else RESET_GPU)
        return unit, "link-down reason 0x%02x" % reason, action
    if statuses is None:
        return unit, "any error status", RESET_GPU
    if status is None:
        return unit, "no error status", None
    if action2 and unit == "RLW_RXPIPE":
        statuses = dict(list(statuses.items()) + list(_RXPIPE_ACTION2.items()))
    return unit, "error status 0x%08x" % status, _nvlink5_status_action(statuses, status)


def nvlink5_action(code, text):
    """(meaning, action) of an NVLink5 Xid (144-150) from its kernel text, by the catalog's "Xid 144-150 Decode":
    the unit from IntrInfo, the action from the error status (NETIR_LINK_EVT: the link-down reason). Xid 150 (MSE)
    is a reset whatever its words. A line the decode does not cover is a reset when the driver printed it Fatal,
    else look-up; no text at all (the DCGM exporter's series) is look-up."""
    name = XID_NAMES.get(code)
    if not (text or "").strip():
        return ("%s; its action depends on the unit and error status in the kernel line (NVIDIA's Xid 144-150 "
                "decode), which this reading lacks: read the node" % name, LOOK_UP)
    if code == 150:
        return "%s (the catalog asks for a GPU reset for every MSE error)" % name, RESET_GPU
    words = _NVLINK5_WORDS.search(text)
    values = [int(w, 16) for w in re.findall(r"0x[0-9a-f]+", words.group(1), re.I)] if words else []
    unit, what, action = (_nvlink5_decoded(code, values[0], values[1] if len(values) > 1 else None) if values
                          else (None, "no IntrInfo word", None))
    if action is not None:
        asks = {NONE: "no action", RESET_GPU: "a GPU reset",
                WATCH: "what the driver's recovery action says (Xid 154, gpu_recovery_action)"}[action]
        return "%s: %s, %s (the catalog asks for %s)" % (name, unit, what, asks), action
    severity = _NVLINK5_SEVERITY.search(text)
    fatal = bool(severity) and severity.group(1).lower() == "fatal"
    where = "%s, %s" % (unit, what) if unit else what
    if fatal:
        return "%s: %s, not in the catalog's decode; printed Fatal: a GPU reset" % (name, where), RESET_GPU
    return "%s: %s, not in the catalog's decode: look it up before using the GPU" % (name, where), LOOK_UP


def xid_meaning(xid, pending=PENDING_DRAIN):
    """(meaning, action) of one Xid ({code, text}): the catalog's immediate action, raised (never lowered) by what
    the driver's text asks (a repair or remapping to activate asks under the pending policy); Xid 154's action is
    the recovery action in its text (look-up without one, as on the DCGM exporter's series, which carries no
    text); 144-150 are decoded from their text (nvlink5_action); a code without a catalog action is look-up."""
    code, text = xid["code"], xid.get("text") or ""
    name = XID_NAMES.get(code)
    if code == XID_RECOVERY_CODE:
        action = recovery_action(text) if text else None
        if action is None:
            return ("%s; the new action is not in the reading: read gpu_recovery_action on the node" % name,
                    LOOK_UP)
        return "%s (%s)" % (name, text.split(" to ", 1)[-1].strip().rstrip(".")) if " to " in text else name, action
    if code in XID_NVLINK5:
        return nvlink5_action(code, text)
    if code not in XID_CATALOG:
        if 0 < code <= XID_CATALOG_LAST:
            return "a code NVIDIA's catalog lists as unused (contact support): look it up before using the GPU", LOOK_UP
        return ("not in NVIDIA's Xid catalog as this collection knows it (1-%d): look it up before using the GPU"
                % XID_CATALOG_LAST, LOOK_UP)
    action = XID_CATALOG[code]
    meaning = name or "catalog action %s" % action
    asked = _text_action(text)
    if asked is None:
        return meaning, action
    what = "node reboot" if asked == REBOOT else "GPU reset"
    asked = pending_action(asked, pending)
    if ACTIONS.index(asked) <= ACTIONS.index(action):
        return meaning, action
    if asked == WATCH:
        return "%s; the driver asks for a %s to activate it (pending: allow: when convenient)" % (meaning, what), WATCH
    return "%s; the driver asks for a %s to activate it" % (meaning, what), asked


def ended_by(xid, later_loads, recoveries):
    """What ended a reset-class Xid: a driver load after it, or a later Xid 154 on its GPU whose action became
    None; None when nothing did. Order is the log's (line numbers)."""
    for load in later_loads:
        if load["line"] > xid["line"]:
            return "the driver loaded again%s" % (" at %.0f s" % load["time"] if load["time"] is not None else "")
    for recovery in recoveries:
        if recovery["bus"] == xid["bus"] and recovery["line"] > xid["line"]:
            return "a later Xid 154 set the recovery action to None"
    return None


def recent_xids(xids, uptime, window, driver_loads=(), pending=PENDING_DRAIN):
    """The Xids within window seconds before the reading, with their meaning and action (every Xid when the log
    line or /proc/uptime has no time: the age cannot be told); a reset-class Xid ended by a later driver load or
    recovery action None keeps its meaning with action none and ``ended_by``."""
    recoveries = [x for x in xids if x["code"] == XID_RECOVERY_CODE and recovery_action(x["text"]) == NONE]
    out = []
    for xid in xids:
        age = None if xid["time"] is None or uptime is None else max(0, int(uptime - xid["time"]))
        if age is None or age <= window:
            meaning, action = xid_meaning(xid, pending)
            ended = ended_by(xid, driver_loads, recoveries) if action in RESET_CLASS else None
            out.append(dict(xid, age_seconds=age, meaning=meaning, action=NONE if ended else action,
                            ended_by=ended))
    return out


def smi_findings(gpu, pending=PENDING_DRAIN):
    """[(reason, action)] from one GPU's nvidia-smi reading: what takes it out of service, then notes."""
    ecc, rows, pages = gpu["ecc"], gpu["remapped_rows"] or {}, gpu["retired_pages"] or {}
    allowed = "" if pending == PENDING_DRAIN else "; new work may start (pending: allow), reset when convenient"
    found = []
    if ecc["volatile"]["uncorrectable"]:
        found.append(("%d uncorrectable ECC error(s) since the driver loaded (a GPU reset clears them)%s"
                      % (ecc["volatile"]["uncorrectable"], allowed), pending_action(RESET_GPU, pending)))
    if ecc["unrepairable_memory"]:
        found.append(("memory that cannot be repaired (unrepairable_memory)", FIELD_DIAG))
    if ecc["sram_threshold_exceeded"]:
        found.append(("uncorrectable SRAM errors past the threshold (sram_threshold_exceeded)", FIELD_DIAG))
    if rows.get("failure"):
        found.append(("row remapping failed", FIELD_DIAG))
    if rows.get("pending"):
        found.append(("a row remapping is pending (a GPU reset applies it)%s" % allowed,
                      pending_action(RESET_GPU, pending)))
    if pages.get("pending"):
        found.append(("a page retirement is pending (a GPU reset applies it)%s" % allowed,
                      pending_action(RESET_GPU, pending)))
    for flag, what in (("channel_repair_pending", "a memory channel"), ("tpc_repair_pending", "a TPC")):
        if ecc.get(flag):
            found.append(("%s is marked for repair (%s; the driver asks for a node reboot to activate it)%s"
                          % (what, flag, allowed.replace("reset", "reboot")), pending_action(REBOOT, pending)))
    recovery = (gpu["recovery_action"] or "").strip()
    action = recovery_action(recovery)
    if action is not None and action != NONE:
        found.append(("the driver asks for recovery action %s" % recovery, action))
    if ecc["aggregate"]["uncorrectable"]:
        found.append(("%d uncorrectable ECC error(s) over the GPU's life" % ecc["aggregate"]["uncorrectable"], WATCH))
    if rows.get("uncorrectable"):
        found.append(("%d row(s) remapped for uncorrectable errors" % rows["uncorrectable"], WATCH))
    return found


def _gpu_entry(bus, reading=None, known=None):
    reading, known = reading or {}, known or {}
    return {"uuid": reading.get("uuid") or known.get("uuid"), "pci_bus": bus, "index": reading.get("index"),
            "name": reading.get("name") or known.get("model"), "reported": bool(reading),
            "excluded": bool(known.get("excluded")),
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
        elif known["excluded"]:
            gpus[known["bus"]]["excluded"] = True
    for bus, uuid in uuids_by_bus.items():
        if bus not in gpus:
            gpus[bus] = _gpu_entry(bus, known={"uuid": uuid})
        elif not gpus[bus]["uuid"]:
            gpus[bus]["uuid"] = uuid
    return gpus


def judged(entry, reported=True):
    """An entry (findings of {reason, action, source}) with its condition, action, reasons and notes: reasons are
    the findings that make the condition (those out of service when unhealthy, those needing a person when
    unknown), notes the rest."""
    findings = entry["findings"]
    actions = [f["action"] for f in findings]
    condition = condition_of(actions, reported)
    deciding = OUT_OF_SERVICE if condition == UNHEALTHY else ((LOOK_UP,) if condition == UNKNOWN else ())
    entry.update(condition=condition, action=worst_action(actions),
                 reasons=[f["reason"] for f in findings if f["action"] in deciding],
                 notes=[f["reason"] for f in findings if f["action"] not in deciding])
    return entry


def _node_findings(entry, smi, reading, lost, pending):
    """The findings of nvidia-smi's reading, or of its absence (excluded, fallen off the bus, not reported)."""
    if entry["reported"]:
        return [{"reason": r, "action": a, "source": "nvidia-smi"} for r, a in smi_findings(reading, pending)]
    if entry["excluded"]:
        return [{"reason": "excluded from use by the driver (GPU Excluded: Yes in /proc/driver/nvidia): nvidia-smi "
                           "does not list it", "action": LOOK_UP, "source": "proc"}]
    if smi is not None or entry["pci_bus"] in lost:
        return [{"reason": "the kernel driver knows it, nvidia-smi cannot reach it (fallen off the bus?)",
                 "action": REBOOT, "source": "nvidia-smi"}]
    return [{"reason": "nvidia-smi gave no report", "action": LOOK_UP, "source": "nvidia-smi"}]


def judge_gpus(smi, kernel_log, proc_texts, uptime_text, window, pending=PENDING_DRAIN):
    """The node's GPU health report (see the module dra_gpu_health_facts for every field).

    smi: parse_smi_xml's result, or None when nvidia-smi gave none; kernel_log: its text or None (not read);
    proc_texts: the texts of /proc/driver/nvidia/gpus/*/information; window: seconds an Xid counts; pending: the
    pending policy (PENDING_POLICIES).
    """
    log = parse_xid_lines(kernel_log)
    recent = recent_xids(log["xids"], uptime_seconds(uptime_text), window, log["driver_loads"], pending)
    readings = (smi or {}).get("gpus") or []
    by_bus = dict((bus_key(g["pci_bus_id"]), g) for g in readings)
    gpus = _gpus_by_bus(readings, parse_proc_information(proc_texts), log["uuids"])
    lost = log["lost"] | smi_lost_buses((smi or {}).get("messages") or [])
    for bus, entry in gpus.items():
        entry["findings"] += _node_findings(entry, smi, by_bus.get(bus), lost, pending)
    unmatched = []
    for xid in recent:
        target = gpus.get(xid["bus"])
        if target is None:
            unmatched.append(xid)
            continue
        target["xids"].append(xid)
        ended = " (ended: %s)" % xid["ended_by"] if xid["ended_by"] else ""
        target["findings"].append({"reason": "Xid %d: %s%s" % (xid["code"], xid["meaning"], ended),
                                   "action": xid["action"], "source": "kernel log"})
    report = [judged(gpus[bus], gpus[bus]["reported"]) for bus in sorted(gpus)]
    return {"gpus": report, "unhealthy": [g["uuid"] or g["pci_bus"] for g in report if g["condition"] == UNHEALTHY],
            "xids": recent, "unmatched_xids": unmatched, "xid_window": window, "pending": pending,
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
                out[gpu["uuid"]] = {"uuid": gpu["uuid"], "node": gpu.get("node") or facts.get("node"),
                                    "condition": gpu["condition"], "action": gpu.get("action"),
                                    "reasons": list(gpu.get("reasons") or []), "notes": list(gpu.get("notes") or [])}
    return out


def gpu_reasons(gpu):
    """What one GPU reading says against its device (or why it is unknown), as the device report's reasons."""
    where = " on %s" % gpu["node"] if gpu.get("node") else ""
    return ["GPU %s%s: %s (%s)" % (gpu["uuid"], where, reason, gpu["action"]) for reason in gpu["reasons"]]
