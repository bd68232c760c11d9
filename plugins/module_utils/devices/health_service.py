# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Device health read from a cluster: the API side of devices.health (module dra_device_health_info).

A fixed number of requests, however many nodes there are: the server version,
resource.k8s.io discovery, and paginated LISTs of ResourceSlices, ResourceClaims
and the pods that are not finished (whole pods: the health field is in their status).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime

from ansible_collections.dra.admin.plugins.module_utils.devices.health import (
    SOURCE_DRIVER_PODS, SOURCE_GPU, check_gpu_health, check_inputs, device_health, drivers_gone, gpu_source, problems,
    source_availability,
)
from ansible_collections.dra.admin.plugins.module_utils.access.api import hold_reads
from ansible_collections.dra.admin.plugins.module_utils.kube.pods import without_managed_fields

# Finished pods use no device; the server filters them out.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def gather_device_health(api, driver=None, first_seen=None, unknown_after=600, now=None, driver_pods=False,
                         gpu_health=None):
    """The report of devices.health.device_health, with the sources' availability and the problems; with
    driver_pods also drivers_gone (devices.health.drivers_gone: one more LIST, of the DaemonSets); with gpu_health
    (the nodes' dra_gpu_health facts) the GPUs' own readings too.

    Bad options raise devices.health.HealthInputError before any request.
    """
    check_inputs(first_seen, unknown_after)
    check_gpu_health(gpu_health)
    version = api.server_version().get("gitVersion") or ""
    resource_version = api.resource_api_version()
    slices = list(api.list_items(api.resource_path("resourceslices", version=resource_version),
                                 {"fieldSelector": "spec.driver=%s" % driver} if driver else None))
    # Kept without managedFields, a page at a time: at 10,000 pods they are a large share of what a LIST holds.
    claims = [without_managed_fields(c) for c in api.list_items(api.resource_path("resourceclaims",
                                                                                  version=resource_version))]
    pods = [without_managed_fields(p) for p in api.list_items("/api/v1/pods", {"fieldSelector": LIVE_PODS})]
    hold_reads()  # kept to the end of the run
    now = now or datetime.datetime.now(datetime.timezone.utc)
    report = device_health(slices, claims, pods, now, first_seen=first_seen, unknown_after=unknown_after,
                           driver=driver, gpu_health=gpu_health)
    report["sources"] = source_availability(version, report.pop("seen"))
    if gpu_health:
        report["sources"][SOURCE_GPU] = gpu_source(gpu_health, report["devices"])
    if driver_pods:
        report["drivers_gone"] = drivers_gone(report["devices"], api.list_items("/apis/apps/v1/daemonsets"), pods,
                                              now)
        report["sources"][SOURCE_DRIVER_PODS] = {
            "available": True, "gate": None,
            "detail": "the driver DaemonSets' pods on the nodes their drivers publish devices for: %d driver(s) "
                      "gone from a node" % len(report["drivers_gone"])}
    report["problems"] = problems(report, unknown_after)
    report["kubernetes_version"] = version
    report["resource_api_version"] = resource_version
    return report
