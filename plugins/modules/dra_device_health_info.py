#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_device_health_info
short_description: Report the health of DRA devices, the pods using unhealthy ones, and driver-published taints
version_added: 0.1.0
description:
  - Per device (driver, pool, device), its health from two sources the API server keeps, and a third one read on the
    nodes when given (O(gpu_health)), and which pods use the unhealthy ones.
  - Pod status - the kubelet writes C(status.containerStatuses[].allocatedResourcesStatus) (gate
    C(ResourceHealthStatus), beta and on from Kubernetes 1.36, alpha and off before; with it off, as on 1.33, the
    kubelet does not watch the drivers' health at all). Each entry names a claim of the container as the container
    names it - C(claim:<name>), or C(claim:<name>/<request>) when the container names a request - and gives per
    resource a C(resourceID) and a health of C(Healthy), C(Unhealthy) or C(Unknown). The kubelet of 1.36 and 1.37
    writes the device's first CDI device ID as C(resourceID) when the driver gave one (C(<vendor>/<class>=<name>)),
    otherwise C(<driver>/<pool>/<device>), so a report is tied to its device through the pod's claim and request; a
    report on a request holding several devices that its C(resourceID) does not name is listed in
    RV(unresolved).
  - C(Unknown) - a device the driver has not reported for 30 seconds (or the driver's own per-device timeout) is
    C(Unknown). The kubelet of 1.37 writes that to the pod when the driver next reports its other devices (seen
    about 30 seconds after the device's last report); a driver that sends nothing at all, its stream still open,
    shows only when the kubelet next syncs the pod (seen after 80 to 85 seconds). A change of health the driver reports is in the pod's
    status within seconds. A deleted pod takes its reports with it - its device is C(not-reported) again.
  - Driver taints - the taints a driver publishes on devices in its ResourceSlices (gate C(DRADeviceTaints), beta
    and on from 1.36, alpha and off before). A taint with effect C(NoSchedule) or C(NoExecute) makes a device
    unhealthy; effect C(None) is only listed. Taints of DeviceTaintRules are not read here.
  - A device is C(unhealthy) when a pod reports it C(Unhealthy) or its driver taints it (C(NoSchedule),
    C(NoExecute)), C(unknown) when a pod reports it C(Unknown), C(healthy) when pods report it C(Healthy), and
    C(not-reported) otherwise. Devices shared by pods take the worst report.
  - Since when - a taint's C(timeAdded) (stamped by the API server, kept by the driver), or the time an earlier run
    first saw the device in that condition, given back through O(first_seen). The pod status field has no time;
    without either, the device counts as first seen by this run. Long Unknown means C(unknown) for at least
    O(unknown_after) seconds.
  - A device is used by the live pods among the consumers (C(status.reservedFor)) of the claims holding it, and by the
    live pods naming such a claim in any field - their spec, a template's claim in their status, or the claim the
    scheduler made for their extended resources backed by DRA (C(status.extendedResourceClaimStatus); the kubelet
    of 1.37 writes no health report for that claim). The pods of a workload's PodGroup use its claims without being
    in C(reservedFor).
  - Where a source does not exist or is off by default (Kubernetes 1.33 - both gates alpha and off), RV(sources)
    says so and the module still reports what it can.
  - A fixed number of requests however many nodes there are - the server version, C(resource.k8s.io) discovery and
    paginated LISTs of ResourceSlices, ResourceClaims and the pods that have not finished (whole pods - the health
    is in their status).
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.gpu_health
options:
  driver:
    description:
      - Only this driver's devices (for example V(gpu.example.com)).
    type: str
  unknown_after:
    description:
      - Seconds a device must have been C(unknown) to be listed in RV(long_unknown) (and be a problem).
    type: int
    default: 600
  first_seen:
    description:
      - What an earlier run returned as RV(first_seen), so that a device that stays unhealthy or unknown keeps the
        time it was first seen. Without it, a device with no taint time is first seen by this run.
    type: dict
    default: {}
  list_devices:
    description:
      - Which devices RV(devices) lists. V(reported) - those a pod reports on or a driver taints. V(all) - every
        published device too. V(none) - none (the summary and the other lists are still returned).
    type: str
    choices: [reported, all, none]
    default: reported
  fail_on_problems:
    description:
      - Fail when an unhealthy device is in use, a device has been unknown for O(unknown_after) seconds, or a pod
        reports a device as not healthy without saying which (RV(problems)).
    type: bool
    default: false
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Device health of the whole cluster
  dra.admin.dra_device_health_info:
  register: health

- name: Pods on unhealthy devices
  ansible.builtin.debug:
    msg: "{{ item.id }} ({{ item.reasons | join('; ') }}): {{ item.pods | map(attribute='name') | join(', ') }}"
  loop: "{{ health.unhealthy_in_use }}"

- name: Again later, keeping when each device was first seen unhealthy or unknown
  dra.admin.dra_device_health_info:
    driver: gpu.example.com
    first_seen: "{{ health.first_seen }}"
    unknown_after: 300
    fail_on_problems: true
"""

RETURN = r"""
kubernetes_version:
  description: The server's version.
  returned: always
  type: str
  sample: v1.36.3
resource_api_version:
  description: The C(resource.k8s.io) version used.
  returned: always
  type: str
  sample: v1
sources:
  description: >-
    Per source (C(pod_status), C(slice_taints), and C(gpu_health) when O(gpu_health) is given) whether the cluster has it (C(available)), its feature gate
    (C(gate)) and why (C(detail)). A source is available when objects carry its field or its gate is on by
    default on the release; otherwise the API server drops the field on write.
  returned: always
  type: dict
  sample:
    pod_status: {available: false, gate: ResourceHealthStatus, detail: "... alpha and off by default on 1.33 ..."}
    slice_taints: {available: true, gate: DRADeviceTaints, detail: "... present on 1 object(s)"}
summary:
  description: >-
    Counts - C(devices) (with a report, a taint, or published), C(published), C(unhealthy), C(unknown),
    C(healthy), C(not_reported), C(tainted) (devices with any driver taint), C(unhealthy_in_use),
    C(long_unknown), C(unresolved) (reports not tied to a device) and C(pods_reporting) (pods carrying the field).
  returned: always
  type: dict
  sample: {devices: 19, published: 19, unhealthy: 2, unknown: 0, healthy: 1, not_reported: 16, tainted: 2,
           unhealthy_in_use: 2, long_unknown: 0, unresolved: 1, pods_reporting: 4}
devices:
  description: The devices O(list_devices) selects.
  returned: always
  type: list
  elements: dict
  contains:
    driver: {description: Driver., type: str, returned: always}
    pool: {description: Pool., type: str, returned: always}
    device: {description: Device name., type: str, returned: always}
    id: {description: C(<driver>/<pool>/<device>)., type: str, returned: always}
    node:
      description: The node the device is on, or C(<all-nodes>) / C(<node-selector>) for shared devices.
      type: str
      returned: always
    published: {description: A current ResourceSlice publishes the device., type: bool, returned: always}
    health: {description: Worst pod-reported health (null when no pod reports on it)., type: str, returned: always}
    condition:
      description: One of C(unhealthy), C(unknown), C(healthy), C(not-reported).
      type: str
      returned: always
    reasons: {description: Why it is unhealthy or unknown., type: list, elements: str, returned: always}
    reports:
      description: >-
        The pods' reports (C(namespace), C(pod), C(container), C(resource), C(resource_id), C(health),
        C(message)).
      type: list
      elements: dict
      returned: always
    taints:
      description: Driver taints (C(key), C(value), C(effect), C(time_added)).
      type: list
      elements: dict
      returned: always
    claims: {description: Claims holding it (namespace/name)., type: list, elements: str, returned: always}
    pods:
      description: Live pods using it (C(namespace), C(name), C(node)).
      type: list
      elements: dict
      returned: always
    in_use: {description: A live pod uses it., type: bool, returned: always}
    uuid: {description: Its C(uuid) attribute (null without one)., type: str, returned: always}
    gpu_uuid:
      description: The physical GPU's UUID - its C(parentUUID) attribute for a MIG device, else C(uuid) - which
        O(gpu_health) is matched to.
      type: str
      returned: always
    gpu:
      description: >-
        The reading of the GPU with its C(gpu_uuid) from O(gpu_health) - C(uuid), C(node), C(condition), C(action),
        C(reasons), C(notes) - or null.
      type: dict
      returned: always
    since: {description: Since when it is unhealthy or unknown (UTC)., type: str, returned: always}
    since_source:
      description: Where RV(devices[].since) comes from - C(taint), C(first-seen) or C(this-run).
      type: str
      returned: always
    for_seconds:
      description: Seconds since RV(devices[].since).
      type: int
      returned: always
unhealthy:
  description: >-
    Every unhealthy device, in use or not - C(driver), C(pool), C(device) (what a DeviceTaintRule's device
    selector takes), C(id), C(node), C(since), C(since_source), C(for_seconds), C(reasons), C(in_use). This is
    what a remediation acts on.
  returned: always
  type: list
  elements: dict
unhealthy_in_use:
  description: The unhealthy devices that live pods use, as in RV(unhealthy) plus C(claims) and C(pods).
  returned: always
  type: list
  elements: dict
long_unknown:
  description: Devices unknown for at least O(unknown_after) seconds, as in RV(unhealthy_in_use).
  returned: always
  type: list
  elements: dict
driver_taints:
  description: Every driver-published taint, with C(driver), C(pool), C(device) and C(node).
  returned: always
  type: list
  elements: dict
unresolved:
  description: >-
    Pod reports not tied to one device - the request holds several devices and the C(resourceID) names none of
    them (C(candidates) lists them).
  returned: always
  type: list
  elements: dict
first_seen:
  description: >-
    Per unhealthy or unknown device id, C(condition) and C(since); give it to the next run as O(first_seen).
  returned: always
  type: dict
  sample: {gpu.example.com/node-0/gpu-1: {condition: unknown, since: "2026-11-23T17:06:50Z"}}
gpus_unmatched:
  description: >-
    The GPUs of O(gpu_health) no published device names by its C(uuid) (or C(parentUUID)) attribute, as in
    RV(devices[].gpu); empty
    with O(driver) (the other drivers' devices are not read).
  returned: always
  type: list
  elements: dict
problems:
  description: >-
    One line per unhealthy device in use, long-unknown device, unresolved non-healthy report and unhealthy GPU that
    no device names.
  returned: always
  type: list
  elements: str
metrics_text:
  description: >-
    The device map in the Prometheus text format, for node-exporter's textfile collector - every device (whatever
    O(list_devices) says) as C(dra_admin_device_info) with C(driver), C(pool), C(device), C(node), C(uuid) (its
    C(uuid) attribute), C(gpu_uuid) (RV(devices[].gpu_uuid)) and C(condition), and each claim and live pod holding
    one as C(dra_admin_device_consumer_info) with C(claim), C(namespace) and C(pod) too. A GPU UUID from node-side
    monitoring (the DCGM exporter's label C(UUID), the physical GPU's also for MIG) joins to the device and its pods
    on C(gpu_uuid); role C(dra.admin.monitoring) has the alert and the panel that do so.
  returned: always
  type: str
  sample: |
    dra_admin_device_info{condition="unhealthy",device="gpu-0",driver="gpu.nvidia.com",gpu_uuid="GPU-1",node="n1",pool="n1",uuid="GPU-1"} 1
    dra_admin_device_consumer_info{claim="c",device="gpu-0",driver="gpu.nvidia.com",gpu_uuid="GPU-1",namespace="ml",node="n1",pod="p",pool="n1",uuid="GPU-1"} 1
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.health_service import gather_device_health
from ansible_collections.dra.admin.plugins.module_utils.devices.health import COND_NOT_REPORTED
from ansible_collections.dra.admin.plugins.module_utils.devices.device_map import device_map_text


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        driver=dict(type="str"),
        unknown_after=dict(type="int", default=600),
        first_seen=dict(type="dict", default={}),
        list_devices=dict(type="str", choices=["reported", "all", "none"], default="reported"),
        fail_on_problems=dict(type="bool", default=False),
        gpu_health=dict(type="list", elements="dict", default=[]),
    )
    return spec


def listed(devices, which):
    if which == "all":
        return devices
    if which == "none":
        return []
    return [d for d in devices if d["condition"] != COND_NOT_REPORTED or d["taints"]]


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = gather_device_health(api, driver=params["driver"], first_seen=params["first_seen"],
                                      unknown_after=params["unknown_after"], gpu_health=params["gpu_health"])
        result["metrics_text"] = device_map_text(result["devices"])
        result["devices"] = listed(result["devices"], params["list_devices"])
        result["api_requests"] = api.requests
        if params["fail_on_problems"] and result["problems"]:
            count = len(result["problems"])
            raise DraAdminError("%d device health problem(s): %s" % (count, "; ".join(result["problems"])), result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
