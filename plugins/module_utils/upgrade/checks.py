# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What an upgrade to a target Kubernetes release will break or change for DRA, from facts read off the cluster.

Each finding is a dict: ``id`` (what kind), ``severity`` (``breaking``: something stops working or a
component refuses to start on the target; ``warning``: works only with an action, or cannot be known
from the API; ``info``), ``subject``, ``message`` (with the evidence in words), ``evidence`` (the
data it rests on) and ``fix`` (the dra.admin role and knob where there is one).

Versions come from the catalog (``catalog``), gate values from a static pod's flags (``control_plane.command_line``),
kube-apiserver's ``kubernetes_feature_enabled`` metric (parsed by ``metrics.diagnosis``) or a kubelet's ``/configz``
(read through the API server's node proxy), the driver role's seamless-upgrade rule from ``drivers.upgrade``,
the driver persona's rule names from ``rbac.personas``. Every component's gates are judged by one rule
(``component_gate_findings``): what the target refuses (a removed gate, a locked gate set to the other
value, a gate on whose dependency is off); a component whose gates cannot be read is named, never passed.

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import hashlib

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    ADMIN_LABEL_RENAMED_IN, NEW_ADMIN_LABEL, OLD_ADMIN_LABEL,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.command_line import parse_map, read_flags
from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import (
    SEAMLESS_UPGRADE_MIN_KUBELET_MINOR, kubelet_minor, kubelet_version, old_kubelets,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import ManifestError
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import FEATURE_ENABLED, enabled_gates, parse_text, select
from ansible_collections.dra.admin.plugins.module_utils.rbac.personas import (
    ASSOCIATED_NODE_VERBS, DRIVER_STATUS_SUBRESOURCE, GRANULAR_STATUS_GATE,
)

SEVERITIES = ("breaking", "warning", "info")
BINDING_SUBRESOURCE = "resourceclaims/binding"
BINDING_VERBS = ("update", "patch")
# Resources whose storage version is reported (the ones every DRA cluster has objects of).
STORED_RESOURCES = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")
KINDS = {"deviceclasses": "DeviceClass", "resourceclaims": "ResourceClaim",
         "resourceclaimtemplates": "ResourceClaimTemplate", "resourceslices": "ResourceSlice",
         "devicetaintrules": "DeviceTaintRule", "resourcepoolstatusrequests": "ResourcePoolStatusRequest"}
CANDIDATE_STORAGE = ("v1", "v1beta2", "v1beta1", "v1alpha3")
# The static pods' component label (kubeadm) -> component name.
CONTROL_PLANE = (catalog.KUBE_APISERVER, catalog.KUBE_CONTROLLER_MANAGER, catalog.KUBE_SCHEDULER)
# How the kubelet findings say where its settings were read (upgrade/checks_service's kubelet_gates_from).
KUBELET_SOURCE_NOTE = {"hosts": "(its --config file, --config-dir and --feature-gates on its host)",
                       "node_proxy": "(/configz)"}
# A kubelet's /configz answer: {"kubeletconfig": <KubeletConfiguration v1beta1 without apiVersion and kind>}.
KUBELET_CONFIGZ_KEY = "kubeletconfig"


class UpgradeInputError(DraAdminError, ValueError):
    """Bad input for an upgrade check; the message names the field."""


def finding(fid, severity, subject, message, fix, evidence=None):
    return {"id": fid, "severity": severity, "subject": subject, "message": message, "fix": fix,
            "evidence": evidence or {}}


def check_target(current, target):
    """(current minor, target minor) or UpgradeInputError naming `target_version`."""
    try:
        target_minor = catalog.require_upgrade_target(target)
    except catalog.VersionError as exc:
        raise UpgradeInputError("target_version: %s" % exc)
    current_minor = catalog.parse_minor(current)
    if current_minor < catalog.UPGRADE_TARGET_MINORS[0]:
        raise UpgradeInputError(
            "the cluster runs Kubernetes %s, older than the catalog knows (1.%d on): upgrade it to 1.%d first, "
            "with the release notes as the guide" % (current, catalog.UPGRADE_TARGET_MINORS[0],
                                                     catalog.UPGRADE_TARGET_MINORS[0]))
    if target_minor < current_minor:
        raise UpgradeInputError(
            "target_version: %s is older than the cluster (%s): Kubernetes cannot be downgraded; give a release "
            "from 1.%d on" % (target, current, current_minor))
    return current_minor, target_minor


# --- reading the facts -----------------------------------------------------------------------

def storage_version_hash(api_version, resource):
    """The discovery document's storageVersionHash for resource.k8s.io/<api_version> <resource>."""
    gvk = "%s/%s/%s" % (catalog.RESOURCE_GROUP, api_version, KINDS[resource])
    return base64.b64encode(hashlib.sha256(gvk.encode("utf-8")).digest()[:8]).decode("ascii")


def storage_versions_from_discovery(discovery_lists):
    """{resource: storage version} from the storageVersionHash of the discovery lists (None: unknown hash)."""
    found = {}
    for resource_list in discovery_lists or []:
        for resource in (resource_list or {}).get("resources") or []:
            name, digest = resource.get("name"), resource.get("storageVersionHash")
            if name not in KINDS or not digest or name in found:
                continue
            found[name] = next((v for v in CANDIDATE_STORAGE if storage_version_hash(v, name) == digest), None)
    return found


def storage_versions_from_api(items):
    """{resource: commonEncodingVersion} from StorageVersion objects (internal.apiserver.k8s.io)."""
    found = {}
    prefix = catalog.RESOURCE_GROUP + "."
    for item in items or []:
        name = (item.get("metadata") or {}).get("name") or ""
        version = (item.get("status") or {}).get("commonEncodingVersion")
        if name.startswith(prefix) and version:
            found[name[len(prefix):]] = version.split("/")[-1]
    return found


# kube-apiserver's request counters api_usage reads.
REQUESTS = "apiserver_request_total"
DEPRECATED_REQUESTS = "apiserver_requested_deprecated_apis"


def api_usage(metrics_text):
    """Requests to resource.k8s.io versions other than v1 since kube-apiserver started, from its /metrics:
    {(version, resource): {"requests": n, "deprecated": bool, "removed_release": str}}."""
    scrape = parse_text(metrics_text or "", names=(REQUESTS, DEPRECATED_REQUESTS))
    usage = {}
    group = [("group", "=", catalog.RESOURCE_GROUP)]
    for sample in select(scrape.samples, REQUESTS, group):
        key = (sample.labels.get("version"), sample.labels.get("resource"))
        if key[0] and key[0] != "v1" and sample.value > 0:
            entry = usage.setdefault(key, {"requests": 0, "deprecated": False, "removed_release": ""})
            entry["requests"] += int(sample.value)
    for sample in select(scrape.samples, DEPRECATED_REQUESTS, group):
        key = (sample.labels.get("version"), sample.labels.get("resource"))
        if sample.value > 0:
            entry = usage.setdefault(key, {"requests": 0, "deprecated": False, "removed_release": ""})
            entry["deprecated"] = True
            entry["removed_release"] = sample.labels.get("removed_release") or ""
    return usage


def gates_from_metrics(metrics_text, current_minor):
    """{gate: effective value}, from kubernetes_feature_enabled (control_plane.component_metrics), of the gates this
    check knows on the cluster's release: the catalogued ones and those of the release's gate list (client-go's,
    which the components report too, are in no list)."""
    gates = enabled_gates(parse_text(metrics_text or "", names=(FEATURE_ENABLED,)).samples)
    return dict((name, value) for name, value in gates.items()
                if catalog.is_catalogued(name) or catalog.kube_gate_info(current_minor, name) is not None)


def flags_from_pods(pods):
    """{component: {"feature-gates": {...}, "runtime-config": {...}, "pod": name}} of the control-plane
    static pods' mirror pods (kubeadm's label component=<name>); pods whose command cannot be read are left out."""
    found = {}
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        component = (meta.get("labels") or {}).get("component")
        if component not in CONTROL_PLANE:
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            try:
                flags = dict(read_flags(container, "pod %s" % meta.get("name")))
            except ManifestError:
                continue
            entry = found.setdefault(component, {"feature-gates": {}, "runtime-config": {}, "pods": []})
            entry["pods"].append(meta.get("name"))
            for flag in ("feature-gates", "runtime-config"):
                entry[flag].update(parse_map(flags.get(flag) if isinstance(flags.get(flag), str) else ""))
    return found


def kubelet_gates_from_configz(document):
    """{gate: value as written} of a kubelet's /configz answer (its featureGates; empty when it sets none),
    or None when the document is not a kubelet's configuration."""
    config = (document or {}).get(KUBELET_CONFIGZ_KEY) if isinstance(document, dict) else None
    if not isinstance(config, dict):
        return None
    gates = config.get("featureGates") or {}
    return dict(gates) if isinstance(gates, dict) else None


def access_reviews(accounts, schedulers, namespace="default"):
    """(key, SubjectAccessReview body) for each permission the 1.36 authorization needs: the drivers'
    associated-node verbs on resourceclaims/driver for their driver name, the schedulers' update and
    patch on resourceclaims/binding. `schedulers`: service accounts as namespace/name, or user names."""
    reviews = []
    resource, sub = DRIVER_STATUS_SUBRESOURCE.split("/")
    for entry in accounts:
        user = "system:serviceaccount:%s:%s" % (entry["namespace"], entry["service_account"])
        groups = ["system:serviceaccounts", "system:serviceaccounts:%s" % entry["namespace"], "system:authenticated"]
        for verb in ASSOCIATED_NODE_VERBS:
            reviews.append(((user, DRIVER_STATUS_SUBRESOURCE, entry["driver"], verb), _review(
                user, groups, dict(resource=resource, subresource=sub, name=entry["driver"], verb=verb,
                                   namespace=namespace))))
    resource, sub = BINDING_SUBRESOURCE.split("/")
    for subject in schedulers or []:
        user, groups = _subject(subject)
        for verb in BINDING_VERBS:
            reviews.append(((user, BINDING_SUBRESOURCE, "", verb), _review(
                user, groups, dict(resource=resource, subresource=sub, verb=verb, namespace=namespace))))
    return reviews


def _subject(subject):
    if "/" in subject:
        namespace, name = subject.split("/", 1)
        return ("system:serviceaccount:%s:%s" % (namespace, name),
                ["system:serviceaccounts", "system:serviceaccounts:%s" % namespace, "system:authenticated"])
    return subject, ["system:authenticated"]


def _review(user, groups, attributes):
    attributes = dict(attributes, group=catalog.RESOURCE_GROUP)
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attributes}}


