#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_version_info
short_description: What DRA needs and offers on a Kubernetes release, from the collection's version catalog
version_added: 0.1.0
description:
  - Answers from the collection's catalog, without contacting any cluster, for one Kubernetes release from 1.30
    to 1.37 which C(resource.k8s.io) API versions exist, which are served by default, and which feature gates and
    C(--runtime-config) entries DRA needs, plus requested extra gates validated against the release.
  - Useful to render configuration for tools the collection does not drive, such as a kind cluster config or a
    cluster API template.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - dra.admin.attributes
  - dra.admin.attributes.info_module
options:
  kubernetes_version:
    description: The release, for example V(v1.33.4) or V(1.36).
    type: str
    required: true
  extra_gates:
    description:
      - DRA feature gates to enable or disable on top of what DRA needs.
      - Validated for the release together with what DRA needs, as role dra.admin.feature_gates writes them
        (on 1.33 a gate that needs C(DynamicResourceAllocation) is fine, because DRA is switched on beside it).
    type: dict
    default: {}
notes:
  - Fails, naming the supported releases, for a version outside 1.30 to 1.37, and naming each offending gate
    for an unknown, removed or locked gate, for a gate whose dependencies would be off, and (from 1.35) for
    switching off a gate that a gate on by default depends on. The components refuse to start in each case,
    except for a dependency that is off before 1.35, where the requested gate would do nothing.
"""

EXAMPLES = r"""
- name: Gates and runtime-config for a 1.33 kind cluster
  dra.admin.dra_version_info:
    kubernetes_version: v1.33.4
  register: dra_needs

- name: Show them
  ansible.builtin.debug:
    msg: "{{ dra_needs.feature_gates }} {{ dra_needs.runtime_config }}"

- name: Check newer gates before asking the feature_gates role for them
  dra.admin.dra_version_info:
    kubernetes_version: "1.35"
    extra_gates:
      DRADeviceTaints: true
"""

RETURN = r"""
minor:
  description: The release's minor number.
  returned: always
  type: int
  sample: 33
resource_api_versions:
  description: The C(resource.k8s.io) versions the release has, newest first.
  returned: always
  type: list
  elements: str
  sample: [v1beta2, v1beta1, v1alpha3]
served_by_default:
  description: The versions served without C(--runtime-config).
  returned: always
  type: list
  elements: str
  sample: []
feature_gates:
  description: Gates to set on kube-apiserver, kube-controller-manager, kube-scheduler and kubelet.
  returned: always
  type: dict
  sample: {DynamicResourceAllocation: true}
runtime_config:
  description: C(--runtime-config) entries for kube-apiserver.
  returned: always
  type: dict
  sample: {resource.k8s.io/v1beta1: "true", resource.k8s.io/v1beta2: "true"}
provisional:
  description: Whether the release's catalog entry comes from unreleased upstream code.
  returned: always
  type: bool
device_taint_rules:
  description:
    - How the release serves C(DeviceTaintRule) (device maintenance, M(dra.admin.dra_device_taint)).
    - C(api_version) (null before 1.33), C(gates) to set to true for it (beside what DRA needs), C(runtime_config)
      entries its API version needs, C(default_on), C(usable) (effect C(None) and a status, from 1.35, which
      M(dra.admin.dra_device_taint) needs), C(selector_fields), C(first) (the first release that has it).
    - Role C(dra.admin.feature_gates) adds these C(gates) with C(dra_feature_gates_device_taints=true).
  returned: always
  type: dict
  sample: {api_version: v1beta2, gates: {DRADeviceTaintRules: true}, runtime_config: {resource.k8s.io/v1beta2: "true"},
           default_on: false, usable: true, selector_fields: [driver, pool, device], first: "1.33"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    default_served_api_versions, device_taint_rule_support, dra_settings, require_supported, resource_api_versions,
)


def argument_spec():
    return dict(
        kubernetes_version=dict(type="str", required=True),
        extra_gates=dict(type="dict", default={}),
    )


def version_info(version, extra_gates):
    minor = require_supported(version)
    settings = dra_settings(version, extra_gates)
    return {
        "minor": minor,
        "resource_api_versions": list(resource_api_versions(version)),
        "served_by_default": list(default_served_api_versions(version)),
        "feature_gates": settings["gates"],
        "runtime_config": settings["runtime_config"],
        "provisional": settings["provisional"],
        "device_taint_rules": device_taint_rule_support(version),
        "errors": settings["errors"],
    }


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module):
        info = version_info(module.params["kubernetes_version"], module.params["extra_gates"])
        errors = info.pop("errors")
        if errors:
            raise DraAdminError("; ".join(errors), info)
    module.exit_json(changed=False, **info)


if __name__ == "__main__":
    main()
