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
    answer; this module only reads, and says in RV(pool_status_served) whether the cluster serves it.
  - Read-only; the same answer in check mode.
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
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.api import (
    AnsibleK8SModule, DraApi, DraApiError, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims import gather_capacity


def argument_spec():
    spec = auth_argument_spec()
    spec.update(driver=dict(type="str"))
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    api = DraApi(module)
    try:
        report = gather_capacity(api, driver=module.params["driver"])
    except DraApiError as exc:
        module.fail_json(msg=str(exc), api_requests=api.requests)
    module.exit_json(
        changed=False, resource_api_version=report["version"], totals=report["totals"],
        by_driver=report["by_driver"], by_pool=report["by_pool"], by_node=report["by_node"],
        by_device_class=report["by_device_class"], unpublished_allocations=report["unpublished_allocations"],
        summary=report["summary"], pool_status_served=report["pool_status_served"], api_requests=api.requests)


if __name__ == "__main__":
    main()
