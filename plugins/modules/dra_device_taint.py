#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_device_taint
short_description: Take DRA devices out of service with a DeviceTaintRule (dry run, taint, evict, lift)
version_added: 0.2.0
description:
  - Device-level maintenance, for example for one faulty GPU, instead of draining a whole node. Writes one
    C(DeviceTaintRule) (C(resource.k8s.io)) that taints the devices its selector matches (every device of a
    driver, of one pool of it (for a node-local driver usually one node), or one device of a pool).
  - O(state=dry_run) only reads; it writes no rule and changes none, whatever rules already exist on the devices
    (of dra.admin or of any other tool, of the same name or not), and returns by name the pods and claims that a
    C(NoExecute) taint of O(key) and O(value) would evict (RV(would_evict), RV(would_evict_claims)), those whose
    claims tolerate it (RV(tolerating)), the rule of O(name) as it is (RV(rule)), and the rules already keeping the
    devices out of service (RV(other_rules_in_force)). It never reports C(changed).
  - O(state=tainted) with O(effect=NoSchedule) keeps new claims from being allocated the devices, and pods using
    them keep running; with O(effect=NoExecute) kube-controller-manager's device-taint-eviction controller also
    deletes the pods using them. The module waits (O(wait)) until the rule's C(EvictionInProgress) condition is
    false for its current generation, up to O(wait_timeout), and returns the pods evicted (RV(evicted)), those that
    tolerate the taint and until when (RV(tolerating)), and the pods still using the devices (RV(still_holding)).
    The controller deletes the pods itself, all at once; it does not use the Eviction API, so PodDisruptionBudgets
    do not hold it back (a training job can lose its quorum).
  - O(state=tainted) with O(effect=Evict) takes the devices out of service with PodDisruptionBudgets respected; the
    rule is written with effect C(NoSchedule) (no new allocation on the devices), then the module evicts the pods
    using the devices through the Eviction API (C(policy/v1) C(Eviction), as M(dra.admin.dra_node_drain) does), a
    refusal by a PodDisruptionBudget retried with backoff until O(wait_timeout). The pods go in waves, one after
    the other (RV(waves)); pods sharing a claim, covered by the same PodDisruptionBudget or controlled by the same
    Job go in one wave, where their budget paces them. Then it waits until their claims no longer hold the devices
    (released, or deallocated). When the time is up it fails naming each pod not evicted, its wave, the
    PodDisruptionBudget and the API server's message (RV(not_evicted)), and the waves not started; the rule stays
    in place (C(NoSchedule)) and the pods not evicted keep running. Pods are evicted as a C(NoExecute) taint would
    evict them (RV(would_evict)); those whose claims tolerate the taint as C(NoExecute) for ever stay.
  - O(state=absent) deletes the rule (lifts the taint); evicted pods are not brought back (their controllers make
    new ones). Other rules on the same devices stay; those that still keep them out of service are returned in
    RV(other_rules_in_force).
  - Who is affected is computed from the ResourceClaims' allocation results and the ResourceSlices, not from the
    rule's status, which only counts pods (and, for effect C(None), is computed once when the rule is created or
    changed).
  - Before anything is written the selector is checked against the published ResourceSlices; an unknown driver,
    pool or device fails naming what exists, and nothing is written.
  - Needs a release whose C(DeviceTaintRule) has effect C(None) and a status (1.35 and later) and a cluster that
    serves it. 1.35 (C(v1alpha3)) and 1.36 (C(v1beta2)) need feature gates and C(--runtime-config) (role
    role C(dra.admin.feature_gates) with C(dra_feature_gates_device_taints=true)); 1.37 serves C(v1) by default. On any
    other cluster the module fails naming the version and what would switch the API on, and changes nothing.
  - The selector can name a driver, a pool and a device only. The API dropped DeviceClass and CEL selectors in
    1.35; select the devices of a class by their driver and pool instead.
  - The rule carries the labels C(app.kubernetes.io/managed-by=dra.admin) and C(dra.admin/purpose=maintenance), so
    it belongs to this module's maintenance operation. The module changes and deletes only rules of that operation, so
    a rule of the same name made by another tool, by the device mode of M(dra.admin.dra_node_drain)
    (C(dra.admin/purpose=device-drain)) or by M(dra.admin.dra_device_remediation)
    (C(dra.admin/purpose=device-health-remediation)) is refused and nothing is changed. Those operations name their
    rules differently (C(dra-admin-drain-...), C(dra-admin-unhealthy-...)), so they coexist with a maintenance rule
    on the same devices. A rule of dra.admin without C(dra.admin/purpose) (written before operations were labelled)
    is taken as a maintenance rule.
  - The eviction controller of O(effect=NoExecute) deletes pods (with their grace period); it does not use the
    Eviction API, so PodDisruptionBudgets do not hold it back. O(effect=Evict) (or M(dra.admin.dra_node_drain) for
    a whole node) respects them.
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
    details:
      - Checks the selector and the rule's owner, reads who would be affected and reports whether it would change,
        without writing the rule or waiting. With O(effect=Evict) it names the waves that would be evicted
        (RV(waves)), evicts nothing, and reports C(changed) when a pod would be evicted.
  diff_mode:
    support: full
    details:
      - Shows the rule's name, labels, selector and taint before and after.