# --- the findings ----------------------------------------------------------------------------

def _v(minor):
    return "1.%d" % minor


def api_findings(facts, target, target_minor):
    found = []
    if facts.get("metrics_error"):
        found.append(finding(
            "metrics-unreadable", "warning", "kube-apiserver /metrics",
            "%s: which resource.k8s.io versions clients use, and kube-apiserver's feature gates, are not known"
            % facts["metrics_error"],
            "run the check with a credential that may get the non-resource URL /metrics (the built-in ClusterRole "
            "system:monitoring grants it; role dra.admin.rbac's admin persona does not)", {}))
    for (version, resource), use in sorted(api_usage(facts.get("metrics_text")).items()):
        serving = catalog.api_serving(target, version, resource)
        evidence = dict(use, version=version, resource=resource)
        subject = "%s/%s %s" % (catalog.RESOURCE_GROUP, version, resource)
        if serving == "default":
            continue
        if serving is None:
            severity, what = "breaking", "Kubernetes %s does not serve it" % _v(target_minor)
        else:
            severity, what = "warning", ("Kubernetes %s serves it only with --runtime-config=%s/%s=true"
                                         % (_v(target_minor), catalog.RESOURCE_GROUP, version))
        found.append(finding(
            "api-version-in-use", severity, subject,
            "%d request(s) to %s since kube-apiserver started (apiserver_request_total%s); %s. The metric does not "
            "name the clients: kube-apiserver's audit log does (userAgent); dra.admin's own modules use the newest served "
            "version, v1 from 1.34" % (
                use["requests"], subject, ", deprecated: removed in %s" % use["removed_release"]
                if use["removed_release"] else "", what),
            "move those clients (drivers, controllers, scripts) to %s/v1%s" % (
                catalog.RESOURCE_GROUP, "" if serving is None else
                ", or keep the version on with role dra.admin.feature_gates, dra_feature_gates_runtime_config_extra: "
                "{'%s/%s': 'true'}" % (catalog.RESOURCE_GROUP, version)),
            evidence))
    for version in facts.get("served_versions") or []:
        resources = [r for r in (facts.get("served_resources") or {}).get(version, []) if "/" not in r]
        gone = [r for r in resources if catalog.api_serving(target, version, r) is None]
        if gone and len(gone) == len(resources):
            found.append(finding(
                "api-version-removed", "breaking", "%s/%s" % (catalog.RESOURCE_GROUP, version),
                "the cluster serves %s/%s (%s); Kubernetes %s has no such version, and kube-apiserver refuses to "
                "start with it in --runtime-config" % (catalog.RESOURCE_GROUP, version, ", ".join(resources),
                                                       _v(target_minor)),
                "remove %s/%s from kube-apiserver's --runtime-config before upgrading: role dra.admin.feature_gates, "
                "dra_feature_gates_runtime_config_extra: {'%s/%s': null}" % (
                    catalog.RESOURCE_GROUP, version, catalog.RESOURCE_GROUP, version),
                {"version": version, "resources": resources}))
    return found


