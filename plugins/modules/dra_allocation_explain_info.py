#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_allocation_explain_info
short_description: Explain why a pod's ResourceClaims are pending - per node, request and device
version_added: 0.2.0
description:
  - For each pod waiting to be scheduled with claims to allocate (the pod named, the pods using the claim named,
    or every such pod of the namespace or of the cluster), and each pending claim no such pod uses, runs the
    scheduler's device allocation on every node and says where the claims fit and, where they do not, why.
  - The rules are those of kube-scheduler's structured allocator on the cluster's release - the pod's claims are
    allocated together on one node, requests in order (one subrequest of a C(firstAvailable) list after the
    other), devices with backtracking, so a fit is found whenever one exists. A device is usable for a request
    when its pool is complete (or, up to 1.34, incomplete pools are allocated from), it matches the DeviceClass's
    and the request's CEL selectors, it is offered to the node (C(nodeName), C(allNodes), C(nodeSelector), per
    device with C(perDeviceNodeSelection)), it is not allocated to another claim (admin access may share it), its
    taints (its own and the DeviceTaintRules' selecting it) with effect C(NoSchedule) or C(NoExecute) are
    tolerated by the request, and its pool's shared counters have room (partitionable devices); C(matchAttribute)
    constraints hold across the requests they name (C(distinctAttribute) ones differ); C(allocationMode=All) takes
    every matching device and fails on any pool being updated or invalid on the node; a claim over 32 devices
    fails. Pools are gathered per node as the cluster's release does it (generations, incomplete and invalid
    pools); before 1.36, where the scheduler's random pool order can change the answer, it is C(cannot_tell)
    unless every order gives the same.
  - A node is searched only when the pod may run there as the scheduler's node filters see it - the pod's
    C(nodeName), C(nodeSelector) and required node affinity, the node's taints against the pod's tolerations, a
    cordoned node - and when it admits the pod's claims already allocated - and when its resources hold the pod
    as kube-scheduler's NodeResourcesFit counts them (the node's allocatable less the requests of the pods bound
    to it; the pod's containers, sidecars, largest init step, overhead and pod-level requests; the pod count;
    extended resources a DeviceClass backs are DRA's).
  - What the scheduler also checks and this module does not model - required inter-pod (anti-)affinity, topology
    spread with C(DoNotSchedule), host ports, volumes the scheduler places, a bound pod's required anti-affinity
    that selects the pod - is listed in RV(explanations[].unchecked); where the devices fit, the verdict is then
    C(cannot_tell), never C(fits).
  - A claim not allocated yet that another pod waiting to be scheduled shares, where no node admits both pods,
    is named among the problems, and where the devices fit the verdict is C(cannot_tell), not C(fits). The
    scheduler allocates it for whichever pod comes first, and on devices only that node may use the other then
    cannot run (then C(does_not_fit)).
  - A claim already allocated whose devices have binding conditions (C(bindingConditions) of the allocation) not yet
    C(True) in the claim's C(status.devices) holds the pod in the scheduler's PreBind; the problems name each such
    device and its conditions, or the binding failure conditions that are C(True) (the scheduler gives the
    allocation up).
  - A claim from the pod's template that is not made yet is charged as kube-apiserver's quota admission charges it
    (one C(count/resourceclaims.resource.k8s.io), and per DeviceClass C(<class>.deviceclass.resource.k8s.io/devices)
    - a count as asked, C(All) as 32, a C(firstAvailable) list as its largest subrequest of the class) against the
    namespace's ResourceQuotas without scopes; one that would pass a quota's hard limit is refused, and the pod waits
    (C(does_not_fit), the problem naming the quota, the resource, what is used, asked and allowed).
  - Extended resources backed by DRA (C(DRAExtendedResource), GA in 1.37) - a container asking for a resource a
    DeviceClass names in C(spec.extendedResourceName), or C(deviceclass.resource.kubernetes.io/<class>) - are
    explained with the claim the scheduler would make for them (labelled C(<namespace>/<extended-resources>)) -
    one request per long-lived container and the largest extra of the other init containers, the class created
    last for a name several classes give. A node whose allocatable lists such a resource (a device plugin serves
    it there) is C(cannot_tell). Before 1.38 kube-scheduler forgets a name when any class naming it is deleted or
    renames it (until a class naming it is created or updated, or the scheduler restarts), which the classes left
    do not show, so a pod asking for a C(spec.extendedResourceName) there, or for the implicit name of a class
    another class wins its name from, is no certain C(fits) (C(cannot_tell), the reason among its problems).
  - CEL selectors are evaluated with the C(cel-python) library and Kubernetes' C(semver) and C(quantity)
    libraries, C(cel.bind) and the string extension functions (docs/decisions.md, "CEL for the allocation
    explainer"). An expression it does not model (optional syntax, list-valued attributes, other extension
    libraries) makes the device C(cannot_evaluate); a runtime error (a missing attribute) makes it
    C(selector_error), as it fails the scheduler's allocation on that node. Neither is ever counted as a fit - a
    node where the answer depends on them is C(cannot_tell).
  - Each device gets the first reason that rules it out, most lasting first - C(pool_incomplete),
    C(feature_off), C(class_selector), C(request_selector), C(selector_error), C(cannot_evaluate), C(allocated),
    C(tainted) - or C(available).
  - The DRA features in force come from kube-apiserver's C(/metrics) (C(kubernetes_feature_enabled)), or the
    release's defaults when it may not be read (RV(features_source)).
  - Reads a fixed number of objects whatever the cluster's size - C(/version), discovery, C(/metrics) and one
    paginated LIST each of DeviceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules (where served), Nodes,
    the pods not bound to a node, the claim templates and the ResourceQuotas (in O(namespace), or all).
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  namespace:
    description:
      - Only the pods and claims of this namespace; required with O(name) or O(pod). Without it, every namespace.
    type: str
  name:
    description:
      - One ResourceClaim - the pods waiting with it, or the claim alone when no such pod uses it.
    type: str
  pod:
    description:
      - One pod waiting to be scheduled.
    type: str
  detail:
    description:
      - C(summary) gives per request the counts of devices per reason; C(nodes) adds each node's verdict and
        reason (or the devices chosen where it fits); C(devices) also lists each device with its first reason.
    type: str
    choices: [summary, nodes, devices]
    default: summary
