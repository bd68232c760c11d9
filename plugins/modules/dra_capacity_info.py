#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_capacity_info
short_description: Report total, allocated, tainted and free DRA devices per driver, pool, node and DeviceClass
version_added: 0.1.0
description:
  - Counts the devices of the newest generation of every ResourceSlice pool and the devices allocated to
    ResourceClaims, per driver, per pool (C(driver/pool)), per node (devices offered to several nodes under
    C(<all-nodes>) or C(<node-selector>)) and per DeviceClass.
  - A device is C(allocated) when a claim's allocation names it without admin access (a device shared through
    consumable capacity counts once), and C(tainted) when its slice gives it a C(NoSchedule) or C(NoExecute) taint
    or a DeviceTaintRule with such an effect selects it (by driver, pool and device; RV(device_taint_rules) says
    whether the rules could be read).
  - C(free) means kube-scheduler can allocate the device now to one more claim asking for a whole device - not
    tainted; its pool complete (every slice of C(resourceSliceCount) published) and valid (no device name, counter
    set name twice; no device consuming a counter set or counter the pool does not define); not allocated, or
    shared with each capacity still holding what a claim without a capacity request takes (its
    C(requestPolicy.default), else all of it); and every shared counter it consumes (partitionable devices,
    C(consumesCounters)) still has that much left after the allocated devices' consumption. C(unavailable) counts
    the devices neither allocated, tainted nor free (an incomplete or invalid pool, counters used up by other
    partitions of the same hardware).
  - The rules are those of the cluster's release, read from C(/version) (RV(allocator)) - from Kubernetes 1.35 a
    pool's counter sets are shared by all its slices, incomplete pools are not allocated from, and a device that
    consumes counters is refused while any counter of its pool is overdrawn; up to 1.34 a device consumes the
    counter sets of its own slice and incomplete pools are allocated from (RV(by_pool) still says C(complete)
    false). Shared counters exist where the C(DRAPartitionableDevices) gate is on (beta and on from 1.36).
  - For devices with consumable capacity (C(allowMultipleAllocations)), each capacity's C(total), C(used) (the sum
    of the claims' C(consumedCapacity)) and C(left), in base units (bytes for C(80Gi)).
  - A DeviceClass's devices are counted when each of its selectors is C(device.driver == "<driver>"); other CEL
    expressions are not evaluated, and the class's C(total), C(tainted) and C(free) are null. Its C(allocated)
    counts the devices allocated for requests naming the class.
  - Computed from four paginated LISTs (DeviceTaintRules where served, slices, claims, DeviceClasses), C(/version)
    and discovery, however many nodes there are. Kubernetes 1.36 and 1.37 can also count devices per pool through
    C(ResourcePoolStatusRequest) (alpha, feature gate C(DRAResourcePoolStatus), C(resource.k8s.io/v1alpha3) on both,
    and the module uses the newest version discovery lists it in), which needs an object to be created and a
    controller to answer; from 1.37 each pool also reports its partition types (C(partitionSummary), with the
    C(DRAPartitionableDevicesType) gate and slices that name a C(partitionTypeAttribute)) and its shared devices'
    capacity (C(shareableSummary)). Only with O(pool_status=true) does this module create one such request per
    driver, read it until kube-controller-manager answers, delete it (also on failure), and return the controller's
    counts and every difference from the computed ones in RV(pool_status). Without it, it only reads, and says in
    RV(pool_status_served) whether the cluster serves it.
  - Read-only otherwise; in check mode no request is created (RV(pool_status.skipped) says so). C(changed) is
    always false, since a request it creates is deleted before it returns.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  driver:
    description:
      - Only this driver's devices and pools (the DeviceClass view keeps every class).
    type: str
  pool_status:
    description:
      - Also ask kube-controller-manager for each pool's counts through a C(ResourcePoolStatusRequest) per driver
        (created, then deleted), and report where they differ from the computed counts.
      - Needs permission to create, get and delete C(resourcepoolstatusrequests). Where they are not served, the
        computed counts are returned and RV(pool_status.skipped) says why.
      - Kubernetes 1.36.3's controller counts each allocation result (admin access and each share of a shared device
        too) and no device taints, so pools with such devices show as disagreements. 1.37's counts each device once,
        without admin access, and counts tainted devices (DeviceTaintRules too, as the computed counts do) as
        unavailable.
    type: bool
    default: false
  wait_timeout:
    description:
      - With O(pool_status), seconds to wait for the controller to answer a request before failing (the request is
        deleted either way); a finite number above 0.
    type: int
    default: 30
    aliases: [pool_status_timeout]
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Free devices per pool
  dra.admin.dra_capacity_info:
  register: capacity