def gate_info_on(minor, name, component=None):
    """What release 1.<minor> knows of gate `name` ({stage, default, locked}, None: not there): the catalog's entry
    for a DRA gate (and those DRA depends on), else the release's own gate list as `component` knows it
    (catalog.kube_gate_info)."""
    if catalog.is_catalogued(name):
        return catalog.target_gate_info(_v(minor), name)
    return catalog.kube_gate_info(minor, name, component)


def gate_removed_in(name):
    """The first release that no longer knows the gate, as a minor, or None."""
    return catalog.gate_removed_in(name) if catalog.is_catalogued(name) else catalog.kube_gate_removed_in(name)


def judged(name, target_minor):
    """Whether this check can say what Kubernetes 1.<target_minor> does with the gate: a catalogued gate, or one of
    the releases' gate lists where the target has a list or the lists show the gate removed by then. client-go's
    gates (in no list), a gate removed before the first list (1.32) and any gate still listed in 1.38 on a target
    without a list (1.31, the announced 1.39) are not."""
    if catalog.is_catalogued(name):
        return True
    if not catalog.kube_gate_in_a_list(name):
        return False
    removed = catalog.kube_gate_removed_in(name)
    return catalog.kube_gate_listed(target_minor) or (removed is not None and target_minor >= removed)


