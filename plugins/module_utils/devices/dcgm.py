# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU health from NVIDIA's DCGM exporter, read through Prometheus: the series, their queries and the verdict per
GPU UUID, in the shape of dra_gpu_health_facts' facts (devices.gpu_health), so that they are a health source the
same way.

The series as dcgm-exporter writes them (its default counters file ``etc/default-counters.csv`` and its renderer):
every GPU series has the labels ``gpu``, ``UUID`` (the physical GPU's, also on a MIG instance's series, which adds
``GPU_I_PROFILE`` and ``GPU_I_ID``), ``pci_bus_id``, ``device``, ``modelName``, the node's name as ``Hostname`` (up to
4.x) or ``hostname`` (after; none with ``--no-hostname``, when the node is the label the scrape puts on it:
``HOST_LABELS``), and with ``--kubernetes-enable-dra`` the DRA claim and device holding it (``DRA_LABELS``).

* ``DCGM_FI_DEV_XID_ERRORS`` (default): the last Xid's code as its value, labelled ``err_code`` and ``err_msg``
  (since 3.3.6-3.4.2), so each new code is a new series; an Xid counts when its code (series or value) is new
  within the window (devices.device_map.new_xids). A repeat of the same code changes nothing on it;
* ``DCGM_EXP_XID_ERRORS_COUNT`` (commented out by default): per code (label ``xid``) the Xids counted in the
  exporter's own window (``window_size_in_ms``, 5 minutes by default) - repeats too;
* ``DCGM_FI_DEV_ROW_REMAP_FAILURE`` (default): a row remapping failed (run the field diagnostics);
* ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`` (default): rows remapped over the GPU's life (a note);
* ``DCGM_FI_DEV_ROW_REMAP_PENDING``, ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``, ``DCGM_FI_DEV_RETIRED_PENDING`` (not in
  the default counters): a pending remapping, uncorrectable errors since the driver loaded, pending page
  retirements - a reset, under the pending policy of devices.gpu_health.

