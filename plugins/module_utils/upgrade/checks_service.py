# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Reads what an upgrade check needs from the API server (through ``api.DraApi``), then asks ``checks``.

Requests: the version, resource.k8s.io discovery (the group and each served version), kube-apiserver's
/metrics, the StorageVersion list (404 where not served), one ``limit=1`` LIST per stored DRA resource
(its count from ``remainingItemCount``), and paginated LISTs of the control-plane mirror pods, Nodes,
namespaces with the old admin-access label, DaemonSets and ResourceSlices; then two SubjectAccessReviews
per driver service account and per scheduler subject. The kubelets' gates come from their hosts
(``kubelet_host_gates``, read there by module ``dra_kubelet_gates_info``; no request); only with
``kubelet_gates_from: node_proxy`` one GET of each node's kubelet /configz through the API server's node proxy
(then the only requests that grow with the cluster: one per node; ``get`` on ``nodes/proxy`` reaches the whole
kubelet API, exec included, which is why it is an opt-in).
For the findings of ``behaviour``: paginated LISTs of the DeviceClasses, ResourceClaimTemplates and
DeviceTaintRules (their last-applied-configuration annotations, and the rules' selectors and effects), of the
deployed Helm releases' Secrets (``owner=helm,status=deployed``; only with ``helm_releases``), and of the
ResourceClaims only when a NoExecute taint is in force and the upgrade makes such taints evict pods with DRA-backed extended
resources. The files of ``manifest_paths`` are read on the host the module runs on. Nothing else grows with the
number of claims.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dra.admin.plugins.module_utils.upgrade import behaviour, checks, stored_versions
from ansible_collections.dra.admin.plugins.module_utils.drivers.checks import driver_accounts
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import NEW_ADMIN_LABEL, OLD_ADMIN_LABEL
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError

STORAGE_VERSIONS_PATH = "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions"
SECRETS_PATH = "/api/v1/secrets"
# The DRA objects whose last-applied-configuration annotation is read (ResourceSlices come with the driver list).
LAST_APPLIED_RESOURCES = ("deviceclasses", "resourceclaimtemplates", "devicetaintrules")
SKIPPED_DIRS = (".git",)


def manifest_path_errors(paths):
    """checks.UpgradeInputError naming manifest_paths when a path does not exist."""
    missing = [p for p in paths or [] if not os.path.exists(p)]
    if missing:
        raise checks.UpgradeInputError(
            "manifest_paths: %s not found on the host the module runs on; give files or directories of YAML or JSON "
            "manifests there (a git checkout works), or leave the option out" % ", ".join(missing))


def manifest_files(path):
    """The manifest files under `path` (itself when a file), sorted; .git is skipped."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(stored_versions.MANIFEST_SUFFIXES))
    return found


def read_manifests(paths):
    """({path: text}, [why a file could not be read])."""
    texts, errors = {}, []
    for path in paths or []:
        for name in manifest_files(path):
            try:
                with open(name, "rb") as handle:
                    texts[name] = handle.read().decode("utf-8")
            except (IOError, OSError, UnicodeDecodeError) as exc:
                errors.append("%s: %s" % (name, exc))
    return texts, errors


def _served_list(api, facts, resource):
    """Every object of a resource.k8s.io resource, from the newest served version that has it ([] when none)."""
    for version in facts["served_versions"]:
        if resource in facts["served_resources"].get(version, []):
            return list(api.list_items(api.resource_path(resource, version=version)))
    return []


def gather_behaviour(api, facts, current, target, helm_releases=False):
    """The facts behaviour.findings reads from the API (manifest files are read by check)."""
    objects = dict((r, _served_list(api, facts, r)) for r in LAST_APPLIED_RESOURCES)
    facts["taint_rules"] = objects["devicetaintrules"]
    facts["last_applied_objects"] = [dict(o, kind=checks.KINDS[r]) for r in LAST_APPLIED_RESOURCES
                                     for o in objects[r]] + facts["resource_slices"]
    if helm_releases:
        try:
            facts["helm_secrets"] = list(api.list_items(SECRETS_PATH, {"labelSelector":
                                                                       stored_versions.HELM_OWNER_SELECTOR}))
        except DraApiError as exc:
            if exc.status not in (401, 403):
                raise
            facts["helm_error"] = str(exc)
    table = catalog.EXTENDED_RESOURCE_TAINT_EVICTION_FROM
    crossing = not catalog.has_patch_change(table, current) and catalog.has_patch_change(table, target)
    if crossing and behaviour.no_execute_taints(facts, target):
        facts["claims"] = _served_list(api, facts, "resourceclaims")


def _count(api, path):
    page = api.get(path, {"limit": 1})
    items = len(page.get("items") or [])
    return items + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


# The kubelets' /configz read at once: below the kubernetes client's connection pool (5 per CPU), so every read
# keeps its connection.
CONFIGZ_READS_AT_ONCE = 8


# Where the kubelets' gates come from: their hosts (the default), or /configz through the API server's node proxy.
FROM_HOSTS = "hosts"
FROM_NODE_PROXY = "node_proxy"
KUBELET_GATES_FROM = (FROM_HOSTS, FROM_NODE_PROXY)
SOURCES = {FROM_HOSTS: "each node's host: the kubelet's --config file, --config-dir and command line "
                       "(dra_kubelet_gates_info)",
           FROM_NODE_PROXY: "/configz through the API server's node proxy"}


def host_kubelet_gates(nodes, host_results):
    """{node: {"gates": {...}} or {"error": why}} for every Node, from the results of dra_kubelet_gates_info on the
    hosts (a list, or a map of anything to them); a Node no host answered for is named with the reason."""
    results = host_results.values() if isinstance(host_results, dict) else host_results or []
    by_node = {}
    for entry in results:
        if isinstance(entry, dict) and entry.get("node"):
            by_node[entry["node"]] = entry
    per_node = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name")
        entry = by_node.get(name)
        if entry is None:
            per_node[name] = {"error": "no host of the inventory read this node's kubelet (add its host to "
                                       "dra_upgrade_kubelet_hosts, or set its dra_node_name)"}
        elif entry.get("error") or not isinstance(entry.get("gates"), dict):
            per_node[name] = {"error": entry.get("error") or "its host returned no gates"}
        else:
            per_node[name] = {"gates": dict(entry["gates"])}
    return per_node


def kubelet_configz_path(node):
    return "/api/v1/nodes/%s/proxy/configz" % node


def read_kubelet_gates(api, nodes):
    """{node: {"gates": {...}} or {"error": why}}: each kubelet's featureGates from its /configz, read through
    the API server's node proxy, CONFIGZ_READS_AT_ONCE nodes at a time (each answer comes from its own node). A
    node whose kubelet does not answer (unreachable, forbidden, no kubelet behind the Node object) gets the reason,
    never an empty answer."""
    names = [(node.get("metadata") or {}).get("name") for node in nodes]
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(CONFIGZ_READS_AT_ONCE, len(names))) as pool:
        return dict(zip(names, pool.map(lambda name: kubelet_gates_of(api, name), names)))


def kubelet_gates_of(api, name):
    """{"gates": {...}} or {"error": why} of one node's kubelet."""
    try:
        gates = checks.kubelet_gates_from_configz(api.get(kubelet_configz_path(name)))
    except DraApiError as exc:
        return {"error": str(exc)}
    except ValueError:  # an answer that is not JSON
        gates = None
    return {"gates": gates} if gates is not None else {
        "error": "GET %s answered something other than a kubelet configuration" % kubelet_configz_path(name)}


def gather(api, schedulers=(), kubelet_gates=True, kubelet_gates_from=FROM_HOSTS, kubelet_host_gates=None):
    """The facts checks.findings reads."""
    served = api.served_resource_versions()
    discovery = api.resource_discovery()
    facts = {
        "served_versions": served,
        "served_resources": dict((v, [r.get("name") for r in (d or {}).get("resources") or []])
                                 for v, d in discovery.items()),
        "schedulers": list(schedulers or []),
    }
    try:
        facts["metrics_text"] = api.get_text("/metrics")
    except DraApiError as exc:
        if exc.status not in (401, 403):
            raise
        facts["metrics_error"] = str(exc)
    listed = api.get_or_none(STORAGE_VERSIONS_PATH)
    if listed is not None:
        facts["storage_versions"] = checks.storage_versions_from_api(listed.get("items"))
        facts["storage_source"] = "StorageVersion API"
    else:
        facts["storage_versions"] = checks.storage_versions_from_discovery(list(discovery.values()))
        facts["storage_source"] = "discovery storageVersionHash"
    version = api.resource_api_version() if served else None
    facts["object_counts"] = {}
    facts["resource_slices"] = []
    drivers = set()
    if version:
        for resource in checks.STORED_RESOURCES:
            if resource in facts["served_resources"].get(version, []):
                facts["object_counts"][resource] = _count(api, api.resource_path(resource, version=version))
        facts["resource_slices"] = [dict(s, kind=checks.KINDS["resourceslices"]) for s in api.list_items(
            api.resource_path("resourceslices", version=version))]
        drivers = set((s.get("spec") or {}).get("driver") for s in facts["resource_slices"])
    facts["control_plane_flags"] = checks.flags_from_pods(api.list_items(
        "/api/v1/namespaces/kube-system/pods", {"labelSelector": "tier=control-plane"}))
    facts["nodes"] = list(api.list_items("/api/v1/nodes"))
    if kubelet_gates:
        facts["kubelet_gates_from"] = kubelet_gates_from
        facts["kubelet_gates"] = read_kubelet_gates(api, facts["nodes"]) if kubelet_gates_from == FROM_NODE_PROXY \
            else host_kubelet_gates(facts["nodes"], kubelet_host_gates)
    # Namespaces carrying either admin-access key (a label selector cannot OR two keys: one list each).
    carrying = {}
    for key in (OLD_ADMIN_LABEL, NEW_ADMIN_LABEL):
        for ns in api.list_items("/api/v1/namespaces", {"labelSelector": key}, metadata_only=True):
            carrying[(ns.get("metadata") or {}).get("name")] = ns
    facts["admin_namespaces"] = [carrying[name] for name in sorted(carrying)]
    facts["daemonsets"] = list(api.list_items("/apis/apps/v1/daemonsets"))
    facts["driver_accounts"] = driver_accounts(facts["daemonsets"], drivers)
    facts["access"] = []
    for key, body in checks.access_reviews(facts["driver_accounts"], schedulers):
        answer = api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body,
                             content_type="application/json")
        facts["access"].append((key, bool((answer.get("status") or {}).get("allowed"))))
    return facts


