# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What an upgrade changes in how Kubernetes treats objects the cluster already has, and where users keep API versions
the target drops; the rest of the upgrade check is ``checks``, and ``findings`` here returns both, breaking first.

- resource.k8s.io versions in manifest files, last-applied-configuration annotations and Helm releases
  (``stored_versions``): ``stored-api-version``.
- A DeviceTaintRule without ``deviceSelector``: kube-scheduler's allocator read it as every device and reads it as
  none from 1.37.1 and 1.38 (``kube.taint_rules.allocator_reader``): ``taint-rule-without-selector``.
- NoExecute device taints also evict the pods whose DRA-backed extended resources' claim holds a tainted device,
  from 1.37.2 and 1.38 (``catalog.EXTENDED_RESOURCE_TAINT_EVICTION_FROM``): ``extended-resource-eviction``.
- kubelet gRPC probes fail at once on a refused connection from 1.38: a driver DaemonSet with a gRPC liveness probe
  and no startupProbe: ``grpc-probe-without-startup``.
- A kubelet binary downgrade is no undo from 1.38 (the kubelet's checkpoint formats): ``kubelet-downgrade``.
- Attribute or capacity names qualified with the slice's own driver: drivers rebuilt on 1.38's helper refuse to
  publish them (``catalog.SELF_QUALIFIED_NAMES_REFUSED_FROM``): ``self-qualified-names``.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION, CONSUMER_POD, allocated_devices, consumer_kind, reserved_for,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_fields
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import (
    NO_EXECUTE, allocator_reader, eviction_reader, rule_effect, rule_selects,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import tolerates
from ansible_collections.dra.admin.plugins.module_utils.upgrade import checks
from ansible_collections.dra.admin.plugins.module_utils.upgrade import stored_versions
from ansible_collections.dra.admin.plugins.module_utils.upgrade.checks import SEVERITIES, finding


def _name(obj):
    meta = obj.get("metadata") or {}
    return "/".join(n for n in (meta.get("namespace"), meta.get("name")) if n)


def _v(minor):
    return "1.%d" % minor


# --- API versions where users keep them -------------------------------------------------------

def stored_version_uses(facts, target_minor):
    """(entries, unread sources) of manifest files, last-applied annotations and Helm releases (see the facts
    checks_service gathers: manifest_texts, manifest_errors, last_applied_objects, helm_secrets, helm_error)."""
    uses, unread = [], list(facts.get("manifest_errors") or [])
    for path, text in sorted((facts.get("manifest_texts") or {}).items()):
        try:
            uses.extend(stored_versions.text_uses(text, path, target_minor))
        except stored_versions.SourceError as exc:
            unread.append(str(exc))
    uses.extend(stored_versions.last_applied_uses(facts.get("last_applied_objects"), target_minor))
    helm, errors = stored_versions.helm_uses(facts.get("helm_secrets"), target_minor)
    uses.extend(helm)
    unread.extend(errors)
    if facts.get("helm_error"):
        unread.append("Helm releases: %s" % facts["helm_error"])
    return uses, unread


def _where_text(use):
    parts = [use["source"]]
    if use.get("line"):
        parts.append("line %d" % use["line"])
    if use.get("document") not in (None, "0") or use.get("line"):
        parts.append("document %s" % use["document"])
    return ", ".join(parts)


def stored_version_findings(facts, target, target_minor):
    """One finding per source and apiVersion: breaking when the target drops the version, a warning when the
    release after it does; one warning names the sources that could not be read."""
    uses, unread = stored_version_uses(facts, target_minor)
    groups = {}
    for use in uses:
        groups.setdefault((use["source"], use["api_version"]), []).append(use)
    found = []
    for (source, api_version), entries in sorted(groups.items()):
        removed = entries[0]["removed_in"]
        gone = catalog.parse_minor(removed) <= target_minor
        writes = sorted(set("%s: %s" % (u["kind"], stored_versions.replacement(target, u["resource"]) or "none")
                            for u in entries if u["resource"]))
        found.append(finding(
            "stored-api-version", "breaking" if gone else "warning", "%s (%s)" % (source, api_version),
            "%s writes %s, which Kubernetes %s no longer serves%s: %s. Applying it again (kubectl apply, helm upgrade "
            "or rollback, a GitOps sync) %s" % (
                source, api_version, removed, "" if gone else " (the release after %s)" % _v(target_minor),
                "; ".join("%s %s (%s)" % (u["kind"], u["name"], _where_text(u)) for u in entries),
                "fails on %s" % _v(target_minor) if gone else "works on %s but fails from %s" % (
                    _v(target_minor), removed)),
            "write apiVersion %s/<version> instead (%s), and move the fields that differ (a v1beta1 request names "
            "deviceClassName itself, v1beta2 and v1 under exactly; a v1beta1 ResourceSlice keeps a device's fields "
            "under basic)%s" % (
                catalog.RESOURCE_GROUP, ", ".join(writes) or "no version of the target serves it",
                "; for a Helm release, upgrade the chart to a version that writes it (helm history shows what was "
                "applied)" if source.startswith("Helm release") else ""),
            {"source": source, "api_version": api_version, "removed_in": removed, "documents": entries}))
    if unread:
        found.append(finding(
            "stored-api-version-unread", "warning", "; ".join(unread)[:200],
            "these sources could not be read, so their resource.k8s.io versions are not checked: %s" % "; ".join(
                unread),
            "fix or remove them from manifest_paths, or allow list on secrets (Helm keeps releases in Secrets with "
            "label owner=helm)", {"sources": unread}))
    return found


# --- DeviceTaintRules without deviceSelector ---------------------------------------------------

def _effect_text(effect, reader_all):
    if effect == NO_EXECUTE:
        return ("keeps every device of the cluster from new allocations" if reader_all else "does nothing") + \
            " (NoExecute)"
    if effect == "NoSchedule":
        return ("keeps every device of the cluster from new allocations" if reader_all else "does nothing") + \
            " (NoSchedule)"
    return "reports the taint on every device" if reader_all else "does nothing"


def taint_rule_findings(facts, current, target, target_minor):
    """The DeviceTaintRules without deviceSelector whose meaning the upgrade changes (kube.taint_rules:
    allocator_reader of the current release and of the target)."""
    before, after = allocator_reader(current), allocator_reader(target)
    if before == after:
        return []
    rules = [r for r in facts.get("taint_rules") or [] if (r.get("spec") or {}).get("deviceSelector") is None]
    found = []
    for rule in sorted(rules, key=_name):
        effect = rule_effect(rule)
        evicts = rule_selects(rule, "", "", "", reader=eviction_reader(catalog.parse_minor(current)))
        found.append(finding(
            "taint-rule-without-selector", "warning", "DeviceTaintRule %s" % _name(rule),
            "DeviceTaintRule %s has no deviceSelector. On %s kube-scheduler reads that as every device: it %s, and "
            "the device-taint-eviction controller %s. From %s (and %s) a rule without selector selects no device: "
            "the rule %s" % (
                _name(rule), current, _effect_text(effect, True),
                "evicts the pods using them" if evicts and effect == NO_EXECUTE else "evicts no pod",
                catalog.patch_change_from(catalog.TAINT_RULE_NO_SELECTOR_NONE_FROM).split(", ", 1)[0],
                _v(target_minor), _effect_text(effect, False)),
            "to keep tainting every device, set spec.deviceSelector: {} (an empty selector selects every device; "
            "kubectl warns about it from 1.38); to taint some devices, name driver, pool and device (module "
            "dra.admin.dra_device_taint); or delete the rule",
            {"rule": _name(rule), "effect": effect, "current_reader": before, "target_reader": after}))
    return found


# --- NoExecute and DRA-backed extended resources ------------------------------------------------

def no_execute_taints(facts, target):
    """{(driver, pool, device): [(taint, source)]} of the NoExecute taints in force: those of DeviceTaintRules as the
    target's eviction controller reads them, and those published in the ResourceSlices."""
    rules = [r for r in facts.get("taint_rules") or [] if rule_effect(r) == NO_EXECUTE]
    reader = eviction_reader(catalog.parse_minor(target))
    tainted = {}
    for resource_slice in facts.get("resource_slices") or []:
        spec = resource_slice.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name")
        for device in spec.get("devices") or []:
            key = (spec.get("driver"), pool, device.get("name"))
            for taint in device_fields(device).get("taints") or []:
                if taint.get("effect") == NO_EXECUTE:
                    tainted.setdefault(key, []).append((taint, "ResourceSlice %s" % _name(resource_slice)))
            for rule in rules:
                if rule_selects(rule, key[0], key[1], key[2], reader=reader):
                    tainted.setdefault(key, []).append(((rule.get("spec") or {}).get("taint") or {},
                                                        "DeviceTaintRule %s" % _name(rule)))
    return tainted


def _evicting(result, taints):
    return [(t, where) for t, where in taints if not any(tolerates(tol, t) for tol in result.get("tolerations") or [])]


def extended_resource_findings(facts, current, target, target_minor):
    """The pods a NoExecute taint in force would newly evict on the target: those whose extended-resource claim
    (the scheduler's annotation on the claim) holds a device with an untolerated NoExecute taint."""
    table = catalog.EXTENDED_RESOURCE_TAINT_EVICTION_FROM
    if catalog.has_patch_change(table, current) or not catalog.has_patch_change(table, target):
        return []
    tainted = no_execute_taints(facts, target)
    found = []
    for claim in sorted(facts.get("claims") or [], key=_name):
        annotations = (claim.get("metadata") or {}).get("annotations") or {}
        if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
            continue
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
        hits = []
        for result, device in zip(results, allocated_devices(claim)):
            key = (device["driver"], device["pool"], device["device"])
            for taint, where in _evicting(result, tainted.get(key, [])):
                hits.append("%s/%s/%s (%s=%s:%s, %s)" % (
                    key + (taint.get("key"), taint.get("value") or "", taint.get("effect"), where)))
        pods = ["%s/%s" % ((claim.get("metadata") or {}).get("namespace"), r.get("name"))
                for r in reserved_for(claim) if consumer_kind(r) == CONSUMER_POD]
        if hits and pods:
            found.append(finding(
                "extended-resource-eviction", "breaking", ", ".join(pods),
                "pod %s holds DRA-backed extended resources through ResourceClaim %s, whose device %s has a NoExecute "
                "taint it does not tolerate. On %s the device-taint-eviction controller leaves such pods alone; from "
                "%s (and %s) it evicts them" % (
                    ", ".join(pods), _name(claim), "; ".join(hits), current,
                    catalog.patch_change_from(table).split(", ", 1)[0], _v(target_minor)),
                "before upgrading, remove or narrow the taint (module dra.admin.dra_device_taint, state absent) or "
                "move the pods off those devices (role dra.admin.drain); to keep the pods, the taint's effect must "
                "be NoSchedule or None",
                {"pods": pods, "claim": _name(claim), "devices": hits}))
    return found


# --- kubelet: gRPC probes and downgrades ---------------------------------------------------------

def grpc_probe_findings(facts, current_minor, target_minor):
    """Each driver DaemonSet (drivers.checks.driver_accounts) with a container whose liveness probe is gRPC and
    that has no startupProbe, when the upgrade crosses GRPC_PROBE_FAIL_FAST_FROM."""
    if not current_minor < catalog.GRPC_PROBE_FAIL_FAST_FROM <= target_minor:
        return []
    drivers = dict(((a["namespace"], a["daemonset"]), a["driver"]) for a in facts.get("driver_accounts") or [])
    found = []
    for ds in facts.get("daemonsets") or []:
        meta = ds.get("metadata") or {}
        driver = drivers.get((meta.get("namespace"), meta.get("name")))
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        bare = [c for c in spec.get("containers") or []
                if ((c.get("livenessProbe") or {}).get("grpc")) and not c.get("startupProbe")]
        if driver is None or not bare:
            continue
        probes = dict((c.get("name"), c["livenessProbe"]) for c in bare)
        found.append(finding(
            "grpc-probe-without-startup", "warning", "DaemonSet %s/%s" % (meta.get("namespace"), meta.get("name")),
            "driver %s: container %s has a gRPC liveness probe and no startupProbe. From Kubernetes %s the kubelet's "
            "gRPC probe fails at once when the connection is refused (before, it waited up to timeoutSeconds): "
            "until the plugin listens, every probe counts as a failure, and a plugin slower to start than "
            "initialDelaySeconds + failureThreshold x periodSeconds (%s) is restarted over and over" % (
                driver, ", ".join(sorted(probes)), _v(catalog.GRPC_PROBE_FAIL_FAST_FROM), "; ".join(
                    "%s: %s + %s x %s s" % (n, p.get("initialDelaySeconds", 0), p.get("failureThreshold", 3),
                                            p.get("periodSeconds", 10)) for n, p in sorted(probes.items()))),
            "add a startupProbe with the same grpc port and service to each such container (role dra.admin.driver's "
            "DaemonSet has one: dra_driver_startup), or set the liveness probe's initialDelaySeconds past the "
            "plugin's start time",
            {"driver": driver, "namespace": meta.get("namespace"), "daemonset": meta.get("name"),
             "containers": sorted(probes)}))
    return found


def self_qualified_names(resource_slice):
    """The attribute and capacity names of a slice's devices written with the slice's own driver as domain."""
    spec = resource_slice.get("spec") or {}
    prefix = "%s/" % spec.get("driver")
    names = set()
    for entry in spec.get("devices") or []:
        fields = device_fields(entry)
        for kind in ("attributes", "capacity"):
            names.update(n for n in fields.get(kind) or {} if n.startswith(prefix))
    return sorted(names)


def self_qualified_findings(facts, current_minor, target_minor):
    """One warning per driver whose ResourceSlices name attributes or capacities with their own domain, when the
    upgrade reaches SELF_QUALIFIED_NAMES_REFUSED_FROM."""
    if not current_minor < catalog.SELF_QUALIFIED_NAMES_REFUSED_FROM <= target_minor:
        return []
    by_driver = {}
    for resource_slice in facts.get("resource_slices") or []:
        names = self_qualified_names(resource_slice)
        if names:
            entry = by_driver.setdefault((resource_slice.get("spec") or {}).get("driver"), {"slices": [], "names": set()})
            entry["slices"].append(_name(resource_slice))
            entry["names"].update(names)
    found = []
    for driver, entry in sorted(by_driver.items()):
        names = sorted(entry["names"])
        found.append(finding(
            "self-qualified-names", "warning", "driver %s" % driver,
            "%d ResourceSlice(s) of %s name attributes or capacities with the driver's own domain (%s). A driver "
            "built on Kubernetes %s's kubeletplugin helper refuses to publish such names (they mean the same as the "
            "bare name), so its new release may publish no slices; and from %s the scheduler reads the qualified "
            "name where a device has both" % (len(entry["slices"]), driver, ", ".join(names[:5]) + (
                ", ..." if len(names) > 5 else ""), _v(catalog.SELF_QUALIFIED_NAMES_REFUSED_FROM),
                _v(catalog.SELF_QUALIFIED_NAMES_REFUSED_FROM)),
            "before upgrading the driver, have it publish the bare names (%s); DeviceClass and claim selectors "
            "that read device.attributes[\"%s\"] keep working" % (
                ", ".join(n.split("/", 1)[1] for n in names[:5]), driver),
            {"driver": driver, "slices": sorted(entry["slices"]), "names": names}))
    return found


def kubelet_downgrade_findings(target_minor):
    if target_minor < catalog.KUBELET_DOWNGRADE_NOTE_FROM:
        return []
    return [finding(
        "kubelet-downgrade", "info", "kubelet %s" % _v(target_minor),
        "putting the older kubelet binary back after the upgrade is not a safe undo: the upgraded kubelet rewrites "
        "its checkpoints under /var/lib/kubelet (CPU and memory manager, DRA's claim info) in its own format, which "
        "an older kubelet may refuse or misread (upstream's DRA version-skew jobs broke on it)",
        "plan the way back as a node replacement or drain (role dra.admin.drain) and rejoin with the older version, "
        "not a binary swap; upgrade a few nodes first", {"target": _v(target_minor)})]


def findings(facts, current, target):
    """checks.findings and the findings above, breaking first."""
    current_minor, target_minor = checks.check_target(current, target)
    found = (checks.findings(facts, current, target)
             + stored_version_findings(facts, target, target_minor)
             + taint_rule_findings(facts, current, target, target_minor)
             + extended_resource_findings(facts, current, target, target_minor)
             + grpc_probe_findings(facts, current_minor, target_minor)
             + self_qualified_findings(facts, current_minor, target_minor)
             + kubelet_downgrade_findings(target_minor))
    return sorted(found, key=lambda f: SEVERITIES.index(f["severity"]))
