# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The allocation explainer against the API: a fixed number of requests, whatever the cluster's size.

`/version`, discovery, kube-apiserver's `/metrics` (the gates in force; the release's defaults when it may not
be read) and one paginated LIST each of DeviceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules (where
served), Nodes, the pods not bound to a node (in the namespace, or all), the pods bound to a node (all namespaces:
the resources each node has left, and their required anti-affinity), the namespace's claim templates and its
ResourceQuotas (none counted where these credentials may not list them).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.allocation import explain, extended, model, search
from ansible_collections.dra.admin.plugins.module_utils.kube.cel import Environment
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_fit import (
    active, anti_affinity_holders, scheduler_verdict, unchecked_filters,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import allocation, pod_claim_refs
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import (
    device_taint_rules,
)
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApiError, hold_reads
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import RESOURCE as TAINT_RULES
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import FEATURE_ENABLED, enabled_gates, parse_text
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    effective_gates, graduated_removed_gates, parse_minor,
)


class NotFound(DraAdminError):
    pass


def resource_quotas(api, namespace):
    """(the ResourceQuotas of the namespace, or of all, how they were read: "read", or "forbidden" when these
    credentials may not list them, then none is counted)."""
    path = "/api/v1/namespaces/%s/resourcequotas" % namespace if namespace else "/api/v1/resourcequotas"
    try:
        return list(api.list_items(path)), "read"
    except DraApiError as exc:
        if exc.status != 403:
            raise
        return [], "forbidden"


def scheduler_features(api, server_version):
    """(the DRA features in force, where they were read): kube-apiserver's kubernetes_feature_enabled (the
    control plane's components are configured alike), else the release's defaults."""
    try:
        reported = enabled_gates(parse_text(api.get_text("/metrics"), names=(FEATURE_ENABLED,)).samples)
        source = "kube-apiserver /metrics"
    except DraApiError as exc:
        if exc.status not in (401, 403, 404):
            raise
        reported, source = {}, "release defaults (/metrics may not be read: %s)" % exc.status
    values = effective_gates(server_version, dict((k, v) for k, v in reported.items() if k.startswith("DRA")))
    values.update((name, True) for name in graduated_removed_gates(server_version))
    return set(name for name, on in values.items() if on), source


def read_cluster(api, namespace, with_pods=True):
    """Every object the explainer reads (see the module text); the pods only `with_pods`."""
    version = api.resource_api_version()
    server_version = (api.server_version() or {}).get("gitVersion")
    rules, rules_read = device_taint_rules(api, api.versions_by_resource().get(TAINT_RULES))
    quotas, quotas_read = resource_quotas(api, namespace) if with_pods else ([], "not read")
    pods_path = "/api/v1/namespaces/%s/pods" % namespace if namespace else "/api/v1/pods"
    templates_path = api.resource_path("resourceclaimtemplates", namespace=namespace, version=version)
    cluster = {
        "server_version": server_version,
        "resource_api_version": version,
        "classes": dict(((c.get("metadata") or {}).get("name"), c) for c in api.list_items(
            api.resource_path("deviceclasses", version=version))),
        "slices": list(api.list_items(api.resource_path("resourceslices", version=version))),
        "claims": list(api.list_items(api.resource_path("resourceclaims", version=version))),
        "templates": list(api.list_items(templates_path)) if with_pods else [],
        "rules": rules, "rules_read": rules_read, "quotas": quotas, "quotas_read": quotas_read,
        "nodes": list(api.list_items("/api/v1/nodes")),
        "pods": [p for p in api.list_items(pods_path, {"fieldSelector": "spec.nodeName="})
                 if not (p.get("metadata") or {}).get("deletionTimestamp")] if with_pods else [],
        "bound_pods": active(api.list_items("/api/v1/pods", {"fieldSelector": "spec.nodeName!="}))
        if with_pods else [],
    }
    hold_reads()  # kept to the end of the run
    return cluster


