#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_node_state_info
short_description: Read what a node knows about DRA - the kubelet's prepared claims, plugin sockets, CDI specs
version_added: 0.2.0
description:
  - Runs on a node and reads, without changing anything, the node's own DRA state, so that
    M(dra.admin.dra_node_state_check_info) can compare it with the API.
  - The kubelet's checkpoint of prepared claims (C(<kubelet_root_dir>/dra_manager_state), format C(DRACheckpoint)
    C(checkpoint.dra.kubelet.k8s.io/v1) with a CRC-32 checksum) - per claim its UID, name, namespace, pods and each
    driver's devices with their CDI device ids.
  - The plugin registration sockets (C(<kubelet_root_dir>/plugins_registry)) and the plugin data directories
    (C(<kubelet_root_dir>/plugins/<driver>)), the driver and pod UID their names carry, and whether each socket
    answers - a gRPC server's first answer (its HTTP/2 SETTINGS frame) within 1 s of the connection preface, so a
    socket nobody listens on (refused) and a plugin that is stopped or hung (the kernel accepts, the process sends
    nothing) both count as not answering.
  - The CDI spec files of O(cdi_spec_dirs) (JSON, or YAML where PyYAML is installed on the node) with their kind,
    devices and the claim UIDs they name.
  - Through C(crictl) (when found), the running containers and the CDI devices each was started with
    (C(crictl inspect), field C(info.config.CDI_devices)), and so which spec each container uses.
  - A file of a format the module does not know is reported with C(format=unknown) and the reason, never guessed.
  - Read-only; the same answer in check mode. Needs no access to the Kubernetes API.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.facts
  - dra.admin.attributes.facts_module
  - dra.admin.attributes.platform
options:
  node_name:
    description:
      - The Kubernetes node name of this host. Default is the host name (what the kubelet uses unless
        C(--hostname-override) is set).
    type: str
  kubelet_root_dir:
    description:
      - The kubelet's root directory (its C(--root-dir)). It must exist and be a directory, else the module fails
        before reading anything (a wrong one would make every live claim and socket look gone).
    type: path
    default: /var/lib/kubelet
  cdi_spec_dirs:
    description:
      - The CDI spec directories the container runtime reads (containerd's C(cdi_spec_dirs)). One that does not
        exist is read as empty; one that exists and is not a directory fails the module before reading anything.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  containers:
    description:
      - Read the running containers through C(crictl). V(false) skips it; then no spec is known to be unused.
    type: bool
    default: true
  crictl:
    description:
      - The C(crictl) program, as a path or a name looked up on E(PATH).
    type: str
    default: crictl
  runtime_endpoint:
    description:
      - The container runtime's CRI endpoint given to C(crictl). Empty to use crictl's own configuration.
    type: str
    default: unix:///run/containerd/containerd.sock
attributes:
  platform:
    support: full
    platforms: linux
    details:
      - Reads the kubelet's root directory and the CDI directories, connects to Unix sockets, runs C(crictl).
notes:
  - The formats were read from the Kubernetes sources of v1.33.13 and v1.37.2 and checked on kind nodes with
    containerd v2.3.4 and dra-example-driver v0.4.0 (docs/decisions.md, "What the node knows").
"""

EXAMPLES = r"""
- name: Read the node's DRA state
  dra.admin.dra_node_state_info:

- name: Claims the kubelet holds prepared
  ansible.builtin.debug:
    msg: "{{ ansible_facts.dra_node_state.checkpoint.claims | map(attribute='uid') | list }}"

- name: A kubelet with another root directory, without crictl
  dra.admin.dra_node_state_info:
    kubelet_root_dir: /data/kubelet
    containers: false
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: dict
  contains:
    dra_node_state:
      description: The node's DRA state.
      returned: always
      type: dict
      contains:
        node: {description: The node name., type: str, returned: always, sample: worker-1}
        kubelet_root_dir: {description: The kubelet root directory read., type: str, returned: always}
        kubelet_running: {description: Whether a process named kubelet runs., type: bool, returned: always}
        checkpoint:
          description:
            - The kubelet's DRA checkpoint. C(format) is V(DRACheckpoint checkpoint.dra.kubelet.k8s.io/v1), V(unknown)
              (with C(error)) or null when the file is absent.
          type: dict
          returned: always
          sample:
            path: /var/lib/kubelet/dra_manager_state
            present: true
            format: DRACheckpoint checkpoint.dra.kubelet.k8s.io/v1
            checksum_ok: true
            error: null
            claims:
              - uid: 2e5fed7d-c2a8-4bad-8ecd-ed565d1cf452
                name: p1-gpu-gp6lj
                namespace: team-a
                pod_uids: [28fd590b-0412-4407-b674-386a96b18041]
                drivers:
                  gpu.example.com:
                    - {pool: worker-1, device: gpu-0, share_id: null, requests: [gpu],
                       cdi_device_ids: ["k8s.gpu.example.com/gpu=common"]}
        registration:
          description: The registration directory and its entries (C(name), C(path), C(driver), C(pod_uid), C(naming),
            C(is_socket), C(answers), C(error)).
          type: dict
          returned: always
        plugin_dirs:
          description: The plugin data directories with their sockets (C(name), C(path), C(pod_uid), C(dra), C(answers),
            C(error)) and files.
          type: list
          elements: dict
          returned: always
        cdi_spec_dirs: {description: The CDI directories read., type: list, elements: str, returned: always}
        cdi_specs:
          description:
            - One entry per spec file; C(format) V(cdi) or V(unknown); C(used_by) lists the running containers
              using one of its devices, null when they could not be read.
          type: list
          elements: dict
          returned: always
          sample:
            - path: /var/run/cdi/k8s.gpu.example.com-gpu_2e5fed7d-c2a8-4bad-8ecd-ed565d1cf452.yaml
              format: cdi
              kind: k8s.gpu.example.com/gpu
              cdi_version: 0.5.0
              devices: [k8s.gpu.example.com/gpu=2e5fed7d-c2a8-4bad-8ecd-ed565d1cf452-gpu-0]
              claim_uids: [2e5fed7d-c2a8-4bad-8ecd-ed565d1cf452]
              used_by: [f99e7b96dbacfadf502d3ae5b82a240f95539a529cb5e4b2aa0e8bf23e69ba0c]
              error: null
        containers:
          description: The running containers (C(id), C(name), C(pod_uid), C(pod_name), C(namespace), C(state),
            C(cdi_devices)); C(available) false with C(reason) when crictl is missing or failed.
          type: dict
          returned: always
        errors: {description: Directories that could not be listed., type: list, elements: str, returned: always}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.nodes import node_state
from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.nodes.node_state_service import gather


def argument_spec():
    return dict(
        node_name=dict(type="str"),
        kubelet_root_dir=dict(type="path", default=node_state.KUBELET_ROOT_DIR),
        cdi_spec_dirs=dict(type="list", elements="path", default=list(node_state.CDI_SPEC_DIRS)),
        containers=dict(type="bool", default=True),
        crictl=dict(type="str", default=node_state.CRICTL),
        runtime_endpoint=dict(type="str", default=node_state.CONTAINERD_SOCKET),
    )


def find_program(module, program):
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    return module.get_bin_path(program)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    crictl = find_program(module, module.params["crictl"]) if module.params["containers"] else None
    with fails_on_error(module, changed=False):
        state = gather(module.params, lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}), crictl)
    module.exit_json(changed=False, ansible_facts={"dra_node_state": state})


if __name__ == "__main__":
    main()
