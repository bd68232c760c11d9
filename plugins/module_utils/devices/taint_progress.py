# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The eviction waits of the device taints, phase by phase (role device_maintenance).

dra_device_taint and dra_device_remediation with ``wait: false`` write their rules and return at once; the role
then waits in an until-loop of the same module in check mode (read only, ``since`` the first call's ``started``)
whose result names what the wait still waits for: the one wait of a ``NoExecute`` taint, ``eviction_done`` (the
rule's EvictionInProgress condition false for its generation), pending while pods that do not tolerate the taint
for ever still use the devices. This file decides that wait and its pending pods, the message when the time is
up (the same as the one call's), and the one result made of the write's and the wait's results (filters
dra.admin.device_taint_result and dra.admin.remediation_result). The fields and the line are
``common.progress``'s.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.progress import module_fields, ran
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import (
    NO_EXECUTE, affected_claims, eviction_done, pod_names, rule_name_of, rule_taint, selector,
)

# The one wait of a NoExecute taint.
EVICTION_DONE = "eviction_done"
EVICTION_TEXT = "the eviction to finish (condition EvictionInProgress false for its generation)"
WAIT_TEXT = {EVICTION_DONE: "the pods using the devices to be evicted (condition EvictionInProgress false for the "
                            "rule's generation)"}
# Pods still to go: those whose claims do not tolerate the taint, or tolerate it for some seconds only.
EVICTED_TOLERATIONS = ("none", "seconds")
# Effect Evict: the fields of one round only (left out of the one result), and those the last round has the
# final word on (the plan, waves, stays the first call's).
EVICT_ROUND_FIELDS = ("waves_left",)
EVICT_WAIT_FIELDS = ("not_evicted", "claims_released", "pod_disruption_budgets")
# The actions of a remediation whose rule is (or is to be) NoExecute: those it waits for.
WAITED_ACTIONS = ("taint", "update", "keep")


def rule_ref(name):
    """How a pending rule is named when no pod is listed (the controller has not reported on it yet)."""
    return "DeviceTaintRule/%s" % name


def eviction_pending(rule, name, effect, affected):
    """(wait, pending) of one rule: (None, []) when its effect does not evict or its eviction is done;
    else (EVICTION_DONE, the pods still to be evicted, sorted; or the rule alone when none is listed).

    rule: the rule as read (None when not written yet, in check mode); name: its name; effect: the effect the
    run wants; affected: taints.affected_claims() as read now.
    """
    if effect != NO_EXECUTE or (rule is not None and eviction_done(rule)):
        return None, []
    return EVICTION_DONE, pod_names(affected, EVICTED_TOLERATIONS) or [rule_ref(name)]


def eviction_timeout_message(name, timeout, what, controller, pods):
    """The failure when the wait's time is up (one call or an until-loop's last round): the rule stays."""
    return ("DeviceTaintRule %s is in place, but after %ss still waiting for %s (controller: %s). Pods still using "
            "the devices: %s. The rule stays; run again to keep waiting, or lift it with state=absent"
            % (name, timeout, what, controller or "no report", ", ".join(pods) or "none"))


def remediation_waits(actions):
    """The remediation's actions whose device's rule is or is to be NoExecute (taint, update, keep)."""
    return [a for a in actions
            if a["action"] in WAITED_ACTIONS and (a.get("want_effect") or a.get("effect")) == NO_EXECUTE]


def remediation_pending(actions, rules, claims, pods_by_uid):
    """What the remediation's eviction wait still waits for: (wait, pending, holding).

    actions: remediation_waits(); rules: the remediation's rules as read now; claims, pods_by_uid: as read now.
    holding: {device id: pods using the device now} for each waited device; pending: the pods still to be
    evicted from the devices whose rule's eviction is not done (the rule alone when none is listed).
    """
    by_name = dict((rule_name_of(r), r) for r in rules)
    holding = {}
    pending = set()
    for action in actions:
        rule = by_name.get(action["rule"])
        sel = selector(action["driver"], action["pool"], action["device"])
        affected = affected_claims(claims, [], rule_taint(rule), pods_by_uid, sel=sel)
        holding[action["id"]] = pod_names(affected)
        pending.update(eviction_pending(rule, action["rule"], NO_EXECUTE, affected)[1])
    return (EVICTION_DONE if pending else None), sorted(pending), holding


def merge_taint_steps(step, wait=None):
    """One dra_device_taint result, as the module returns it with `wait: true`, from the role's write
    (`wait: false`) and the until-loop's last round (check mode, `wait: false`).

    From the write: the plan (devices, would_evict, the rules in force before it; with effect Evict the waves),
    changed, the diff. From the wait: the rule and who uses the devices at the end (claims, pods, tolerating,
    affected_claims; with effect Evict not_evicted, claims_released and the budgets); evicted: the pods of the
    write's start gone at the end, still_holding: those left. With effect Evict the wait's rounds evict too, so
    the result is changed when they did. A wait that did not run (skipped:
    check mode, or no NoExecute) leaves the write's result as it is.
    """
    if not ran(step):
        return {}
    out = module_fields(step, also=EVICT_ROUND_FIELDS)
    out["changed"] = bool(step.get("changed"))
    if not ran(wait):
        return out
    for field in ("rule", "affected_claims", "claims", "pods", "tolerating") + EVICT_WAIT_FIELDS:
        if field in wait:
            out[field] = wait[field]
    if "still_holding" in step:
        still = list(wait.get("pods") or [])
        out["evicted"] = sorted(p for p in step.get("pods") or [] if p not in still)
        out["still_holding"] = still
        # effect Evict: the until-loop's rounds evict (the one call's changed covers them)
        out["changed"] = out["changed"] or bool(wait.get("changed")) or bool(out["evicted"])
    out["api_requests"] = (step.get("api_requests") or 0) + (wait.get("api_requests") or 0)
    return out


def merge_remediation_steps(step, wait=None):
    """One dra_device_remediation result, as the module returns it with `wait: true`, from the role's write
    (`wait: false`) and the until-loop's last round (check mode, `wait: false`).

    From the write: every action as planned and carried out, the lists, changed, the diff. From the wait, per
    device tainted NoExecute: evicted (the pods of the write's start gone at the end) and still_holding.
    """
    if not ran(step):
        return {}
    out = module_fields(step, also=("holding",))
    out["changed"] = bool(step.get("changed"))
    if not ran(wait):
        return out
    holding = wait.get("holding") or {}
    actions = []
    for action in step.get("actions") or []:
        action = dict(action)
        if action.get("want_effect") == NO_EXECUTE and action["id"] in holding and "still_holding" in action:
            still = list(holding[action["id"]])
            action["evicted"] = sorted(p for p in action["still_holding"] if p not in still)
            action["still_holding"] = still
        actions.append(action)
    out["actions"] = actions
    out["api_requests"] = (step.get("api_requests") or 0) + (wait.get("api_requests") or 0)
    return out
