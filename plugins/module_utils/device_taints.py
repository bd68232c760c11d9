# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""DeviceTaintRules against the API (see _device_taints for the rules and the reports).

Requests: discovery (which version serves devicetaintrules), one GET of the rule, one LIST each of
ResourceSlices, ResourceClaims and pods (Table form) before writing; while waiting for eviction, one
GET of the rule per poll, and the claims and pods are listed once more at the end.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.claims import pod_index
from ansible_collections.dra.admin.plugins.module_utils._device_taints import (
    DEFAULT_KEY, EFFECT_NONE, NO_EXECUTE, RESOURCE, DeviceTaintError, affected_claims, build_rule, default_rule_name,
    diff_view, eviction_done, is_managed, removed_annotations, report, rule_condition, rule_patch, rule_summary,
    selected_devices, selection_error, selector, selector_text,
)
from ansible_collections.dra.admin.plugins.module_utils._gates import (
    RESOURCE_GROUP, VersionError, device_taint_rule_support, device_taint_rules_unavailable,
)

MERGE_PATCH = "application/merge-patch+json"
DRY_RUN = "dry_run"
TAINTED = "tainted"
ABSENT = "absent"


class DeviceTaintFailure(DeviceTaintError):
    """Stopped after writing (a timeout); `details` carries the report so far."""

    def __init__(self, message, details=None):
        super(DeviceTaintFailure, self).__init__(message)
        self.details = details or {}


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


def rule_taint(rule):
    """A rule's taint; its timeAdded only for NoExecute (the only effect that evicts)."""
    taint = dict(((rule or {}).get("spec") or {}).get("taint") or {})
    if taint.get("effect") != NO_EXECUTE:
        taint.pop("timeAdded", None)
    return taint


def rule_path(version, name=None):
    return "/apis/%s/%s/%s%s" % (RESOURCE_GROUP, version, RESOURCE, "/" + name if name else "")