def _label(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def bound_by_node(cluster):
    """{node name: [pods bound to it]} of the cluster read (read_cluster's bound_pods)."""
    out = {}
    for pod in cluster.get("bound_pods") or []:
        out.setdefault((pod.get("spec") or {}).get("nodeName"), []).append(pod)
    return out


def subjects(cluster, namespace=None, claim=None, pod=None, mapping=None):
    """[(subject dict, pod or None, claim label or None)]: the unbound pods with claims to allocate, or extended
    resources a DeviceClass backs (mapping, see extended.class_mapping) (the pod named, the pods using the claim
    named, or all in scope), then the pending claims no such pod uses."""
    pods = [p for p in cluster["pods"]
            if (pod_claim_refs(p) or extended.pod_backed_resources(p.get("spec") or {}, mapping or {}))
            and (not pod or _label(p) == "%s/%s" % (namespace, pod))]
    if claim:
        wanted = "%s/%s" % (namespace, claim)
        pods = [p for p in pods if wanted in ["%s/%s" % (namespace, c) for dummy, c, dummy2 in pod_claim_refs(p)]]
    out = [({"pod": _label(p)}, p, None) for p in sorted(pods, key=_label)]
    if pod:
        return out
    used = set("%s/%s" % ((p.get("metadata") or {}).get("namespace"), c)
               for p in pods for dummy, c, dummy2 in pod_claim_refs(p) if c)
    for item in sorted(cluster["claims"], key=_label):
        label = _label(item)
        if label in used or allocation(item) is not None or (namespace and not label.startswith(namespace + "/")):
            continue
        if not claim or label == "%s/%s" % (namespace, claim):
            out.append(({"claim": label}, None, label))
    return out


def explain_all(api, namespace=None, claim=None, pod=None, detail=explain.DETAIL_SUMMARY):
    """The module's result: one explanation per subject, the totals, what was read."""
    cluster = read_cluster(api, namespace)
    minor = parse_minor(cluster["server_version"])
    features, features_source = scheduler_features(api, cluster["server_version"])
    ctx = explain.context(Environment(minor), cluster, features)
    claims_by_label = dict((_label(c), c) for c in cluster["claims"])
    templates = dict((_label(t), t) for t in cluster["templates"])
    mapping = extended_mapping(cluster, features)
    unsure = unsure_mappings(cluster) if mapping else {}
    found = subjects(cluster, namespace, claim, pod, mapping)
    _require_found(found, cluster, namespace, claim, pod, claims_by_label)
    memo, left_by_owner = {}, extended.claims_by_owner(cluster["claims"])
    users = explain.claim_users(cluster["pods"])
    bound, holders = bound_by_node(cluster), anti_affinity_holders(cluster["bound_pods"])
    explanations = [explain_subject(ctx, subject, pod_obj, claim_label, claims_by_label, templates, cluster, detail,
                                    memo, mapping, left_by_owner, users, bound, holders, unsure)
                    for subject, pod_obj, claim_label in found]
    return {"explanations": explanations, "totals": totals(explanations),
            "resource_api_version": cluster["resource_api_version"], "device_taint_rules": cluster["rules_read"],
            "resource_quotas": cluster["quotas_read"],
            "features": sorted(f for f in features if f.startswith("DRA")), "features_source": features_source,
            "release": minor}


def _require_found(found, cluster, namespace, claim, pod, claims_by_label):
    if pod and not found:
        raise NotFound("pod %s/%s is not waiting to be scheduled with claims (it is bound to a node, being deleted, "
                       "asks for no claim and no extended resource a DeviceClass backs, or does not exist)"
                       % (namespace, pod))
    if claim and "%s/%s" % (namespace, claim) not in claims_by_label:
        raise NotFound("ResourceClaim %s/%s does not exist; check name and namespace" % (namespace, claim))


def extended_mapping(cluster, features):
    """{extended resource name: DeviceClass name} where the scheduler backs extended resources by DRA, else {}."""
    return extended.class_mapping(cluster["classes"]) if model.EXTENDED_RESOURCE in features else {}


def unsure_mappings(cluster):
    """{extended resource name: why}: the names whose class the cluster's kube-scheduler may not map as its current
    DeviceClasses say (extended.unsure_mappings, by its release)."""
    version = cluster.get("server_version")
    return extended.unsure_mappings(cluster["classes"], parse_minor(version) if version else None)


def explain_subject(ctx, subject, pod, claim_label, claims_by_label, templates, cluster, detail, memo=None,
                    mapping=None, left_by_owner=None, users=None, bound=None, holders=None, unsure=None):
    """The explanation of one subject (explain.explain). unsure: ``unsure_mappings`` of the cluster (None: read
    here): a pod whose extended resources include one of them is no plain fits (cannot_tell, the reason among its
    problems)."""
    resources, unchecked, scheduler, contested, unsure_names = (), (), None, [], []
    if bound is None:
        bound = bound_by_node(cluster)
    if holders is None:
        holders = anti_affinity_holders(cluster.get("bound_pods") or ())
    if pod is not None:
        allocated, to_allocate, problems, waits = explain.pod_claims(pod, claims_by_label, templates,
                                                                     cluster.get("quotas") or ())
        if left_by_owner is None:
            left_by_owner = extended.claims_by_owner(cluster["claims"])
        extended_claim, resources, left_over = explain.extended_resource_claim(pod, mapping or {}, left_by_owner)
        if extended_claim is not None:
            to_allocate.append(extended_claim)
            problems.extend(left_over)
            if unsure is None:
                unsure = unsure_mappings(cluster)
            unsure_names = [unsure[r] for r in resources if r in unsure]
            problems.extend(unsure_names)
        if users is None:
            users = explain.claim_users(cluster["pods"])
        contested = explain.shared_claim_problems(pod, to_allocate, users, cluster["nodes"])
        problems.extend(contested)
        spec = pod.get("spec") or {}
        unchecked = unchecked_filters(pod, holders)
        scheduler = scheduler_verdict(pod)
        if spec.get("schedulingGates"):
            problems.append("the pod has scheduling gates (%s): the scheduler does not look at it yet" % ", ".join(
                g.get("name") for g in spec["schedulingGates"]))
    else:
        allocated, problems, spec, waits = [], [], None, []
        to_allocate = [search.Claim(claim_label, claims_by_label[claim_label].get("spec"))]
    return explain.explain(ctx, subject, to_allocate, allocated, problems, cluster["nodes"], spec, detail, memo,
                           resources, waits, bound, unchecked, scheduler, bool(contested or unsure_names))


def totals(explanations):
    counts = {"subjects": len(explanations)}
    for verdict in (search.FITS, search.DOES_NOT_FIT, search.CANNOT_TELL):
        counts[verdict] = sum(1 for e in explanations if e["verdict"] == verdict)
    return counts
