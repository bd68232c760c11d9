#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_rbac_plan_info
short_description: Render the DRA RBAC personas for the resources a cluster serves
version_added: 0.1.0
description:
  - Reads which C(resource.k8s.io) resources the API server serves (every served version) and the
    Kubernetes version, and renders the ClusterRoles, ClusterRoleBindings and RoleBindings of three personas.
  - B(cluster admin) owns DeviceClasses, ResourceSlices and, where served, DeviceTaintRules and
    ResourcePoolStatusRequests, and reads ResourceClaims and ResourceClaimTemplates in every namespace.
  - B(driver) gets what a node-local kubelet plugin needs; ResourceSlices, ResourceClaims read and status,
    Nodes get; on releases with C(DRAResourceClaimGranularStatusAuthorization) (1.36+) also
    C(associated-node:update) and C(associated-node:patch) on C(resourceclaims/driver) for its own driver name.
  - B(operator) gets ResourceClaims and ResourceClaimTemplates (not their status) in the namespaces given,
    through RoleBindings; nothing cluster-scoped.
  - With O(jobs.namespace), also the identities of the collection's jobs (for the AWX job templates of
    C(playbooks/awx_configure.yml)), each a ServiceAccount in that namespace with a long-lived token Secret and a
    ClusterRole C(<prefix>job-<identity>) bound to it. B(reader) reads what the reports read (no Secret, no
    ConfigMap, no C(nodes/proxy), no write); B(canary) reads as the reader and writes its probes' pods, claim
    templates and claims in O(jobs.canary_namespace) only (a RoleBinding); B(devices) also writes DeviceTaintRules
    and evicts pods; B(maintenance) also patches nodes and evicts pods.
  - Also lists objects an earlier run made (label C(app.kubernetes.io/managed-by=dra.admin) and a persona label)
    that the current personas no longer render, so the caller can delete them.
  - Read-only; role P(dra.admin.rbac#role) applies the result.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  admins:
    description: Subjects of the cluster-admin persona.
    type: dict
    default: {}
    suboptions:
      users: {description: User names., type: list, elements: str, default: []}
      groups: {description: Group names., type: list, elements: str, default: []}
      service_accounts: {description: Service accounts as C(namespace/name)., type: list, elements: str, default: []}
  drivers:
    description: One entry per DRA driver; each gets its own ClusterRole limited to its driver name.
    type: list
    elements: dict
    default: []
    suboptions:
      driver: {description: The driver name (for example C(gpu.example.com))., type: str, required: true}
      users: {description: User names., type: list, elements: str, default: []}
      groups: {description: Group names., type: list, elements: str, default: []}
      service_accounts: {description: Service accounts as C(namespace/name)., type: list, elements: str, default: []}
  operators:
    description: Operator teams; each entry's subjects get the operator persona in its namespaces.
    type: list
    elements: dict
    default: []
    suboptions:
      namespaces: {description: Namespaces the subjects may manage claims in., type: list, elements: str, required: true}
      users: {description: User names., type: list, elements: str, default: []}
      groups: {description: Group names., type: list, elements: str, default: []}
      service_accounts: {description: Service accounts as C(namespace/name)., type: list, elements: str, default: []}
  jobs:
    description: The identities of the collection's jobs; none without O(jobs.namespace).
    type: dict
    default: {}
    suboptions:
      namespace:
        description: Namespace of the jobs' ServiceAccounts and token Secrets (created); empty = no job identities.
        type: str
        default: ""
      canary_namespace:
        description: Namespace the canary's probes run in (role P(dra.admin.canary#role)'s C(dra_canary_namespace));
          required with O(jobs.namespace). It must exist before the objects are applied.
        type: str
        default: ""
  name_prefix:
    description: Prefix of every ClusterRole and binding name (C(<prefix>cluster-admin), C(<prefix>driver:<driver>),
      C(<prefix>operator)).
    type: str
    default: dra-
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Render the personas
  dra.admin.dra_rbac_plan_info:
    admins: {groups: [platform-admins]}
    drivers:
      - driver: gpu.example.com
        service_accounts: [dra-system/gpu-example-com-kubeletplugin]
    operators:
      - namespaces: [team-a, team-b]
        groups: [ml-operators]
    jobs:
      namespace: dra-admin-jobs
      canary_namespace: dra-canary
  register: plan

- name: Apply them
  kubernetes.core.k8s:
    definition: "{{ item }}"
  loop: "{{ plan.objects }}"
  loop_control:
    label: "{{ item.kind }} {{ item.metadata.name }}"
"""

RETURN = r"""
kubernetes_version:
  description: The API server's version.
  returned: always
  type: str
  sample: v1.36.3
resource_api_versions:
  description: Served C(resource.k8s.io) versions.
  returned: always
  type: list
  elements: str
served_resources:
  description: Resource names (with subresources) served in C(resource.k8s.io), across served versions.
  returned: always
  type: list
  elements: str
  sample: [deviceclasses, resourceclaims, resourceclaims/status, resourceclaimtemplates, resourceslices]
granular_status_authorization:
  description: Whether the release has C(DRAResourceClaimGranularStatusAuthorization), so drivers get
    C(resourceclaims/driver) rules.
  returned: always
  type: bool
objects:
  description: ClusterRoles, ClusterRoleBindings and RoleBindings to apply; with O(jobs.namespace) first the
    jobs' Namespace, ServiceAccounts and token Secrets (without data; the token controller fills them).
  returned: always
  type: list
  elements: dict
stale:
  description: Objects made earlier by this collection that the personas no longer render.
  returned: always
  type: list
  elements: dict
  sample: [{kind: RoleBinding, namespace: old-team, name: dra-operator}]
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.rbac.personas_service import plan

SUBJECTS = dict(users=dict(type="list", elements="str", default=[]),
                groups=dict(type="list", elements="str", default=[]),
                service_accounts=dict(type="list", elements="str", default=[]))


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        admins=dict(type="dict", default={}, options=dict(SUBJECTS)),
        drivers=dict(type="list", elements="dict", default=[],
                     options=dict(SUBJECTS, driver=dict(type="str", required=True))),
        operators=dict(type="list", elements="dict", default=[],
                       options=dict(SUBJECTS, namespaces=dict(type="list", elements="str", required=True))),
        name_prefix=dict(type="str", default="dra-"),
        jobs=dict(type="dict", default={}, options=dict(namespace=dict(type="str", default=""),
                                                        canary_namespace=dict(type="str", default=""))),
    )
    return spec


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True)
    with fails_on_error(module) as failure:
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = plan(api, module.params)
    if not result["served_resources"]:
        module.warn("the cluster serves no resource.k8s.io resources: the personas hold only Nodes get; enable "
                    "DRA first (role dra.admin.feature_gates)")
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
