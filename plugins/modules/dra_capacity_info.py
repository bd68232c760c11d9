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
    consumable capacity counts once), C(tainted) when its slice gives it a C(NoSchedule) or C(NoExecute) taint,
    and C(free) when it is neither. Taints from DeviceTaintRules are not read.
  - For devices with consumable capacity (C(allowMultipleAllocations)), each capacity's C(total), C(used) (the sum
    of the claims' C(consumedCapacity)) and C(left), in base units (bytes for C(80Gi)).
  - A DeviceClass's devices are counted when each of its selectors is C(device.driver == "<driver>"); other CEL
    expressions are not evaluated, and the class's C(total), C(tainted) and C(free) are null. Its C(allocated)
    counts the devices allocated for requests naming the class.
  - Computed from three paginated LISTs (slices, claims, DeviceClasses) and discovery, however many nodes there
    are. Kubernetes 1.36 can also count devices per pool through C(ResourcePoolStatusRequest) (alpha, feature gate
    C(DRAResourcePoolStatus), C(resource.k8s.io/v1alpha3)), which needs an object to be created and a controller to
    answer. Only with O(pool_status=true) does this module create one such request per driver, read it until
    kube-controller-manager answers, delete it (also on failure), and return the controller's counts and every
    difference from the computed ones in RV(pool_status). Without it, it only reads, and says in
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
        too) and no device taints, so pools with such devices show as disagreements.
    type: bool
    default: false
  pool_status_timeout:
    description:
      - Seconds to wait for the controller to answer a request before failing (the request is deleted either way).
    type: int
    default: 30
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

- name: Compare with the controller's pool status (Kubernetes 1.36, gate DRAResourcePoolStatus)
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
    Counts over every device - C(total), C(allocated), C(tainted), C(free), and C(capacity) (per consumable capacity
    name, C(total), C(used), C(left); empty without consumable capacity).
  returned: always
  type: dict
  sample: {total: 16, allocated: 3, tainted: 0, free: 13, capacity: {}}
by_driver:
  description: The same counts per driver.
  returned: always
  type: dict
by_pool:
  description: The same counts per pool, keyed C(driver/pool).
  returned: always
  type: dict
by_node:
  description: The same counts per node, or C(<all-nodes>) / C(<node-selector>) for devices offered to several nodes.
  returned: always
  type: dict
by_device_class:
  description: >-
    The same counts per DeviceClass; C(selectors_evaluated) false when the class's selectors are not of the form
    C(device.driver == "<driver>"), and then C(total), C(tainted) and C(free) are null.
  returned: always
  type: dict
unpublished_allocations:
  description: Allocated devices (driver/pool/device) that no current ResourceSlice publishes.
  returned: always
  type: list
  elements: str
summary:
  description: One line per driver - free of total devices, allocated, tainted, and consumable capacity left.
  returned: always
  type: list
  elements: str
  sample: ["devices of gpu.example.com: 14 free of 16 (2 allocated, 0 tainted)"]
pool_status_served:
  description: Whether the cluster serves C(resourcepoolstatusrequests) (Kubernetes 1.36, alpha).
  returned: always
  type: bool
pool_status:
  description:
    - With O(pool_status) only (null otherwise). C(source) is C(ResourcePoolStatusRequest) when the controller
      answered, else C(computed) with the reason in C(skipped); C(pools) the controller's C(status.pools) entries
      keyed C(driver/pool); C(disagreements) one line per count that differs from RV(by_pool) (total, allocated,
      available against free), per pool only one side has, and per pool the controller could not validate;
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

from ansible_collections.dra.admin.plugins.module_utils.api import (
    AnsibleK8SModule, DraApi, DraApiError, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims import PoolStatusError, gather_capacity
from ansible_collections.dra.admin.plugins.module_utils._waits import wait_parameter_errors


def argument_spec():
    spec = auth_argument_spec()
    spec.update(driver=dict(type="str"), pool_status=dict(type="bool", default=False),
                pool_status_timeout=dict(type="int", default=30))
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    errors = wait_parameter_errors(module.params, timeouts=("pool_status_timeout",), intervals=())
    if errors:
        module.fail_json(msg="; ".join(errors))
    api = DraApi(module)
    try:
        report = gather_capacity(api, driver=module.params["driver"], pool_status=module.params["pool_status"],
                                 timeout=module.params["pool_status_timeout"], check_mode=module.check_mode)
    except (DraApiError, PoolStatusError) as exc:
        module.fail_json(msg=str(exc), api_requests=api.requests)
    module.exit_json(
        changed=False, resource_api_version=report["version"], totals=report["totals"],
        by_driver=report["by_driver"], by_pool=report["by_pool"], by_node=report["by_node"],
        by_device_class=report["by_device_class"], unpublished_allocations=report["unpublished_allocations"],
        summary=report["summary"], pool_status_served=report["pool_status_served"],
        pool_status=report["pool_status"], metrics_text=report["metrics_text"], api_requests=api.requests)


if __name__ == "__main__":
    main()
