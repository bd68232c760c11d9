#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_node_drain
short_description: Drain a node in DRA order (claim workloads, verify, driver last) and return it to service
version_added: 0.1.0
description:
  - O(state=drained) drains a node in the order the DRA good-practices page asks for
    (1) cordon, remembering whether the node was already cordoned (annotation C(dra.admin/cordoned-before-drain));
    (2) evict the pods that consume ResourceClaims (whichever field names the claim - the pod's spec, a
    template's claim in its status, or the claim the scheduler made for its extended resources backed by DRA, which
    only C(status.extendedResourceClaimStatus) names) through the Eviction API, concurrently, retrying
    PodDisruptionBudget refusals (HTTP 429) with backoff until O(wait_timeout); a pod whose namespace is being deleted
    cannot be evicted (HTTP 403, cause C(NamespaceTerminating)), so it is retried the same way until the namespace
    controller marks it for deletion, then waited for;
    (3) evict the remaining evictable pods under C(kubectl drain) rules;
    (4) wait until no ResourceClaim is allocated or reserved on the node (a claim is on the node while a pod there
    uses it, or while it is allocated there and no pod elsewhere uses it, so a claim shared with pods on other nodes
    does not hold the drain once this node's pods are gone; claims used here only by DaemonSet pods, which stay,
    are listed in RV(daemonset_claims) with a warning and not waited for; claims reserved only for consumers that
    are not pods, such as a workload's PodGroup, stay reserved while the group exists whatever happens to its pods,
    so once no pod on the node uses them they are not waited for either; RV(non_pod_claims) names each with its
    consumer and what to do, with a warning);
    (5) only then take the DRA driver off the node by labelling it with O(exclusion_label), which the driver
    DaemonSet's node affinity excludes, and wait until the driver pods are gone.
  - O(state=in_service) reverses it, removes the label, waits for a ready driver pod and for the node's
    ResourceSlices of O(drivers) (a slice with the node's C(nodeName), or a C(perDeviceNodeSelection) slice with a
    device naming it), then uncordons (by default only when the drain cordoned it).
  - On any timeout or error the node stays cordoned, the driver is not touched while a claim on the node is still
    allocated or reserved, and the message lists the blocking pods, PodDisruptionBudgets or claims.
  - Before any write, the drain refuses (nothing changed, RV(claims_not_freed) in the failure) when its evictions
    cannot free a claim on the node, that is a claim allocated for this node alone that the pods of a controller (a
    Deployment's ReplicaSet, a StatefulSet, a Job) name by C(resourceClaimName). The controller's replacements name
    the same claim and wait for it (Pending, as it can only be used on this cordoned node), so the claim is released
    only once every one of its pods here is gone; a PodDisruptionBudget that allows fewer disruptions than that
    would hold the drain until its timeout. The message says what frees it (scale the workload to zero, relax the
    budget, or a C(resourceClaimTemplateName) per pod). With O(preview) it is only reported.
  - Nothing is deleted without the Eviction API. Pods no controller manages are only evicted with O(force=true),
    and then with a warning.
  - Check mode returns the eviction order and changes nothing.
  - Device mode (O(device_driver) set) drains only one pool of the node (O(device_pool), by default the pool named
    like the node, as node-local drivers name theirs) or one device of it (O(device)) instead of the whole node,
    through a C(NoExecute) C(DeviceTaintRule) (M(dra.admin.dra_device_taint)); O(state=drained) waits until the
    eviction is done and then until no claim is allocated those devices (claims released); O(state=in_service)
    lifts the rule. The node is not cordoned and the driver stays. Needs a cluster serving C(DeviceTaintRule)
    (1.35+). Unlike the node drain, kube-controller-manager's device-taint-eviction controller evicts here, and
    it deletes the pods (their grace period applies, a C(DisruptionTarget) condition is set first) and does not go
    through the Eviction API, so PodDisruptionBudgets do not hold it back, and C(force), C(delete_emptydir_data)
    and the DaemonSet rules do not apply; claims that tolerate the taint keep their pods for their
    C(tolerationSeconds), or for ever.
  - The device mode's rule is the drain's own, C(dra-admin-drain-<driver>-<pool>-<device>) with the label
    C(dra.admin/purpose=device-drain). It never changes or lifts another rule on the same devices (a maintenance
    rule of M(dra.admin.dra_device_taint), a remediation rule, another tool's rule); a rule of its name that is not
    the drain's is refused and nothing is changed. Both O(state)s return in RV(other_rules_in_force) the other
    rules that keep the devices out of service, so a lift says when the devices are not back in service yet.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.wait
options:
  node:
    description: The node to drain or return to service.
    type: str
    required: true
  state:
    description: V(drained) to drain, V(in_service) to return the node to service.
    type: str
    choices: [drained, in_service]
    default: drained
  driver_daemonsets:
    description:
      - The DRA driver DaemonSets as C(namespace/name). Their pods are removed last, by O(exclusion_label).
      - Each must have a required node affinity with O(exclusion_label) C(DoesNotExist) (or C(NotIn) a list
        holding V(true)) in every term; the module refuses to start otherwise, before changing anything.
      - When neither this nor O(driver_pod_labels) is given, the drivers are every DaemonSet whose required
        node affinity keeps its pods off nodes with O(exclusion_label) (one cluster-wide DaemonSet list).
      - O(state=in_service) waits for a ready pod on the node of each driver DaemonSet that places one there
        (node selector, node affinity and taints), before it waits for O(drivers)' ResourceSlices.
    type: list
    elements: str
    default: []
  driver_pod_labels:
    description: Labels that identify driver pods not found through O(driver_daemonsets).
    type: dict
    default: {}
  drivers:
    description:
      - Driver names that must publish for the node again before O(state=in_service) uncordons - a current
        ResourceSlice of the driver covers the node through its C(nodeName), C(allNodes) or a C(nodeSelector)
        admitting the node's labels (at slice level, or per device with C(perDeviceNodeSelection)).
    type: list
    elements: str
    default: []
  drivers_not_in_pods:
    description:
      - Drivers that publish devices of the node but do not run in a pod on it (a service on the host, say). The
        drain cannot take them off the node and leaves them there.
      - Every other driver publishing the node's own devices (a ResourceSlice bound to the node by name) needs a pod
        on the node among the driver pods (O(driver_daemonsets), O(driver_pod_labels), or the DaemonSets found
        through O(exclusion_label)); otherwise O(state=drained) fails before changing anything, naming the drivers,
        rather than end with a driver still on the node. Not checked once the node carries O(exclusion_label).
    type: list
    elements: str
    default: []
  exclusion_label:
    description:
      - Node label key (value V(true)) that keeps the driver DaemonSet off the node.
      - Must be a label key as Kubernetes defines it (C([prefix/]name)); anything else is refused before the node
        is touched.
    type: str
    default: dra.admin/driver-excluded
  wait_timeout:
    default: 600
    aliases: [timeout]
  wait_sleep:
    default: 1.0
    aliases: [poll_interval]
  wait:
    description:
      - V(true) runs the whole drain in this one call, waiting between the phases (until O(wait_timeout), which
        bounds the whole operation). The waits for evicted pods and for the driver pods to leave watch the node's
        pods and end as the last one is deleted (where the server refuses the watch, they poll like the others).
        The other waits look again after 0.1 s, then twice as long each time up to O(wait_sleep) - a phase that is
        over at once (claims released right after their pods) costs a fraction of O(wait_sleep), a long one a look
        every O(wait_sleep).
      - V(false) (O(state=drained) of the node drain only) does the writes of the next phase whose waits are over
        and returns at once, with what the drain still waits for (RV(waiting_for), RV(pending)) as read before
        them; run it again after each wait. The writes are those of O(wait=true) in the same order - cordon and
        evict the claim pods; once they are gone, evict the other pods; once those are gone and no claim holds
        the driver, label the node with O(exclusion_label). PodDisruptionBudget refusals are still retried within
        the call. In check mode it writes nothing and only reports, which makes it the read-only call to wait
        with, in an C(until) loop, a line per round (role dra.admin.drain does so).
    type: bool
    default: true
  since:
    description:
      - With O(wait=false), when the drain started (seconds since the epoch, RV(started) of its first call);
        RV(elapsed) counts from it, and PodDisruptionBudget retries end O(wait_timeout) after it. Default is the
        call's own start.
    type: float
  preview:
    description:
      - Change nothing; say whether each claim workload the drain would evict would find devices again on the other
        nodes, with what is allocated now (RV(preview)) - its claims from templates made anew, its shared claims
        deallocated when only pods of this node reserve them, placed one workload after the other so two do not
        count the same free device, by the rules of M(dra.admin.dra_allocation_explain_info) (which needs the
        C(cel-python) library).
      - The drain role runs it first and refuses to start when C(dra_drain_refuse_pending) is true and a workload
        would stay Pending.
    type: bool
    default: false
  grace_period:
    description: Grace period for evicted pods, in seconds. Default is each pod's own.
    type: int
  evict_daemonset_pods:
    description: Also evict pods of DaemonSets other than the driver (C(kubectl drain) leaves them).
    type: bool
    default: false
  delete_emptydir_data:
    description: Evict pods that use C(emptyDir) volumes (their data is lost).
    type: bool
    default: false
  force:
    description: Evict pods that no controller manages (they will not come back).
    type: bool
    default: false
  uncordon:
    description:
      - With O(state=in_service), V(if_drain_cordoned) uncordons only when the node was schedulable before the
        drain; V(always) uncordons anyway; V(never) leaves it cordoned.
    type: str
    choices: [if_drain_cordoned, always, never]
    default: if_drain_cordoned
  device_driver:
    description:
      - Device mode, for this DRA driver's devices on O(node) only (see the description). Other options of the
        node drain (O(driver_daemonsets), O(force), O(grace_period), ...) are not used then.
    type: str
  device_pool:
    description: With O(device_driver), the pool to drain. Default is the pool named like O(node).
    type: str
  device:
    description: With O(device_driver), only this device of the pool.
    type: str
attributes:
  check_mode:
    support: full
    details:
      - Returns the eviction order and changes nothing; C(changed) says whether the real run would write anything.
  diff_mode:
    support: none
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
  - cel-python >= 0.5.0, < 0.6 (only with O(preview))
"""

EXAMPLES = r"""
- name: Drain a GPU node, DRA driver last
  dra.admin.dra_node_drain:
    node: gpu-node-7
    driver_daemonsets: [dra-system/gpu-driver]
    wait_timeout: 900
  register: drain

- name: Time of each phase
  ansible.builtin.debug:
    var: drain.phases

- name: What would be evicted, in which order
  dra.admin.dra_node_drain:
    node: gpu-node-7
    driver_daemonsets: [dra-system/gpu-driver]
  check_mode: true

- name: Drain only one faulty GPU of the node (device mode, a NoExecute DeviceTaintRule)
  dra.admin.dra_node_drain:
    node: gpu-node-7
    device_driver: gpu.example.com
    device: gpu-3

- name: Return the node to service once the driver publishes its devices again
  dra.admin.dra_node_drain:
    node: gpu-node-7
    state: in_service
    driver_daemonsets: [dra-system/gpu-driver]
    drivers: [gpu.example.com]
"""

RETURN = r"""
node:
  description: The node.
  returned: always
  type: str
preview:
  description:
    - With O(preview) - C(workloads), per claim pod the drain would evict, C(pod), C(controller) (C(Kind/name), null for
      a bare pod, which is not made again - C(verdict) C(not_recreated)), C(verdict) (C(fits), C(does_not_fit),
      C(cannot_tell)), C(fits_on), C(message) and C(requests) as M(dra.admin.dra_allocation_explain_info) gives them;
      C(would_stay_pending), the pods whose verdict is not C(fits); C(summary), one line.
  returned: O(preview=true)
  type: dict
  sample:
    workloads:
      - pod: training/trainer-0
        controller: StatefulSet/trainer
        verdict: does_not_fit
        fits_on: []
        message: "does not fit: request gpu of training/<gpu> needs 2 device(s) of class gpu.example.com: ..."
    would_stay_pending: [training/trainer-0]
    summary: "0 of 1 claim workload(s) would find devices again; would stay pending: training/trainer-0"
was_cordoned:
  description: Whether the node was cordoned before the drain.
  returned: always
  type: bool
eviction_order:
  description: Pods in the order they are evicted (claim pods first).
  returned: state=drained
  type: list
  elements: str
claim_pods:
  description: Pods that consume ResourceClaims.
  returned: state=drained
  type: list
  elements: str
other_pods:
  description: Other evictable pods.
  returned: state=drained
  type: list
  elements: str
driver_pods:
  description: DRA driver pods on the node (removed last).
  returned: state=drained
  type: list
  elements: str
skipped_pods:
  description: Pods left in place (mirror pods, other DaemonSet pods) with the reason.
  returned: state=drained
  type: list
  elements: dict
claims_held_at_start:
  description: Claims allocated or reserved on the node when the drain started (those it waits for).
  returned: state=drained
  type: list
  elements: str
claims_not_freed:
  description:
    - Claims on the node the drain's evictions cannot free (see the description; the drain refuses them before any
      write), each with C(claim), C(pods) (its pods on the node), C(controllers) (C(Kind namespace/name)) and
      C(pod_disruption_budgets) (C(name), C(disruptions_allowed)).
  returned: state=drained with O(preview) (check mode and a run fail with it, before any write)
  type: list
  elements: dict
  sample:
    - claim: ml/shared-gpu
      pods: [ml/trainer-7d9-abcde, ml/trainer-7d9-fghij]
      controllers: [ReplicaSet ml/trainer-7d9]
      pod_disruption_budgets: [{name: ml/trainer, disruptions_allowed: 1}]
daemonset_claims:
  description: Claims used on the node only by DaemonSet pods, which stay on it; not waited for.
  returned: state=drained
  type: list
  elements: str
non_pod_claims:
  description: >-
    Claims on the node reserved only for consumers that are not pods (a workload's PodGroup): C(claim)
    (namespace/name), C(consumers) (for example C(podgroups.scheduling.k8s.io/training)) and C(message) (what to do to
    free the devices). The drain evicts the node's pods that use them but does not wait for the reservation, which
    no eviction ends.
  returned: state=drained
  type: list
  elements: dict
phases:
  description: Seconds spent in each phase.
  returned: success, not in check mode
  type: dict
  sample: {preflight: 0.12, cordon: 0.01, evict_claim_pods: 5.3, evict_other_pods: 0.0,
           wait_claims_released: 0.4, remove_driver: 1.1}
events:
  description: Progress lines with seconds since start (what was still held, by whom).
  returned: success, not in check mode
  type: list
  elements: str
name:
  description: Device mode, the name of the drain's DeviceTaintRule.
  returned: device mode
  type: str
  sample: dra-admin-drain-gpu.example.com-gpu-node-7-gpu-3
rule:
  description: Device mode, the DeviceTaintRule (see M(dra.admin.dra_device_taint)).
  returned: device mode
  type: dict
lifted:
  description: Device mode, whether the drain's rule was deleted (or would be, in check mode).
  returned: device mode, state=in_service
  type: bool
other_rules_in_force:
  description:
    - Device mode, the other DeviceTaintRules (any tool's or dra.admin operation's) that keep some of the devices
      out of service (effect C(NoSchedule) or C(NoExecute)), as in M(dra.admin.dra_device_taint); after
      O(state=in_service) the devices are back in service only when this is empty.
  returned: device mode
  type: list
  elements: dict
evicted:
  description: Device mode, pods evicted from the devices.
  returned: device mode, state=drained
  type: list
  elements: str
claims_released:
  description: Device mode, whether no claim is allocated the devices any more.
  returned: device mode, state=drained, not in check mode
  type: bool
waiting_for:
  description:
    - With O(wait=false), the wait of the drain not over yet, as read before the call's writes - V(claim_pods_gone),
      V(other_pods_gone), V(claims_released) or V(driver_pods_gone) (also while the driver is yet to be told to
      leave) - or null when nothing is left to wait for.
  returned: wait=false
  type: str
pending:
  description: With O(wait=false), what that wait still waits for (pods or claims as namespace/name).
  returned: wait=false
  type: list
  elements: str
pending_count:
  description: With O(wait=false), how many are pending.
  returned: wait=false
  type: int
elapsed:
  description: With O(wait=false), seconds since O(since) (or since the call started).
  returned: wait=false
  type: float
progress:
  description: With O(wait=false), one line - what is waited for, what is pending, seconds so far.
  returned: wait=false
  type: str
  sample: "waiting for the evicted pods that use ResourceClaims to be gone: 1 pending (team-a/trainer-0), 4.2s so far"
started:
  description: With O(wait=false), when the drain started (O(since), else the call's start), in seconds since the epoch.
  returned: wait=false
  type: float
details:
  description: On failure, the blocking pods, PodDisruptionBudgets or claims.
  returned: failure
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
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import drain_devices
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_service import NodeDrain
from ansible_collections.dra.admin.plugins.module_utils.nodes.drain_inputs import input_errors
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_options


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        node=dict(type="str", required=True),
        state=dict(type="str", choices=["drained", "in_service"], default="drained"),
        driver_daemonsets=dict(type="list", elements="str", default=[]),
        driver_pod_labels=dict(type="dict", default={}),
        drivers=dict(type="list", elements="str", default=[]),
        drivers_not_in_pods=dict(type="list", elements="str", default=[]),
        exclusion_label=dict(type="str", default=DEFAULT_EXCLUSION_LABEL),
        grace_period=dict(type="int"),
        evict_daemonset_pods=dict(type="bool", default=False),
        delete_emptydir_data=dict(type="bool", default=False),
        force=dict(type="bool", default=False),
        uncordon=dict(type="str", choices=["if_drain_cordoned", "always", "never"], default="if_drain_cordoned"),
        device_driver=dict(type="str"),
        device_pool=dict(type="str"),
        device=dict(type="str"),
        wait=dict(type="bool", default=True),
        since=dict(type="float"),
        preview=dict(type="bool", default=False),
    )
    spec.update(wait_options(600, 1.0, timeout_aliases=["timeout"], sleep_aliases=["poll_interval"]))
    return spec


REQUIRED_BY = {"device_pool": "device_driver", "device": "device_driver"}  # the driver whose devices to drain


def device_mode(module, api, params):
    """One pool or device of the node through a NoExecute DeviceTaintRule (module_utils.device_taints)."""
    result = drain_devices(api, params["node"], params["state"], params["device_driver"], params["device_pool"],
                           params["device"], params["wait_timeout"], params["wait_sleep"], module.check_mode)
    module.exit_json(node=params["node"], api_requests=api.requests, **result)


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True, required_by=REQUIRED_BY)
    params = module.params
    with fails_on_error(module, details_key="details") as failure:  # RV(details): what blocks the drain
        raise_input_errors(input_errors(params, spec), "; nothing was changed")
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        if params["device_driver"]:
            device_mode(module, api, params)
        drain = NodeDrain(api, params, check_mode=module.check_mode)
        failure.keep(changed=lambda: drain.changed, events=lambda: drain.events, phases=lambda: drain.phases)
        if params["state"] == "drained":
            result = drain.drain()
        else:
            result = drain.return_to_service()
    for warning in drain.warnings:
        module.warn(warning)
    result.pop("would_change", None)
    module.exit_json(changed=drain.changed, api_requests=api.requests, **result)


if __name__ == "__main__":
    main()
