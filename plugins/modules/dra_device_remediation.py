#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dra_device_remediation
short_description: Taint unhealthy DRA devices with a DeviceTaintRule, and lift the taint once they are healthy again
version_added: 0.2.0
description:
  - One remediation pass over the device health that M(dra.admin.dra_device_health_info) reports (pods'
    C(allocatedResourcesStatus) and the taints drivers publish in their ResourceSlices).
  - A published device that is unhealthy gets a C(DeviceTaintRule) of its own, named
    C(dra-admin-unhealthy-<driver>-<pool>-<device>), with the taint key C(dra.admin/unhealthy) and O(effect)
    (C(NoSchedule) unless C(NoExecute) is asked for), written as M(dra.admin.dra_device_taint) writes it (same code).
  - A device with such a rule that is healthy again (no source reports a problem - its pods report it C(Healthy), or
    nothing reports on it) is marked with the annotation C(dra.admin/healthy-since) on its rule by the first run that
    sees it so; the first run at least O(healthy_for) seconds later lifts the rule. A device seen unhealthy or
    C(Unknown) again loses the mark, and the period starts over. The time is kept on the rule, so runs need no
    local state file.
  - Only the remediation's own rules are changed or lifted - those with the labels
    C(app.kubernetes.io/managed-by=dra.admin) and C(dra.admin/purpose=device-health-remediation) and the taint key
    C(dra.admin/unhealthy). Maintenance rules of M(dra.admin.dra_device_taint), drivers' taints and other tools'
    rules are never touched.
  - A rule whose device is not published any more is kept (nothing says the device is healthy). A device that is only
    C(Unknown) is not tainted, and keeps a rule it has (without the healthy mark).
  - When a write fails part-way (for example the eviction wait times out with O(effect=NoExecute)), the module fails
    naming the device, with RV(actions) as planned and C(changed) true when anything was written before.
  - Needs a cluster that serves C(DeviceTaintRule) with effect C(None) and a status (1.35 and later; on 1.35 and
    1.36 switched on with role C(dra.admin.feature_gates) and C(dra_feature_gates_device_taints=true)). Otherwise
    the module fails naming the version and what would switch the API on, and changes nothing.
  - With pod-reported health only, a device whose pods are gone (for example evicted by a C(NoExecute) taint) is
    reported by nobody, which counts as healthy; it returns to service after O(healthy_for) seconds, and is
    tainted again if the next pod reports it unhealthy. A driver that taints its devices in its ResourceSlices
    says until when itself.
author:
  - dra.admin maintainers (@dra-admin)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - dra.admin.attributes
  - dra.admin.attributes.actiongroup_k8s
  - dra.admin.wait
  - dra.admin.gpu_health
attributes:
  check_mode:
    support: full
    details:
      - Reads the health and the rules and returns every action it would take, writing nothing.
  diff_mode:
    support: full
    details:
      - Per rule written or lifted, its name, labels, selector and taint before and after.
