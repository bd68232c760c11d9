# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Claim views read from a cluster: the API side of claims.claims, shared by
dra_claims_info and the drain. A fixed number of paginated LISTs, however
many nodes there are."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import RESOURCE_GROUP
from ansible_collections.dra.admin.plugins.module_utils.access.api import LIST_PAGE_SIZE, DraApiError
from ansible_collections.dra.admin.plugins.module_utils.claims.claims import (
    blocks_node, claim_fields, claim_selected, claim_totals, claim_view, claims_listed_by_groups, count_view,
    daemonset_claims, non_pod_claims, pod_ref, view_keeping,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import (
    CONSUMER_POD, POD_GROUP_API_GROUP, POD_GROUP_RESOURCE, allocation, claims_used_by, consumer_kind, consumer_resource,
    reserved_for,
)
from ansible_collections.dra.admin.plugins.module_utils.claims.capacity import (
    capacity_report, metrics_text, pool_status_answer, pool_status_comparison, pool_status_computed,
    pool_status_request, pool_status_support, summary_lines,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import RESOURCE as TAINT_RULES
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_index

POD_NODE_COLUMN = "Node"
POOL_STATUS_RESOURCE = "resourcepoolstatusrequests"
POLL_INTERVAL = 0.5


class ClaimsError(DraAdminError):
    """A problem with the request (for example an unknown node)."""


class PoolStatusError(DraAdminError):
    """A ResourcePoolStatusRequest that did not answer, or failed."""


def node_label_index(api):
    """{node name: labels} from a metadata-only LIST."""
    return dict((n["metadata"]["name"], n["metadata"].get("labels") or {})
                for n in api.list_items("/api/v1/nodes", metadata_only=True))


def pod_ref_pages(api, namespaces=()):
    """The pods' (uid, pod_ref) pairs (in the namespaces, if given), a page at a time, from the pod LIST in the
    server's Table form: metadata and node only, never whole pods."""
    paths = ["/api/v1/namespaces/%s/pods" % ns for ns in namespaces] or ["/api/v1/pods"]
    columns = {POD_NODE_COLUMN: lambda pod: (pod.get("spec") or {}).get("nodeName")}
    page = []
    for path in paths:
        for meta, cells in api.list_table_rows(path, columns):
            page.append((meta.get("uid"), pod_ref(cells.get(POD_NODE_COLUMN), meta.get("ownerReferences"))))
            if len(page) >= LIST_PAGE_SIZE:
                yield page
                page = []
    yield page


def pod_index(api, namespaces=()):
    """{uid: pod_ref} of every pod (in the namespaces, if given): metadata and node only, never whole pods."""
    return dict(pair for page in pod_ref_pages(api, namespaces) for pair in page)


def served_resource_path(api, group, resource):
    """The cluster-wide LIST path of a resource in the first version of its group that serves it (the
    preferred version first), or None when the server does not serve it. One GET per version looked at."""
    if not group:
        versions, prefix = ["v1"], "/api"
    else:
        doc = api.get_or_none("/apis/%s" % group) or {}
        preferred = (doc.get("preferredVersion") or {}).get("version")
        versions = [preferred] if preferred else []
        versions += [v.get("version") for v in doc.get("versions") or [] if v.get("version") != preferred]
        prefix = "/apis/%s" % group
    for version in versions:
        listing = api.get_or_none("%s/%s" % (prefix, version)) or {}
        if any(r.get("name") == resource for r in listing.get("resources") or []):
            return "%s/%s/%s" % (prefix, version, resource)
    return None


def non_pod_consumer_index(api, claims):
    """(others, listed) for claims.claims.claim_view: others, {(API group, resource): set of uids} of the objects that
    exist, for each resource of the consumers that are not pods (a workload's PodGroup) the claims' reservedFor
    names; listed, {(namespace, claim name): [consumer reference]} of the PodGroups that list claims (read when a
    claim is allocated and reserved for nobody, as the scheduler leaves a group's claim while none of its pods can
    be placed). Discovery of each group and one LIST per resource (metadata only, whole PodGroups); none without
    such claims. A resource not served, or not readable with these credentials, is left out: its consumers'
    existence stays unknown (never counted as gone)."""
    wanted = set(consumer_resource(ref) for claim in claims for ref in reserved_for(claim)
                 if consumer_kind(ref) != CONSUMER_POD)
    if any(allocation(c) is not None and not reserved_for(c) for c in claims):
        wanted.add((POD_GROUP_API_GROUP, POD_GROUP_RESOURCE))
    others, listed = {}, {}
    for group, resource in sorted(wanted):
        try:
            path = served_resource_path(api, group, resource)
            if path is None:
                continue
            if (group, resource) == (POD_GROUP_API_GROUP, POD_GROUP_RESOURCE):
                groups = list(api.list_items(path))
                listed = claims_listed_by_groups(groups)
            else:
                groups = api.list_items(path, metadata_only=True)
            others[(group, resource)] = set((m.get("metadata") or {}).get("uid") for m in groups)
        except DraApiError as exc:
            if exc.status not in (401, 403, 404):
                raise
    return others, listed


def claims_used_on_node(api, node):
    """{(namespace, claim name)} the pods on the node use, from every field that names a claim (one LIST of
    the node's pods, field-selected: whole pods, as claims are named in their spec and status)."""
    return claims_used_by(api.list_items("/api/v1/pods", {"fieldSelector": "spec.nodeName=%s" % node}))


def claim_items(api, version, namespaces=(), label_selector=None):
    query = {"labelSelector": label_selector} if label_selector else {}
    if not namespaces:
        return api.list_items(api.resource_path("resourceclaims", version=version), query)
    return (c for ns in namespaces
            for c in api.list_items(api.resource_path("resourceclaims", namespace=ns, version=version), query))


def unknown_node_error(node, nodes):
    known = sorted(nodes)
    return ClaimsError("node %r does not exist (the cluster has %d nodes%s); check the name with "
                       "'kubectl get nodes'" % (node, len(known), (": " + ", ".join(known[:10])) if known else ""))


def claim_pages(api, version, namespaces=(), label_selector=None):
    """Every page of the claims' LISTs (cluster-wide, or per namespace), each as the claims.claim_fields of its
    claims: the whole objects are dropped page by page."""
    query = {"labelSelector": label_selector} if label_selector else {}
    paths = [api.resource_path("resourceclaims", namespace=ns, version=version) for ns in namespaces] or \
        [api.resource_path("resourceclaims", version=version)]
    for path in paths:
        for page in api.list_pages(path, query):
            yield [claim_fields(item) for item in page.get("items") or []]


def needs_consumer_index(claim):
    """Whether non_pod_consumer_index reads anything for the claim: it names a consumer that is not a pod, or
    its allocation is reserved for nobody (the PodGroups that list claims are read then)."""
    held_for = reserved_for(claim)
    return any(consumer_kind(ref) != CONSUMER_POD for ref in held_for) or \
        (allocation(claim) is not None and not held_for)


def _views(claims, known, node, driver, keep, keys=()):
    """(views, summary, totals) of the claims on `node` and of `driver` (all without them); views only when
    `keep`, each with only `keys` (claims.view_keeping) when given. known: (node labels, pods, slice index, others,
    listed) for claims.claim_view. None as soon as a claim needs the consumer index and it was not read (others is
    None)."""
    views, summary, totals = [], {}, claim_totals(())
    for claim in claims:
        if known[3] is None and needs_consumer_index(claim):
            return None
        view = claim_view(claim, *known)
        if claim_selected(view, node=node, driver=driver):
            count_view(summary, totals, view)
            if keep:
                views.append(view_keeping(view, keys))
    views.sort(key=lambda v: (v["namespace"] or "", v["name"] or ""))
    return views, summary, totals


def _all_claim_views(api, version, known, selection):
    """_views of every claim. The claims' pages are made into views as they come, not kept; when a claim needs
    the consumer index (rare: a consumer that is not a pod, an allocation reserved for nobody), the claims are
    listed again and kept, the index read from them, and the views made from those (one more LIST)."""
    namespaces, label_selector, node, driver, keep, keys = selection
    pages = claim_pages(api, version, namespaces, label_selector)
    try:
        made = _views((claim for page in pages for claim in page), known + (None, None), node, driver, keep, keys)
    finally:
        pages.close()
    if made is None:
        items = [claim for page in claim_pages(api, version, namespaces, label_selector) for claim in page]
        made = _views(items, known + non_pod_consumer_index(api, items), node, driver, keep, keys)
    return made


def gather_claim_views(api, node=None, namespaces=(), driver=None, label_selector=None, keep_views=True, keys=()):
    """Claim views of the cluster, as a dict.

    version: the resource api version used; views: sorted claim views (those on
    `node` when given); summary and totals: claims.summarize_by_node and claims.claim_totals of those views;
    blocking: views that keep `node`'s driver from leaving;
    daemonset_claims: views on `node` held only by DaemonSet pods (not blocking);
    non_pod_claims: views on `node` reserved only for consumers that are not pods (a
    workload's PodGroup) that no pod on the node uses (not blocking).

    Only the fields the views read are kept of each claim (claims.claim_fields). With keep_views false and no
    `node`, the views are counted as they are made and not kept (views is empty). With `keys`, the views returned
    keep only those keys (claims.view_keeping): without `node` as they are made, with it once blocking,
    daemonset_claims and non_pod_claims, which read whole views, are made.
    """
    version = api.resource_api_version()
    nodes = node_label_index(api)
    if node is not None and node not in nodes:
        raise unknown_node_error(node, nodes)
    slice_index = device_index(api.list_items(api.resource_path("resourceslices", version=version)))
    known = (nodes, pod_index(api, namespaces), slice_index)
    on_node = node is not None
    selection = (namespaces, label_selector, node, driver, keep_views or on_node, () if on_node else keys)
    views, summary, totals = _all_claim_views(api, version, known, selection)
    used = claims_used_on_node(api, node) if on_node and any(v["non_pod_consumers"] for v in views) else None
    return {"version": version, "summary": summary, "totals": totals,
            "views": [view_keeping(v, keys) for v in views] if on_node else views,
            "blocking": [v for v in views if on_node and blocks_node(v, node, used)],
            "daemonset_claims": daemonset_claims(views, node) if on_node else [],
            "non_pod_claims": non_pod_claims(views, node, used) if on_node else []}


def device_taint_rules(api, served):
    """(the cluster's DeviceTaintRules from the first of the `served` versions, how they were read: "read",
    "not served", or "forbidden" when these credentials may not list them, then none is counted)."""
    if not served:
        return [], "not served"
    try:
        return list(api.list_items(api.resource_path(TAINT_RULES, version=served[0]))), "read"
    except DraApiError as exc:
        if exc.status != 403:
            raise
        return [], "forbidden"


def gather_capacity(api, driver=None, pool_status=False, timeout=30, check_mode=False, clock=time.monotonic,
                    sleep=time.sleep):
    """Capacity of the cluster from the server's version, discovery (once per served version) and four LISTs
    (DeviceTaintRules where served, slices, claims, DeviceClasses): claims.capacity.capacity_report (free judged by that
    release's allocator rules) plus the version used and whether the server serves ResourcePoolStatusRequest
    (alpha, 1.36+).

    With pool_status, where it is served and not in check mode, also one ResourcePoolStatusRequest per driver
    (created, read until the controller answers, deleted) and the differences from the computed counts."""
    version = api.resource_api_version()
    server_version = (api.server_version() or {}).get("gitVersion")
    by_resource = api.versions_by_resource()
    taint_rules, rules_read = device_taint_rules(api, by_resource.get(TAINT_RULES))
    slices = list(api.list_items(api.resource_path("resourceslices", version=version)))
    claims = list(api.list_items(api.resource_path("resourceclaims", version=version)))
    report = capacity_report(slices, claims,
                             api.list_items(api.resource_path("deviceclasses", version=version)), driver=driver,
                             server_version=server_version, taint_rules=taint_rules)
    report["device_taint_rules"] = rules_read
    report["summary"] = summary_lines(report)
    report["version"] = version
    served = by_resource.get(POOL_STATUS_RESOURCE) or []
    report["pool_status_served"] = bool(served)
    report["pool_status"] = None
    if pool_status:
        report["pool_status"] = read_pool_status(api, report, served, driver, timeout, check_mode, clock, sleep,
                                                 (slices, claims, server_version, taint_rules))
    answered = report["pool_status"] and report["pool_status"]["source"] != "computed"
    report["metrics_text"] = metrics_text(report, report["pool_status"]["disagreements"] if answered else None)
    return report


def read_pool_status(api, report, served, driver, timeout, check_mode, clock, sleep, listed=((), (), None, ())):
    """{source, skipped, pools, disagreements, requests}: the controller's counts per pool and how they differ.
    `served`: the resource.k8s.io versions serving the request, newest first (the request is made in the first);
    `listed`: (slices, claims, server version, DeviceTaintRules) the report was computed from, for the counts the
    report does not keep (claims.capacity.pool_status_computed)."""
    drivers = [driver] if driver else sorted(report["by_driver"])
    out = {"source": "computed", "skipped": None, "pools": {}, "disagreements": [], "requests": []}
    if not served:
        out["skipped"] = "%s is not served: %s" % (POOL_STATUS_RESOURCE, pool_status_support())
        return out
    if check_mode:
        out["skipped"] = "check mode: no ResourcePoolStatusRequest created"
        return out
    path = "/apis/%s/%s/%s" % (RESOURCE_GROUP, served[0], POOL_STATUS_RESOURCE)
    for name in drivers:
        answer = ask_pool_status(api, path, pool_status_request(name, "%s/%s" % (RESOURCE_GROUP, served[0])),
                                 timeout, clock, sleep)
        out["requests"].append(answer["name"])
        if not answer["complete"]:
            raise PoolStatusError("ResourcePoolStatusRequest %s for driver %s did not complete: %s"
                                  % (answer["name"], name, answer["message"]))
        if answer["truncated"]:
            out["disagreements"].append("%s: the pool status lists %d of %d pools" % (
                name, len(answer["pools"]), answer["pool_count"]))
        out["pools"].update(answer["pools"])
    out["source"] = "ResourcePoolStatusRequest"
    out["disagreements"] += pool_status_comparison(report, [out["pools"][k] for k in sorted(out["pools"])],
                                                   drivers=drivers, computed=pool_status_computed(*listed))
    return out


def ask_pool_status(api, path, body, timeout, clock, sleep):
    """Create the request, GET it until its status is set (or `timeout` seconds), and always delete it."""
    created = api.request("POST", path, body=body, content_type="application/json") or {}
    name = (created.get("metadata") or {}).get("name")
    try:
        deadline = clock() + timeout
        answer = pool_status_answer(created)
        while answer is None:
            if clock() > deadline:
                raise PoolStatusError(
                    "ResourcePoolStatusRequest %s had no status after %ss: is kube-controller-manager running with "
                    "the DRAResourcePoolStatus feature gate? Raise pool_status_timeout or leave pool_status off"
                    % (name, timeout))
            sleep(POLL_INTERVAL)
            answer = pool_status_answer(api.get("%s/%s" % (path, name)))
    finally:
        if name:
            api.request("DELETE", "%s/%s" % (path, name))
    answer["name"] = name
    return answer
