# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Claim views read from a cluster: the API side of _claims, shared by
dra_claims_info and the drain. A fixed number of paginated LISTs, however
many nodes there are."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils._claims import (
    claim_selected, claim_view, holds_devices, pool_nodes,
)


class ClaimsError(Exception):
    """A problem with the request (for example an unknown node)."""


def node_label_index(api):
    """{node name: labels} from a metadata-only LIST."""
    return dict((n["metadata"]["name"], n["metadata"].get("labels") or {})
                for n in api.list_items("/api/v1/nodes", metadata_only=True))


def live_pod_uids(api, namespaces=()):
    paths = ["/api/v1/namespaces/%s/pods" % ns for ns in namespaces] or ["/api/v1/pods"]
    return set(p["metadata"]["uid"] for path in paths for p in api.list_items(path, metadata_only=True))


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
    """(resource api version, sorted claim views, views still holding devices on `node`)."""
    version = api.resource_api_version()
    nodes = node_label_index(api)
    if node is not None and node not in nodes:
        raise unknown_node_error(node, nodes)
    pools_index = pool_nodes(api.list_items(api.resource_path("resourceslices", version=version)))
    pods = live_pod_uids(api, namespaces)
    views = []
    for item in claim_items(api, version, namespaces, label_selector):
        view = claim_view(item, nodes, pods, pools_index)
        if claim_selected(view, node=node, driver=driver):
            views.append(view)
    views.sort(key=lambda v: (v["namespace"] or "", v["name"] or ""))
    blocking = [v for v in views if node is not None and holds_devices(v)]
    return version, views, blocking