- name: Pools with no free device
  ansible.builtin.debug:
    msg: "{{ capacity.by_pool | dict2items | selectattr('value.free', 'equalto', 0) | map(attribute='key') | list }}"

- name: One driver's devices per node
  dra.admin.dra_capacity_info:
    driver: gpu.example.com

- name: Compare with the controller's pool status (Kubernetes 1.36+, gate DRAResourcePoolStatus)
  dra.admin.dra_capacity_info:
    pool_status: true
  register: checked

- name: Fail when the two disagree
  ansible.builtin.assert:
    that: checked.pool_status.disagreements | length == 0
    fail_msg: "{{ checked.pool_status.disagreements }}"
"""

RETURN = r"""
resource_api_version:
  description: The C(resource.k8s.io) version used.
  returned: always
  type: str
  sample: v1
totals:
  description: >-
    Counts over every device - C(total), C(allocated), C(tainted), C(free) (allocatable now), C(unavailable)
    (neither allocated, tainted nor free), and C(capacity) (per consumable capacity name, C(total), C(used),
    C(left); empty without consumable capacity).
  returned: always
  type: dict
  sample: {total: 16, allocated: 3, tainted: 0, free: 13, unavailable: 0, capacity: {}}
by_driver:
  description: The same counts per driver.
  returned: always
  type: dict
