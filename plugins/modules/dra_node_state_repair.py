#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_node_state_repair
short_description: Move a node's provably stale CDI specs to a backup directory, remove its dead plugin sockets
version_added: 0.2.0
description:
  - Runs on a node with the repairs M(dra.admin.dra_node_state_check_info) listed for it (RV(dra.admin.dra_node_state_check_info#module:nodes[].repairs)).
  - Reads the node's state again first (as M(dra.admin.dra_node_state_info) does) and carries out a repair only
    when it still holds there - a CDI spec that still names the same claims and that no running container uses;
    a socket that still does not answer. A repair that no longer holds is listed in RV(refused) with the reason,
    and nothing is done for it.
  - A CDI spec is moved, not deleted, into O(backup_dir) under its name and the UTC time of the move; moving it
    back undoes the repair. A dead socket is removed - a socket file holds no data (it cannot be copied or moved
    to another file system), and the driver's plugin binds a new one when it starts. Nothing else on the node is
    touched.
  - Supports check mode (what would move) and diff (the paths before and after).
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.platform
options:
  repairs:
    description:
      - The repairs for this node (C(kind) V(cdi_spec) or V(socket), C(path), and for a spec its C(claim_uids)).
      - An empty list does nothing.
    type: list
    elements: dict
    required: true
  backup_dir:
    description:
      - Where the files go, on the node. Created (0700) when missing.
    type: path
    default: /etc/kubernetes/dra-admin-backups
  kubelet_root_dir:
    description: The kubelet's root directory, read again before acting.
    type: path
    default: /var/lib/kubelet
  cdi_spec_dirs:
    description: The CDI spec directories, read again before acting.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  crictl:
    description: The C(crictl) program, to see which running containers use a spec.
    type: str
    default: crictl
  runtime_endpoint:
    description: The container runtime's CRI endpoint given to C(crictl). Empty to use crictl's own configuration.
    type: str
    default: unix:///run/containerd/containerd.sock
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    support: full
    platforms: linux
    details:
      - Moves files of the kubelet's root directory and the CDI directories on the node.
"""

EXAMPLES = r"""
- name: Move what the check proved stale on this node
  dra.admin.dra_node_state_repair:
    repairs: "{{ (node_check.nodes | selectattr('node', 'equalto', inventory_hostname) | first).repairs }}"

- name: The same into another directory
  dra.admin.dra_node_state_repair:
    repairs:
      - kind: cdi_spec
        path: /var/run/cdi/k8s.gpu.example.com-gpu_0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11.yaml
        claim_uids: [0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11]
    backup_dir: /root/dra-node-backups
"""

RETURN = r"""
moved:
  description: The repairs carried out (in check mode, those that would be), each with C(kind), C(path), C(reason) and
    C(backup) (where a spec went; null for a removed socket and in check mode).
  returned: always
  type: list
  elements: dict
  sample:
    - kind: cdi_spec
      path: /var/run/cdi/k8s.gpu.example.com-gpu_0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11.yaml
      backup: /etc/kubernetes/dra-admin-backups/k8s.gpu.example.com-gpu_0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11.yaml.20260101T120000.000000
      reason: claim(s) 0b6f3c2e-3f7a-4d55-9b0e-2b1f7a9c8d11 gone from the API, no running container uses it
refused:
  description: Repairs that no longer hold on the node, with C(why); nothing was done for them.
  returned: always
  type: list
  elements: dict
  sample: [{kind: cdi_spec, path: /var/run/cdi/x.yaml, why: /var/run/cdi/x.yaml is used by running container(s) 4f1c2d3e4a5b6}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.files import NODE_BACKUP_DIR
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_state
from ansible_collections.dra.admin.plugins.module_utils.nodes.node_state_service import gather, repair

KINDS = ("cdi_spec", "socket")


def argument_spec():
    return dict(
        repairs=dict(type="list", elements="dict", required=True),
        backup_dir=dict(type="path", default=NODE_BACKUP_DIR),
        kubelet_root_dir=dict(type="path", default=node_state.KUBELET_ROOT_DIR),
        cdi_spec_dirs=dict(type="list", elements="path", default=list(node_state.CDI_SPEC_DIRS)),
        crictl=dict(type="str", default=node_state.CRICTL),
        runtime_endpoint=dict(type="str", default=node_state.CONTAINERD_SOCKET),
    )


def validate(repairs):
    for index, item in enumerate(repairs):
        if item.get("kind") not in KINDS or not item.get("path"):
            raise InputError("repairs[%d] needs kind (%s) and path: give the repairs dra_node_state_check_info listed "
                             "for this node, unchanged" % (index, " or ".join(KINDS)))
        if item["kind"] == "cdi_spec" and not item.get("claim_uids"):
            raise InputError("repairs[%d] (a CDI spec) needs claim_uids: the claims the check found gone" % index)


def after_line(moved, backup_dir):
    if moved["kind"] == "socket":
        return "%s removed\n" % moved["path"]
    return "%s -> %s\n" % (moved["path"], moved["backup"] or backup_dir)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = dict(module.params, node_name=None, containers=True)
    host_error = "moving a stale file into %s or removing a dead socket failed: {error}" % params["backup_dir"]
    with fails_on_error(module, host_error=host_error, changed=False):
        validate(params["repairs"])
        crictl = module.get_bin_path(params["crictl"]) if "/" not in params["crictl"] else params["crictl"]
        fresh = gather(params, lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}), crictl)
        moved, refused = repair(params["repairs"], fresh, params["backup_dir"], module.check_mode)
    diff = {"before": "".join("%s\n" % m["path"] for m in moved),
            "after": "".join(after_line(m, params["backup_dir"]) for m in moved)}
    module.exit_json(changed=bool(moved), moved=moved, refused=refused, diff=diff)


if __name__ == "__main__":
    main()
