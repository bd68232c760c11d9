#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_guardrails_info
short_description: Render the DRA guardrails (ValidatingAdmissionPolicies) for a cluster, and wait until they are in force
version_added: 0.1.0
description:
  - Renders the ValidatingAdmissionPolicies and ValidatingAdmissionPolicyBindings of the DRA guardrails for the
    Kubernetes version and the C(resource.k8s.io) versions the API server serves; role P(dra.admin.guardrails#role)
    applies them.
  - B(broad-device-taint) refuses a DeviceTaintRule whose C(spec.deviceSelector) names no driver (it can match
    every device of the cluster), and a NoExecute one that does not name both driver and pool, unless the rule
    carries the annotation C(dra.admin/allow-broad-taint) with a reason. Checked on create, and on update when the
    spec changes or the override is removed. Skipped, with the reason, where DeviceTaintRule is not served.
  - B(admin-access-label) refuses a Namespace created with the release's admin-access label, or an update that
    adds, changes or removes it, unless the user is in one of O(admin_groups). That label lets every claim of the
    namespace request C(adminAccess), so a tenant allowed to edit its own namespace (namespace-admin tools,
    self-service platforms) could otherwise give itself access to every device; other label edits are not
    affected.
  - B(device-count), on releases whose kube-scheduler crashes on device counts that overflow when summed
    (kubernetes#141307; fixed in 1.34.12, 1.35.9, 1.36.5, 1.37.1 and 1.38, never in 1.33 and before), refuses a
    ResourceClaim or ResourceClaimTemplate with a request or C(firstAvailable) subrequest asking for more than 32
    devices, more than one claim can ever hold; with every count within that limit no sum can overflow. Elsewhere
    it is not applicable, and the result says why.
  - B(admin-access) refuses a ResourceClaim or ResourceClaimTemplate with C(adminAccess) in any request outside
    namespaces labelled with the release's admin-access label (C(resource.k8s.io/admin-access) before 1.34,
    C(resource.kubernetes.io/admin-access) from 1.34). kube-apiserver refuses the same itself from 1.33, before
    admission policies run; C(notes) says so per release.
  - Each policy matches every served version of its resources. The objects carry the labels
    C(app.kubernetes.io/managed-by=dra.admin) and C(dra.admin/guardrail=<guardrail>); C(existing) lists every such
    object on the cluster and C(stale) those the current settings no longer render.
  - With I(wait), waits until each guardrail rendered is in force, which the API server reaches some time after the
    objects are created. The evidence is its policy type-checked without warnings and, for broad-device-taint with C(Deny), a
    server-side dry run (nothing stored) of a DeviceTaintRule with an empty selector refused by the policy.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.wait
options:
  broad_device_taint:
    description: Render the broad-device-taint guardrail.
    type: bool
    default: true
  admin_access:
    description: Render the admin-access guardrail.
    type: bool
    default: true
  admin_access_label:
    description: Render the admin-access-label guardrail.
    type: bool
    default: true
  device_count:
    description: Render the device-count guardrail (only on releases whose kube-scheduler needs it).
    type: bool
    default: true
  admin_groups:
    description:
      - The admin persona's groups (as the API server authenticates them, C(request.userInfo.groups)); only their
        members may add, change or remove the admin-access label on a namespace (guardrail B(admin-access-label)).
        List the groups the role P(dra.admin.rbac#role) gives the admin persona, and keep a group you belong to, or
        you can no longer label namespaces yourself.
    type: list
    elements: str
    default: [system:masters, kubeadm:cluster-admins]
  validation_actions:
    description:
      - The bindings' C(validationActions). C(Deny) refuses the object; C(Warn) lets it through with a warning to
        the client; C(Audit) records the failure in the audit log. C(Deny) and C(Warn) cannot be combined.
    type: list
    elements: str
    choices: [Deny, Warn, Audit]
    default: [Deny]
  wait:
    description: Wait until every guardrail rendered is in force (apply the objects first).
    type: bool
    default: false
  wait_timeout:
    default: 60
  wait_sleep:
    default: 1.0
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Render the guardrails
  dra.admin.dra_guardrails_info:
  register: guardrails

- name: Apply them
  kubernetes.core.k8s:
    definition: "{{ item }}"
  loop: "{{ guardrails.objects }}"
  loop_control:
    label: "{{ item.kind }} {{ item.metadata.name }}"

- name: Wait until they are in force
  dra.admin.dra_guardrails_info:
    wait: true

- name: Only report broad DeviceTaintRules, without refusing them
  dra.admin.dra_guardrails_info:
    admin_access: false
    validation_actions: [Warn, Audit]
"""

RETURN = r"""
kubernetes_version:
  description: The API server's version.
  returned: always
  type: str
  sample: v1.37.2
policy_api_version:
  description: The apiVersion of the policies and bindings on this release (from the version catalog).
  returned: always
  type: str
  sample: admissionregistration.k8s.io/v1
serving:
  description: The C(resource.k8s.io) versions serving each guarded resource.
  returned: always
  type: dict
  sample: {devicetaintrules: [v1], resourceclaims: [v1], resourceclaimtemplates: [v1]}
objects:
  description: The policies and bindings to apply (each policy, then its binding).
  returned: always
  type: list
  elements: dict
installed:
  description: The guardrails rendered.
  returned: always
  type: list
  elements: str
  sample: [broad-device-taint, admin-access, admin-access-label, device-count]
not_applicable:
  description:
    - Guardrails switched on that do not apply to this cluster, with the reason.
    - Named so, not C(skipped), which Ansible reserves (a result with it is shown as a skipped task).
  returned: always
  type: list
  elements: dict
  sample: [{guardrail: broad-device-taint, reason: "skipped: Kubernetes v1.33.13 does not serve DeviceTaintRule ..."}]
disabled:
  description: Guardrails switched off.
  returned: always
  type: list
  elements: str
notes:
  description: Per guardrail, what the API server of this release enforces itself.
  returned: always
  type: dict
existing:
  description: Every policy and binding of the guardrails on the cluster (C(kind), C(name), C(guardrail)).
  returned: always
  type: list
  elements: dict
stale:
  description: Those of C(existing) that the current settings do not render, bindings first.
  returned: always
  type: list
  elements: dict
  sample: [{kind: ValidatingAdmissionPolicyBinding, name: dra-admin-guardrail-admin-access, guardrail: admin-access}]
in_force:
  description: With I(wait), per guardrail the evidence that it is in force.
  returned: when wait is true
  type: dict
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_options, wait_parameter_errors
from ansible_collections.dra.admin.plugins.module_utils.rbac.guardrails import (
    DEFAULT_ACTIONS, DEFAULT_ADMIN_GROUPS, GUARDRAILS, VALIDATION_ACTIONS, option_name,
)
from ansible_collections.dra.admin.plugins.module_utils.rbac.guardrails_service import run


def argument_spec():
    spec = auth_argument_spec()
    spec.update(dict((option_name(g), dict(type="bool", default=True)) for g in GUARDRAILS))
    spec.update(
        validation_actions=dict(type="list", elements="str", choices=list(VALIDATION_ACTIONS),
                                default=list(DEFAULT_ACTIONS)),
        admin_groups=dict(type="list", elements="str", default=list(DEFAULT_ADMIN_GROUPS)),
        wait=dict(type="bool", default=False),
    )
    spec.update(wait_options(60, 1.0))
    return spec


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    with fails_on_error(module) as failure:
        raise_input_errors(wait_parameter_errors(module.params, spec=spec))
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = run(api, module.params)
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