by_pool:
  description:
    - The same counts per pool, keyed C(driver/pool), and C(complete) (all C(resourceSliceCount) slices of the
      newest generation published), C(problem) (why the scheduler does not allocate from the pool, starting with
      C(incomplete) or C(invalid), else null) and C(counters), the pool's shared counters (partitionable devices) -
      per counter set, per counter, C(capacity), C(consumed) (by the allocated devices) and C(left) (negative when
      overdrawn); empty without shared counters. From Kubernetes 1.35 counter sets are keyed by name (shared by
      the pool's slices), before by C(<slice>/<set>).
  returned: always
  type: dict
  sample:
    gpu.example.com/node-000000:
      total: 3
      allocated: 1
      tainted: 0
      free: 0
      unavailable: 2
      capacity: {}
      complete: true
      problem: null
      counters: {gpu-0: {memory: {capacity: 85899345920, consumed: 85899345920, left: 0}}}
by_node:
  description: The same counts per node, or C(<all-nodes>) / C(<node-selector>) for devices offered to several nodes.
  returned: always
  type: dict
by_device_class:
  description: >-
    The same counts per DeviceClass; C(selectors_evaluated) false when the class's selectors are not of the form
    C(device.driver == "<driver>"), and then C(total), C(tainted), C(free) and C(unavailable) are null.
  returned: always
  type: dict
allocator:
  description: >-
    The allocation rules applied - C(release) (the cluster's minor version, null when unreadable: the newest
    rules), C(counters_per_pool) (counter sets shared by a pool's slices, 1.35+), C(incomplete_pools_allocated)
    (up to 1.34) and C(taint_reader), how kube-scheduler reads a DeviceTaintRule without C(deviceSelector) -
    C(allocator) (it selects every device: up to 1.37.0, and when the version is unreadable) or
    C(allocator-no-selector-none) (it selects no device: from 1.37.1 and 1.38).
  returned: always
  type: dict
  sample: {release: 37, counters_per_pool: true, incomplete_pools_allocated: false,
           taint_reader: allocator-no-selector-none}
device_taint_rules:
  description: >-
    How DeviceTaintRules were read for C(tainted) - C(read), C(not served) (the release or its gates do not serve
    them), or C(forbidden) (these credentials may not list them, and no rule's taint is counted).
  returned: always
  type: str
  sample: read
unpublished_allocations:
  description: Allocated devices (driver/pool/device) that no current ResourceSlice publishes (they consume no
    shared counter).
  returned: always
  type: list
  elements: str
summary:
  description: One line per driver - free of total devices, allocated, tainted, unavailable (when any), and
    consumable capacity left.
  returned: always
  type: list
  elements: str
  sample: ["devices of gpu.example.com: 14 free of 16 (2 allocated, 0 tainted)"]
pool_status_served:
  description: Whether the cluster serves C(resourcepoolstatusrequests) (Kubernetes 1.36 and 1.37, alpha).
  returned: always
  type: bool
pool_status:
  description:
    - With O(pool_status) only (null otherwise). C(source) is C(ResourcePoolStatusRequest) when the controller
      answered, else C(computed) with the reason in C(skipped); C(pools) the controller's C(status.pools) entries
      keyed C(driver/pool); C(disagreements) one line per count that differs from RV(by_pool) (total, allocated,
      available against the devices neither allocated nor tainted, unavailable against tainted), per pool only one
      side has, per pool the controller could not count or flags with a C(validationError), and from 1.37 per
      partition type (total, allocatable) and per shared capacity (total, consumed, available) that differs;
      C(requests) the names of the requests made (all deleted).
  returned: always
  type: dict
  contains:
    source:
      description: C(ResourcePoolStatusRequest) when the controller answered, else C(computed).
      type: str
    skipped:
      description: Why no request was made (not served, or check mode); null when one was.
      type: str
    pools:
      description: The controller's C(status.pools) entries keyed C(driver/pool).
      type: dict
    disagreements:
      description: One line per difference from the computed counts.
      type: list
      elements: str
    requests:
      description: Names of the requests made (all deleted).
      type: list
      elements: str
  sample:
    source: ResourcePoolStatusRequest
    skipped: null
    pools:
      gpu.example.com/node-000000: {driver: gpu.example.com, poolName: node-000000, totalDevices: 8,
                                    allocatedDevices: 1, availableDevices: 7, unavailableDevices: 0}
    disagreements: []
    requests: [dra-admin-capacity-pcf4p]
metrics_text:
  description:
    - The per-pool figures in the Prometheus text exposition format, for a node-exporter textfile collector
      (C(playbooks/health.yml) writes it with C(dra_health_capacity_metrics_file)) -
      C(dra_admin_devices{driver,pool,state}) (state C(total), C(allocated), C(tainted), C(free)),
      C(dra_admin_device_capacity{driver,pool,capacity,kind}) for consumable capacity (kind C(total), C(used),
      C(left), base units), and C(dra_admin_pool_status_disagreements) when the pool status was compared.
  returned: always
  type: str
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import gather_capacity
from ansible_collections.dra.admin.plugins.module_utils.common.names import subdomain_error
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_options, wait_parameter_errors


def argument_spec():
    spec = auth_argument_spec()
    spec.update(driver=dict(type="str"), pool_status=dict(type="bool", default=False))
    spec.update(wait_options(30, timeout_aliases=["pool_status_timeout"]))
    return spec


def input_errors(params, spec=None):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = wait_parameter_errors(params, intervals=(), spec=spec)
    if params["driver"] is not None:
        errors.append(subdomain_error("driver", params["driver"]))
    return [e for e in errors if e]


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    with fails_on_error(module) as failure:
        raise_input_errors(input_errors(module.params, spec))
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        report = gather_capacity(api, driver=module.params["driver"], pool_status=module.params["pool_status"],
                                 timeout=module.params["wait_timeout"], check_mode=module.check_mode)
    module.exit_json(
        changed=False, resource_api_version=report["version"], totals=report["totals"],
        by_driver=report["by_driver"], by_pool=report["by_pool"], by_node=report["by_node"],
        by_device_class=report["by_device_class"], unpublished_allocations=report["unpublished_allocations"],
        allocator=report["allocator"], device_taint_rules=report["device_taint_rules"],
        summary=report["summary"], pool_status_served=report["pool_status_served"],
        pool_status=report["pool_status"], metrics_text=report["metrics_text"], api_requests=api.requests)


if __name__ == "__main__":
    main()