def _values(settings, target_minor):
    """{gate: bool} of the gates among `settings` ({gate: value as written}) that this check judges on the target
    (judged); values that are not booleans are left out (the component would not have started with them)."""
    values = {}
    for name, raw in (settings or {}).items():
        if not judged(name, target_minor):
            continue
        try:
            values[name] = catalog.gate_value(raw)
        except ValueError:
            continue
    return values


# Gates every release's components know (component-base's own).
EVERY_RELEASES_GATES = ("AllAlpha", "AllBeta")


def unjudged_gates(settings, target_minor):
    """The names among `settings` ({gate: value as written}) that this check cannot judge on the target (judged),
    sorted; AllAlpha and AllBeta, which every release has, are left out."""
    return sorted(name for name in (settings or {})
                  if not judged(name, target_minor) and name not in EVERY_RELEASES_GATES)


def unchecked_gates_finding(component, where, source, names, target_minor, prefix):
    """One warning for the gates a component sets that this check cannot judge: a gate the target no longer
    knows stops the component ("unrecognized feature gate")."""
    return finding(
        "feature-gate-unchecked", "warning", "%s: %s" % (prefix, ", ".join(names)),
        "%s %s sets %s, which this check cannot judge on Kubernetes %s (no gate list of that release has them: "
        "client-go's gates, or a release without a list): a component that names a gate Kubernetes %s no longer "
        "knows refuses to start (\"unrecognized feature gate\")"
        % (where, source, ", ".join(names), _v(target_minor), _v(target_minor)),
        "before upgrading, check that Kubernetes %s still has each of them (its kube-apiserver --help lists the "
        "alpha and beta gates; its release notes the removed ones) and remove the others with role "
        "dra.admin.feature_gates, dra_feature_gates_extra: {<gate>: null}" % _v(target_minor),
        {"component": component, "gates": names, "source": source})


def gate_verdict(name, value, target_minor, component=None):
    """What Kubernetes 1.<target_minor> does with `component` when it sets gate `name` to `value`:
    (id, severity, what happens) or None when it accepts it without remark (or the gate is not judged)."""
    target = _v(target_minor)
    info = gate_info_on(target_minor, name, component)
    removed = gate_removed_in(name)
    shown = "%s=%s" % (name, str(value).lower())
    if info is None and removed is not None and target_minor >= removed:
        return ("feature-gate-removed", "breaking",
                "%s; Kubernetes %s no longer knows the gate and the component refuses to start" % (shown, _v(removed)))
    if info is None and not catalog.is_catalogued(name) and judged(name, target_minor):
        return ("feature-gate-removed", "breaking",
                "%s; the %s of Kubernetes %s does not know the gate (\"unrecognized feature gate\") and refuses to "
                "start" % (shown, component or "components", target))
    if info is not None and info["locked"] and value != info["default"]:
        return ("feature-gate-locked", "breaking",
                "%s; on Kubernetes %s it is locked to %s and the component refuses to start"
                % (shown, target, str(info["default"]).lower()))
    if info is not None and info["locked"]:
        return ("feature-gate-locked", "info",
                "%s; on Kubernetes %s it is locked to that value (the setting does nothing, and a later release "
                "that removes the gate refuses it)" % (shown, target))
    return None


def _gate_fix(name, severity):
    return ("%s: role dra.admin.feature_gates, dra_feature_gates_extra: {%s: null}"
            % ("remove the gate before upgrading" if severity == "breaking" else "remove it when convenient", name))


def _dependency_fix(item, values, target):
    fixes = ["remove %s=false" % dep if values.get(dep) is False else "add %s=true" % dep for dep in item["missing"]]
    info = catalog.target_gate_info(target, item["gate"])
    if not info["locked"]:
        fixes.append("or set %s=false" % item["gate"])
    return "before upgrading: %s (role dra.admin.feature_gates, dra_feature_gates_extra)" % ", ".join(fixes)