options:
  effect:
    description:
      - The taint's effect on unhealthy devices. V(NoSchedule) keeps new claims off them and leaves running pods
        alone; V(NoExecute) also evicts the pods using them (and waits up to O(wait_timeout) for the eviction).
      - An existing remediation rule of an unhealthy device is changed to this effect.
    type: str
    choices: [NoSchedule, NoExecute]
    default: NoSchedule
  healthy_for:
    description:
      - Seconds a device must have been healthy (from the first run that saw it so) before its taint is lifted.
        V(0) lifts it the first run that sees it healthy.
    type: int
    default: 600
  driver:
    description:
      - Only this driver's devices and rules.
      - A driver that publishes no device in the cluster and has no remediation rule is refused before any
        write (a scheduled run with a misspelt driver would otherwise succeed for ever), unless
        O(allow_absent_driver=true).
    type: str
  allow_absent_driver:
    description:
      - Accept an O(driver) that publishes no device (nothing to do then), as for a schedule set up before the
        driver is installed.
    type: bool
    default: false
  dead_drivers:
    description:
      - Also take out of service the devices a driver still publishes for a node its kubelet plugin is gone from
        (kubernetes#141912) - no pod of the driver's DaemonSet on the node is Ready, and none turned not Ready less
        than 30 seconds ago. Their rules always have effect C(NoSchedule) (the pods using them are left alone) and
        say why in C(dra.admin/reason); once the plugin is back they are healthy again and lifted after
        O(healthy_for), as every other remediation rule.
      - The driver's DaemonSet is found as the upgrade check finds it (the label C(dra.admin/driver), or a DaemonSet
        that mounts the kubelet's plugin registry and names the driver); a driver no DaemonSet runs is not judged.
        Only devices published for a named node count.
      - Keep it the same in every run of a schedule - a run without it sees those devices healthy and starts
        lifting their rules. Costs one more LIST (the DaemonSets). RV(drivers_gone) says what was found.
    type: bool
    default: false
  wait:
    description:
      - With O(effect=NoExecute), wait after each device's taint until its eviction is finished.
      - V(false) writes every rule and returns at once, saying what the evictions still wait for (RV(waiting_for),
        RV(pending), the pods still to be evicted, RV(holding), RV(elapsed), RV(progress)). The same call in check
        mode writes nothing and only reports, which makes it the read-only call to wait on in an C(until) loop, a
        line per round (role C(dra.admin.device_maintenance), entry point C(remediate), does so); with O(since), a
        round after O(wait_timeout) whose evictions are not over fails naming the devices.
    type: bool
    default: true
  since:
    description:
      - With O(wait=false), when the remediation started (seconds since the epoch, RV(started) of its first call);
        RV(elapsed) and O(wait_timeout) count from it. Default is the call's own start.
    type: float
  wait_timeout:
    default: 300
  wait_sleep:
    default: 2.0
    aliases: [poll_interval]
notes:
  - Run it on a schedule (for example every few minutes); each run is one pass, and O(healthy_for) is measured
    between runs with the clock of the host that runs the module.
  - Claims can tolerate the remediation's taint with the key C(dra.admin/unhealthy).
  - With O(gpu_health), read the facts in the same play just before, and give them in every run of a schedule - a
    run without them sees their devices as the other sources do and may start lifting rules. A GPU that asks for a
    reset stays unhealthy until it is reset (nvidia-smi's counters) and the Xid has left O(dra.admin.dra_gpu_health_facts#module:xid_window)
    or a later driver load or Xid 154 (recovery action None) ended it, also after a C(NoExecute) rule has evicted the
    pods that reported on it.
seealso:
  - module: dra.admin.dra_device_health_info
  - module: dra.admin.dra_device_taint
"""

EXAMPLES = r"""
- name: Keep new claims off unhealthy GPUs; return them after 10 minutes of good health
  dra.admin.dra_device_remediation:
    driver: gpu.example.com
    healthy_for: 600
  register: remediation

- name: What it did
  ansible.builtin.debug:
    msg: "tainted {{ remediation.tainted }}, lifted {{ remediation.lifted }}, waiting {{ remediation.waiting }}"

- name: Also evict the pods on unhealthy devices (asked for explicitly)
  dra.admin.dra_device_remediation:
    effect: NoExecute
    healthy_for: 1800
    wait_timeout: 600
"""

RETURN = r"""
kubernetes_version:
  description: The API server's version.
  returned: success
  type: str
  sample: v1.36.3
api_version:
  description: The C(resource.k8s.io) version the rules were read and written in.
  returned: success
  type: str
  sample: v1beta2
now:
  description: This run's time, as written to C(dra.admin/healthy-since).
  returned: success
  type: str
  sample: "2026-11-23T21:40:00Z"
actions:
  description:
    - One entry per device that is unhealthy or has a remediation rule - C(action) (V(taint), V(update), V(keep),
      V(mark-healthy), V(unmark), V(wait), V(lift), V(unpublished)), C(id), C(driver), C(pool), C(device), C(rule)
      (its name), C(effect) (the rule's, before this run), and per action C(reasons), C(in_use), C(want_effect),
      C(healthy_since), C(seconds_left), C(changed), and for taints the pods that C(NoExecute) would evict or
      evicted (C(would_evict), C(evicted), C(still_holding)); for lifts C(other_rules_in_force), the names of the
      other rules (any tool's or dra.admin operation's) that still keep the device out of service.
  returned: success
  type: list
  elements: dict
tainted:
  description: Devices (driver/pool/device) that got a new rule.
  returned: success
  type: list
  elements: str
updated:
  description: Unhealthy devices whose rule was changed (effect, or a healthy-since mark removed).
  returned: success
  type: list
  elements: str
kept:
  description: Devices whose rule stays as it is (unhealthy, or Unknown without a mark).
  returned: success
  type: list
  elements: str
marked_healthy:
  description: Devices seen healthy for the first time; their rule got C(dra.admin/healthy-since).
  returned: success
  type: list
  elements: str
unmarked:
  description: Devices marked healthy before that are not healthy now; the mark was removed.
  returned: success
  type: list
  elements: str
waiting:
  description: Devices healthy since their mark, for less than O(healthy_for) seconds.
  returned: success
  type: list
  elements: str
lifted:
  description: Devices whose rule was lifted (deleted).
  returned: success
  type: list
  elements: str
unpublished:
  description: Devices with a rule that no ResourceSlice publishes now; the rule is kept.
  returned: success
  type: list
  elements: str
health_summary:
  description: The health report's counts (see M(dra.admin.dra_device_health_info)'s C(summary)).
  returned: success
  type: dict
sources:
  description: Which health sources the cluster has (see M(dra.admin.dra_device_health_info)'s C(sources)).
  returned: success
  type: dict
drivers_gone:
  description:
    - With O(dead_drivers=true), the drivers whose kubelet plugin is gone from a node they still publish devices
      for, each with C(driver), C(node), C(daemonsets) and C(reason). Their devices are in RV(actions).
  returned: when O(dead_drivers=true)
  type: list
  elements: dict
  sample:
    - driver: gpu.example.com
      node: worker-3
      daemonsets: [dra-system/gpu-driver]
      reason: driver gpu.example.com publishes devices for node worker-3 but no pod of its DaemonSet dra-system/gpu-driver runs there
waiting_for:
  description:
    - With O(wait=false), what the evictions still wait for - V(eviction_done) while the rule of a device tainted
      C(NoExecute) has its C(EvictionInProgress) condition not false for its generation - or null.
  returned: wait=false
  type: str
pending:
  description:
    - With O(wait=false), the pods (namespace/name) still to be evicted from those devices;
      C(DeviceTaintRule/<name>) for a rule not reported on yet with no such pod listed.
  returned: wait=false
  type: list
  elements: str
pending_count:
  description: With O(wait=false), how many are pending.
  returned: wait=false
  type: int
holding:
  description: With O(wait=false), per device tainted C(NoExecute) (its id), the pods using it now.
  returned: wait=false
  type: dict
elapsed:
  description: With O(wait=false), seconds since O(since) (or since the call started).
  returned: wait=false
  type: float
progress:
  description: With O(wait=false), one line - what is waited for, what is pending, seconds so far.
  returned: wait=false
  type: str
started:
  description: With O(wait=false), when the remediation started (O(since), else the call's start), in seconds since the epoch.
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
from ansible_collections.dra.admin.plugins.module_utils.devices.remediation_service import remediate
from ansible_collections.dra.admin.plugins.module_utils.devices.remediation import EFFECTS, RemediationInputError
from ansible_collections.dra.admin.plugins.module_utils.devices.health import HealthInputError, check_gpu_health
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import NO_SCHEDULE
from ansible_collections.dra.admin.plugins.module_utils.devices.remediation import check_inputs
from ansible_collections.dra.admin.plugins.module_utils.common.names import subdomain_error
from ansible_collections.dra.admin.plugins.module_utils.common.waits import since_error, wait_options, wait_parameter_errors


def argument_spec():
    spec = auth_argument_spec()
    spec.update(
        effect=dict(type="str", choices=list(EFFECTS), default=NO_SCHEDULE),
        healthy_for=dict(type="int", default=600),
        driver=dict(type="str"),
        allow_absent_driver=dict(type="bool", default=False),
        dead_drivers=dict(type="bool", default=False),
        wait=dict(type="bool", default=True),
        since=dict(type="float"),
        gpu_health=dict(type="list", elements="dict", default=[]),
    )
    spec.update(wait_options(300, 2.0, sleep_aliases=["poll_interval"]))
    return spec


def input_errors(params, spec=None):
    """Every problem of the parameters, each naming the option and the fix; checked before any request."""
    errors = wait_parameter_errors(params, spec=spec)
    errors.append(since_error(params, "remediation"))
    if params["driver"] is not None:
        errors.append(subdomain_error("driver", params["driver"]))
    try:
        check_inputs(params["effect"], params["healthy_for"])
    except RemediationInputError as exc:
        errors.append(str(exc))
    try:
        check_gpu_health(params["gpu_health"])
    except HealthInputError as exc:
        errors.append(str(exc))
    return [e for e in errors if e]


def main():
    spec = argument_spec()
    module = AnsibleK8SModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    # a bad input (a ValueError) is refused before any request; a RemediationFailure says what it changed
    with fails_on_error(module, changed=False, refused_suffix="; nothing was changed") as failure:
        raise_input_errors(input_errors(params, spec))
        api = DraApi(module)
        failure.keep(api_requests=lambda: api.requests)
        result, changed, diff = remediate(api, params["effect"], params["healthy_for"], driver=params["driver"],
                                          wait_timeout=params["wait_timeout"], poll_interval=params["wait_sleep"],
                                          check_mode=module.check_mode, wait=params["wait"], since=params["since"],
                                          allow_absent_driver=params["allow_absent_driver"],
                                          dead_drivers=params["dead_drivers"], gpu_health=params["gpu_health"])
    module.exit_json(changed=changed, api_requests=api.requests, diff=diff, **result)


if __name__ == "__main__":
    main()
