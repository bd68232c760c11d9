#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_slices_info
short_description: Report ResourceSlice pools per node and driver, and nodes that publish nothing
version_added: 0.1.0
description:
  - Per node and per driver, the pools, how many slices of the newest pool generation are published against
    the pool's C(resourceSliceCount) (an incomplete pool is flagged), the generation and the device count.
  - Lists the nodes that match the driver's node selection (O(node_selector)) but publish no slice of it.
  - Uses the newest C(resource.k8s.io) version the cluster serves and paginated LIST requests.
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
      - Only this driver's slices (for example V(gpu.example.com)). Needed to list nodes that publish nothing.
    type: str
  node:
    description:
      - Only pools with devices on this node (slices with its C(nodeName), or with C(perDeviceNodeSelection)
        devices naming it).
    type: str
  node_selector:
    description:
      - Label selector of the nodes the driver is expected to run on (the selector of its DaemonSet).
        Default is every node.
    type: str
  fail_on_problems:
    description:
      - Fail when a pool is incomplete or a selected node publishes no slice of O(driver).
    type: bool
    default: false
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Pools and devices of the GPU driver on GPU nodes
  dra.admin.dra_slices_info:
    driver: gpu.example.com
    node_selector: nvidia.com/gpu.present=true
  register: slices

- name: Nodes whose driver publishes nothing
  ansible.builtin.debug:
    var: slices.nodes_without_slices

- name: Fail when a pool is incomplete or a node publishes nothing
  dra.admin.dra_slices_info:
    driver: gpu.example.com
    fail_on_problems: true
"""

RETURN = r"""
resource_api_version:
  description: The C(resource.k8s.io) version used.
  returned: always
  type: str
  sample: v1
pools:
  description: One entry per driver and pool (see M(dra.admin.dra_cluster_info) for the fields).
  returned: always
  type: list
  elements: dict
nodes:
  description: >-
    Per node, per driver, pools, slices, devices (those on that node), complete. Devices of slices with
    C(perDeviceNodeSelection) count under the node each device names. Devices offered to several nodes are under
    C(<all-nodes>) (C(allNodes)) or C(<node-selector>) (a node selector), not under any node.
  returned: always
  type: dict
  sample: {kwok-node-0: {gpu.example.com: {pools: [kwok-node-0], slices: 1, devices: 8, complete: true}}}
incomplete_pools:
  description: Pools with fewer slices than their C(resourceSliceCount), as C(driver/pool).
  returned: always
  type: list
  elements: str
nodes_without_slices:
  description: >-
    Nodes matching O(node_selector) that no driver (O(driver) when given) publishes for: no current slice
    covers them through its C(nodeName), C(allNodes) or a C(nodeSelector) admitting the node (at slice level,
    or per device with C(perDeviceNodeSelection)).
  returned: always
  type: list
  elements: str
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.slice_reports_service import slices_info
from ansible_collections.dra.admin.plugins.module_utils.claims.slice_reports import problems_message


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        driver=dict(type="str"),
        node=dict(type="str"),
        node_selector=dict(type="str"),
        fail_on_problems=dict(type="bool", default=False),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = slices_info(api, module.params)
        result["api_requests"] = api.requests
        if module.params["fail_on_problems"] and (result["incomplete_pools"] or result["nodes_without_slices"]):
            raise DraAdminError(problems_message(result, module.params["driver"]), result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
