# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU health from NVIDIA's DCGM exporter, read through Prometheus: the series, their queries and the verdict per
GPU UUID, in the shape of dra_gpu_health_facts' facts (devices.gpu_health), so that they are a health source the
same way.

The series (dcgm-exporter's field names, from DCGM's field list; its default labels ``UUID``, ``gpu``,
``pci_bus_id``, ``device``, ``modelName``, ``Hostname``):

* ``DCGM_FI_DEV_XID_ERRORS``: the value of the last Xid the GPU reported (0: none). It keeps that value, so an Xid
  counts when the series changed within the window; the code's meaning and action are devices.gpu_health's;
* ``DCGM_FI_DEV_ROW_REMAP_FAILURE``: 1 when a row remapping failed (replace the GPU);
* ``DCGM_FI_DEV_ROW_REMAP_PENDING``: 1 when a remapping waits for a GPU reset;
* ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``: double-bit (uncorrectable) ECC errors since the driver loaded (a reset);
* ``DCGM_FI_DEV_RETIRED_PENDING``: pages waiting for retirement (a reset; GPUs before Ampere);
* ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS``: rows remapped for uncorrectable errors over the GPU's life (a note).

Series the exporter does not collect (its counters file chooses) are simply absent; the report says which.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import (
    HEALTHY, OUT_OF_SERVICE, REPLACE, RESET_GPU, UNHEALTHY, WATCH, worst_action, xid_meaning,
)

UUID_LABEL = "UUID"
HOST_LABEL = "Hostname"
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
# series -> (how a value above 0 reads, the action it asks for)
FLAG_SERIES = (
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "row remapping failed", REPLACE),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "a row remapping is pending (a GPU reset applies it)", RESET_GPU),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "%d uncorrectable ECC error(s) since the driver loaded", RESET_GPU),
    ("DCGM_FI_DEV_RETIRED_PENDING", "a page retirement is pending (a GPU reset applies it)", RESET_GPU),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "%d row(s) remapped for uncorrectable errors", WATCH),
)
SERIES = (XID_ERRORS,) + tuple(name for name, dummy, dummy2 in FLAG_SERIES)


def _by_gpu(series):
    return "max by (%s, %s) (%s)" % (UUID_LABEL, HOST_LABEL, series)


def queries(window):
    """{series: PromQL} - per GPU (UUID, Hostname): the flags' current values, and the last Xid of the GPUs whose
    Xid series changed within window seconds."""
    out = dict((name, _by_gpu(name)) for name, dummy, dummy2 in FLAG_SERIES)
    out[XID_ERRORS] = _by_gpu("last_over_time(%s[%ds]) and changes(%s[%ds]) > 0" % (
        XID_ERRORS, window, XID_ERRORS, window))
    return out


def _finding(template, value):
    return template % int(value) if "%d" in template else template


def gpu_facts(results):
    """[dra_gpu_health-shaped facts, one per Hostname] from {series: [(labels, value)]} (the queries' answers).

    Each GPU: uuid, condition (healthy or unhealthy: the exporter reports only GPUs it reaches), action, reasons,
    notes, findings, and the series values read.
    """
    gpus = {}
    for name, template, action in FLAG_SERIES:
        for labels, value in results.get(name) or []:
            gpu = _gpu(gpus, labels)
            gpu["series"][name] = value
            if value > 0:
                gpu["findings"].append({"reason": _finding(template, value), "action": action, "source": "dcgm"})
    for labels, value in results.get(XID_ERRORS) or []:
        gpu = _gpu(gpus, labels)
        gpu["series"][XID_ERRORS] = value
        if value > 0:
            meaning, action = xid_meaning({"code": int(value), "text": ""})
            gpu["findings"].append({"reason": "Xid %d: %s" % (int(value), meaning), "action": action,
                                    "source": "dcgm"})
    nodes = {}
    for (host, uuid), gpu in sorted(gpus.items()):
        action = worst_action(f["action"] for f in gpu["findings"])
        gpu.update(condition=UNHEALTHY if action in OUT_OF_SERVICE else HEALTHY, action=action,
                   reasons=[f["reason"] for f in gpu["findings"] if f["action"] in OUT_OF_SERVICE],
                   notes=[f["reason"] for f in gpu["findings"] if f["action"] not in OUT_OF_SERVICE])
        nodes.setdefault(host, []).append(gpu)
    return [{"node": host or None, "available": True, "source": "dcgm", "gpus": found}
            for host, found in sorted(nodes.items())]


def _gpu(gpus, labels):
    key = (labels.get(HOST_LABEL) or "", labels.get(UUID_LABEL) or "")
    if key not in gpus:
        gpus[key] = {"uuid": key[1] or None, "node": key[0] or None, "series": {}, "findings": []}
    return gpus[key]
