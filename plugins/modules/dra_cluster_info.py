#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_cluster_info
short_description: Report whether a cluster serves Dynamic Resource Allocation, and what it publishes
version_added: 0.1.0
description:
  - Reads the Kubernetes version, the C(resource.k8s.io) API versions the API server serves, the
    DeviceClasses, and the ResourceSlices summarised per driver, pool and node.
  - Says which nodes publish no ResourceSlice at all.
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  require_dra:
    description:
      - Fail when the cluster serves no C(resource.k8s.io) version this collection understands
        (v1, v1beta2 or v1beta1). The message lists the versions found and how to enable DRA.
      - When V(false), the module returns RV(dra_served=false) instead.
    type: bool
    default: true
  node_selector:
    description:
      - Label selector for the nodes to report on (for example V(nvidia.com/gpu.present=true)).
        Default is every node.
    type: str
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
notes:
  - Uses paginated LIST requests; the number of API requests does not grow with the number of nodes.
"""

EXAMPLES = r"""
- name: Is DRA served, and what do the drivers publish?
  dra.admin.dra_cluster_info:
  register: dra

- name: Show nodes that publish no devices
  ansible.builtin.debug:
    var: dra.nodes_without_slices

- name: Only report, do not fail, on a cluster without DRA
  dra.admin.dra_cluster_info:
    require_dra: false
    kubeconfig: /etc/kubernetes/admin.conf
  register: dra
"""

RETURN = r"""
kubernetes_version:
  description: The API server's C(gitVersion).
  returned: always
  type: str
  sample: v1.36.3
dra_served:
  description: Whether a C(resource.k8s.io) version this collection understands is served.
  returned: always
  type: bool
resource_api_versions:
  description: The C(resource.k8s.io) versions the API server serves, newest first.
  returned: always
  type: list
  elements: str
  sample: [v1, v1beta2, v1beta1]
resource_api_version:
  description: The version this collection uses for its requests, or null when none is served.
  returned: always
  type: str
  sample: v1
device_classes:
  description: DeviceClasses with their CEL selector expressions.
  returned: always
  type: list
  elements: dict
  sample: [{name: gpu.example.com, selectors: ['device.driver == "gpu.example.com"']}]
pools:
  description: One entry per driver and pool (newest generation only).
  returned: always
  type: list
  elements: dict
  contains:
    driver: {description: Driver name., type: str, returned: always}
    pool: {description: Pool name., type: str, returned: always}
    generation: {description: Newest pool generation seen., type: int, returned: always}
    slices_seen: {description: Slices of that generation., type: int, returned: always}
    slices_expected: {description: The pool's C(resourceSliceCount)., type: int, returned: always}
    complete: {description: Whether every slice of the pool is published., type: bool, returned: always}
    devices: {description: Devices in the pool's slices., type: int, returned: always}
    scopes:
      description: >-
        Where the pool's devices are - node names (the slice's C(nodeName), or with C(perDeviceNodeSelection)
        each device's), C(<all-nodes>) (C(allNodes)) or C(<node-selector>) (a node selector, slice or device).
      type: list
      elements: str
      returned: always
    devices_at: {description: "Devices per node or marker of C(scopes).", type: dict, returned: always}
    stale_slices: {description: Slices of older generations (being replaced)., type: int, returned: always}
    slice_names: {description: Names of the current slices., type: list, elements: str, returned: always}
nodes:
  description: >-
    Per node (and C(<all-nodes>), C(<node-selector>) for shared devices), per driver, the pools, slice and
    device counts; devices count under the node they are on.
  returned: always
  type: dict
  sample: {kwok-node-0: {gpu.example.com: {pools: [kwok-node-0], devices: 8, slices: 1, complete: true}}}
nodes_without_slices:
  description: >-
    Selected nodes that no driver publishes for: no current ResourceSlice covers them through its
    C(nodeName), C(allNodes) or a C(nodeSelector) admitting the node (at slice level, or per device with
    C(perDeviceNodeSelection)).
  returned: always
  type: list
  elements: str
drivers:
  description: >-
    Per driver, how many selected nodes it publishes for (the rule of RV(nodes_without_slices)), and its device
    and pool counts over the locations in RV(nodes).
  returned: always
  type: dict
  sample: {gpu.example.com: {nodes: 3, devices: 24, pools: 3}}
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.slice_reports_service import cluster_info


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        require_dra=dict(type="bool", default=True),
        node_selector=dict(type="str"),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = cluster_info(api, module.params["require_dra"], module.params["node_selector"])
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
