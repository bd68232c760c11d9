#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_claims_info
short_description: Report which ResourceClaims hold which devices on which nodes
version_added: 0.1.0
description:
  - Lists ResourceClaims with their state (C(pending), C(allocated), C(reserved), C(deallocating)), the
    node(s) their devices are on, the devices, the consumers from C(status.reservedFor) and whether each
    still exists, and whether the claim is orphaned (allocated or reserved with no live consumer).
  - A consumer is a pod, or an object that is not a pod, such as a workload's PodGroup
    (C(podgroups.scheduling.k8s.io), with the DRAWorkloadResourceClaims feature gate), for which the claim stays
    reserved while the group exists. Whether such a consumer exists is read from its API when the cluster serves it.
  - The claim the scheduler makes for a pod's extended resources backed by DRA (a DeviceClass with
    C(extendedResourceName); the pod's spec does not name it, its C(status.extendedResourceClaimStatus) does) is
    reported like any other, with the pod as its consumer, and marked RV(claims[].extended_resource_claim).
  - A claim is on the nodes of the pods among its consumers (C(status.reservedFor), each pod placed by its
    C(spec.nodeName)); a claim shared by pods on several nodes is on each of them. Without a live scheduled
    consumer it is on the nodes its allocation is local to (C(nodeSelector) C(matchFields) on C(metadata.name), or
    a label selector evaluated against Node labels). An allocation without a node selector (network-attached
    devices, C(node_scope=cluster-wide)) is on the nodes of its pods, and on no node without them.
  - Each allocated device is cross-checked with the ResourceSlices of its pool.
  - Uses the newest C(resource.k8s.io) version the cluster serves (v1, v1beta2, v1beta1) and a fixed number
    of paginated LIST requests, however many nodes there are.
  - With O(fail_if_any_on_node=true) it is a gate for drains, the same check M(dra.admin.dra_node_drain) makes
    before it removes the driver; it fails listing every claim still allocated or reserved on O(node) and its
    consumers. Claims used on O(node) only by DaemonSet pods do not fail it, because a drain leaves those pods in
    place; they are listed in RV(daemonset_claims). Nor do claims reserved only for consumers that are not pods
    once no pod on O(node) uses them (devices are prepared on a node only for its pods); they are listed in
    RV(non_pod_claims).
  - Read-only; the same answer in check mode.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.info_module
  - dra.admin.attributes.actiongroup_k8s
options:
  node:
    description:
      - Only claims on this node (used by a pod on it, or allocated there without a consumer elsewhere). The node
        must exist.
    type: str
  namespaces:
    description:
      - Only claims in these namespaces. Default is every namespace.
    type: list
    elements: str
    default: []
  driver:
    description:
      - Only claims with at least one device of this driver (for example V(gpu.example.com)).
    type: str
  label_selector:
    description:
      - Label selector on the claims (for example V(app=training)).
    type: str
  fail_if_any_on_node:
    description:
      - Fail when any selected claim is still allocated or reserved on O(node). Requires O(node).
    type: bool
    default: false
  include_claims:
    description:
      - Return the per-claim list. Set V(false) on very large clusters to return only the summaries.
    type: bool
    default: true
  claim_keys:
    description:
      - Return only these keys of each claim in RV(claims), and always its C(namespace) and C(name). Default is
        every key.
      - On a large cluster the per-claim list is most of the module's time and memory, and both grow with the
        number of lists and mappings in each claim. Asking for the keys a task reads, for example V(state),
        V(nodes) and V(orphaned), returns every claim for little more than the summaries cost.
      - The summaries, totals and the node gate are computed from every key whatever is asked for.
      - Cannot be used with O(include_claims=false), which returns no claim.
    type: list
    elements: str
    choices: [namespace, name, uid, state, node_scope, nodes, allocation_nodes, devices, drivers, consumers,
              missing_consumers, non_pod_consumers, extended_resource_claim, orphaned, deletion_requested, problems]
    default: []
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Every claim in the cluster, with node and consumers
  dra.admin.dra_claims_info:
  register: claims

- name: Orphaned claims (allocated or reserved for consumers that are gone)
  ansible.builtin.debug:
    msg: "{{ claims.claims | selectattr('orphaned') | map(attribute='name') | list }}"

- name: Gate before removing the DRA driver from a node
  dra.admin.dra_claims_info:
    node: gpu-node-7
    fail_if_any_on_node: true
    include_claims: false

- name: Orphaned claims of a large cluster, returning only the keys the next task reads
  dra.admin.dra_claims_info:
    claim_keys: [state, nodes, orphaned]
  register: claims

- name: Claims of one driver in two namespaces
  dra.admin.dra_claims_info:
    driver: gpu.example.com
    namespaces: [team-a, team-b]
"""

RETURN = r"""
resource_api_version:
  description: The C(resource.k8s.io) version used.
  returned: always
  type: str
  sample: v1