def component_gate_findings(component, where, source, settings, target_minor, subject_extra=None):
    """The findings for one component's gates on the target: `settings` {gate: value as written} (the
    component's own settings: its --feature-gates or featureGates, or the values that differ from the defaults);
    `where` says whose settings they are ("kube-apiserver", "the kubelet on node-a, node-b"), `source` where they
    were read, `subject_extra` what the subjects name instead of the component (the kubelets' nodes). Each gate
    the target removes or locks to the other value, and each gate that would be on while one it depends on is off
    (refused at start-up from 1.35)."""
    target = _v(target_minor)
    prefix = subject_extra or component
    values = _values(settings, target_minor)
    found = []
    for name in sorted(values):
        verdict = gate_verdict(name, values[name], target_minor, component)
        if verdict:
            fid, severity, what = verdict
            found.append(finding(fid, severity, "%s: %s" % (prefix, name), "%s %s sets %s" % (where, source, what),
                                 _gate_fix(name, severity),
                                 {"component": component, "gate": name, "value": values[name], "source": source}))
    unchecked = unjudged_gates(settings, target_minor)
    if unchecked:
        found.append(unchecked_gates_finding(component, where, source, unchecked, target_minor, prefix))
    if target_minor < catalog.DEPENDENCIES_ENFORCED_FROM:
        return found
    # A locked gate set to the other value is already a finding; judge the dependencies without it.
    accepted = dict((name, value) for name, value in values.items()
                    if (gate_verdict(name, value, target_minor, component) or ("", "info"))[1] != "breaking")
    for item in catalog.target_unmet_dependencies(target, accepted):
        found.append(finding(
            "feature-gate-dependency", "breaking", "%s: %s" % (prefix, item["gate"]),
            "%s %s: on Kubernetes %s %s is on (%s) and depends on %s, which %s off; the component refuses to start "
            "(\"%s is enabled, but depends on features that are disabled\")" % (
                where, source, target, item["gate"], "set" if item["set"] else "by default",
                " and ".join(item["missing"]), "is" if len(item["missing"]) == 1 else "are", item["gate"]),
            _dependency_fix(item, accepted, target),
            {"component": component, "gate": item["gate"], "missing": item["missing"], "source": source,
             "settings": dict((n, accepted[n]) for n in [item["gate"]] + item["missing"] if n in accepted)}))
    return found


def gate_findings(facts, current, target, target_minor):
    found = []
    flags = facts.get("control_plane_flags") or {}
    for component in sorted(flags):
        found += component_gate_findings(component, component, "(static pod command)",
                                         flags[component]["feature-gates"], target_minor)
    found += kubelet_gate_findings(facts, current, target_minor)
    if flags:
        return found
    current_minor = catalog.require_upgrade_target(current)
    effective = gates_from_metrics(facts.get("metrics_text"), current_minor)
    unknown, differing = [], {}
    for name, value in sorted(effective.items()):
        current_info = gate_info_on(current_minor, name)
        if current_info is not None and value == current_info["default"]:
            # Only the catalogued gates are named: every other gate at its default that the target removes
            # would be too (52 from 1.36 to 1.38, nearly all GA gates locked for releases, which no one sets).
            removed = catalog.gate_removed_in(name)
            if removed is not None and target_minor >= removed:
                unknown.append(name)
            continue
        differing[name] = value
    found += component_gate_findings(catalog.KUBE_APISERVER, catalog.KUBE_APISERVER,
                                     "(kubernetes_feature_enabled differs from the default)", differing, target_minor)
    if unknown:
        found.append(finding(
            "feature-gate-unknown", "warning", "%s: %s" % (catalog.KUBE_APISERVER, ", ".join(unknown)),
            "Kubernetes %s removes %s; kube-apiserver runs with the default value, and without its command line "
            "(no static pod visible through the API) it cannot be told whether --feature-gates names them: a "
            "component that names a removed gate refuses to start" % (_v(target_minor), ", ".join(unknown)),
            "read the flags on the control-plane hosts (module dra.admin.component_flags) and remove them with role "
            "dra.admin.feature_gates, dra_feature_gates_extra: {%s}" % ", ".join("%s: null" % n for n in unknown),
            {"gates": unknown, "source": "kubernetes_feature_enabled"}))
    sensitive = catalog.upgrade_sensitive_gates(current, target)
    if sensitive:
        unread = [c for c in CONTROL_PLANE if c != catalog.KUBE_APISERVER or facts.get("metrics_text") is None]
        found.append(finding(
            "feature-gates-unread", "warning", ", ".join(unread),
            "the gates of %s cannot be read through the API (no control-plane mirror pods with kubeadm's component "
            "label, and no /metrics of theirs through kube-apiserver); Kubernetes %s refuses some settings "
            "these components may have: %s" % (" and ".join(unread), _v(target_minor), _sensitive_text(sensitive)),
            "read their flags on the control-plane hosts (module dra.admin.component_flags, or "
            "dra.admin.component_metrics_info for kubernetes_feature_enabled) and check them with this module's "
            "rules, or run the check against a cluster whose static pods are visible",
            {"components": unread, "gates": sensitive}))
    return found