def kubelet_gates_source(facts):
    """Which kubelets' gates were read and which not (the reasons are in the findings), and from where."""
    per_node = facts.get("kubelet_gates")
    if per_node is None:
        return {"read": [], "unread": [], "source": "not read (kubelet_gates: false)"}
    return {"read": sorted(n for n, e in per_node.items() if "gates" in e),
            "unread": sorted(n for n, e in per_node.items() if "error" in e),
            "source": SOURCES[facts.get("kubelet_gates_from") or FROM_HOSTS]}


def check(api, target, schedulers=(), kubelet_gates=True, manifest_paths=(), helm_releases=False,
          kubelet_gates_from=FROM_HOSTS, kubelet_host_gates=None):
    """The module's whole answer: versions, findings, their counts by severity, and the facts' sources."""
    current = api.server_version().get("gitVersion")
    checks.check_target(current, target)  # bad input fails before anything else is read
    manifest_path_errors(manifest_paths)
    if kubelet_gates_from not in KUBELET_GATES_FROM:
        raise checks.UpgradeInputError("kubelet_gates_from: %r is not one of %s" % (
            kubelet_gates_from, ", ".join(KUBELET_GATES_FROM)))
    facts = gather(api, schedulers, kubelet_gates, kubelet_gates_from, kubelet_host_gates)
    facts["manifest_texts"], facts["manifest_errors"] = read_manifests(manifest_paths)
    gather_behaviour(api, facts, current, target, helm_releases)
    found = behaviour.findings(facts, current, target)
    return {
        "kubernetes_version": current,
        "target_version": target,
        "findings": found,
        "summary": checks.summary(found),
        "sources": {
            "feature_gates": "static pod command" if facts["control_plane_flags"] else "kubernetes_feature_enabled",
            "storage_versions": facts["storage_source"],
            "driver_service_accounts": ["%s/%s" % (a["namespace"], a["service_account"])
                                        for a in facts["driver_accounts"]],
            "kubelet_feature_gates": kubelet_gates_source(facts),
            "manifest_files": sorted(facts["manifest_texts"]),
            "helm_releases": len(facts.get("helm_secrets") or []) if helm_releases else
            "not read (helm_releases: false)",
        },
    }