options:
  state:
    description:
      - V(dry_run) reads only; it reports who a C(NoExecute) taint would evict and which rules are in force, and
        writes nothing.
      - V(tainted) writes it with O(effect).
      - V(absent) deletes it.
    type: str
    choices: [dry_run, tainted, absent]
    default: tainted
  name:
    description:
      - Name of the C(DeviceTaintRule). Default is derived from the selector,
        C(dra-admin-<driver>-<pool>-<device>), so runs with the same selector find the same rule.
      - Choose one to keep several rules on the same devices apart (for example one per reason).
      - A rule of that name that another tool or another dra.admin operation wrote is refused (O(state=dry_run)
        only reports it).
    type: str
  driver:
    description:
      - The DRA driver whose devices to taint, for example V(gpu.example.com). Required unless O(state=absent) with
        O(name).
    type: str
  pool:
    description:
      - Only the devices of this pool of O(driver). A node-local driver usually names its pool after the node.
    type: str
  device:
    description:
      - Only this device of O(pool) (needs O(pool)).
    type: str
  key:
    description: The taint's key (a qualified name such as C(example.com/maintenance)).
    type: str
    default: dra.admin/maintenance
  value:
    description: The taint's value (at most 63 characters; claims may tolerate a key and value).
    type: str
    default: ""
  effect:
    description:
      - The taint's effect with O(state=tainted). V(NoSchedule) keeps new allocations off the devices;
        V(NoExecute) also makes kube-controller-manager delete the pods using them at once, bypassing
        PodDisruptionBudgets.
      - V(Evict) is not a Kubernetes taint effect - the rule is written with V(NoSchedule) and the module evicts
        the pods using the devices itself, through the Eviction API, wave by wave, honouring PodDisruptionBudgets
        (see the description). Role C(dra.admin.device_maintenance) uses it by default.
      - O(state=dry_run) reports as for V(NoExecute), and the waves V(Evict) would make, and writes nothing.
      - V(Evict) refuses before any write (the rule included) when evicting cannot free a device, that is when the
        pods of a controller (a Deployment's ReplicaSet, a StatefulSet, a Job) name a claim by C(resourceClaimName).
        Each replacement names the same claim and reserves it again, still allocated the device (V(NoSchedule)
        keeps only new allocations off it), so the evictions would churn the workload and never free the device.
        The message names the claims, their controllers and what frees them; O(state=dry_run) lists them in
        RV(claims_not_freed).
    type: str
    choices: [NoSchedule, NoExecute, Evict]
    default: NoSchedule
  labels:
    description:
      - Extra labels for the rule, for example to mark why it exists. C(app.kubernetes.io/managed-by) is always
        V(dra.admin) and C(dra.admin/purpose) always V(maintenance); leave both out.
    type: dict
    default: {}
  annotations:
    description:
      - Annotations for the rule (for example the reason, or the ticket). One given as null is removed from the rule.
    type: dict
    default: {}
  preview:
    description:
      - With O(state=dry_run), also say whether each pod a C(NoExecute) taint would evict (its claims not tolerating
        it), made anew by its controller, would find devices again with these devices tainted and what is allocated
        now (RV(preview)), by the rules of M(dra.admin.dra_allocation_explain_info) (which needs the C(cel-python)
        library).
    type: bool
    default: false
  wait:
    description:
      - With O(state=tainted) and V(NoExecute), wait until eviction is finished (kube-controller-manager's report
        on the rule); with V(Evict), until every wave is evicted and the claims are released. O(state=dry_run) never
        waits. After O(wait_timeout) the rule stays in place and the module fails listing the pods still using the
        devices (with V(Evict), those not evicted and why).
      - With V(Evict), the wait for a wave's evicted pods watches each of the wave's namespaces from a LIST and ends
        as the last pod is deleted (where the server refuses the watch, it polls every O(wait_sleep) at most).
      - With V(Evict) and V(false), each call evicts the pods of the first wave not gone yet, one request per pod (a
        refusal by a PodDisruptionBudget is retried by the next call, and named in RV(not_evicted)), and returns
        what is still waited for; a role calls it in an C(until) loop (not in check mode, since it evicts) until
        RV(waiting_for) is null. With O(since), a call after O(wait_timeout) whose eviction is not over fails as the
        waiting call does.
      - V(false) writes the rule and returns at once, saying what the eviction still waits for (RV(waiting_for),
        RV(pending), the pods still to be evicted, RV(elapsed), RV(progress)). The same call in check mode writes
        nothing and only reports, which makes it the read-only call to wait on in an C(until) loop, a line per
        round (role C(dra.admin.device_maintenance) does so); with O(since), a round after O(wait_timeout) whose
        eviction is not over fails as the waiting call does.
    type: bool
    default: true
  since:
    description:
      - With O(wait=false), when the operation started (seconds since the epoch, RV(started) of its first call);
        RV(elapsed) and O(wait_timeout) count from it. Default is the call's own start.
    type: float
  wait_timeout:
    default: 300
  wait_sleep:
    default: 2.0
    aliases: [poll_interval]
notes:
  - Pods whose claims tolerate the taint with C(effect=NoExecute) and C(tolerationSeconds) are evicted that many
    seconds after the taint's C(timeAdded) (the server resets it when the effect changes), so O(wait) waits for them
    too; a toleration without C(tolerationSeconds) keeps the pod for ever (reported in RV(tolerating) and
    RV(still_holding)).
seealso:
  - module: dra.admin.dra_claims_info
  - module: dra.admin.dra_slices_info
  - module: dra.admin.dra_node_drain
"""

EXAMPLES = r"""
- name: Which pods would one faulty GPU take down? (reads only)
  dra.admin.dra_device_taint:
    state: dry_run
    driver: gpu.example.com
    pool: node-1
    device: gpu-3
  register: gpu3

- name: Show them
  ansible.builtin.debug:
    msg: "{{ gpu3.would_evict }} (tolerating: {{ gpu3.tolerating }})"

- name: Take the GPU out of service, evicting its pods
  dra.admin.dra_device_taint:
    state: tainted
    effect: NoExecute
    driver: gpu.example.com
    pool: node-1
    device: gpu-3
    value: faulty
    annotations:
      dra.admin/reason: "ECC errors, ticket 4711"
    wait_timeout: 600

- name: Take the GPU out of service, evicting its pods as PodDisruptionBudgets allow
  dra.admin.dra_device_taint:
    state: tainted
    effect: Evict
    driver: gpu.example.com
    pool: node-1
    device: gpu-3
    wait_timeout: 900
  register: evicted

- name: Say which pods went in which wave
  ansible.builtin.debug:
    msg: "{{ evicted.waves | map(attribute='pods') | list }}"

- name: Return it to service (other rules on it stay)
  dra.admin.dra_device_taint:
    state: absent
    driver: gpu.example.com
    pool: node-1
    device: gpu-3
  register: lifted

- name: Say which other rules still keep it out of service
  ansible.builtin.debug:
    msg: "{{ lifted.other_rules_in_force | map(attribute='name') | list }}"
"""

RETURN = r"""
preview:
  description:
    - With O(state=dry_run) and O(preview) - C(workloads) (per pod the taint would evict - C(pod), C(controller),
      C(verdict) C(fits), C(does_not_fit), C(cannot_tell) or C(not_recreated) for a bare pod, C(fits_on),
      C(message), C(requests)), C(would_stay_pending) and C(summary), as M(dra.admin.dra_node_drain)'s preview.
  returned: O(preview=true)
  type: dict
name:
  description: The rule's name.
  returned: always
  type: str
  sample: dra-admin-gpu.example.com-node-1-gpu-3
kubernetes_version:
  description: The API server's version.
  returned: always
  type: str
  sample: v1.36.3
api_version:
  description: The C(resource.k8s.io) version the rule was read and written in.
  returned: always
  type: str
  sample: v1beta2
rule:
  description:
    - The rule as last read (empty when there is none); C(condition) is its C(EvictionInProgress) condition (with
      C(current), whether it describes the rule's current generation), or null before the controller wrote it;
      C(operation) is the dra.admin operation it belongs to (null for another tool's rule).
    - With O(state=dry_run), the rule of RV(name) as it is, untouched (empty when there is none); with
      O(state=absent), the rule as it was before it was deleted.
  returned: always
  type: dict
other_rules_in_force:
  description:
    - The DeviceTaintRules other than RV(name), of any tool or dra.admin operation, whose selector can select a
      device this run selects and whose effect is C(NoSchedule) or C(NoExecute), as read at the start of the run.
      After a lift, they still keep (some of) the devices out of service.
    - Each with C(name), C(operation) (the dra.admin operation that owns it, one of V(maintenance), V(device-drain),
      V(device-health-remediation); null for another tool's rule), C(managed), C(effect), C(key), C(value) and
      C(device_selector).
  returned: always
  type: list
  elements: dict
  sample:
    - name: dra-admin-drain-gpu.example.com-node-1-gpu-3
      operation: device-drain
      managed: true
      effect: NoExecute
      key: dra.admin/maintenance
      value: drained
      device_selector: {driver: gpu.example.com, pool: node-1, device: gpu-3}
lifted:
  description: Whether a rule was deleted (or would be, in check mode).
  returned: when O(state=absent)
  type: bool
selector:
  description: The selection as driver/pool/device (C(*) for any).
  returned: when O(state) is not V(absent)
  type: str
  sample: gpu.example.com/node-1/gpu-3
devices:
  description: The published devices the selector matches, each with C(driver), C(pool), C(device) and C(node).
  returned: when O(state) is not V(absent)
  type: list
  elements: dict
claims:
  description: Claims (namespace/name) allocated any of the devices, at the end.
  returned: when O(state) is not V(absent)
  type: list
  elements: str
pods:
  description: Pods (namespace/name) using those claims, at the end.
  returned: when O(state) is not V(absent)
  type: list
  elements: str
would_evict:
  description: Pods a C(NoExecute) taint evicts (at once, or after their C(tolerationSeconds)), as found at the start.
  returned: when O(state) is not V(absent)
  type: list
  elements: str
would_evict_claims:
  description: The claims of RV(would_evict).
  returned: when O(state) is not V(absent)
  type: list
  elements: str
tolerating:
  description:
    - Pods whose claims tolerate the taint as C(NoExecute), each with C(pod), C(claim), C(toleration_seconds)
      (null, for ever) and C(until) (when they are evicted; null for ever, or before the taint has a C(timeAdded)).
  returned: when O(state) is not V(absent)
  type: list
  elements: dict
evicted:
  description: Pods that used the devices at the start and are gone at the end.
  returned: when O(effect=NoExecute) or O(effect=Evict)
  type: list
  elements: str
still_holding:
  description: Pods still using the devices at the end.
  returned: when O(effect=NoExecute) or O(effect=Evict)
  type: list
  elements: str
waves:
  description:
    - The eviction waves of O(effect=Evict) (with O(state=dry_run), those it would make), in order, each with
      C(wave) (its number), C(pods), C(claims), C(pod_disruption_budgets) (the budgets covering its pods),
      C(jobs), C(unmanaged) (pods no controller recreates) and C(terminating) (pods already being deleted).
    - With O(wait=false), the waves of the pods still using the devices, as read by the call (so numbered from
      the first wave still to go; RV(not_evicted) numbers them the same way).
  returned: when O(effect=Evict) or O(state=dry_run)
  type: list
  elements: dict
  sample:
    - wave: 1
      pods: [ml/trainer-0, ml/trainer-1]
      claims: [ml/trainer-0-gpu-x7k2p, ml/trainer-1-gpu-9fq4d]
      pod_disruption_budgets: [ml/trainer]
      jobs: []
      unmanaged: []
      terminating: []
claims_not_freed:
  description:
    - The claims whose devices evicting their pods cannot free (see O(effect)), each with C(claim), C(devices)
      (C(driver/pool/device) of the selected devices it holds), C(pods) and C(controllers) (C(Kind
      namespace/name) of the controllers that recreate the pods naming the claim). With O(state=tainted) and
      O(effect=Evict) a non-empty list is refused before any write and returned in the failure.
  returned: when O(state=dry_run)
  type: list
  elements: dict
  sample:
    - claim: ml/shared-gpu
      devices: [gpu.example.com/node-1/gpu-0]
      pods: [ml/trainer-7d9-abcde]
      controllers: [ReplicaSet ml/trainer-7d9]
pod_disruption_budgets:
  description:
    - The PodDisruptionBudgets covering the pods of RV(waves), each with C(name), C(spec) (C(minAvailable),
      C(maxUnavailable)) and, as the disruption controller last computed them, C(disruptions_allowed),
      C(current_healthy), C(desired_healthy) and C(expected_pods).
  returned: when O(effect=Evict) or O(state=dry_run)
  type: list
  elements: dict
not_evicted:
  description:
    - With O(effect=Evict), the pods that could not be evicted, each with C(pod), C(wave), C(reason),
      C(pod_disruption_budgets) (those covering it) and C(message) (with the API server's words, for example
      C(The disruption budget trainer needs 2 healthy pods and has 2 currently)).
    - C(reason) is V(budget) when a PodDisruptionBudget refused the eviction, V(namespace) when the pod's namespace
      is being deleted, V(terminating) when the pod was evicted but is not gone in time, V(error) for another
      refusal.
    - With O(wait=false), the refusals of this call (the next call retries them).
  returned: when O(effect=Evict)
  type: list
  elements: dict
claims_released:
  description: With O(effect=Evict), whether no claim of the evicted pods holds a selected device any more.
  returned: when O(effect=Evict)
  type: bool
waves_left:
  description: With O(effect=Evict) and O(wait=false), how many waves still have pods (the first of them is the one
    this call evicted).
  returned: when O(effect=Evict) and O(wait=false)
  type: int
affected_claims:
  description: Per claim, its devices under the rule, pods, and C(toleration) (V(none), V(forever), V(seconds)).
  returned: when O(state) is not V(absent)
  type: list
  elements: dict
waiting_for:
  description:
    - With O(wait=false), what the eviction still waits for - V(eviction_done) while a C(NoExecute) rule's
      C(EvictionInProgress) condition is not false for its generation; with O(effect=Evict), V(wave_evicted) while
      the pods of a wave are not all gone, then V(claims_released) while their claims still hold a device - or null
      when nothing is left to wait for.
  returned: wait=false
  type: str
  sample: eviction_done
pending:
  description:
    - With O(wait=false), the pods (namespace/name) still to be evicted, those whose claims do not tolerate the taint
      for ever; C(DeviceTaintRule/<name>) alone while the controller has not reported and no such pod is listed.
      With O(effect=Evict), the pods of the wave still there, or the claims (namespace/name) still holding a device.
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
  sample: "waiting for the pods using the devices to be evicted (...): 1 pending (ns/trainer-0), 3.1s so far"
started:
  description: With O(wait=false), when the operation started (O(since), else the call's start), in seconds since the epoch.
  returned: wait=false
  type: float
api_requests:
  description: Number of API requests the module made.
  returned: always
  type: int
"""

from ansible_collections.dra.admin.plugins.module_utils.common.errors import fails_on_error, raise_input_errors
from ansible_collections.dra.admin.plugins.module_utils.access.api import (
    AnsibleK8SModule, DraApi, auth_argument_spec,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import (
    ABSENT, DRY_RUN, TAINTED, DeviceTaint,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.evictions import EVICT
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import DEFAULT_KEY, input_errors
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import EFFECT_NONE, NO_EXECUTE, NO_SCHEDULE
from ansible_collections.dra.admin.plugins.module_utils.common.waits import since_error, wait_options, wait_parameter_errors


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        state=dict(type="str", choices=[DRY_RUN, TAINTED, ABSENT], default=TAINTED),
        name=dict(type="str"),
        driver=dict(type="str"),
        pool=dict(type="str"),
        device=dict(type="str"),
        key=dict(type="str", default=DEFAULT_KEY, no_log=False),
        value=dict(type="str", default=""),
        effect=dict(type="str", choices=[NO_SCHEDULE, NO_EXECUTE, EVICT], default=NO_SCHEDULE),
        labels=dict(type="dict", default={}),
        annotations=dict(type="dict", default={}),
        wait=dict(type="bool", default=True),
        since=dict(type="float"),
        preview=dict(type="bool", default=False),
    )
    spec.update(wait_options(300, 2.0, sleep_aliases=["poll_interval"]))
    return spec


# Option relations Ansible checks before main() (its message names the option and what is missing): the driver
# selects the devices of states tainted and dry_run, the rule of state absent is found by its name or its selector,
# and device names are unique only within a pool.
REQUIRED_IF = [("state", TAINTED, ["driver"]), ("state", DRY_RUN, ["driver"]),
               ("state", ABSENT, ["name", "driver"], True)]
REQUIRED_BY = {"device": "pool"}


def parameter_errors(params):
    effect = NO_SCHEDULE if params["effect"] == EVICT else params["effect"]  # Evict writes a NoSchedule rule
    checked = dict(params, effect=EFFECT_NONE if params["state"] == DRY_RUN else effect)
    errors = input_errors(checked)
    if params.get("preview") and params["state"] != DRY_RUN:
        errors.append("preview is for state=dry_run (it says where the evicted workloads would go; it writes nothing)")
    errors.append(since_error(params, "operation"))
    return [e for e in errors if e] + wait_parameter_errors(params, spec=argument_spec())


def main():
    module = AnsibleK8SModule(argument_spec=argument_spec(), supports_check_mode=True, required_if=REQUIRED_IF,
                              required_by=REQUIRED_BY)
    with fails_on_error(module) as failure:
        raise_input_errors(parameter_errors(module.params), "; nothing was changed")
        api = DraApi(module)
        run = DeviceTaint(api, module.params, check_mode=module.check_mode)
        failure.keep(changed=lambda: run.changed, api_requests=lambda: api.requests, diff=lambda: run.diff)
        result = run.run()
    module.exit_json(changed=run.changed, api_requests=api.requests, diff=run.diff, **result)


if __name__ == "__main__":
    main()
