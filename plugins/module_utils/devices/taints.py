# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Device maintenance with DeviceTaintRules: input checks, the rule, its status, who it affects.

Pure functions over the JSON objects the API returns (no Ansible, no network). Which release serves
the rule, in which resource.k8s.io version and behind which gates is the version catalog's
(releases.catalog.device_taint_rule_support); this file knows the rule's shape from 1.35 on: a selector by
driver, pool and device (DeviceClass and CEL selectors were dropped in 1.35), a taint with effect
None, NoSchedule or NoExecute, and a status with the EvictionInProgress condition.

Who a rule affects is computed here, from the claims' allocation results and the ResourceSlices
(kube.slices.device_index): the rule's status only counts pods. A claim tolerates the taint as
kube-controller-manager's device-taint-eviction controller decides it: a NoExecute toleration
(empty key matches every key; operator Equal compares the value, Exists
does not; only tolerations with effect NoExecute count) without tolerationSeconds tolerates it for ever;
with tolerationSeconds the pods are evicted at the taint's timeAdded plus the smallest of them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import hashlib
import re

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.claims.claims import live_consumer_pods
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import allocated_devices
from ansible_collections.dra.admin.plugins.module_utils.common.names import (
    DNS_SUBDOMAIN, MANAGED_BY, MANAGED_BY_LABEL, MAX_SUBDOMAIN, label_value_error, qualified_name_error,
    subdomain_error,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_index
from ansible_collections.dra.admin.plugins.module_utils.common.times import format_time, parse_time
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import (
    EFFECTS, EVICTION, KEEPS_ALLOCATIONS_OFF, KIND, NO_EXECUTE, selector_selects,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import tolerates

EVICTION_IN_PROGRESS = "EvictionInProgress"

# Rules the collection creates carry this label; it changes or deletes no other rule.
DEFAULT_KEY = "dra.admin/maintenance"
NAME_PREFIX = "dra-admin-"

# What a run does with the rule: dry_run reads and reports only, tainted creates or patches it, absent deletes it.
DRY_RUN = "dry_run"
TAINTED = "tainted"
ABSENT = "absent"

# Each maintenance operation of the collection owns its rules: they carry the operation in this label, have
# names of the operation's own prefix, and no operation changes or deletes a rule of another one.
OPERATION_LABEL = "dra.admin/purpose"
MAINTENANCE = "maintenance"                    # dra_device_taint, role device_maintenance
DEVICE_DRAIN = "device-drain"                  # dra_node_drain's device mode, role drain
REMEDIATION = "device-health-remediation"      # dra_device_remediation, role device_maintenance (remediate)
OPERATIONS = (MAINTENANCE, DEVICE_DRAIN, REMEDIATION)
OPERATION_NAME_PREFIXES = {MAINTENANCE: NAME_PREFIX, DEVICE_DRAIN: NAME_PREFIX + "drain-",
                           REMEDIATION: NAME_PREFIX + "unhealthy-"}
OPERATION_TOOLS = {MAINTENANCE: "dra.admin.dra_device_taint (role device_maintenance)",
                   DEVICE_DRAIN: "dra.admin.dra_node_drain's device mode (role drain)",
                   REMEDIATION: "dra.admin.dra_device_remediation (role device_maintenance, entry point remediate)"}


class DeviceTaintError(DraAdminError):
    """A request that cannot be carried out; the message names the field or object and the fix."""


def input_errors(params):
    """Errors in the module's parameters, each naming the field and the fix (empty: fine).

    params: name, driver, pool, device, key, value, effect, labels, annotations (state not needed).
    """
    errors = []
    if params.get("name"):
        errors.append(subdomain_error("name", params["name"], example="dra-admin-gpu-example-com-node-1"))
    if params.get("driver") is not None:  # when driver is required, and that device needs pool: the module's spec
        errors.append(subdomain_error("driver", params["driver"]))
    errors.append(qualified_name_error("key", params.get("key") or "", example=DEFAULT_KEY))
    errors.append(label_value_error("value", params.get("value") or ""))
    if params.get("effect") not in EFFECTS:
        errors.append("effect %r: use one of %s" % (params.get("effect"), ", ".join(EFFECTS)))
    for field in ("labels", "annotations"):
        for key in sorted(params.get(field) or {}):
            errors.append(qualified_name_error("%s key" % field, key))
    if (params.get("labels") or {}).get(MANAGED_BY_LABEL, MANAGED_BY) != MANAGED_BY:
        errors.append("labels: %s is set by dra.admin to %s on the rules it creates; leave it out"
                      % (MANAGED_BY_LABEL, MANAGED_BY))
    if OPERATION_LABEL in (params.get("labels") or {}):
        errors.append("labels: %s names the dra.admin operation that owns a rule and is set by that operation; "
                      "leave it out" % OPERATION_LABEL)
    return [e for e in errors if e]


def selector(driver, pool=None, device=None):
    """The rule's deviceSelector: only the fields given."""
    out = {"driver": driver}
    if pool:
        out["pool"] = pool
    if device:
        out["device"] = device
    return out


def selector_text(sel):
    return "/".join(sel.get(k) or "*" for k in ("driver", "pool", "device"))


def default_rule_name(sel, prefix=NAME_PREFIX):
    """A stable rule name for a selector: dra-admin-<driver>-<pool>-<device>, shortened with a hash when long.

    prefix: the start of another operation's names (OPERATION_NAME_PREFIXES: the drain's dra-admin-drain-, the
    remediation's dra-admin-unhealthy-), so operations on the same devices do not look for the same rule."""
    parts = [sel.get(k) for k in ("driver", "pool", "device") if sel.get(k)]
    base = re.sub(r"[^a-z0-9.-]+", "-", "-".join(parts).lower()).strip("-.")
    name = prefix + base
    if len(name) > MAX_SUBDOMAIN or not DNS_SUBDOMAIN.match(name):
        digest = hashlib.sha256("/".join(parts).encode("utf-8")).hexdigest()[:10]
        name = (prefix + base[:200]).rstrip("-.") + "-" + digest
    return name


def operation_rule_name(sel, operation):
    """The default name of `operation`'s rule for a selector (its own prefix)."""
    return default_rule_name(sel, OPERATION_NAME_PREFIXES[operation])


def build_rule(api_version, name, sel, key, value, effect, labels=None, annotations=None, operation=MAINTENANCE):
    """The DeviceTaintRule to create, labelled as the collection's and as `operation`'s. An annotation given as
    None is one the rule must not have: left out here, removed from an existing rule by rule_patch."""
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    labels = dict(labels or {})
    labels.update({MANAGED_BY_LABEL: MANAGED_BY, OPERATION_LABEL: operation})
    metadata = {"name": name, "labels": labels}
    kept = dict((k, v) for k, v in (annotations or {}).items() if v is not None)
    if kept:
        metadata["annotations"] = kept
    return {"apiVersion": "resource.k8s.io/%s" % api_version, "kind": KIND, "metadata": metadata,
            "spec": {"deviceSelector": dict(sel), "taint": taint}}


def is_managed(rule):
    return ((rule.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY


def rule_name_of(rule):
    return ((rule or {}).get("metadata") or {}).get("name")


def rule_operation(rule):
    """The dra.admin operation that owns a rule: its OPERATION_LABEL; a rule of the collection without the label
    was written by dra_device_taint before operations were labelled, so it is maintenance's. None for a rule
    the collection did not write."""
    if not is_managed(rule):
        return None
    return ((rule.get("metadata") or {}).get("labels") or {}).get(OPERATION_LABEL) or MAINTENANCE


def ownership_error(rule, operation):
    """Why `operation` may not change or delete the existing `rule` (None when absent or the operation's own)."""
    if rule is None:
        return None
    name = rule_name_of(rule)
    if not is_managed(rule):
        return ("DeviceTaintRule %s exists and was not created by dra.admin (no label %s=%s): dra.admin changes "
                "and deletes only its own rules; choose another name, or change it with kubectl; nothing was "
                "changed" % (name, MANAGED_BY_LABEL, MANAGED_BY))
    owner = rule_operation(rule)
    if owner != operation:
        return ("DeviceTaintRule %s belongs to another dra.admin operation (label %s=%s, written by %s): each "
                "operation changes and deletes only its own rules, so that lifting one maintenance does not end "
                "another on the same devices; choose another name, or lift it with %s; nothing was changed"
                % (name, OPERATION_LABEL, owner, OPERATION_TOOLS.get(owner, "another tool"),
                   OPERATION_TOOLS.get(owner, "kubectl")))
    return None


def comparable(rule):
    """What decides whether a rule must change: selector, taint key/value/effect, the wanted labels and
    annotations (the server adds timeAdded; other labels and annotations are left alone)."""
    spec = (rule or {}).get("spec") or {}
    taint = spec.get("taint") or {}
    sel = spec.get("deviceSelector") or {}
    return {"deviceSelector": dict((k, sel[k]) for k in ("driver", "pool", "device") if sel.get(k)),
            "taint": {"key": taint.get("key"), "value": taint.get("value") or "", "effect": taint.get("effect")}}


def metadata_changes(existing, wanted, removed_annotations=()):
    """{labels: {...}, annotations: {...}} of wanted entries the existing rule lacks or has otherwise; each of
    `removed_annotations` the rule has is given as None (a merge patch removes it)."""
    out = {}
    for field in ("labels", "annotations"):
        have = (existing.get("metadata") or {}).get(field) or {}
        want = dict((wanted.get("metadata") or {}).get(field) or {})
        if field == "annotations":
            want.update((k, None) for k in removed_annotations if k not in want)
        diff = dict((k, v) for k, v in want.items() if have.get(k) != v)
        if diff:
            out[field] = diff
    return out


def removed_annotations(annotations):
    """The annotation keys given as None: those a rule must not have (see build_rule)."""
    return sorted(k for k, v in (annotations or {}).items() if v is None)


def rule_patch(existing, wanted, removed=()):
    """A JSON merge patch turning `existing` into `wanted` (and removing the `removed` annotations it has), or
    None when nothing differs."""
    patch = {}
    before, after = comparable(existing), comparable(wanted)
    if before != after:
        sel = dict((k, after["deviceSelector"].get(k)) for k in ("driver", "pool", "device"))
        taint = dict(after["taint"])
        taint["value"] = taint["value"] or None
        patch["spec"] = {"deviceSelector": sel, "taint": taint}
    meta = metadata_changes(existing, wanted, removed)
    if meta:
        patch["metadata"] = meta
    return patch or None


def planned_writes(state, operation, existing, wanted=None, removed=()):
    """The requests one run of `operation` makes, as [{verb, name, body}] (POST, PATCH: a merge patch, DELETE).

    A dry run makes none, whatever rules exist. Otherwise only the operation's own rule (or a new one) is
    written: DeviceTaintError (nothing written) when `existing`, the rule of the run's name, belongs to another
    operation or tool. state: DRY_RUN, TAINTED (wanted: build_rule()) or ABSENT; removed: annotations to remove.
    """
    if state == DRY_RUN:
        return []
    problem = ownership_error(existing, operation)
    if problem:
        raise DeviceTaintError(problem)
    if state == ABSENT:
        return [{"verb": "DELETE", "name": rule_name_of(existing)}] if existing is not None else []
    if existing is None:
        return [{"verb": "POST", "name": rule_name_of(wanted), "body": wanted}]
    patch = rule_patch(existing, wanted, removed)
    return [{"verb": "PATCH", "name": rule_name_of(existing), "body": patch}] if patch else []


def rule_selector(rule):
    """A rule's deviceSelector as selector() gives it (driver, pool, device; only those set)."""
    sel = ((rule or {}).get("spec") or {}).get("deviceSelector") or {}
    return dict((k, sel[k]) for k in ("driver", "pool", "device") if sel.get(k))


def selectors_overlap(first, second):
    """Whether two selectors (driver, pool, device; a field left out matches any) can select the same device."""
    return all(not first.get(k) or not second.get(k) or first[k] == second[k] for k in ("driver", "pool", "device"))


def rules_in_force(rules, sel, besides=None):
    """The rules other than the one named `besides` (of any operation or tool) whose selector can select a
    device `sel` selects and whose effect keeps it out of service (NoSchedule, NoExecute), sorted by name.

    Each: name, operation (the dra.admin operation owning it; None for another tool's), managed, effect, key,
    value, device_selector."""
    out = []
    for rule in rules:
        name = rule_name_of(rule)
        taint = ((rule.get("spec") or {}).get("taint")) or {}
        if name == besides or taint.get("effect") not in KEEPS_ALLOCATIONS_OFF:
            continue
        if not selectors_overlap(rule_selector(rule), sel):
            continue
        out.append({"name": name, "operation": rule_operation(rule), "managed": is_managed(rule),
                    "effect": taint.get("effect"), "key": taint.get("key"), "value": taint.get("value") or "",
                    "device_selector": rule_selector(rule)})
    out.sort(key=lambda r: r["name"] or "")
    return out


def diff_view(rule):
    """The rule as the module's diff shows it (None when absent)."""
    if not rule:
        return {}
    meta = rule.get("metadata") or {}
    view = comparable(rule)
    view["name"] = meta.get("name")
    view["labels"] = dict(meta.get("labels") or {})
    return view


# ---- selection ---------------------------------------------------------------------------------

def selected_devices(slices, sel):
    """[{driver, pool, device, node}] the selector matches in the current slices, sorted (node: a node name
    or a location marker of kube.locations)."""
    locations, dummy = device_index(slices)
    out = []
    for (driver, pool, device), where in locations.items():
        if driver != sel.get("driver"):
            continue
        if sel.get("pool") and pool != sel["pool"]:
            continue
        if sel.get("device") and device != sel["device"]:
            continue
        out.append({"driver": driver, "pool": pool, "device": device, "node": where})
    out.sort(key=lambda d: (d["pool"] or "", d["device"] or ""))
    return out


def _some(names, limit=10):
    names = sorted(n for n in names if n)
    return ", ".join(names[:limit]) + (", ... (%d in all)" % len(names) if len(names) > limit else "")


def selection_error(slices, sel, option_names=None):
    """Why the selector matches no published device (naming what exists), or None when it matches some.

    option_names: the caller's names of the selector's driver, pool and device options where they are not
    those (the node drain's device mode: device_driver, device_pool); the message then starts with the option
    at fault."""
    names = dict({"driver": "driver", "pool": "pool", "device": "device"}, **(option_names or {}))

    def at(field, text):
        return text if names[field] == field else "%s: %s" % (names[field], text)

    slices = list(slices)
    locations, pools = device_index(slices)
    drivers = set(d for d, p in pools)
    driver = sel.get("driver")
    if driver not in drivers:
        return at("driver", "driver %s publishes no ResourceSlice in this cluster (drivers publishing devices: %s): "
                  "check the name (dra.admin.dra_slices_info lists drivers and pools); no DeviceTaintRule was written"
                  % (driver, _some(drivers) or "none"))
    driver_pools = set(p for d, p in pools if d == driver)
    if sel.get("pool") and sel["pool"] not in driver_pools:
        return at("pool", "driver %s has no pool %s (its pools: %s); no DeviceTaintRule was written"
                  % (driver, sel["pool"], _some(driver_pools)))
    if sel.get("device"):
        in_pool = set(n for (d, p, n) in locations if d == driver and p == sel.get("pool"))
        if sel["device"] not in in_pool:
            return at("device", "no device %s in pool %s of driver %s (its devices: %s); no DeviceTaintRule was "
                      "written" % (sel["device"], sel.get("pool"), driver, _some(in_pool) or "none"))
    if not selected_devices(slices, sel):
        return "no published device matches %s; no DeviceTaintRule was written" % selector_text(sel)
    return None


# ---- status ------------------------------------------------------------------------------------

def rule_condition(rule):
    """The rule's EvictionInProgress condition as a dict, with `current`: whether it describes the rule's
    current generation (observedGeneration); None when the controller has not written it yet."""
    meta = (rule or {}).get("metadata") or {}
    for cond in ((rule or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == EVICTION_IN_PROGRESS:
            return {"status": cond.get("status"), "reason": cond.get("reason"), "message": cond.get("message"),
                    "observed_generation": cond.get("observedGeneration"),
                    "current": cond.get("observedGeneration") == meta.get("generation"),
                    "eviction_in_progress": cond.get("status") == "True",
                    "last_transition_time": cond.get("lastTransitionTime")}
    return None


def rule_taint(rule):
    """A rule's taint; its timeAdded only for NoExecute (the only effect that evicts)."""
    taint = dict(((rule or {}).get("spec") or {}).get("taint") or {})
    if taint.get("effect") != NO_EXECUTE:
        taint.pop("timeAdded", None)
    return taint


def eviction_done(rule):
    """The controller reports, for the rule's current spec, that no eviction is in progress."""
    cond = rule_condition(rule)
    return bool(cond and cond["current"] and not cond["eviction_in_progress"])


# ---- who is affected ---------------------------------------------------------------------------

def noexecute_toleration(results, taint):
    """How a claim's allocated devices under the taint tolerate it as NoExecute: ("none", None),
    ("forever", None) or ("seconds", smallest tolerationSeconds).

    As the device-taint-eviction controller (1.35-1.37) decides it: only tolerations with effect NoExecute
    count; per device a matching one without tolerationSeconds tolerates the taint for ever, otherwise the
    smallest tolerationSeconds (negative as 0) applies; the claim goes at its earliest device.
    """
    as_noexecute = dict(taint, effect=NO_EXECUTE)
    earliest = None
    for result in results:
        matching = [t for t in result.get("tolerations") or []
                    if t.get("effect") == NO_EXECUTE and tolerates(t, as_noexecute)]
        if not matching:
            return "none", None
        if any(t.get("tolerationSeconds") is None for t in matching):
            continue  # tolerated for ever on this device
        seconds = min(max(int(t["tolerationSeconds"]), 0) for t in matching)
        earliest = seconds if earliest is None else min(earliest, seconds)
    return ("seconds", earliest) if earliest is not None else ("forever", None)


def affected_claims(claims, devices, taint, pods_by_uid=None, sel=None):
    """Claims allocated any of `devices` (or, with `sel`, any device the selector names, also one no current
    slice publishes any more), with their pods and how they tolerate the taint as NoExecute.

    devices: selected_devices(); taint: {key, value, effect, timeAdded}; pods_by_uid: {uid: pod_ref} of
    live pods (consumers not in it are reported as gone); sel: the rule's deviceSelector. Each entry:
    namespace, name, devices, pods (names of live consumer pods), toleration (none, forever, seconds),
    toleration_seconds, evict_at (timeAdded + tolerationSeconds, when the taint has a timeAdded).
    """
    wanted = set((d["driver"], d["pool"], d["device"]) for d in devices)

    def affected(result):
        key = (result.get("driver"), result.get("pool"), result.get("device"))
        return key in wanted or (sel is not None and selector_selects(sel, *key, reader=EVICTION))
    added = parse_time(taint.get("timeAdded"))
    out = []
    for claim in claims:
        results = [r for r in ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {})
                               .get("results") or []) if affected(r)]
        if not results:
            continue
        meta = claim.get("metadata") or {}
        kind, seconds = noexecute_toleration(results, taint)
        pods = live_consumer_pods(claim, pods_by_uid)
        evict_at = None
        if kind == "seconds" and added is not None:
            evict_at = format_time(added + datetime.timedelta(seconds=seconds))
        out.append({"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
                    "devices": ["%s/%s/%s" % (r.get("driver"), r.get("pool"), r.get("device")) for r in results],
                    "all_devices": len(allocated_devices(claim)),
                    "pods": sorted(pods), "toleration": kind, "toleration_seconds": seconds, "evict_at": evict_at})
    out.sort(key=lambda c: (c["namespace"] or "", c["name"] or ""))
    return out


def pod_names(claims, toleration=None):
    """Sorted namespace/name of the pods of these claim entries (those with the given toleration kind)."""
    return sorted(set("%s/%s" % (c["namespace"], p) for c in claims
                      if toleration is None or c["toleration"] in toleration for p in c["pods"]))


def claim_names(claims, toleration=None):
    return ["%s/%s" % (c["namespace"], c["name"]) for c in claims
            if toleration is None or c["toleration"] in toleration]


def tolerating_pods(claims):
    """[{pod, claim, toleration_seconds, until}] of pods whose claims tolerate the taint (until None: for ever)."""
    out = []
    for claim in claims:
        if claim["toleration"] == "none":
            continue
        for pod in claim["pods"]:
            out.append({"pod": "%s/%s" % (claim["namespace"], pod),
                        "claim": "%s/%s" % (claim["namespace"], claim["name"]),
                        "toleration_seconds": claim["toleration_seconds"], "until": claim["evict_at"]})
    out.sort(key=lambda p: p["pod"])
    return out


def report(before, after, effect):
    """What the module returns about pods and claims.

    before: affected_claims() when the module started; after: the same at the end (equal for dry runs and
    check mode). would_evict: pods a NoExecute taint would evict now or after their tolerationSeconds;
    evicted: pods that used the devices at the start and are gone; still_holding: pods still using them.
    """
    out = {"claims": claim_names(after), "pods": pod_names(after),
           "would_evict": pod_names(before, ("none", "seconds")),
           "would_evict_claims": claim_names(before, ("none", "seconds")),
           "tolerating": tolerating_pods(after)}
    if effect == NO_EXECUTE:
        still = set(pod_names(after))
        out["evicted"] = sorted(p for p in pod_names(before) if p not in still)
        out["still_holding"] = sorted(still)
    return out


def rule_summary(rule, api_version):
    """The rule as the module returns it."""
    if not rule:
        return {}
    meta = rule.get("metadata") or {}
    spec = rule.get("spec") or {}
    return {"name": meta.get("name"), "api_version": api_version, "generation": meta.get("generation"),
            "labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {},
            "device_selector": spec.get("deviceSelector") or {}, "taint": spec.get("taint") or {},
            "condition": rule_condition(rule), "managed": is_managed(rule), "operation": rule_operation(rule)}