requirements:
  - kubernetes >= 24.2.0
  - cel-python >= 0.5.0, < 0.6
seealso:
  - module: dra.admin.dra_claims_info
  - module: dra.admin.dra_capacity_info
notes:
  - The answer is what the allocator would do now, with the claims allocated now; a pod that fits but stays
    Pending waits on something else (its other resources, a scheduling gate, a claim not made yet - see
    RV(explanations[].problems)).
"""

EXAMPLES = r"""
- name: Why is this pod Pending?
  dra.admin.dra_allocation_explain_info:
    namespace: training
    pod: trainer-0
  register: why

- name: Show the answer
  ansible.builtin.debug:
    msg: "{{ why.explanations[0].message }}"

- name: Every pending claim of a namespace, with each node's verdict
  dra.admin.dra_allocation_explain_info:
    namespace: training
    detail: nodes
  register: pending

- name: Devices per reason for one claim
  dra.admin.dra_allocation_explain_info:
    namespace: training
    name: trainer-0-gpu
    detail: devices
"""

RETURN = r"""
explanations:
  description: One per pod (C(pod)) or unused pending claim (C(claim)).
  returned: always
  type: list
  elements: dict
  contains:
    pod:
      description: C(namespace/name) of the pod (absent for a claim explained alone).
      type: str
    claim:
      description: C(namespace/name) of the claim explained alone (absent for a pod).
      type: str
    claims:
      description:
        - The claims to allocate - C(namespace/<pod claim>) for one from a template not made yet,
          C(namespace/<extended-resources>) for the claim of the pod's extended resources backed by DRA.
      type: list
      elements: str
    verdict:
      description:
        - C(fits) (on some node), C(does_not_fit) (on no node), C(cannot_tell).
        - Judged on the nodes also when every claim is allocated already (the pod's node selection and where its
          claims are allocated still decide), and C(does_not_fit) while a claim the pod names does not exist or is
          being deleted (the scheduler waits for it; said in RV(explanations[].problems)).
      type: str
    fits_on:
      description: The nodes where every claim to allocate fits (and the checked node filters and resources hold).
      type: list
      elements: str
    unchecked:
      description: What kube-scheduler checks of the pod that is not modelled here; not empty, no verdict is C(fits).
      type: list
      elements: str
    scheduler:
      description:
        - kube-scheduler's own last word on a pod it has tried - C(reason), C(message) and C(since) of its
          C(PodScheduled) condition while C(False) - or null. Where it found no node (C(Unschedulable)) for a pod
          this explanation says fits, RV(explanations[].problems) says they disagree.
      type: dict
    cannot_tell_on:
      description:
        - The nodes where the answer depends on what cannot be evaluated here (a selector, consumable capacity), or,
          before Kubernetes 1.36, on the order in which the scheduler goes through the node's pools (random there).
      type: list
      elements: str
    nodes_considered:
      description: Nodes in the cluster.
      type: int
    nodes_searched:
      description: Nodes the pod may run on, searched for devices.
      type: int
    nodes_excluded:
      description: Per reason (the pod's node selection, taints, cordon, its allocated claims), how many nodes.
      type: dict
    problems:
      description: What else keeps the pod waiting, or may keep it or another pod waiting (claims not made yet or
        being deleted, scheduling gates, a claim shared with a pod no node admits together with this one).
      type: list
      elements: str
    warnings:
      description: What would happen after the allocation - a chosen device with a C(NoExecute) taint tolerated only
        by a toleration without that effect (the device taint eviction evicts the pod).
      type: list
      elements: str
    message:
      description: One paragraph - the verdict, where, and the request that explains it.
      type: str
    requests:
      description:
        - Per request (C(request/subrequest) for a C(firstAvailable) entry) - C(claim), C(device_class),
          C(allocation_mode), C(count), C(admin_access), C(considered) (devices offered to the searched nodes),
          C(excluded) (per reason, how many), C(available), C(nodes_with_enough) (nodes with enough available
          devices for this request alone), and with O(detail=devices) C(devices) (C(device), C(reason), C(detail)).
      type: list
      elements: dict
    nodes:
      description:
        - With O(detail=nodes) or O(detail=devices) - per node C(name), C(verdict) (also C(error) - the allocator
          stops with an error there, which fails the pod's whole scheduling attempt), C(node_reason) (the pod cannot
          run there), C(reason), C(may_error), or C(devices) (the devices chosen, each C(<claim> <request> - <driver/pool/device>))
          and C(warnings).
      type: list
      elements: dict
  sample:
    - pod: training/trainer-0
      claims: [training/trainer-0-gpu]
      verdict: does_not_fit
      fits_on: []
      cannot_tell_on: []
      nodes_considered: 3
      nodes_searched: 2
      nodes_excluded: {"node taint node-role.kubernetes.io/control-plane=:NoSchedule not tolerated": 1}
      problems: []
      unchecked: []
      scheduler: null
      message: >-
        does not fit: 1 of 3 nodes ruled out for the pod (1: node taint
        node-role.kubernetes.io/control-plane=:NoSchedule not tolerated); request gpu of training/trainer-0-gpu needs
        2 device(s) of class gpu.example.com: 16 considered (14 are allocated to other claims), 2 available
      requests:
        - {claim: training/trainer-0-gpu, request: gpu, device_class: gpu.example.com, allocation_mode: ExactCount,
           count: 2, admin_access: false, considered: 16, excluded: {allocated: 14}, available: 2,
           nodes_with_enough: 0}
totals:
  description: C(subjects) explained and how many per verdict.
  returned: always
  type: dict
  sample: {subjects: 3, fits: 1, does_not_fit: 2, cannot_tell: 0}
features:
  description: The DRA feature gates in force for the allocation rules.
  returned: always
  type: list
  elements: str
features_source:
  description: Where the gates were read - C(kube-apiserver /metrics), or the release's defaults.
  returned: always
  type: str
release:
  description: The cluster's minor version.
  returned: always
  type: int
resource_api_version:
  description: The C(resource.k8s.io) version read.
  returned: always
  type: str
device_taint_rules:
  description: C(read), C(not served) or C(forbidden) (then no rule's taint is applied).
  returned: always
  type: str
resource_quotas:
  description: C(read), C(forbidden) (then no quota is counted) or C(not read) (a claim alone is explained).
  returned: always
  type: str
"""

from ansible_collections.dra.admin.plugins.module_utils.allocation.explain import DETAIL_SUMMARY, DETAILS
from ansible_collections.dra.admin.plugins.module_utils.allocation.explain_service import explain_all
from ansible_collections.dra.admin.plugins.module_utils.access.api import AnsibleK8SModule, DraApi, auth_argument_spec
from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.common.names import dns_label_error, subdomain_error


def argument_spec():
    spec = auth_argument_spec()
    spec.update(namespace=dict(type="str"), name=dict(type="str"), pod=dict(type="str"),
                detail=dict(type="str", choices=list(DETAILS), default=DETAIL_SUMMARY))
    return spec


REQUIRED_BY = {"name": "namespace", "pod": "namespace"}  # the namespace of the claim or pod; Ansible checks it


def input_errors(params):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = []
    if params["namespace"]:
        errors.append(dns_label_error("namespace", params["namespace"]))
    for field in ("name", "pod"):
        if params[field]:
            errors.append(subdomain_error(field, params[field], example="trainer-0"))
    return [e for e in errors if e]


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True, required_by=REQUIRED_BY)
    with fails_on_error(module) as failure:
        raise_input_errors(input_errors(module.params))
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result = explain_all(api, namespace=module.params["namespace"], claim=module.params["name"],
                             pod=module.params["pod"], detail=module.params["detail"])
    module.exit_json(changed=False, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
