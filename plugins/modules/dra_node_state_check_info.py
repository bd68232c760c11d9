#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_node_state_check_info
short_description: Compare what each node knows about DRA with the API, and say what is provably stale
version_added: 0.2.0
description:
  - Takes the C(dra_node_state) fact of every node (gathered on the nodes by M(dra.admin.dra_node_state_info))
    and reads the API once for all of them - ResourceClaims, Pods, ResourceSlices, Nodes and DaemonSets, each one
    paginated LIST - so that a run over many nodes costs a fixed number of requests, not some per node.
  - Per node, it finds claims the kubelet still holds prepared that the API no longer has or no longer allocates
    to the node (C(stale_checkpoint_claim)); CDI specs of claims that no longer exist (C(stale_cdi_spec));
    registration or plugin sockets that do not answer (C(dead_socket)) or whose driver has no running pod on the
    node (C(socket_without_driver_pod)); drivers that publish ResourceSlices for the node without an answering
    registration socket (C(driver_without_socket)); pods stuck terminating with claims (C(pod_stuck_terminating))
    with the reason (C(driver gone), C(unprepare failing), C(container still running), C(unprepared, waiting for the
    kubelet)); and files it could not read (C(unreadable_node_state)).
  - Every finding carries the single safe next step. The bring-back step of a driver names its DaemonSet and why
    it does not run on the node.
  - The repairs it lists (RV(nodes[].repairs)) are only the provably stale files - a CDI spec whose claims are
    gone from the API, that no running container uses and the kubelet no longer holds; a socket that does not
    answer of a driver with no running pod on the node - for M(dra.admin.dra_node_state_repair) to move to a
    backup directory after checking again on the node. RV(nodes[].force_delete_safe) lists the pods stuck
    terminating whose claims the node shows unprepared and whose containers are stopped.
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  node_states:
    description:
      - The C(dra_node_state) facts of the nodes to check, as a list or as a mapping of host to fact (for example
        C(dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['ansible_facts',
        'dra_node_state']))))).
    type: raw
    required: true
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Read each node's DRA state
  dra.admin.dra_node_state_info:

- name: Compare every node with the API, once
  dra.admin.dra_node_state_check_info:
    node_states: "{{ ansible_play_hosts | map('extract', hostvars, ['ansible_facts', 'dra_node_state']) | list }}"
  delegate_to: localhost
  run_once: true
  register: node_check
"""

RETURN = r"""
nodes:
  description: One report per node, by node name.
  returned: always
  type: list
  elements: dict
  contains:
    node: {description: The node., type: str, returned: always}
    findings:
      description: What disagrees, each with C(kind), C(subject), C(message), C(next_step) and C(repair) (null unless
        the node-side repair may move it).
      type: list
      elements: dict
      returned: always
      sample:
        - kind: pod_stuck_terminating
          node: worker-2
          subject: team-a/trainer
          reason: driver gone
          message: "pod team-a/trainer is stuck terminating for 95 s with claims trainer-gpu-x2kq: driver gone"
          next_step: "bring driver gpu.example.com back: DaemonSet dra-system/gpu-example-com-kubeletplugin (driver
            gpu.example.com) does not run on this node: no required node affinity term matches"
          repair: null
    repairs:
      description: The node-side repairs (C(kind) V(cdi_spec) or V(socket), C(path), C(reason)).
      type: list
      elements: dict
      returned: always
    force_delete_safe:
      description: Pods stuck terminating whose claims the node shows unprepared and no container running.
      type: list
      elements: dict
      returned: always
    kubelet_running: {description: Whether the kubelet ran when the node was read., type: bool, returned: always}
    answering_drivers: {description: Drivers with an answering registration socket., type: list, returned: always}
counts:
  description: Findings per kind over every node.
  returned: always
  type: dict
findings: {description: The number of findings over every node., type: int, returned: always}
repairs: {description: The number of node-side repairs over every node., type: int, returned: always}
resource_api_version: {description: The resource.k8s.io version read., type: str, returned: always, sample: v1}
api_requests:
  description: Number of API requests the module made (one paginated LIST per resource, for every node at once).
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.nodes.node_check_service import run_check


def argument_spec():
    spec = auth_argument_spec()
    spec.update(node_states=dict(type="raw", required=True))
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module, api_requests=0) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        report = run_check(api, module.params["node_states"])
    module.exit_json(changed=False, api_requests=api.requests, **report)


if __name__ == "__main__":
    main()
