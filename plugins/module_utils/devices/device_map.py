# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The device map as Prometheus series: which DRA device (driver, pool, device, node) a GPU UUID is, and which
claim and pods hold it - what node-side GPU monitoring (NVIDIA's DCGM exporter, NVSentinel) does not know unless
the exporter runs with ``--kubernetes-enable-dra``. Written for node-exporter's textfile collector, as the capacity
and canary series are.

* ``dra_admin_device_info{driver, pool, device, node, uuid, gpu_uuid, condition} 1``: one series per device the
  health report has (``uuid``: its uuid attribute, ``MIG-...`` for a MIG device; ``gpu_uuid``: the physical GPU's,
  its parentUUID attribute for a MIG device, else its uuid; both empty without one; its condition: healthy,
  unhealthy, unknown, not-reported);
* ``dra_admin_device_consumer_info{driver, pool, device, node, uuid, gpu_uuid, claim, namespace, pod} 1``: one
  series per live pod using a device (``pod`` empty for a claim that holds the device with no live pod).

dcgm-exporter labels a GPU's series (MIG instances' too) with the physical GPU's UUID in ``UUID``.
``XID_CONSUMERS_QUERY`` joins its Xids to the pods and devices here on ``gpu_uuid``, one result per pod: an Xid is
one of ``DCGM_FI_DEV_XID_ERRORS``' codes (label ``err_code`` since dcgm-exporter 3.3.6; its value the last code)
that is new within ``XID_ALERT_WINDOW`` (the series, or its value, was not there that long ago), or a code that
``DCGM_EXP_XID_ERRORS_COUNT`` (label ``xid``, when the exporter counts them) counted in its own window - leaving out
0 and the codes whose catalog action does not take the GPU out of service (``XID_NOT_ALERTED``: the application's
own and IGNORE codes, devices.gpu_health.XID_CATALOG). A repeat of the gauge's last code changes neither its series
nor its value: only the count series sees it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import NONE, RESTART_APP, XID_CATALOG
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import labels_text

METRIC_DEVICE = "dra_admin_device_info"
METRIC_CONSUMER = "dra_admin_device_consumer_info"
UUID_LABEL = "uuid"
GPU_UUID_LABEL = "gpu_uuid"
# dcgm-exporter's series (its default counters file; the count only when the counters file enables it), the label
# holding the GPU's UUID and the ones holding the code.
DCGM_XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
DCGM_XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
DCGM_UUID_LABEL = "UUID"
DCGM_CODE_LABEL = "err_code"
DCGM_COUNT_CODE_LABEL = "xid"
# Seconds an Xid of the gauge alerts after it appeared.
XID_ALERT_WINDOW = 3600
XID_NOT_ALERTED = tuple(sorted(code for code, action in XID_CATALOG.items() if action in (NONE, RESTART_APP)))


def new_xids(window, by, not_codes=()):
    """PromQL: per ``by`` labels (with the code's), the Xid codes new within window seconds - the gauge's series (or
    value) absent window seconds ago, or a code the exporter's count series counted in its window - without 0 and
    not_codes. The code is in label err_code (copied from the count series' xid)."""
    skip = "|".join(str(c) for c in (0,) + tuple(not_codes))
    keys = ", ".join((DCGM_UUID_LABEL, DCGM_CODE_LABEL) + tuple(by))
    # The gauge's value is its code (with or without the err_code label): filter on the value.
    now = "max by (%s) (%s > 0%s)" % (keys, DCGM_XID_ERRORS, "".join(" != %d" % c for c in not_codes))
    before = "max by (%s, %s) (%s offset %ds)" % (DCGM_UUID_LABEL, DCGM_CODE_LABEL, DCGM_XID_ERRORS, window)
    gauge = "((%s unless on(%s, %s) %s) or (%s != on(%s, %s) group_left() %s))" % (
        now, DCGM_UUID_LABEL, DCGM_CODE_LABEL, before, now, DCGM_UUID_LABEL, DCGM_CODE_LABEL, before)
    counted = 'label_replace(max by (%s) (max_over_time(%s{%s!~"%s"}[%ds])) > 0, "%s", "$1", "%s", "(.+)")' % (
        ", ".join((DCGM_UUID_LABEL, DCGM_COUNT_CODE_LABEL) + tuple(by)), DCGM_XID_COUNT, DCGM_COUNT_CODE_LABEL,
        skip + "|", window, DCGM_CODE_LABEL, DCGM_COUNT_CODE_LABEL)
    return "(%s or max without (%s) (%s))" % (gauge, DCGM_COUNT_CODE_LABEL, counted)


# Per pod (and claim) on a GPU with a new out-of-service (or unknown) Xid: the device's and the pod's labels and the
# code (err_code; the largest when several). The DCGM side is one series per UUID first, so that a GPU scraped
# twice still joins.
XID_CONSUMERS_QUERY = ('%s * on(%s) group_left(%s) label_replace(topk by (%s) (1, %s), "%s", "$1", "%s", "(.+)")'
                       % (METRIC_CONSUMER, GPU_UUID_LABEL, DCGM_CODE_LABEL, DCGM_UUID_LABEL,
                          new_xids(XID_ALERT_WINDOW, (), XID_NOT_ALERTED), GPU_UUID_LABEL, DCGM_UUID_LABEL))


def _claims_and_pods(entry):
    """[(claim, namespace, pod)] of one device: each live pod with the claim of its namespace holding the device."""
    rows = []
    for claim in entry.get("claims") or []:
        namespace, name = claim.split("/", 1) if "/" in claim else ("", claim)
        pods = [p for p in entry.get("pods") or [] if (p.get("namespace") or "") == namespace]
        rows += [(name, namespace, p.get("name") or "") for p in pods] or [(name, namespace, "")]
    return rows


def device_map_text(devices):
    """The device map of a health report's devices (devices.health.device_health's ``devices``) in the Prometheus
    text exposition format."""
    info = ["# HELP %s A DRA device, where it is, its GPU UUID and health condition, from "
            "dra.admin.dra_device_health_info." % METRIC_DEVICE, "# TYPE %s gauge" % METRIC_DEVICE]
    consumers = ["# HELP %s A claim and live pod holding a DRA device, with the device's GPU UUID, from "
                 "dra.admin.dra_device_health_info." % METRIC_CONSUMER, "# TYPE %s gauge" % METRIC_CONSUMER]
    for entry in devices:
        where = dict(driver=entry["driver"] or "", pool=entry["pool"] or "", device=entry["device"] or "",
                     node=entry["node"] or "", uuid=entry.get("uuid") or "",
                     gpu_uuid=entry.get("gpu_uuid") or entry.get("uuid") or "")
        info.append("%s%s 1" % (METRIC_DEVICE, labels_text(condition=entry["condition"], **where)))
        for claim, namespace, pod in _claims_and_pods(entry):
            consumers.append("%s%s 1" % (METRIC_CONSUMER, labels_text(claim=claim, namespace=namespace, pod=pod,
                                                                      **where)))
    return "\n".join(info + consumers) + "\n"
