#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_node_ready_info
short_description: Whether a node is back after its own work - Ready, its kubelet's version, its DRA drivers and devices
version_added: 0.1.0
description:
  - Looks at one node until it is back or O(wait_timeout) is up, and says what is missing - the node's C(Ready)
    condition (with the kubelet's reason and message), its kubelet's version (O(kubelet_version)), a ready pod of
    each driver DaemonSet that places one on the node (O(driver_daemonsets)), and each driver's devices published
    for the node (O(drivers)), the same as before the node's work when O(expect_devices) gives them.
  - Run it once before the node's work (O(wait_timeout=0), O(fail_when_not_back=false)) to keep RV(devices), and
    after it with O(expect_devices) set to them - that is what the C(node_upgrade) role does between the drain and
    the uncordon.
  - A driver DaemonSet that keeps its pods off the node (the drain's exclusion label still on it) is not waited for.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  node:
    description: The node's name.
    type: str
    required: true
  kubelet_version:
    description:
      - The release its kubelet must report (V(v1.37.2), or V(1.37.2) as kubespray's C(kube_version) writes it; a
        distribution's suffix such as C(-3+abc) is accepted). Empty for any.
    type: str
    default: ""
  driver_daemonsets:
    description: The DRA drivers' DaemonSets, as C(namespace/name); each that places a pod on the node must have a ready one there.
    type: list
    elements: str
    default: []
  drivers:
    description: DRA driver names whose ResourceSlices must publish devices for the node.
    type: list
    elements: str
    default: []
  expect_devices:
    description: >-
      Per driver, the devices (C(pool/device)) it must publish for the node - RV(devices) of a look before the node's
      work. A device missing or new is a problem.
    type: dict
    default: {}
  wait_timeout:
    description: Seconds to keep looking until the node is back; V(0) looks once.
    type: int
    default: 300
  wait_sleep:
    description: The longest pause between two looks, in seconds (the first ones are shorter).
    type: float
    default: 2.0
  fail_when_not_back:
    description: Fail, naming each problem, when the node is not back after O(wait_timeout).
    type: bool
    default: true
seealso:
  - module: dra.admin.dra_node_drain
  - module: dra.admin.dra_upgrade_plan_info
"""

EXAMPLES = r"""
- name: Before the node's work - what the drivers publish for it
  dra.admin.dra_node_ready_info:
    node: gpu-node-1
    drivers: [gpu.example.com]
    wait_timeout: 0
    fail_when_not_back: false
  register: before

- name: After it - back at v1.37.2, with the same devices
  dra.admin.dra_node_ready_info:
    node: gpu-node-1
    kubelet_version: v1.37.2
    driver_daemonsets: [dra-system/gpu-driver]
    drivers: [gpu.example.com]
    expect_devices: "{{ before.devices }}"
    wait_timeout: 600
"""

RETURN = r"""
node:
  description: The node.
  returned: always
  type: str
back:
  description: Whether nothing is missing.
  returned: always
  type: bool
problems:
  description: What is missing, one sentence each, naming the node.
  returned: always
  type: list
  elements: str
  sample: ["node worker-2 is not Ready (KubeletNotReady: container runtime network not ready)"]
kubelet_version:
  description: The version the node's kubelet reports.
  returned: always
  type: str
driver_pods:
  description: The ready driver pods on the node, as C(namespace/name).
  returned: always
  type: list
  elements: str
devices:
  description: Per driver of O(drivers), the devices it publishes for the node, as sorted C(pool/device).
  returned: always
  type: dict
  sample: {gpu.example.com: [worker-1/gpu-0, worker-1/gpu-1]}
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import AnsibleK8SModule, DraApi, auth_argument_spec
from ansible_collections.dra.admin.plugins.module_utils.nodes.readiness_service import wait_until_back


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        node=dict(type="str", required=True),
        kubelet_version=dict(type="str", default=""),
        driver_daemonsets=dict(type="list", elements="str", default=[]),
        drivers=dict(type="list", elements="str", default=[]),
        expect_devices=dict(type="dict", default={}),
        wait_timeout=dict(type="int", default=300),
        wait_sleep=dict(type="float", default=2.0),
        fail_when_not_back=dict(type="bool", default=True),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = wait_until_back(api, module.params)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