A GPU's verdict needs its uncorrectable errors, its pending memory repairs and its Xids (``REQUIRED``): a GPU for
which the exporter exports none of a group's series is ``unknown`` (never healthy) unless another reading makes it
unhealthy. A GPU the exporter reported within the window and reports no more is a finding too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices.device_map import (
    DCGM_CODE_LABEL, DCGM_UUID_LABEL, DCGM_XID_COUNT, DCGM_XID_ERRORS, new_xids,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import (
    FIELD_DIAG, LOOK_UP, PENDING_DRAIN, RESET_GPU, WATCH, judged, pending_action, xid_meaning,
)

UUID_LABEL = DCGM_UUID_LABEL
# The node's name: the exporter's own label (Hostname before dcgm-exporter's rename, hostname after), then the
# labels a scrape's relabelling commonly puts on a pod's node (with --no-hostname the exporter writes none).
HOST_LABELS = ("hostname", "Hostname", "node", "kubernetes_node", "kubernetes_pod_node_name")
# --kubernetes-enable-dra (dcgm-exporter 4.3+): the DRA device and claim holding the GPU, per pod.
DRA_LABELS = (("driver", "dra_driver_name"), ("pool", "dra_pool_name"), ("device", "dra_device_name"),
              ("claim_namespace", "dra_claim_namespace"), ("claim", "dra_claim_name"),
              ("mig_device_uuid", "dra_mig_device_uuid"), ("namespace", "namespace"), ("pod", "pod"))
XID_ERRORS = DCGM_XID_ERRORS
XID_COUNT = DCGM_XID_COUNT
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
ECC_DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
RETIRED_PENDING = "DCGM_FI_DEV_RETIRED_PENDING"
UNCORRECTABLE_REMAPPED = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
# series -> (how a value above 0 reads, the action it asks for, whether the pending policy applies)
FLAG_SERIES = (
    (ROW_REMAP_FAILURE, "row remapping failed", FIELD_DIAG, False),
    (ROW_REMAP_PENDING, "a row remapping is pending (a GPU reset applies it)", RESET_GPU, True),
    (ECC_DBE_VOL, "%d uncorrectable ECC error(s) since the driver loaded (a GPU reset clears them)", RESET_GPU, True),
    (RETIRED_PENDING, "%d page(s) pending retirement (a GPU reset applies it)", RESET_GPU, True),
    (UNCORRECTABLE_REMAPPED, "%d row(s) remapped for uncorrectable errors", WATCH, False),
)
SERIES = (XID_ERRORS, XID_COUNT) + tuple(flag[0] for flag in FLAG_SERIES)
# What a verdict needs, and the series any one of which gives it (the default exporter has none of the first two).
REQUIRED = (
    ("uncorrectable ECC errors since the driver loaded", (ECC_DBE_VOL,)),
    ("pending row remappings or page retirements", (ROW_REMAP_PENDING, RETIRED_PENDING)),
    ("Xids", (XID_ERRORS, XID_COUNT)),
)
NEW_XIDS = "new_xids"
GONE = "gone"
DRA_DEVICES = "dra_devices"


def _by(extra=()):
    return ", ".join((UUID_LABEL,) + HOST_LABELS + tuple(extra))


def queries(window):
    """{name: PromQL}, one instant query each: per GPU (UUID and the node's labels) each series' current value
    (the count's over window seconds), the Xid codes new within the window, the GPUs reported within the window
    and no more, and the DRA labels of --kubernetes-enable-dra."""
    out = dict((name, "max by (%s) (%s)" % (_by(), name)) for name in SERIES if name != XID_COUNT)
    out[XID_COUNT] = "max by (%s) (max_over_time(%s[%ds]))" % (_by(), XID_COUNT, window)
    out[NEW_XIDS] = new_xids(window, HOST_LABELS)
    out[GONE] = "group by (%s) (last_over_time(%s[%ds])) unless on(%s) group by (%s) (%s)" % (
        _by(), XID_ERRORS, window, UUID_LABEL, UUID_LABEL, XID_ERRORS)
    out[DRA_DEVICES] = 'group by (%s) (%s{%s!=""})' % (
        ", ".join((UUID_LABEL,) + tuple(label for dummy, label in DRA_LABELS)), XID_ERRORS, "dra_device_name")
    return out


def host_of(labels):
    """The node of a series: the first of HOST_LABELS it has, None without any."""
    for label in HOST_LABELS:
        if labels.get(label):
            return labels[label]
    return None


def _gpu(gpus, labels):
    uuid = labels.get(UUID_LABEL) or ""
    if uuid not in gpus:
        gpus[uuid] = {"uuid": uuid or None, "node": None, "series": {}, "findings": [], "xids": [],
                      "dra_devices": []}
    gpu = gpus[uuid]
    gpu["node"] = gpu["node"] or host_of(labels)
    return gpu


def _finding(reason, action):
    return {"reason": reason, "action": action, "source": "dcgm"}


def _flag_findings(gpus, results, pending):
    for name, template, action, policy in FLAG_SERIES:
        for labels, value in results.get(name) or []:
            gpu = _gpu(gpus, labels)
            gpu["series"][name] = max(value, gpu["series"].get(name, value))
    for gpu in gpus.values():
        for name, template, action, policy in FLAG_SERIES:
            value = gpu["series"].get(name)
            if value:
                reason = template % int(value) if "%d" in template else template
                if policy and action != pending_action(action, pending):
                    reason += "; new work may start (pending: allow), reset when convenient"
                gpu["findings"].append(_finding(reason, pending_action(action, pending) if policy else action))


def _xid_findings(gpus, results):
    for name in (XID_ERRORS, XID_COUNT):
        for labels, value in results.get(name) or []:
            _gpu(gpus, labels)["series"][name] = value
    for labels, value in results.get(NEW_XIDS) or []:
        gpu = _gpu(gpus, labels)
        try:  # the code: its label (err_code, or the count's xid copied there), else the gauge's value
            code = int(labels.get(DCGM_CODE_LABEL) or value)
        except ValueError:
            continue
        if code in gpu["xids"]:
            continue
        gpu["xids"].append(code)
        meaning, action = xid_meaning({"code": code, "text": ""})
        gpu["findings"].append(_finding("Xid %d: %s" % (code, meaning), action))


def _missing_findings(gpu):
    out = []
    for what, names in REQUIRED:
        if not any(name in gpu["series"] for name in names):
            out.append(_finding("the exporter does not export %s for it: whether it has %s cannot be told"
                                % (" or ".join(names), what), LOOK_UP))
    return out


def gpu_facts(results, pending=PENDING_DRAIN):
    """[dra_gpu_health-shaped facts, one per node] from {query name: [(labels, value)]} (the queries' answers).

    Each GPU: uuid, node, condition (healthy, unhealthy, unknown), action, reasons, notes, findings, the Xid codes
    new in the window, the series values read and the DRA devices the exporter names (--kubernetes-enable-dra).
    """
    gpus = {}
    _flag_findings(gpus, results, pending)
    _xid_findings(gpus, results)
    for labels, dummy in results.get(GONE) or []:
        _gpu(gpus, labels)["findings"].append(_finding(
            "gone from the exporter (reported within the window, not now): the GPU fell off the bus or the exporter "
            "on its node stopped", LOOK_UP))
    for labels, dummy in results.get(DRA_DEVICES) or []:
        device = dict((key, labels.get(label) or None) for key, label in DRA_LABELS)
        gpu = _gpu(gpus, labels)
        if device not in gpu["dra_devices"]:
            gpu["dra_devices"].append(device)
    nodes = {}
    for uuid, gpu in sorted(gpus.items()):
        if not any(f["reason"].startswith("gone from") for f in gpu["findings"]):
            gpu["findings"] += _missing_findings(gpu)
        judged(gpu)
        nodes.setdefault(gpu["node"] or "", []).append(gpu)
    return [{"node": host or None, "available": True, "source": "dcgm", "pending": pending, "gpus": found}
            for host, found in sorted(nodes.items())]
