#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_driver_status_info
short_description: Report (and wait for) a DRA driver DaemonSet's rollout and its ResourceSlices on every selected node
version_added: 0.1.0
description:
  - Reads the driver's DaemonSet, works out the nodes it selects (node selector, required node affinity,
    taints, as the DaemonSet controller does), and reports the rollout (pods updated and available) and which
    of those nodes publish ResourceSlices of O(driver) with complete pools.
  - With O(wait=true) polls until the rollout is complete and every selected node publishes its slices, and
    returns the progress seen; on timeout it fails naming the nodes that did not.
  - Checks the DaemonSet itself (exclusion label in every node affinity term, gRPC liveness probe on each of
    O(health_ports), O(expected_strategy)) and fails on a problem when O(fail_on_problems=true).
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.wait
options:
  driver: {description: Driver name in the ResourceSlices., type: str, required: true}
  namespace: {description: Namespace of the DaemonSet., type: str, required: true}
  daemonset_name: {description: Name of the DaemonSet., type: str, required: true}
  exclusion_label:
    description: Node label key every node affinity term must exclude (C([prefix/]name), as Kubernetes defines label keys).
    type: str
    default: dra.admin/driver-excluded
  health_ports: {description: Ports that must carry a gRPC liveness probe (service C(liveness))., type: list, elements: int, default: []}
  require_startup_probe: {description: Also require a gRPC startup probe on each health port., type: bool, default: false}
  expected_strategy: {description: The updateStrategy the DaemonSet must have., type: dict}
  wait: {description: Wait for the rollout and the slices., type: bool, default: false}
  wait_timeout: {default: 300, aliases: [timeout]}
  wait_sleep: {default: 2.0, aliases: [poll_interval]}
  since:
    description:
      - When the wait started (seconds since the epoch, RV(started) of an earlier call), for a role that waits in an
        C(until) loop of calls with O(wait=false) - RV(elapsed) counts from it. Default is the call's own start.
    type: float
  fail_on_problems: {description: Fail when the DaemonSet check finds a problem or (after waiting) nodes lack slices., type: bool, default: true}
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Wait until the driver runs and publishes on every selected node
  dra.admin.dra_driver_status_info:
    driver: gpu.example.com
    namespace: dra-system
    daemonset_name: gpu-example-com-kubeletplugin
    health_ports: [51515]
    wait: true
    wait_timeout: 600
  register: status

- name: Show progress
  ansible.builtin.debug:
    var: status.progress
"""

RETURN = r"""
done: {description: Rollout complete and every selected node publishes complete slices., returned: always, type: bool}
rollout:
  description: The rollout - C(done), C(desired), C(updated), C(available), C(ready) and a C(text) summary.
  returned: always
  type: dict
selected_nodes: {description: Nodes the DaemonSet selects., returned: always, type: list, elements: str}
nodes_with_slices:
  description: >-
    Selected nodes the driver publishes for, with every pool of it covering the node complete: a current
    slice covers the node through its C(nodeName), C(allNodes) or a C(nodeSelector) admitting the node (at
    slice level, or per device with C(perDeviceNodeSelection)).
  returned: always
  type: list
  elements: str
nodes_without_slices: {description: Selected nodes publishing no (or incomplete) slices of the driver., returned: always, type: list, elements: str}
daemonset_problems: {description: What is wrong with the DaemonSet spec., returned: always, type: list, elements: str}
update_strategy: {description: The DaemonSet's updateStrategy., returned: always, type: dict}
progress: {description: One line per change seen while waiting., returned: always, type: list, elements: str}
elapsed: {description: Seconds spent (since O(since) when given)., returned: always, type: float}
started:
  description: When the call (or the wait, with O(since)) started, in seconds since the epoch.
  returned: always
  type: float
pending:
  description: >-
    What a wait for the driver still waits for - the rollout while it is not complete (with its text), each selected node
    without complete ResourceSlices, or a node the DaemonSet selects when it selects none; empty when RV(done).
  returned: always
  type: list
  elements: str
api_requests: {description: Number of API requests the module made., returned: always, type: int}
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.drivers.status_service import run
from ansible_collections.dra.admin.plugins.module_utils.drivers.status import failure, input_errors
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_options


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        driver=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        daemonset_name=dict(type="str", required=True),
        exclusion_label=dict(type="str", default=DEFAULT_EXCLUSION_LABEL),
        health_ports=dict(type="list", elements="int", default=[]),
        require_startup_probe=dict(type="bool", default=False),
        expected_strategy=dict(type="dict"),
        wait=dict(type="bool", default=False),
        since=dict(type="float"),
        fail_on_problems=dict(type="bool", default=True),
    )
    spec.update(wait_options(300, 2.0, timeout_aliases=["timeout"], sleep_aliases=["poll_interval"]))
    return spec


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    with fails_on_error(module) as failing:
        raise_input_errors(input_errors(module.params, spec))
        api = DraApi(module)
        failing.keep(api_requests=lambda: api.requests)
        result = run(api, module.params)
        message = failure(module.params, result)
        if message and module.params["fail_on_problems"]:
            raise DraAdminError(message, result)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