claims:
  description: >-
    The selected claims (empty when O(include_claims=false)). Each has the keys below, only its C(namespace),
    C(name) and those of O(claim_keys) when that is set.
  returned: always
  type: list
  elements: dict
  contains:
    namespace: {description: Namespace., type: str, returned: always}
    name: {description: Name., type: str, returned: always}
    uid: {description: UID., type: str, returned: always}
    state:
      description: C(pending), C(allocated), C(reserved) or C(deallocating) (deleted but still allocated).
      type: str
      returned: always
    node_scope:
      description: >-
        Where the allocation can be used - C(node) (pinned to named nodes), C(selector) (label selector, matched
        against Node labels), C(cluster-wide) (no node selector: usable everywhere) or C(unallocated).
      type: str
      returned: always
    nodes:
      description: >-
        Nodes the claim is on - those of its consumer pods, or without a live scheduled consumer those of
        RV(claims[].allocation_nodes).
      type: list
      elements: str
      returned: always
    allocation_nodes:
      description: Nodes the allocation is local to (empty for C(cluster-wide) and C(unallocated)).
      type: list
      elements: str
      returned: always
    devices:
      description: Allocated devices (C(request), C(driver), C(pool), C(device), C(admin_access)).
      type: list
      elements: dict
      returned: always
    drivers: {description: Drivers of the allocated devices., type: list, elements: str, returned: always}
    consumers:
      description: >-
        C(status.reservedFor) entries (C(resource), C(api_group), C(name), C(uid)) with C(kind) (C(pod),
        C(pod_group) for a workload's PodGroup, C(other)), C(exists) (true, false, or null when not checkable),
        C(node) (the pod's node, null when gone, unscheduled or not a pod) and C(daemonset) (a DaemonSet controls the
        pod).
      type: list
      elements: dict
      returned: always
    missing_consumers: {description: Consumers that no longer exist., type: list, elements: dict, returned: always}
    non_pod_consumers:
      description: >-
        The consumers that are not pods and may still exist (a workload's PodGroup): the claim stays reserved
        while they exist, whatever happens to pods.
      type: list
      elements: dict
      returned: always
    extended_resource_claim:
      description: >-
        The scheduler made the claim for a pod's extended resources backed by DRA (annotation
        C(resource.kubernetes.io/extended-resource-claim)).
      type: bool
      returned: always
    orphaned: {description: Allocated or reserved with no live consumer., type: bool, returned: always}
    deletion_requested: {description: The claim has a deletion timestamp., type: bool, returned: always}
    problems:
      description: >-
        Disagreements with the devices' ResourceSlices, and consumer pods running outside a node-local
        allocation's nodes.
      type: list
      elements: str
      returned: always
summary:
  description: >-
    Per node counts of claims by state, orphaned and total; a shared claim counts under each of its nodes, a
    claim on no node under C(<cluster-wide>) or C(<unallocated>).
  returned: always
  type: dict
  sample: {kwok-node-0: {pending: 0, allocated: 0, reserved: 2, deallocating: 0, orphaned: 0, total: 2}}
totals:
  description: Counts over every selected claim.
  returned: always
  type: dict
  sample: {pending: 1, allocated: 0, reserved: 5, deallocating: 0, orphaned: 0, total: 6}
blocking:
  description: With O(node), the claims still allocated or reserved on it (namespace/name), except RV(daemonset_claims).
  returned: always
  type: list
  elements: str
daemonset_claims:
  description: With O(node), claims on it used there only by DaemonSet pods (namespace/name); they do not block.
  returned: always
  type: list
  elements: str
non_pod_claims:
  description: >-
    With O(node), claims on it reserved only for consumers that are not pods (a workload's PodGroup) that no pod on
    it uses (namespace/name); they do not block. Each stays reserved while its consumer exists.
  returned: always
  type: list
  elements: str
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError, fails_on_error
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import gather_claim_views
from ansible_collections.dra.admin.plugins.module_utils.claims.claims import VIEW_KEYS, blocking_message, view_names


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        node=dict(type="str"),
        namespaces=dict(type="list", elements="str", default=[]),
        driver=dict(type="str"),
        label_selector=dict(type="str"),
        fail_if_any_on_node=dict(type="bool", default=False),
        include_claims=dict(type="bool", default=True),
        claim_keys=dict(type="list", elements="str", choices=list(VIEW_KEYS), default=[]),
    )
    return spec


def check_keys_returned(params):
    """claim_keys chooses what each returned claim keeps: refused when no claim is returned."""
    if params["claim_keys"] and not params["include_claims"]:
        raise DraAdminError("claim_keys (%s) chooses the keys of each returned claim, but include_claims is false, "
                            "so no claim is returned; remove claim_keys, or set include_claims: true. Nothing was "
                            "read." % ", ".join(params["claim_keys"]))


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True,
                              required_if=[("fail_if_any_on_node", True, ["node"])])
    params = module.params
    with fails_on_error(module) as failure:
        check_keys_returned(params)
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        gathered = gather_claim_views(
            api, node=params["node"], namespaces=params["namespaces"], driver=params["driver"],
            label_selector=params["label_selector"], keep_views=params["include_claims"], keys=params["claim_keys"])
        views, blocking = gathered["views"], gathered["blocking"]
        result = dict(
            changed=False, resource_api_version=gathered["version"],
            claims=views if params["include_claims"] else [],
            summary=gathered["summary"], totals=gathered["totals"],
            blocking=view_names(blocking), daemonset_claims=view_names(gathered["daemonset_claims"]),
            non_pod_claims=view_names(gathered["non_pod_claims"]),
            api_requests=api.requests,
        )
        if params["fail_if_any_on_node"] and blocking:
            result["claims"] = blocking if not params["include_claims"] else result["claims"]
            raise DraAdminError(blocking_message(params["node"], blocking), result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
