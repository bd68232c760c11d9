#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_upgrade_plan_info
short_description: The plan of a rolling Kubernetes upgrade (or node maintenance) done the DRA way
version_added: 0.1.0
description:
  - Reads the cluster and returns what C(playbooks/upgrade.yml) will do, before it changes anything.
  - With O(target_version), an upgrade with kubeadm to that release (the cluster's minor or the next one; kubeadm
    never skips a minor nor goes down). The control-plane nodes come first, then the workers in batches of
    O(batch_size). A node whose kubelet already runs the target and that carries no mark of a drain is C(done) and
    left alone, so a run stopped part-way continues from the node where it stopped.
  - Without O(target_version), node maintenance - every chosen node taken through the drain, the user's own node
    work, the verification and back into service, with no Kubernetes change.
  - The upgrade check (M(dra.admin.dra_upgrade_check_info)) runs for the target; each C(breaking) finding refuses
    the run (RV(refused)), except a control-plane feature gate the target removes or locks, which the upgrade
    settles itself - it is left out of the kubeadm-config flags (RV(carried_flags)) before C(kubeadm upgrade apply)
    renders the new manifests, so a removed gate is never carried over.
  - With O(preview=true), per worker to take out - the drain's preview, whether each claim workload on it would
    find devices on the other nodes (as M(dra.admin.dra_node_drain) with C(preview=true)).
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  target_version:
    description:
      - The Kubernetes release to upgrade to, in full (V(v1.37.2)).
      - A pre-release (V(v1.38.0-beta.0), V(v1.38.0-rc.1)) only with O(allow_pre_release=true).
      - Empty for node maintenance without an upgrade.
    type: str
    default: ""
  allow_pre_release:
    description:
      - Accept an alpha, beta or release candidate as O(target_version), for a test cluster on a release's day zero;
        RV(kubeadm_apply_args) then carries the flag C(kubeadm upgrade apply) needs for it
        (C(--allow-experimental-upgrades), or C(--allow-release-candidate-upgrades) for a release candidate).
      - The catalog's facts about an unreleased minor were checked against its pre-release (the upgrade check's
        C(planned-release) finding names it).
    type: bool
    default: false
  nodes:
    description:
      - The nodes to take through, in this order (control-plane nodes always go first). Default every node, by
        name.
    type: list
    elements: str
    default: []
  batch_size:
    description: Workers taken out at the same time.
    type: int
    default: 1
  exclusion_label:
    description: The drain's driver exclusion label (as M(dra.admin.dra_node_drain)'s O(dra.admin.dra_node_drain#module:exclusion_label)).
    type: str
    default: dra.admin/driver-excluded
  preview:
    description: Add the drain's preview to each worker to take out (reads the cluster's claims once per worker).
    type: bool
    default: true
  kubelet_gates:
    description: Let the upgrade check read each kubelet's feature gates (as M(dra.admin.dra_upgrade_check_info)).
    type: bool
    default: true
  carry_flags:
    description:
      - Whether the run carries kubeadm-config's control-plane flags to the target, leaving out the gates and
        C(--runtime-config) entries it refuses (C(playbooks/upgrade.yml) does, in RV(carried_flags)).
      - V(false) where another tool renders kubeadm's configuration from its own variables (kubespray) - a
        control-plane gate the target refuses is then refused like any other breaking finding, to be fixed in that
        tool's variables, and RV(carried_flags) stays empty.
    type: bool
    default: true
notes:
  - Read only; the kubeadm commands, the kubelet's replacement and the verification are the C(node_upgrade) role's.
seealso:
  - module: dra.admin.dra_upgrade_check_info
  - module: dra.admin.dra_node_drain
  - module: dra.admin.dra_node_ready_info
"""

EXAMPLES = r"""
- name: What an upgrade to v1.37.2 would do
  dra.admin.dra_upgrade_plan_info:
    target_version: v1.37.2
  register: plan

- name: Node maintenance on two GPU nodes, one at a time
  dra.admin.dra_upgrade_plan_info:
    nodes: [gpu-node-1, gpu-node-2]
"""

RETURN = r"""
mode:
  description: C(upgrade) or C(maintenance).
  returned: always
  type: str
kubernetes_version:
  description: The kube-apiserver's version.
  returned: always
  type: str
target_version:
  description: The release the run ends at (the cluster's own for maintenance).
  returned: always
  type: str
kubeadm_apply_args:
  description: What C(kubeadm upgrade apply) needs besides the version for the target (the flag of a pre-release's
    stage); empty for a release and for maintenance.
  returned: always
  type: list
  elements: str
  sample: ["--allow-experimental-upgrades"]
refused:
  description: Why the run must not start (each a blocking finding with its fix); empty when it may.
  returned: always
  type: list
  elements: str
findings:
  description: The upgrade check's findings for the target (empty for maintenance).
  returned: always
  type: list
  elements: dict
carried_flags:
  description: >-
    The control-plane flags of kubeadm-config carried to the target - C(extra_args) (for
    M(dra.admin.kubeadm_config)'s O(dra.admin.kubeadm_config#module:extra_args); a null flag is removed) and
    C(dropped) (C(component), C(flag), C(entry), C(why)).
  returned: always
  type: dict
  sample: {extra_args: {kube-apiserver: {feature-gates: "DRADeviceTaints=true"}}, dropped: []}
control_plane:
  description: >-
    The control-plane nodes in order, each with C(node), C(kubelet_version), C(drain_marks) (what a drain left on
    it) and C(action) (C(upgrade), C(finish) - at the target but still drained, C(maintain) or C(done)).
  returned: always
  type: list
  elements: dict
workers:
  description: The workers in order, as RV(control_plane), with C(drain_preview) when O(preview=true).
  returned: always
  type: list
  elements: dict
batches:
  description: The workers' names in batches of O(batch_size).
  returned: always
  type: list
  elements: list
to_do:
  description: The nodes the run takes through, in order.
  returned: always
  type: list
  elements: str
summary:
  description: One line saying what the run will do, or why it is refused.
  returned: always
  type: str
  sample: "upgrade to v1.37.2: 3 node(s) to take through (cp, worker-1, worker-2)"
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import AnsibleK8SModule, DraApi, auth_argument_spec
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from ansible_collections.dra.admin.plugins.module_utils.upgrade.rollout_service import plan


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        target_version=dict(type="str", default=""),
        allow_pre_release=dict(type="bool", default=False),
        nodes=dict(type="list", elements="str", default=[]),
        batch_size=dict(type="int", default=1),
        exclusion_label=dict(type="str", default=DEFAULT_EXCLUSION_LABEL),
        preview=dict(type="bool", default=True),
        kubelet_gates=dict(type="bool", default=True),
        carry_flags=dict(type="bool", default=True),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = plan(api, module.params)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
