# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Remediation of unhealthy devices: which devices to taint, which of the collection's rules to lift, and when.

Pure functions (no Ansible, no network). The input is the device health report (devices.health.device_health's
``devices``: every published device with its condition) and the DeviceTaintRules the remediation created; the
output is one action per device, carried out by the caller through module_utils.device_taints (the same code as
dra_device_taint).

* A published device whose condition is ``unhealthy`` gets a rule of its own (name
  ``dra-admin-unhealthy-<driver>-<pool>-<device>``, taint key ``dra.admin/unhealthy``, the asked effect:
  NoSchedule unless the caller asks for NoExecute).
* The remediation's own rules are those with the collection's managed-by label, the remediation label and the
  remediation's taint key; no other rule is ever read as one of them, changed or lifted.
* A rule whose device is healthy again (condition ``healthy`` or ``not-reported``: no source reports a problem)
  gets the annotation ``dra.admin/healthy-since`` with this run's time the first run that sees it so, and is lifted
  by the first run at least ``healthy_for`` seconds later. A device that is ``unhealthy`` or ``unknown`` again
  loses the annotation (the period starts over). The time lives on the rule, so runs need no local state; the
  health report's ``first_seen`` cannot serve: it remembers only since when a device is unhealthy or unknown.
* A rule whose device is no longer published is kept (nothing says the device is healthy).
* Opt-in (``dead_drivers``): the devices a driver still publishes for a node its kubelet plugin is gone from
  (devices.health.drivers_gone, kubernetes#141912) count as unhealthy, always with effect NoSchedule: new claims
  get no allocation there (the plugin could not prepare them) and the pods already using them are left alone.
  Once the plugin is back (its pod Ready) the devices are healthy again and their rules are lifted as above.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.devices.health import (
    COND_HEALTHY, COND_NOT_REPORTED, COND_UNHEALTHY, device_key,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import EFFECT_NONE, NO_EXECUTE, NO_SCHEDULE
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import (
    MANAGED_BY, MANAGED_BY_LABEL, OPERATION_LABEL, OPERATION_NAME_PREFIXES,
    REMEDIATION, operation_rule_name, selector,
)
from ansible_collections.dra.admin.plugins.module_utils.common.times import format_time, parse_time

KEY = "dra.admin/unhealthy"
# The remediation's identity as a dra.admin operation (devices.taints: the label, its value, its names' prefix).
PURPOSE_LABEL = OPERATION_LABEL
PURPOSE = REMEDIATION
HEALTHY_SINCE = "dra.admin/healthy-since"
REASON = "dra.admin/reason"
RULE_PREFIX = OPERATION_NAME_PREFIXES[REMEDIATION]
# The LIST that finds the remediation's rules (the taint key is checked on each too).
LABEL_SELECTOR = "%s=%s,%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY, PURPOSE_LABEL, PURPOSE)
EFFECTS = (NO_SCHEDULE, NO_EXECUTE)

# Actions, one per device.
TAINT = "taint"            # an unhealthy device without its rule: create it
UPDATE = "update"          # an unhealthy device whose rule has another effect or a healthy-since mark: patch it
KEEP = "keep"              # an unhealthy device with its rule as wanted: nothing to do
MARK = "mark-healthy"      # healthy again, first seen so: write healthy-since
UNMARK = "unmark"          # marked healthy, but not healthy now: remove healthy-since
WAIT = "wait"              # marked healthy, the period is not over
LIFT = "lift"              # healthy for the period: delete the rule
UNPUBLISHED = "unpublished"  # the rule's device is not published now: kept
WRITES = (TAINT, UPDATE, MARK, UNMARK, LIFT)

HEALTHY_CONDITIONS = (COND_HEALTHY, COND_NOT_REPORTED)


class RemediationInputError(DraAdminError, ValueError):
    """A bad option (effect, healthy_for); the message names it and the fix."""


def check_inputs(effect, healthy_for):
    if effect not in EFFECTS:
        raise RemediationInputError("effect %r: use NoSchedule (the default: keeps new claims off the device) or "
                                    "NoExecute (also evicts the pods using it)" % (effect,))
    if isinstance(healthy_for, bool) or not isinstance(healthy_for, int) or healthy_for < 0:
        raise RemediationInputError("healthy_for is %r; give the seconds a device must be healthy before its taint "
                                    "is lifted (a whole number, 0 or more)" % (healthy_for,))


def driver_absent(driver, devices, rules):
    """Whether a `driver` asked for publishes no device and owns no remediation rule (a misspelt name: a
    scheduled remediation would find nothing to do and succeed for ever). A driver with rules of its own left
    is not absent: the run lifts them. devices: the health report's devices; rules: the DeviceTaintRules read."""
    if not driver:
        return False
    if any(d.get("published") and d.get("driver") == driver for d in devices):
        return False
    return not any(is_remediation_rule(r) and _rule_device(r)[0] == driver for r in rules)


def absent_driver_error(driver, publishing):
    """The refusal of an absent `driver` (driver_absent), naming the drivers that do publish."""
    publishing = sorted(set(d for d in publishing if d))
    return RemediationInputError(
        "driver %r publishes no device in this cluster (drivers publishing: %s) and has no remediation rule: check "
        "the name, or set allow_absent_driver: true (role device_maintenance: "
        "dra_device_maintenance_remediate_allow_absent_driver) where the driver may be absent"
        % (driver, ", ".join(publishing) or "none"))


def with_gone_drivers(devices, gone):
    """The health report's devices with those of the drivers gone from their node (devices.health.drivers_gone)
    made unhealthy, their reason added and their rule's effect NoSchedule (copies; the others as they are)."""
    reasons = dict(((g["driver"], g["node"]), g["reason"]) for g in gone or [])
    out = []
    for dev in devices:
        reason = reasons.get((dev.get("driver"), dev.get("node"))) if dev.get("published") else None
        if reason:
            dev = dict(dev, condition=COND_UNHEALTHY, reasons=list(dev.get("reasons") or []) + [reason],
                       remediation_effect=NO_SCHEDULE)
        out.append(dev)
    return out


def rule_name(driver, pool, device):
    """The remediation's rule for one device (never a maintenance rule's name: another prefix)."""
    return operation_rule_name(selector(driver, pool, device), REMEDIATION)


def is_remediation_rule(rule):
    """A rule this remediation made: managed-by and purpose labels, its taint key, one device selected."""
    meta = rule.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec = rule.get("spec") or {}
    sel = spec.get("deviceSelector") or {}
    return (labels.get(MANAGED_BY_LABEL) == MANAGED_BY and labels.get(PURPOSE_LABEL) == PURPOSE
            and (spec.get("taint") or {}).get("key") == KEY
            and all(sel.get(k) for k in ("driver", "pool", "device")))


def _rule_device(rule):
    sel = (rule.get("spec") or {}).get("deviceSelector") or {}
    return sel.get("driver"), sel.get("pool"), sel.get("device")


def healthy_since(rule):
    """The rule's healthy-since time (aware datetime), or None when absent or unreadable."""
    text = ((rule.get("metadata") or {}).get("annotations") or {}).get(HEALTHY_SINCE)
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError:
        return None


def _action(kind, key, name, rule=None, **extra):
    out = {"action": kind, "id": device_key(*key), "driver": key[0], "pool": key[1], "device": key[2],
           "rule": name, "effect": ((rule or {}).get("spec") or {}).get("taint", {}).get("effect")}
    out.update(extra)
    return out


def plan(devices, rules, now, healthy_for, effect=NO_SCHEDULE, driver=None):
    """One action per device that is unhealthy or has a remediation rule, sorted by device.

    devices: the health report's devices (every published device; each with driver, pool, device, published,
    condition, reasons, in_use); rules: DeviceTaintRules (only the remediation's own are read); now: aware
    datetime; healthy_for: seconds; effect: for new and unhealthy devices' rules; driver: only this driver.
    Each action: action, id, driver, pool, device, rule (name), effect (the rule's now, None without one), and
    per kind: reasons and in_use (taint, update, keep), want_effect (taint, update), healthy_since
    (mark, wait, lift), lift_at and seconds_left (wait).
    """
    check_inputs(effect, healthy_for)
    by_key = dict(((d["driver"], d["pool"], d["device"]), d) for d in devices
                  if d.get("published") and (driver is None or d["driver"] == driver))
    own = {}
    for rule in rules:
        if is_remediation_rule(rule) and (driver is None or _rule_device(rule)[0] == driver):
            own[_rule_device(rule)] = rule
    actions = []
    for key in sorted(set(own) | set(k for k, d in by_key.items() if d["condition"] == COND_UNHEALTHY)):
        dev = by_key.get(key)
        rule = own.get(key)
        name = (rule.get("metadata") or {}).get("name") if rule else rule_name(*key)
        condition = dev["condition"] if dev else None
        if condition == COND_UNHEALTHY:
            extra = {"reasons": list(dev.get("reasons") or []), "in_use": bool(dev.get("in_use"))}
            current = ((rule or {}).get("spec") or {}).get("taint", {}).get("effect")
            want = dev.get("remediation_effect") or effect
            if rule is None:
                actions.append(_action(TAINT, key, name, want_effect=want, **extra))
            elif current != want or current == EFFECT_NONE or HEALTHY_SINCE in \
                    ((rule.get("metadata") or {}).get("annotations") or {}):
                actions.append(_action(UPDATE, key, name, rule, want_effect=want, **extra))
            else:
                actions.append(_action(KEEP, key, name, rule, **extra))
        elif dev is None:
            actions.append(_action(UNPUBLISHED, key, name, rule))
        elif condition in HEALTHY_CONDITIONS:
            since = healthy_since(rule)
            if since is None:
                if healthy_for == 0:
                    actions.append(_action(LIFT, key, name, rule, healthy_since=format_time(now)))
                else:
                    actions.append(_action(MARK, key, name, rule, healthy_since=format_time(now)))
                continue
            healthy_seconds = (now - since).total_seconds()
            if healthy_seconds >= healthy_for:
                actions.append(_action(LIFT, key, name, rule, healthy_since=format_time(since)))
            else:
                actions.append(_action(WAIT, key, name, rule, healthy_since=format_time(since),
                                       seconds_left=int(healthy_for - healthy_seconds + 0.999)))
        else:  # unknown: not proven healthy, the period starts over
            marked = HEALTHY_SINCE in ((rule.get("metadata") or {}).get("annotations") or {})
            actions.append(_action(UNMARK if marked else KEEP, key, name, rule,
                                   reasons=list(dev.get("reasons") or []), in_use=bool(dev.get("in_use"))))
    return actions


def rule_annotations(action, now):
    """The annotations the caller writes with an action (None: remove it), for module_utils.device_taints."""
    if action["action"] in (TAINT, UPDATE):
        return {REASON: "; ".join(action.get("reasons") or []) or "unhealthy", HEALTHY_SINCE: None}
    if action["action"] == MARK:
        return {HEALTHY_SINCE: action["healthy_since"] or format_time(now)}
    if action["action"] == UNMARK:
        return {HEALTHY_SINCE: None}
    return {}


# The lists the module returns, per action kind (named so that none is a method of a mapping, which Jinja would
# find first: result.update, result.keep).
LISTS = ((TAINT, "tainted"), (UPDATE, "updated"), (KEEP, "kept"), (MARK, "marked_healthy"), (UNMARK, "unmarked"),
         (WAIT, "waiting"), (LIFT, "lifted"), (UNPUBLISHED, "unpublished"))


def summary(actions):
    """{list name: [device ids]} for each action kind (empty lists included)."""
    names = dict(LISTS)
    out = dict((name, []) for name in names.values())
    for action in actions:
        out[names[action["action"]]].append(action["id"])
    return out