def _sensitive_text(sensitive):
    return "; ".join("%s (%s)" % (name, why) for name, why in sorted(sensitive.items()))


def kubelet_gate_findings(facts, current, target_minor):
    """The kubelets' gates, read per node from /configz (`facts["kubelet_gates"]`: {node: {"gates": {...}} or
    {"error": why}}; absent when not read): the kubelets with the same settings are judged together (their
    findings name every such node), and one warning names each node whose configuration could not be read."""
    per_node = facts.get("kubelet_gates")
    if per_node is None:
        return []
    groups, unread = {}, {}
    for node in sorted(per_node):
        entry = per_node[node]
        if entry.get("error"):
            unread[node] = entry["error"]
            continue
        settings = _values(entry.get("gates"), target_minor)
        unchecked = dict((name, entry["gates"][name]) for name in unjudged_gates(entry.get("gates"), target_minor))
        groups.setdefault((tuple(sorted(settings.items())), tuple(sorted(unchecked.items()))), []).append(node)
    found = []
    source = KUBELET_SOURCE_NOTE.get(facts.get("kubelet_gates_from"), "(its configuration and flags)")
    for (catalogued, unchecked), nodes in sorted(groups.items(), key=lambda kv: kv[1]):
        where = "kubelet on %s" % ", ".join(nodes)
        for item in component_gate_findings(catalog.KUBELET, "the " + where, source, dict(catalogued + unchecked),
                                            target_minor, subject_extra=where):
            item["evidence"]["nodes"] = nodes
            found.append(item)
    if unread:
        sensitive = catalog.upgrade_sensitive_gates(current, _v(target_minor))
        found.append(finding(
            "kubelet-gates-unread", "warning", ", ".join(sorted(unread)),
            "the feature gates of the kubelet on %s cannot be read (%s): a setting Kubernetes %s refuses is not "
            "checked there, and such a kubelet does not start once upgraded%s" % (
                ", ".join(sorted(unread)), "; ".join("%s: %s" % (n, unread[n]) for n in sorted(unread)),
                _v(target_minor), "; the settings to look for: %s" % _sensitive_text(sensitive) if sensitive else ""),
            "read each such kubelet on its host: playbook upgrade_check.yml runs dra.admin.dra_kubelet_gates_info on "
            "the hosts of dra_upgrade_kubelet_hosts (the node's host must be there and reachable, its Node name the "
            "kubelet's --hostname-override, the host name or dra_node_name); where hosts cannot be reached, "
            "kubelet_gates_from: node_proxy reads /configz instead, which needs get on nodes/proxy - the whole "
            "kubelet API, exec included", {"nodes": unread, "gates": sensitive}))
    return sorted(found, key=lambda f: (SEVERITIES.index(f["severity"]), f["id"], f["subject"]))