class DeviceTaint(object):
    """One run of dra_device_taint: params as the module's (state, name, driver, pool, device, key, value,
    effect, labels, annotations, wait, wait_timeout, poll_interval)."""

    def __init__(self, api, params, check_mode=False, clock=time.time, sleep=time.sleep):
        self.api = api
        self.p = params
        self.check_mode = check_mode
        self.clock = clock
        self.sleep = sleep
        self.changed = False
        self.diff = {"before": {}, "after": {}}
        self.selector = selector(params.get("driver"), params.get("pool"), params.get("device"))
        self.name = params.get("name") or default_rule_name(self.selector)
        # Annotations given as None are removed from the rule (a remediation's healthy-since mark).
        self.removed = removed_annotations(params.get("annotations"))

    def effect(self):
        return EFFECT_NONE if self.p["state"] == DRY_RUN else self.p["effect"]

    def run(self):
        kube_version, version = rule_api_version(self.api)
        existing = self.api.get_or_none(rule_path(version, self.name))
        if existing is not None and not is_managed(existing):
            raise DeviceTaintError(
                "DeviceTaintRule %s exists and was not created by dra.admin (no label app.kubernetes.io/managed-by="
                "dra.admin): dra.admin changes and deletes only its own rules; choose another name, or change it "
                "with kubectl; nothing was changed" % self.name)
        self.diff["before"] = diff_view(existing)
        result = {"name": self.name, "kubernetes_version": kube_version, "api_version": version}
        if self.p["state"] == ABSENT:
            return dict(result, **self.lift(version, existing))
        return dict(result, **self.apply(version, existing))

    # ---------------------------------------------------------------- absent
    def lift(self, version, existing):
        if existing is None:
            return {"rule": {}, "lifted": False}
        if not self.check_mode:
            self.api.request("DELETE", rule_path(version, self.name))
        self.changed = True
        return {"rule": rule_summary(existing, version), "lifted": True}

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
        wanted = build_rule(version, self.name, self.selector, self.p["key"], self.p.get("value") or "",
                            self.effect(), self.p.get("labels"), self.p.get("annotations"))
        claims, pods = self.read_claims(data_version)
        planned_taint = self.taint_for_report(existing, wanted)
        rule = self.write(version, existing, wanted)
        self.diff["after"] = diff_view(wanted if self.check_mode or rule is None else rule)
        # Claims as read before writing, judged against the taint as written (its timeAdded dates tolerations).
        taint = planned_taint if self.check_mode or rule is None else rule_taint(rule)
        before = affected_claims(claims, devices, taint, pods, sel=self.selector)
        after, rule = self.wait(version, rule, devices, before, data_version)
        out = {"rule": rule_summary(rule or wanted, version), "devices": devices,
               "selector": selector_text(self.selector), "affected_claims": after}
        out.update(report(before, after, self.effect()))
        return out

    def taint_for_report(self, existing, wanted):
        """The taint whose timeAdded dates the evictions: the existing rule's while its spec stays; a new or
        changed taint gets its timeAdded from the server (none known before writing)."""
        if existing is not None and "spec" not in (rule_patch(existing, wanted, self.removed) or {}):
            return rule_taint(existing)
        return dict(rule_taint(wanted), timeAdded=None)

    def write(self, version, existing, wanted):
        """Create or patch the rule (not in check mode); the rule as the server has it (None in check mode
        for a new rule)."""
        if existing is None:
            self.changed = True
            if self.check_mode:
                return None
            return self.api.request("POST", rule_path(version), body=wanted)
        patch = rule_patch(existing, wanted, self.removed)
        if patch is None:
            return existing
        self.changed = True
        if self.check_mode:
            return existing
        return self.api.request("PATCH", rule_path(version, self.name), body=patch, content_type=MERGE_PATCH)

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
            rule = self.poll(version, eviction_done,
                             "the eviction to finish (condition EvictionInProgress false for its generation)",
                             devices, before, data_version)
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
                    "DeviceTaintRule %s is in place, but after %ss still waiting for %s (controller: %s). Pods "
                    "still using the devices: %s. The rule stays; run again to keep waiting, or lift it with "
                    "state=absent" % (self.name, self.p["wait_timeout"], what, cond.get("message") or "no report",
                                      ", ".join(details.get("still_holding") or details["pods"]) or "none"),
                    details)
            self.sleep(self.p["poll_interval"])


# ---------------------------------------------------------------- the drain's device mode
DRAIN_VALUE = "drained"
DRAINED_NODE_ANNOTATION = "dra.admin/drained-node"


def drain_devices(api, node, state, driver, pool=None, device=None, timeout=600, poll_interval=1.0,
                  check_mode=False, clock=time.time, sleep=time.sleep):
    """dra_node_drain's device mode: one pool (default: the one named like the node) or one device of it, on
    `node`, through a NoExecute DeviceTaintRule instead of the whole node.

    drained: the rule, the wait for the eviction, then the wait until no claim is allocated any of the devices
    (claims released); in_service: the rule lifted. Returns the module's result (changed in `changed`).
    """
    params = {"state": TAINTED if state == "drained" else ABSENT, "name": None, "driver": driver,
              "pool": pool or node, "device": device, "key": DEFAULT_KEY, "value": DRAIN_VALUE,
              "effect": NO_EXECUTE, "labels": {}, "annotations": {DRAINED_NODE_ANNOTATION: node}, "wait": True,
              "wait_timeout": timeout, "poll_interval": poll_interval}
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


def check_devices_on_node(api, node, sel):
    """Refuse a selection whose devices are not all on `node` (nothing written)."""
    slices = list(api.list_items(api.resource_path("resourceslices")))
    problem = selection_error(slices, sel)
    if problem:
        raise DeviceTaintError("node %s: %s" % (node, problem))
    elsewhere = sorted(set(d["node"] for d in selected_devices(slices, sel) if d["node"] != node))
    if elsewhere:
        raise DeviceTaintError(
            "node %s: devices of %s are on %s, not on this node; name this node's pool with device_pool; "
            "nothing was written" % (node, selector_text(sel), ", ".join(elsewhere)))
