# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The device map as Prometheus series: which DRA device (driver, pool, device, node) a GPU UUID is, and which
claim and pods hold it - what node-side GPU monitoring (NVIDIA's DCGM exporter, NVSentinel) does not know. Written
for node-exporter's textfile collector, as the capacity and canary series are.

* ``dra_admin_device_info{driver, pool, device, node, uuid, condition} 1``: one series per device the health
  report has (its ``uuid`` attribute, empty without one; its condition: healthy, unhealthy, unknown,
  not-reported);
* ``dra_admin_device_consumer_info{driver, pool, device, node, uuid, claim, namespace, pod} 1``: one series per
  live pod using a device (``pod`` empty for a claim that holds the device with no live pod).

A DCGM exporter series carries the GPU's UUID in its label ``UUID`` (dcgm-exporter's default labels: ``gpu``,
``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``); ``XID_CONSUMERS_QUERY`` joins its Xid gauge
``DCGM_FI_DEV_XID_ERRORS`` (the value of the last Xid) to the pods and devices here, one result per pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import labels_text

METRIC_DEVICE = "dra_admin_device_info"
METRIC_CONSUMER = "dra_admin_device_consumer_info"
UUID_LABEL = "uuid"
# dcgm-exporter's series (its default counters file) and the label holding the GPU's UUID.
DCGM_XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
DCGM_UUID_LABEL = "UUID"

# Per pod (and claim) on a GPU whose last Xid is not 0: the Xid code, with the DRA device's and the pod's labels.
# The DCGM side is reduced to one series per UUID first, so that a GPU scraped twice still joins.
XID_CONSUMERS_QUERY = ('%s * on(%s) group_left() label_replace(max by (%s) (%s) > 0, "%s", "$1", "%s", "(.+)")'
                       % (METRIC_CONSUMER, UUID_LABEL, DCGM_UUID_LABEL, DCGM_XID_ERRORS, UUID_LABEL, DCGM_UUID_LABEL))


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
                     node=entry["node"] or "", uuid=entry.get("uuid") or "")
        info.append("%s%s 1" % (METRIC_DEVICE, labels_text(condition=entry["condition"], **where)))
        for claim, namespace, pod in _claims_and_pods(entry):
            consumers.append("%s%s 1" % (METRIC_CONSUMER, labels_text(claim=claim, namespace=namespace, pod=pod,
                                                                      **where)))
    return "\n".join(info + consumers) + "\n"