def admin_label_findings(facts, current_minor, target_minor):
    """The namespaces whose adminAccess the upgrade takes away (the old key only) or gives (the new key only, set
    before the rename counted), and every namespace that grants adminAccess on the target."""
    key = NEW_ADMIN_LABEL if target_minor >= ADMIN_LABEL_RENAMED_IN else OLD_ADMIN_LABEL
    granting = sorted((ns.get("metadata") or {}).get("name") for ns in facts.get("admin_namespaces") or []
                      if ((ns.get("metadata") or {}).get("labels") or {}).get(key) == "true")
    found = [finding(
        "admin-access-namespaces", "info", "label %s" % key,
        "on Kubernetes 1.%d ResourceClaims may request adminAccess (every device of a node, in use or not) in %d "
        "namespace(s), those labelled %s=true: %s" % (target_minor, len(granting), key, ", ".join(granting)),
        "check that each should; role dra.admin.guardrails lets only the admin persona set or change either key",
        {"label": key, "namespaces": granting})] if granting else []
    if target_minor < ADMIN_LABEL_RENAMED_IN:
        return found
    for ns in facts.get("admin_namespaces") or []:
        meta = ns.get("metadata") or {}
        labels = meta.get("labels") or {}
        if (current_minor < ADMIN_LABEL_RENAMED_IN and labels.get(NEW_ADMIN_LABEL) == "true"
                and labels.get(OLD_ADMIN_LABEL) != "true"):
            found.append(finding(
                "admin-access-label", "warning", "namespace %s" % meta.get("name"),
                "namespace %s has %s=true but not %s=true: today that key grants nothing; from Kubernetes 1.%d it "
                "lets every ResourceClaim there request adminAccess" % (
                    meta.get("name"), NEW_ADMIN_LABEL, OLD_ADMIN_LABEL, ADMIN_LABEL_RENAMED_IN),
                "if the namespace should not have admin access, kubectl label namespace %s %s- before the upgrade"
                % (meta.get("name"), NEW_ADMIN_LABEL),
                {"namespace": meta.get("name"), "labels": dict((k, v) for k, v in labels.items()
                                                               if k in (OLD_ADMIN_LABEL, NEW_ADMIN_LABEL))}))
        if labels.get(OLD_ADMIN_LABEL) == "true" and labels.get(NEW_ADMIN_LABEL) != "true":
            found.append(finding(
                "admin-access-label", "breaking", "namespace %s" % meta.get("name"),
                "namespace %s has %s=true but not %s=true: from Kubernetes 1.%d only the new label allows "
                "ResourceClaims with adminAccess there%s" % (
                    meta.get("name"), OLD_ADMIN_LABEL, NEW_ADMIN_LABEL, ADMIN_LABEL_RENAMED_IN,
                    " (already the case on this cluster)" if current_minor >= ADMIN_LABEL_RENAMED_IN else ""),
                "kubectl label namespace %s %s=true (keep the old label until every API server runs 1.%d or "
                "newer); no dra.admin role labels namespaces" % (meta.get("name"), NEW_ADMIN_LABEL,
                                                                 ADMIN_LABEL_RENAMED_IN),
                {"namespace": meta.get("name"), "labels": dict((k, v) for k, v in labels.items()
                                                               if k in (OLD_ADMIN_LABEL, NEW_ADMIN_LABEL))}))
    return found


def rbac_findings(facts, target):
    info = catalog.target_gate_info(target, GRANULAR_STATUS_GATE)
    if info is None or not info["default"]:
        return []
    denied = {}
    for key, allowed in facts.get("access") or []:
        if not allowed:
            denied.setdefault(key[:3], []).append(key[3])
    found = []
    for entry in facts.get("driver_accounts") or []:
        user = "system:serviceaccount:%s:%s" % (entry["namespace"], entry["service_account"])
        verbs = denied.get((user, DRIVER_STATUS_SUBRESOURCE, entry["driver"]))
        if verbs:
            found.append(finding(
                "driver-rbac", "breaking",
                "%s/%s (DaemonSet %s)" % (entry["namespace"], entry["service_account"], entry["daemonset"]),
                "driver %s runs as %s, which may not %s on %s for %s (SubjectAccessReview); with %s (on by default "
                "from 1.36) its ResourceClaim device status updates are refused" % (
                    entry["driver"], user, " or ".join(sorted(verbs)), DRIVER_STATUS_SUBRESOURCE, entry["driver"],
                    GRANULAR_STATUS_GATE),
                "role dra.admin.rbac, dra_rbac_drivers: [{driver: %s, service_accounts: [%s/%s]}] (or install the "
                "driver with role dra.admin.driver, whose built-in RBAC has it)" % (
                    entry["driver"], entry["namespace"], entry["service_account"]),
                dict(entry, denied=sorted(verbs))))
    for subject in facts.get("schedulers") or []:
        user = _subject(subject)[0]
        verbs = denied.get((user, BINDING_SUBRESOURCE, ""))
        if verbs:
            found.append(finding(
                "scheduler-rbac", "breaking", subject,
                "scheduler %s may not %s %s (SubjectAccessReview); from 1.36 a scheduler needs it to allocate "
                "ResourceClaims" % (user, " or ".join(sorted(verbs)), BINDING_SUBRESOURCE),
                "grant update and patch on %s in %s to %s (a ClusterRole and binding; the dra.admin.rbac personas "
                "do not cover schedulers)" % (BINDING_SUBRESOURCE, catalog.RESOURCE_GROUP, user),
                {"subject": subject, "denied": sorted(verbs)}))
    return found


