#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_config
short_description: Merge settings and feature gates into the kubelet's configuration file
version_added: 0.1.0
description:
  - Merges keys into a KubeletConfiguration file (by default C(/var/lib/kubelet/config.yaml), where
    kubeadm writes it), for example C(featureGates), C(kubeAPIQPS) and C(kubeAPIBurst).
  - Mappings merge key by key (gates already in C(featureGates) stay unless named); a null value
    removes a key.
  - Only the top-level entries that change are rewritten; every other line keeps its exact text,
    and a new key goes where sorting puts it when the file's keys are sorted (as kubeadm writes them).
  - With O(kubernetes_version), the feature gates are checked against the collection's version catalog
    first; an unknown gate, a removed gate or a gate locked to the other value fails the task and
    nothing is written.
  - Without O(kubernetes_version), only gates every release of the catalog accepts are written; a value
    that is not a boolean, a gate no catalogued release knows, or a gate some release refuses fails the
    task and nothing is written.
  - C(kubeAPIQPS) and C(kubeAPIBurst) in O(merge) are checked first (QPS above 0, Burst a whole number
    not below QPS; a value not given is taken from the file, else the kubelet's default 50/100).
  - Writes atomically after a backup. The kubelet reads the file only at start; restarting it is the
    caller's business (the C(dra.admin.feature_gates) role does it).
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.platform
  - dra.admin.backup
  - dra.admin.backup.keep
options:
  path:
    description:
      - The kubelet configuration file.
    type: path
    default: /var/lib/kubelet/config.yaml
  merge:
    description:
      - Keys to merge into the file, for example C(kubeAPIQPS) and C(kubeAPIBurst).
      - Nested mappings merge recursively; a null value removes the key.
    type: dict
    default: {}
  feature_gates:
    description:
      - Feature gates to merge into C(featureGates), gate name to V(true) or V(false); null removes a gate.
      - Do not also give C(featureGates) in O(merge).
    type: dict
    default: {}
  kubernetes_version:
    description:
      - Version of the kubelet (for example V(v1.33.13)). When given, O(feature_gates) are validated
        against that release before anything is written; without it, they are accepted only when every
        release the collection's catalog knows accepts them.
    type: str
  enable_dra:
    description:
      - Also merge the gates DRA needs on O(kubernetes_version) according to the version catalog
        (C(DynamicResourceAllocation=true) on 1.30 to 1.33, nothing from 1.34). Requires O(kubernetes_version).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Reports what would change and the diff; writes nothing.
  diff_mode:
    support: full
    details:
      - The file's text before and after.
  platform:
    support: full
    platforms: posix
    details:
      - Runs on the node whose kubelet configuration file it changes.
requirements:
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Enable DRA in the kubelet of a 1.33 node
  dra.admin.kubelet_config:
    kubernetes_version: v1.33.13
    feature_gates:
      DynamicResourceAllocation: true
  register: kubelet

- name: Restart the kubelet when its configuration changed
  ansible.builtin.service:
    name: kubelet
    state: restarted
  when: kubelet is changed

- name: Kubelet client QPS and Burst
  dra.admin.kubelet_config:
    merge:
      kubeAPIQPS: 50
      kubeAPIBurst: 100
"""

RETURN = r"""
changed:
  description: Whether the file changed (or would change, in check mode).
  returned: always
  type: bool
path:
  description: The configuration file.
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
config:
  description: The configuration after the change.
  returned: always
  type: dict
  sample: {kind: KubeletConfiguration, featureGates: {DynamicResourceAllocation: true}}
dra_feature_gates:
  description: The gates O(enable_dra) added (empty without it).
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: true}
feature_gates:
  description: The C(featureGates) map after the change.
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: true}
backup_file:
  description: The backup written before the change.
  returned: changed and backup and not check mode
  type: str
  sample: /etc/kubernetes/dra-admin-backups/config.yaml.20250101T120000.000000
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.files import NODE_BACKUP_DIR, backup_options
from ansible_collections.dra.admin.plugins.module_utils.control_plane import kubelet_config
from ansible_collections.dra.admin.plugins.module_utils.control_plane import manifest as manifest_rules
from ansible_collections.dra.admin.plugins.module_utils.control_plane.kubelet_config_service import plan, write


def argument_spec():
    return dict(
        path=dict(type="path", default="/var/lib/kubelet/config.yaml"),
        merge=dict(type="dict", default={}),
        feature_gates=dict(type="dict", default={}),
        kubernetes_version=dict(type="str"),
        enable_dra=dict(type="bool", default=False),
        **backup_options(NODE_BACKUP_DIR)
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    path = module.params["path"]
    with fails_on_error(module, host_error="writing %s failed: {error}" % path) as failure:
        if not manifest_rules.HAS_YAML:
            raise DraAdminError(missing_required_lib("PyYAML"))
        failure.keep(path=path, changed=False)
        planned = plan(module.params)
        result = kubelet_config.result(planned, path, module._diff)
        failure.keep(result)
        if result["changed"] and not module.check_mode:
            write(module, module.params, planned[1], result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
