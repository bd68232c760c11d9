# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Claim views read from a cluster: the API side of _claims, shared by
dra_claims_info and the drain. A fixed number of paginated LISTs, however
many nodes there are."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils._claims import (
    blocks_node, claim_selected, claim_view, daemonset_claims, pod_ref,
)
from ansible_collections.dra.admin.plugins.module_utils._capacity import capacity_report, summary_lines
from ansible_collections.dra.admin.plugins.module_utils._slices import device_index

POD_NODE_COLUMN = "Node"
POOL_STATUS_RESOURCE = "resourcepoolstatusrequests"


class ClaimsError(Exception):
    """A problem with the request (for example an unknown node)."""


def node_label_index(api):
    """{node name: labels} from a metadata-only LIST."""
    return dict((n["metadata"]["name"], n["metadata"].get("labels") or {})
                for n in api.list_items("/api/v1/nodes", metadata_only=True))


def pod_index(api, namespaces=()):
    """{uid: pod_ref} of every pod (in the namespaces, if given): metadata and node only, never whole pods."""
    paths = ["/api/v1/namespaces/%s/pods" % ns for ns in namespaces] or ["/api/v1/pods"]
    columns = {POD_NODE_COLUMN: lambda pod: (pod.get("spec") or {}).get("nodeName")}
    index = {}
    for path in paths:
        for meta, cells in api.list_table_rows(path, columns):
            index[meta.get("uid")] = pod_ref(cells.get(POD_NODE_COLUMN), meta.get("ownerReferences"))
    return index


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


def gather_claim_views(api, node=None, namespaces=(), driver=None, label_selector=None):
    """Claim views of the cluster, as a dict.

    version: the resource api version used; views: sorted claim views (those on
    `node` when given); blocking: views that keep `node`'s driver from leaving;
    daemonset_claims: views on `node` held only by DaemonSet pods (not blocking).
    """
    version = api.resource_api_version()
    nodes = node_label_index(api)
    if node is not None and node not in nodes:
        raise unknown_node_error(node, nodes)
    slice_index = device_index(api.list_items(api.resource_path("resourceslices", version=version)))
    pods = pod_index(api, namespaces)
    views = []
    for item in claim_items(api, version, namespaces, label_selector):
        view = claim_view(item, nodes, pods, slice_index)
        if claim_selected(view, node=node, driver=driver):
            views.append(view)
    views.sort(key=lambda v: (v["namespace"] or "", v["name"] or ""))
    on_node = node is not None
    return {"version": version, "views": views,
            "blocking": [v for v in views if on_node and blocks_node(v, node)],
            "daemonset_claims": daemonset_claims(views, node) if on_node else []}


def gather_capacity(api, driver=None):
    """Capacity of the cluster from three LISTs (slices, claims, DeviceClasses): _capacity.capacity_report plus
    the version used and whether the server serves ResourcePoolStatusRequest (alpha, 1.36)."""
    version = api.resource_api_version()
    report = capacity_report(api.list_items(api.resource_path("resourceslices", version=version)),
                             api.list_items(api.resource_path("resourceclaims", version=version)),
                             api.list_items(api.resource_path("deviceclasses", version=version)), driver=driver)
    report["summary"] = summary_lines(report)
    report["version"] = version
    report["pool_status_served"] = POOL_STATUS_RESOURCE in api.served_resources()
    return report
