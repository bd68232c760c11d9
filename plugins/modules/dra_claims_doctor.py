#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_claims_doctor
short_description: Find ResourceClaims and pods that DRA left stuck, and fix them on request
version_added: 0.1.0
description:
  - Finds four problems, each returned in RV(findings) with what causes it and what to do.
  - C(orphaned) - a claim allocated or reserved with no live consumer. A stale reservation is released by
    kube-controller-manager's resourceclaim controller whenever it syncs the claim, so the fix annotates the claim
    (C(dra.admin/resync-requested)), which makes the controller sync it. A claim generated for a pod that is gone
    and that nothing reserves is deleted, as the garbage collector would. A claim made by hand that is allocated
    but unused is only reported.
  - C(stuck_deletion) - a claim being deleted, held by finalizers, whose driver is gone from the claim's node(s).
    The fix is to bring the driver back (the advice says where); only with O(force=true)
    the module removes the claim's finalizers, and never while a consumer pod still exists.
  - C(pod_stuck_terminating) - a pod being deleted that holds a claim whose driver is gone from the pod's node (the
    kubelet cannot unprepare its devices, so the pod stays). Reported with its node and driver; not fixed here.
  - C(missing_devices) - a claim holding devices that no current ResourceSlice publishes. Reported only.
  - A driver is gone from a node only when nothing of it still publishes for the node - no current ResourceSlice of
    it covers the node through its C(nodeName), C(allNodes) or a C(nodeSelector) admitting the node's labels (at
    slice level, or per device with C(perDeviceNodeSelection)). So drivers of network-attached or shared devices
    count as present on every node they serve. The nodes are read once (metadata only) for their labels.
  - Nothing is changed unless O(fix) names the kind; check mode returns the plan in RV(actions), and diff mode shows
    each claim's annotations and finalizers before and after. Every write is conditional on the claim being the one
    diagnosed (its uid, its resourceVersion or its finalizers).
  - A fixed number of paginated LIST requests to diagnose, however many nodes there are, plus one request per fix.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.wait
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  namespaces:
    description:
      - Only claims and pods in these namespaces. Default is every namespace.
    type: list
    elements: str
    default: []
  fix:
    description:
      - Kinds of findings to fix. V(orphaned) asks the resourceclaim controller to release stale reservations, or
        deletes an unreserved claim whose pod is gone. V(stuck_deletion) removes finalizers and needs O(force=true).
      - C(pod_stuck_terminating) and C(missing_devices) have no fix here (see each finding's C(advice)).
    type: list
    elements: str
    choices: [orphaned, stuck_deletion]
    default: []
  force:
    description:
      - Allow removing the finalizers of claims in C(stuck_deletion) (with O(fix=[stuck_deletion])). Each such
        finding carries a C(warning) saying what that risks.
    type: bool
    default: false
  wait:
    description:
      - After fixing, look again until the fixed findings are gone or O(wait_timeout) passes; those still found
        are returned in RV(unresolved).
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
- name: What is stuck? (read-only)
  dra.admin.dra_claims_doctor:
  register: doctor

- name: Show the findings
  ansible.builtin.debug:
    msg: "{{ doctor.findings | map(attribute='message') | list }}"

- name: Let the controller release orphaned claims, and wait for it
  dra.admin.dra_claims_doctor:
    fix: [orphaned]
    wait: true
    wait_timeout: 120

- name: The driver of a node is gone for good - drop the finalizers of its deleted claims
  dra.admin.dra_claims_doctor:
    fix: [stuck_deletion]
    force: true
  check_mode: true
"""

RETURN = r"""
resource_api_version:
  description: The C(resource.k8s.io) version used.
  returned: always
  type: str
  sample: v1
findings:
  description: Every problem found (after the fixes when O(fix) was given and the module was not in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: C(orphaned), C(stuck_deletion), C(pod_stuck_terminating) or C(missing_devices).
      type: str
      returned: always
    claim: {description: The claim (namespace/name)., type: str, returned: except for pod_stuck_terminating}
    pod: {description: The pod (namespace/name)., type: str, returned: for pod_stuck_terminating}
    node: {description: The pod's node., type: str, returned: for pod_stuck_terminating}
    nodes: {description: Nodes the claim or pod is on., type: list, elements: str, returned: always}
    drivers:
      description: Drivers concerned (for C(stuck_deletion) and C(pod_stuck_terminating) those that are gone).
      type: list
      elements: str
      returned: always
    claims: {description: The pod's claims whose driver is gone., type: list, elements: str, returned: for pod_stuck_terminating}
    overdue_seconds:
      description: Seconds the pod is past the end of its grace period (0 while within it).
      type: int
      returned: for pod_stuck_terminating
    devices: {description: Devices no slice publishes (driver/pool/device)., type: list, elements: str, returned: for missing_devices}
    finalizers: {description: The claim's finalizers., type: list, elements: str, returned: for stuck_deletion}
    message: {description: What is wrong., type: str, returned: always}
    advice: {description: What to do., type: str, returned: always}
    action:
      description: >-
        The fix this finding allows, carried out when its kind is in O(fix) - C(resync), C(delete),
        C(remove_finalizers), or null (report only, or refused).
      type: str
      returned: always
    refused:
      description: Why the fix is not allowed (a consumer pod exists, or O(force) is not set).
      type: str
      returned: when refused
    warning: {description: What removing the finalizers risks., type: str, returned: with force}
counts:
  description: Number of findings of each kind.
  returned: always
  type: dict
  sample: {orphaned: 1, stuck_deletion: 0, pod_stuck_terminating: 0, missing_devices: 0}
actions:
  description: >-
    The fixes carried out (or in check mode, planned) - C(kind), C(claim), C(action). Empty without O(fix).
  returned: always
  type: list
  elements: dict
unresolved:
  description: With O(wait=true), fixed findings still found when the wait ended.
  returned: always
  type: list
  elements: dict
warnings_issued:
  description: The risk warnings of forced finalizer removals (also emitted as Ansible warnings).
  returned: always
  type: list
  elements: str
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.doctor_run_service import treat
from ansible_collections.dra.admin.plugins.module_utils.claims.doctor import validate_fix
from ansible_collections.dra.admin.plugins.module_utils.common.names import dns_label_error
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_options, wait_parameter_errors


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        namespaces=dict(type="list", elements="str", default=[]),
        fix=dict(type="list", elements="str", default=[], choices=["orphaned", "stuck_deletion"]),
        force=dict(type="bool", default=False),
        wait=dict(type="bool", default=False),
    )
    spec.update(wait_options(60, 1.0))
    return spec


def input_errors(params, spec=None):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = validate_fix(params["fix"], params["force"]) + wait_parameter_errors(params, spec=spec)
    errors.extend(dns_label_error("namespaces entry", namespace) for namespace in params["namespaces"])
    return [e for e in errors if e]


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    with fails_on_error(module) as failure:
        raise_input_errors(input_errors(params, spec), "; nothing was changed")
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result, diffs, warnings = treat(api, params, module.check_mode)
    for text in warnings:
        module.warn(text)
    result["api_requests"] = api.requests
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
