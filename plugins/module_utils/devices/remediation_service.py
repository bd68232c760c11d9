# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Remediation of unhealthy devices against the API (module dra_device_remediation).

Reads the device health (device_health.gather_device_health) and the remediation's own DeviceTaintRules (one
LIST with their labels), plans with devices.remediation.plan, and writes each action through
device_taints.DeviceTaint, the code of dra_device_taint: taint (create or patch the device's rule), mark or
unmark healthy-since (a patch of its annotation), lift (delete). Devices whose plan is keep, wait or unpublished
cost no request beyond the reads. With wait false no action waits for its eviction; the rules, claims and pods are
read once more at the end to say what the evictions still wait for (devices.taint_progress), for a role that waits
in an until-loop of the same call in check mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible_collections.dra.admin.plugins.module_utils.devices.remediation import (
    KEY, LABEL_SELECTOR, LIFT, PURPOSE, WRITES, absent_driver_error, check_inputs, driver_absent, plan,
    rule_annotations, summary, with_gone_drivers,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import DeviceTaintError
from ansible_collections.dra.admin.plugins.module_utils.devices.taint_progress import (
    EVICTION_TEXT, WAIT_TEXT, eviction_timeout_message, remediation_pending, remediation_waits,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import pod_index
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import current_slices, pool_key
from ansible_collections.dra.admin.plugins.module_utils.common.progress import progress
from ansible_collections.dra.admin.plugins.module_utils.common.times import format_time
from ansible_collections.dra.admin.plugins.module_utils.devices.health_service import gather_device_health
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import (
    ABSENT, TAINTED, DeviceTaint, rule_api_version, rule_path,
)


class RemediationFailure(DeviceTaintError):
    """A write failed part-way: `changed` says whether an earlier action (or this one) wrote anything."""

    def __init__(self, message, changed, details):
        super(RemediationFailure, self).__init__(message, details)
        self.changed = changed


def remediation_params(action, now, wait_timeout, poll_interval, wait=True):
    """dra_device_taint's parameters for one planned action (wait false: none waits for its eviction)."""
    effect = action.get("want_effect") or action.get("effect")
    return {"state": ABSENT if action["action"] == LIFT else TAINTED, "name": action["rule"],
            "driver": action["driver"], "pool": action["pool"], "device": action["device"], "key": KEY,
            "value": "", "effect": effect, "labels": {}, "operation": PURPOSE,
            "annotations": rule_annotations(action, now), "wait": wait and bool(action.get("want_effect")),
            "wait_timeout": wait_timeout, "wait_sleep": poll_interval}


def remediate(api, effect, healthy_for, driver=None, wait_timeout=300, poll_interval=2.0, check_mode=False,
              now=None, clock=time.time, sleep=time.sleep, wait=True, since=None, allow_absent_driver=False,
              dead_drivers=False, gpu_health=None):
    """Plan and carry out the remediation. Returns (result, changed, diff); DeviceTaintError on a cluster
    without a usable DeviceTaintRule (nothing written) or a failed write.

    wait false: no action waits for its eviction; the result says what the evictions still wait for
    (waiting_for, pending, holding: the pods using each NoExecute device now) and the seconds since `since` (else
    the call's start); with `since`, a call after wait_timeout whose evictions are not over fails as the
    waiting call does. A `driver` that publishes nothing and owns no rule is refused (RemediationInputError,
    nothing written) unless allow_absent_driver. dead_drivers: the devices of drivers gone from their node
    (devices.health.drivers_gone) are taken out of service too (devices.remediation.with_gone_drivers); gpu_health:
    the nodes' dra_gpu_health facts, a third health source."""
    check_inputs(effect, healthy_for)
    started = since or clock()
    kube_version, version = rule_api_version(api)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    health = gather_device_health(api, driver=driver, now=now, driver_pods=dead_drivers, gpu_health=gpu_health)
    rules = list(api.list_items(rule_path(version), {"labelSelector": LABEL_SELECTOR}))
    if not allow_absent_driver and driver_absent(driver, health["devices"], rules):
        # The health read is limited to the driver: the drivers that do publish are read for the message only.
        slices = api.list_items(api.resource_path("resourceslices"))
        raise absent_driver_error(driver, [pool_key(s)[0] for s in current_slices(slices)])
    devices = with_gone_drivers(health["devices"], health.get("drivers_gone")) if dead_drivers else health["devices"]
    actions = plan(devices, rules, now, healthy_for, effect, driver)
    changed = False
    diff = {"before": {}, "after": {}}
    for action in actions:
        if action["action"] not in WRITES:
            continue
        task = DeviceTaint(api, remediation_params(action, now, wait_timeout, poll_interval, wait),
                           check_mode=check_mode, clock=clock, sleep=sleep)
        try:
            outcome = task.run()
        except DeviceTaintError as exc:
            raise RemediationFailure(
                "device %s (%s of rule %s): %s; the actions before it were carried out, the later ones not: run "
                "again" % (action["id"], action["action"], action["rule"], exc), changed or task.changed,
                dict(exc.details, actions=actions))
        changed = changed or task.changed
        action["changed"] = task.changed
        for field in ("would_evict", "evicted", "still_holding"):
            if field in outcome:
                action[field] = outcome[field]
        if action["action"] == LIFT:  # what still keeps the device out of service (a maintenance rule, say)
            action["other_rules_in_force"] = [rule["name"] for rule in outcome.get("other_rules_in_force") or []]
        if task.changed:
            diff["before"][task.name] = task.diff["before"]
            diff["after"][task.name] = task.diff["after"]
    result = {"kubernetes_version": kube_version, "api_version": version, "actions": actions,
              "health_summary": health["summary"], "sources": health["sources"], "now": format_time(now)}
    if dead_drivers:
        result["drivers_gone"] = health["drivers_gone"]
    result.update(summary(actions))
    if not wait:
        result.update(eviction_progress(api, version, actions, started, since, wait_timeout, clock, changed))
    return result, changed, diff


def eviction_progress(api, version, actions, started, since, wait_timeout, clock, changed):
    """wait false: what the evictions of the NoExecute devices still wait for, as read now (the rules, then the
    claims and pods, only when a device is NoExecute); the progress fields and holding."""
    waits = remediation_waits(actions)
    waiting_for, pending, holding = None, [], {}
    if waits:
        rules = list(api.list_items(rule_path(version), {"labelSelector": LABEL_SELECTOR}))
        claims = list(api.list_items(api.resource_path("resourceclaims")))
        waiting_for, pending, holding = remediation_pending(waits, rules, claims, pod_index(api))
    out = progress(waiting_for, pending, started, clock(), WAIT_TEXT)
    out.update(started=started, holding=holding)
    if waiting_for and since and clock() - started >= wait_timeout:
        names = ", ".join(a["rule"] for a in waits)
        raise RemediationFailure(
            "devices %s: %s" % (", ".join(a["id"] for a in waits),
                                eviction_timeout_message(names, wait_timeout, EVICTION_TEXT, None, pending)),
            changed, dict(out, actions=actions))
    return out