def kubelet_findings(facts, target_minor):
    found = []
    nodes = facts.get("nodes") or []
    oldest = target_minor - catalog.KUBELET_MAX_SKEW
    too_old, unreadable = {}, {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        minor = kubelet_minor(node)
        if minor is None:
            unreadable[name] = kubelet_version(node) or "<none>"
        elif minor < oldest:
            too_old[name] = kubelet_version(node)
    if too_old:
        found.append(finding(
            "kubelet-skew", "breaking", ", ".join(sorted(too_old)),
            "kubelets older than 1.%d are outside the version skew policy of Kubernetes %s (kubelet at most %d minors "
            "older than kube-apiserver): %s" % (oldest, _v(target_minor), catalog.KUBELET_MAX_SKEW,
                                                ", ".join("%s runs %s" % (n, too_old[n]) for n in sorted(too_old))),
            "upgrade those kubelets to 1.%d or newer before the control plane (drain each node first: role "
            "dra.admin.drain)" % oldest, {"nodes": too_old, "oldest_supported_minor": oldest}))
    if unreadable:
        found.append(finding(
            "kubelet-version-unknown", "warning", ", ".join(sorted(unreadable)),
            "the kubelet version of %s cannot be read (%s): the version skew cannot be checked there" % (
                ", ".join(sorted(unreadable)),
                ", ".join("%s reports %s" % (n, unreadable[n]) for n in sorted(unreadable))),
            "check those nodes' kubelets by hand", {"nodes": unreadable}))
    old = dict((n, v) for n, v in old_kubelets(nodes).items() if n not in unreadable)
    if old:
        found.append(finding(
            "seamless-driver-upgrade", "warning", ", ".join(sorted(old)),
            "driver upgrades cannot be seamless while kubelets older than 1.%d run (%s): role dra.admin.driver then "
            "updates with maxSurge 0, and each node is briefly without its driver" % (
                SEAMLESS_UPGRADE_MIN_KUBELET_MINOR, ", ".join("%s runs %s" % (n, old[n]) for n in sorted(old))),
            "upgrade those kubelets first, or upgrade drivers after them (role dra.admin.driver, "
            "dra_driver_seamless_upgrade: auto)", {"nodes": old}))
    return found


def storage_findings(facts, current, target, target_minor):
    found = []
    counts = facts.get("object_counts") or {}
    stored = facts.get("storage_versions") or {}
    source = facts.get("storage_source") or "storageVersionHash"
    for resource in STORED_RESOURCES:
        count = counts.get(resource) or 0
        now = stored.get(resource)
        then = catalog.storage_version(target, resource)
        if not count or not then:
            continue
        evidence = {"resource": resource, "objects": count, "storage_version": now, "target_storage_version": then,
                    "source": source}
        if now and now != then:
            found.append(finding(
                "storage-version", "warning", resource,
                "%d %s stored as %s/%s (%s); Kubernetes %s stores them as %s: objects keep their old encoding "
                "in etcd until they are written again"
                % (count, resource, catalog.RESOURCE_GROUP, now, source, _v(target_minor), then),
                "after the upgrade, rewrite them before a release without %s (kubectl get %s -A -o json | kubectl "
                "replace -f -, or a StorageVersionMigration where storagemigration.k8s.io is served); no dra.admin "
                "role does it" % (now, resource), evidence))
        elif not now:
            found.append(finding(
                "storage-version", "warning", resource,
                "the storage version of %d %s cannot be read (no StorageVersion API, and no storageVersionHash "
                "this collection recognises)" % (count, resource),
                "check with etcdctl on a control-plane host", evidence))
    return found


def sequence_findings(current_minor, target_minor):
    found = []
    if target_minor - current_minor > 1:
        found.append(finding(
            "upgrade-path", "warning", "%s -> %s" % (_v(current_minor), _v(target_minor)),
            "the control plane upgrades one minor release at a time: %s" % " -> ".join(
                _v(m) for m in range(current_minor, target_minor + 1)),
            "run this check for each step", {"steps": [_v(m) for m in range(current_minor + 1, target_minor + 1)]}))
    if target_minor in catalog.PLANNED_MINORS or target_minor in catalog.PROVISIONAL_MINORS:
        source = ("are upstream's plans" if target_minor in catalog.PLANNED_MINORS else
                  "were checked against its pre-release %s" % catalog.PROVISIONAL_CHECKED_AGAINST[target_minor])
        found.append(finding(
            "planned-release", "info", _v(target_minor),
            "Kubernetes %s is not released yet: the catalog's facts about it %s" % (_v(target_minor), source),
            "check again against the release notes", {}))
    return found


def findings(facts, current, target):
    """Every finding for an upgrade of a cluster at `current` to `target`, breaking first."""
    current_minor, target_minor = check_target(current, target)
    found = (sequence_findings(current_minor, target_minor)
             + api_findings(facts, target, target_minor)
             + storage_findings(facts, current, target, target_minor)
             + gate_findings(facts, current, target, target_minor)
             + admin_label_findings(facts, current_minor, target_minor)
             + rbac_findings(facts, target)
             + kubelet_findings(facts, target_minor))
    return sorted(found, key=lambda f: SEVERITIES.index(f["severity"]))


def summary(found):
    return dict((s, sum(1 for f in found if f["severity"] == s)) for s in SEVERITIES)
