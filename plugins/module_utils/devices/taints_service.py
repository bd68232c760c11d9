# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DeviceTaintRules against the API (see devices.taints for the rules and the reports).

Requests: discovery (which version serves devicetaintrules), one LIST of the rules (the run's own by name, and
the others that keep the same devices out of service), one LIST each of ResourceSlices, ResourceClaims and pods
(Table form) before writing; while waiting for eviction, one GET of the rule per poll, and the claims and pods are
listed once more at the end. With wait false there is no poll: the claims and pods as read before writing say
what the eviction still waits for (devices.taint_progress), for a role that waits in an until-loop. A dry run
makes no write, whatever rules exist; every other run writes only its own
operation's rule (devices.taints.planned_writes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.allocation.whatif_service import preview_evictions
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import pod_index
from ansible_collections.dra.admin.plugins.module_utils.access.api import MERGE_PATCH
from ansible_collections.dra.admin.plugins.module_utils.common.progress import progress
from ansible_collections.dra.admin.plugins.module_utils.devices.taint_progress import (
    EVICTION_TEXT, WAIT_TEXT, eviction_pending, eviction_timeout_message,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import EFFECT_NONE, NO_EXECUTE, RESOURCE
from ansible_collections.dra.admin.plugins.module_utils.devices.taints import (  # noqa: F401 (states re-exported)
    ABSENT, DEFAULT_KEY, DEVICE_DRAIN, DRY_RUN, MAINTENANCE, TAINTED,
    DeviceTaintError, affected_claims, build_rule, diff_view, eviction_done, operation_rule_name, ownership_error,
    planned_writes, pod_names, removed_annotations, report, rule_condition, rule_name_of, rule_patch, rule_selector,
    rule_summary, rule_taint, rules_in_force, selected_devices, selection_error, selector, selector_text,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.evictions import (
    EVICT, RULE_EFFECT, WAIT_TEXT as EVICTION_WAIT_TEXT,
)
from ansible_collections.dra.admin.plugins.module_utils.devices.evictions_service import DeviceEviction
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    RESOURCE_GROUP, VersionError, device_taint_rule_support, device_taint_rules_unavailable,
)


class DeviceTaintFailure(DeviceTaintError):
    """Stopped after writing (a timeout); `details` carries the report so far."""


def rule_api_version(api):
    """(Kubernetes version, the resource.k8s.io version serving devicetaintrules); DeviceTaintError when the
    cluster does not serve a usable one, saying what would switch it on. Changes nothing."""
    kube_version = (api.server_version() or {}).get("gitVersion") or "unknown"
    try:
        support = device_taint_rule_support(kube_version)
    except VersionError as exc:
        raise DeviceTaintError("DeviceTaintRule: %s" % exc)
    if not support["usable"]:
        raise DeviceTaintError(device_taint_rules_unavailable(kube_version) + "; nothing was changed")
    serving = api.versions_serving(RESOURCE)
    # From 1.35 every version of the rule has the same shape: take the newest one served.
    for version in ("v1", "v1beta2", "v1alpha3"):
        if version in serving:
            return kube_version, version
    raise DeviceTaintError(device_taint_rules_unavailable(kube_version) + "; nothing was changed")


def rule_path(version, name=None):
    return "/apis/%s/%s/%s%s" % (RESOURCE_GROUP, version, RESOURCE, "/" + name if name else "")


def rule_named(rules, name):
    """The rule of that name among `rules`, or None."""
    for rule in rules:
        if rule_name_of(rule) == name:
            return rule
    return None


class DeviceTaint(object):
    """One run of dra_device_taint: params as the module's (state, name, driver, pool, device, key, value,
    effect, labels, annotations, wait, wait_timeout, wait_sleep, since), and `operation`: the dra.admin operation
    the run belongs to (default maintenance; the drain's device mode and the remediation name theirs), which
    owns the rules it writes and names them by default."""

    def __init__(self, api, params, check_mode=False, clock=time.time, sleep=time.sleep):
        self.api = api
        self.p = params
        self.check_mode = check_mode
        self.clock = clock
        self.sleep = sleep
        self.changed = False
        self.diff = {"before": {}, "after": {}}
        self.operation = params.get("operation") or MAINTENANCE
        self.selector = selector(params.get("driver"), params.get("pool"), params.get("device"))
        self.name = params.get("name") or operation_rule_name(self.selector, self.operation)
        # Annotations given as None are removed from the rule (a remediation's healthy-since mark).
        self.removed = removed_annotations(params.get("annotations"))
        # With wait false: when the operation started (since, else now), and what it still waits for.
        self.started = params.get("since") or clock()
        self.waiting = (None, [])

    def effect(self):
        return EFFECT_NONE if self.p["state"] == DRY_RUN else self.p["effect"]

    def rule_effect(self):
        """The effect the rule is written with: Evict writes NoSchedule and evicts the pods itself."""
        return RULE_EFFECT if self.effect() == EVICT else self.effect()

    def api_version(self):
        try:
            return rule_api_version(self.api)
        except DeviceTaintError as exc:
            if self.effect() != EVICT:
                raise
            raise DeviceTaintError(
                "%s. effect Evict needs the rule as well: its NoSchedule taint keeps new claims off the devices "
                "while their pods are evicted; dra.admin.dra_node_drain evicts the pods of a whole node with "
                "PodDisruptionBudgets respected" % str(exc).rstrip("."))

    def run(self):
        kube_version, version = self.api_version()
        rules = list(self.api.list_items(rule_path(version)))
        existing = rule_named(rules, self.name)
        if self.p["state"] != DRY_RUN:
            problem = ownership_error(existing, self.operation)
            if problem:
                raise DeviceTaintError(problem)
        self.diff["before"] = self.diff["after"] = diff_view(existing)
        result = {"name": self.name, "kubernetes_version": kube_version, "api_version": version}
        if self.p["state"] == ABSENT:
            result.update(self.lift(version, existing))
        else:
            result.update(self.apply(version, existing))
        # What else keeps the devices out of service (read before this run's write).
        sel = rule_selector(existing) if self.p["state"] == ABSENT and existing is not None else self.selector
        result["other_rules_in_force"] = rules_in_force(rules, sel, besides=self.name) if sel.get("driver") else []
        if not self.p["wait"]:
            texts = dict(WAIT_TEXT, **EVICTION_WAIT_TEXT)
            result.update(progress(self.waiting[0], self.waiting[1], self.started, self.clock(), texts),
                          started=self.started)
        return result

    def carry_out(self, version, writes, existing):
        """Make the planned writes (none in check mode); the rule as the server answered the last one (the
        existing rule when nothing was written, None for a new rule in check mode)."""
        if self.check_mode:
            self.changed = self.changed or bool(writes)
            return existing
        rule = existing
        for write in writes:
            if write["verb"] == "POST":
                rule = self.api.request("POST", rule_path(version), body=write["body"])
            elif write["verb"] == "PATCH":
                rule = self.api.request("PATCH", rule_path(version, write["name"]), body=write["body"],
                                        content_type=MERGE_PATCH)
            else:
                self.api.request(write["verb"], rule_path(version, write["name"]))
            self.changed = True
        return rule

    # ---------------------------------------------------------------- absent
    def lift(self, version, existing):
        writes = planned_writes(ABSENT, self.operation, existing)
        self.carry_out(version, writes, existing)
        self.diff["after"] = {}
        return {"rule": rule_summary(existing, version), "lifted": bool(writes)}

    # ---------------------------------------------------------------- dry run and taint
    def data_version(self):
        return self.api.resource_api_version()

    def read_claims(self, data_version):
        claims = list(self.api.list_items(self.api.resource_path("resourceclaims", version=data_version)))
        return claims, pod_index(self.api)

    def apply(self, version, existing):
        data_version = self.data_version()
        slices = list(self.api.list_items(self.api.resource_path("resourceslices", version=data_version)))
        problem = selection_error(slices, self.selector)
        if problem:
            raise DeviceTaintError(problem)
        devices = selected_devices(slices, self.selector)
        claims, pods = self.read_claims(data_version)
        out = {"devices": devices, "selector": selector_text(self.selector)}
        if self.p["state"] == DRY_RUN:
            # Read and report only: the pods a NoExecute taint of this key and value would evict.
            taint = {"key": self.p["key"], "value": self.p.get("value") or "", "effect": NO_EXECUTE, "timeAdded": None}
            before = affected_claims(claims, devices, taint, pods, sel=self.selector)
            out.update({"rule": rule_summary(existing, version), "affected_claims": before})
            out.update(report(before, before, EFFECT_NONE))
            out.update(DeviceEviction(self, devices, taint, data_version).preview(before)[1])
            if self.p.get("preview"):
                out["preview"] = self.placement_preview(version, before)
            return out
        wanted = build_rule(version, self.name, self.selector, self.p["key"], self.p.get("value") or "",
                            self.rule_effect(), self.p.get("labels"), self.p.get("annotations"), self.operation)
        writes = planned_writes(TAINTED, self.operation, existing, wanted, self.removed)
        planned_taint = self.taint_for_report(existing, wanted)
        if self.effect() == EVICT:
            DeviceEviction(self, devices, planned_taint, data_version).refuse_what_cannot_be_freed(
                affected_claims(claims, devices, planned_taint, pods, sel=self.selector), existing is not None)
        rule = self.carry_out(version, writes, existing)
        written = not self.check_mode and rule is not None
        if not writes:
            self.diff["after"] = diff_view(existing)
        else:
            self.diff["after"] = diff_view(wanted if self.check_mode else rule)
        # Claims as read before writing, judged against the taint as written (its timeAdded dates tolerations).
        taint = rule_taint(rule) if written else planned_taint
        before = affected_claims(claims, devices, taint, pods, sel=self.selector)
        if self.effect() == EVICT:
            out["rule"] = rule_summary(rule or wanted, version)
            return self.evict(out, DeviceEviction(self, devices, taint, data_version), before)
        after, rule = self.wait(version, rule, devices, before, data_version)
        out.update({"rule": rule_summary(rule or wanted, version), "affected_claims": after})
        out.update(report(before, after, self.effect()))
        if not self.p["wait"]:
            self.waiting = eviction_pending(rule, self.name, self.effect(), after)
            self.check_time_left(rule, out)
        return out

    def placement_preview(self, version, before):
        """whatif.preview of the pods a NoExecute taint would evict, with the rule in force (one GET per pod)."""
        rule = build_rule(version, self.name, self.selector, self.p["key"], self.p.get("value") or "", NO_EXECUTE)
        evicted = []
        for name in pod_names(before, ("none", "seconds")):
            namespace, pod = name.split("/", 1)
            found = self.api.get_or_none("/api/v1/namespaces/%s/pods/%s" % (namespace, pod))
            if found:
                evicted.append(found)
        return preview_evictions(self.api, evicted, extra_rules=[rule])

    def evict(self, out, eviction, before):
        """Effect Evict, once the NoSchedule rule is written: the waves evicted (all of them and the wait for the
        claims; with wait false one round), or in check mode the plan."""
        out.update(report(before, before, EVICT), affected_claims=before)
        if self.p["wait"]:
            fields, failure = eviction.run(before)
            if eviction.after is not None:
                out.update(report(before, eviction.after, EVICT), affected_claims=eviction.after)
        else:
            fields, waiting, pending, failure = eviction.step(before)
            self.waiting = (waiting, pending)
        out.update(fields)
        self.changed = self.changed or eviction.changed
        if failure:
            raise DeviceTaintFailure(failure, dict((k, v) for k, v in out.items() if k not in ("devices", "selector")))
        return out

    def check_time_left(self, rule, out):
        """wait false with since (a round of a role's wait): fail as the one call does when the eviction is not
        over and wait_timeout has passed since the operation started."""
        if not self.waiting[0] or not self.p.get("since") or self.clock() - self.started < self.p["wait_timeout"]:
            return
        cond = rule_condition(rule) or {}
        raise DeviceTaintFailure(
            eviction_timeout_message(self.name, self.p["wait_timeout"], EVICTION_TEXT, cond.get("message"),
                                     out.get("still_holding") or out["pods"]),
            dict((k, v) for k, v in out.items() if k not in ("devices", "selector")))

    def taint_for_report(self, existing, wanted):
        """The taint whose timeAdded dates the evictions: the existing rule's while its spec stays; a new or
        changed taint gets its timeAdded from the server (none known before writing)."""
        if existing is not None and "spec" not in (rule_patch(existing, wanted, self.removed) or {}):
            return rule_taint(existing)
        return dict(rule_taint(wanted), timeAdded=None)

    # ---------------------------------------------------------------- waiting
    def wait(self, version, rule, devices, before, data_version):
        """Wait as the state asks; return (affected claims at the end, the rule as last read)."""
        if self.check_mode or rule is None or not self.p["wait"]:
            return before, rule
        effect = self.effect()
        if effect == EFFECT_NONE:
            rule = self.poll(version, lambda r: (rule_condition(r) or {}).get("current"),
                             "kube-controller-manager to report on it (the EvictionInProgress condition for its "
                             "generation); is DRADeviceTaintRules on for kube-controller-manager?", devices, before,
                             data_version)
        elif effect == NO_EXECUTE:
            rule = self.poll(version, eviction_done, EVICTION_TEXT, devices, before, data_version)
        claims, pods = self.read_claims(data_version)
        return affected_claims(claims, devices, rule_taint(rule), pods, sel=self.selector), rule

    def poll(self, version, done, what, devices, before, data_version):
        deadline = self.clock() + self.p["wait_timeout"]
        while True:
            rule = self.api.get_or_none(rule_path(version, self.name))
            if rule is None:
                raise DeviceTaintError("DeviceTaintRule %s was deleted while waiting for %s" % (self.name, what))
            if done(rule):
                return rule
            if self.clock() >= deadline:
                claims, pods = self.read_claims(data_version)
                after = affected_claims(claims, devices, rule_taint(rule), pods, sel=self.selector)
                details = dict(report(before, after, self.effect()), rule=rule_summary(rule, version),
                               affected_claims=after)
                cond = rule_condition(rule) or {}
                raise DeviceTaintFailure(
                    eviction_timeout_message(self.name, self.p["wait_timeout"], what, cond.get("message"),
                                             details.get("still_holding") or details["pods"]),
                    details)
            self.sleep(self.p["wait_sleep"])


# ---------------------------------------------------------------- the drain's device mode
DRAIN_VALUE = "drained"
DRAINED_NODE_ANNOTATION = "dra.admin/drained-node"


def drain_devices(api, node, state, driver, pool=None, device=None, timeout=600, poll_interval=1.0,
                  check_mode=False, clock=time.time, sleep=time.sleep):
    """dra_node_drain's device mode: one pool (default: the one named like the node) or one device of it, on
    `node`, through a NoExecute DeviceTaintRule instead of the whole node.

    drained: the rule, the wait for the eviction, then the wait until no claim is allocated any of the devices
    (claims released); in_service: the rule lifted. The rule is the drain's own (operation device-drain, named
    dra-admin-drain-<driver>-<pool>-<device>): a maintenance rule of dra_device_taint or any other rule on the
    same devices is never changed or lifted, and is returned in other_rules_in_force. Returns the module's
    result (changed in `changed`).
    """
    params = {"state": TAINTED if state == "drained" else ABSENT, "name": None, "driver": driver,
              "pool": pool or node, "device": device, "key": DEFAULT_KEY, "value": DRAIN_VALUE,
              "effect": NO_EXECUTE, "labels": {}, "annotations": {DRAINED_NODE_ANNOTATION: node}, "wait": True,
              "wait_timeout": timeout, "wait_sleep": poll_interval, "operation": DEVICE_DRAIN}
    task = DeviceTaint(api, params, check_mode=check_mode, clock=clock, sleep=sleep)
    started = clock()
    if state == "drained":
        check_devices_on_node(api, node, task.selector)
    result = task.run()
    result["changed"] = task.changed
    if state != "drained" or check_mode:
        return result
    deadline = started + timeout
    devices = result["devices"]
    while True:
        claims = list(api.list_items(api.resource_path("resourceclaims")))
        held = affected_claims(claims, devices, {}, sel=task.selector)
        if not held:
            result["claims_released"] = True
            return result
        if clock() >= deadline:
            raise DeviceTaintFailure(
                "node %s, devices %s: the pods are evicted, but after %ss these claims are still allocated the "
                "devices: %s (a claim tolerating the taint for ever, or a driver that has not unprepared it); the "
                "rule %s stays" % (node, selector_text(task.selector), timeout,
                                   ", ".join("%s/%s" % (c["namespace"], c["name"]) for c in held), task.name),
                dict(result, claims_released=False))
        sleep(poll_interval)


# dra_node_drain's names of the selector's options in its device mode.
DRAIN_OPTION_NAMES = {"driver": "device_driver", "pool": "device_pool"}


def check_devices_on_node(api, node, sel):
    """Refuse a selection whose devices are not all on `node` (nothing written)."""
    slices = list(api.list_items(api.resource_path("resourceslices")))
    problem = selection_error(slices, sel, DRAIN_OPTION_NAMES)
    if problem:
        raise DeviceTaintError("node %s: %s" % (node, problem))
    elsewhere = sorted(set(d["node"] for d in selected_devices(slices, sel) if d["node"] != node))
    if elsewhere:
        raise DeviceTaintError(
            "node %s: devices of %s are on %s, not on this node; name this node's pool with device_pool; "
            "nothing was written" % (node, selector_text(sel), ", ".join(elsewhere)))
