# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The claim doctor against a cluster: reads (a fixed number of paginated LISTs) and the
opt-in fixes of claims.doctor's plan, each a single conditional request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import time

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import claim_view, pod_ref, view_name
from ansible_collections.dra.admin.plugins.module_utils.claims.doctor import (
    DELETE, REMOVE_FINALIZERS, RESYNC, RESYNC_ANNOTATION, diagnose, pod_info,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_index
from ansible_collections.dra.admin.plugins.module_utils.common.times import format_time
from ansible_collections.dra.admin.plugins.module_utils.access.api import MERGE_PATCH, DraApiError
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import (
    POD_NODE_COLUMN, claim_items, node_label_index, non_pod_consumer_index,
)

JSON_PATCH = "application/json-patch+json"


def read_pods(api, namespaces=()):
    """({uid: pod_ref}, {uid: pod_info}) from one pod LIST in Table form (per namespace, if given)."""
    paths = ["/api/v1/namespaces/%s/pods" % ns for ns in namespaces] or ["/api/v1/pods"]
    columns = {POD_NODE_COLUMN: lambda pod: (pod.get("spec") or {}).get("nodeName")}
    refs, infos = {}, {}
    for path in paths:
        for meta, cells in api.list_table_rows(path, columns):
            ref = pod_ref(cells.get(POD_NODE_COLUMN), meta.get("ownerReferences"))
            refs[meta.get("uid")] = ref
            infos[meta.get("uid")] = pod_info(meta, ref[0])
    return refs, infos


def examine(api, namespaces=(), force=False, now=None):
    """Findings of the cluster: dict with version, findings, metas ({namespace/name: claim metadata})."""
    version = api.resource_api_version()
    nodes = node_label_index(api)  # names and labels: what a slice's nodeSelector is matched against
    slices = list(api.list_items(api.resource_path("resourceslices", version=version)))
    slice_index = device_index(slices)
    refs, infos = read_pods(api, namespaces)
    views, metas = [], {}
    items = list(claim_items(api, version, namespaces))
    others, listed = non_pod_consumer_index(api, items)  # a workload's PodGroup is a consumer while it exists
    for item in items:
        view = claim_view(item, nodes, refs, slice_index, others, listed)
        views.append(view)
        metas[view_name(view)] = item.get("metadata") or {}
    findings = diagnose(views, metas, infos, slices, nodes, time.time() if now is None else now, force)
    return {"version": version, "findings": findings, "metas": metas}


def _claim_path(api, version, finding):
    return api.resource_path("resourceclaims", namespace=finding["namespace"], name=finding["name"], version=version)


def carry_out(api, version, finding, meta):
    """One planned action, conditional on the claim being the one diagnosed (uid, resourceVersion)."""
    path = _claim_path(api, version, finding)
    if finding["action"] == RESYNC:
        stamp = format_time(datetime.datetime.now(datetime.timezone.utc))
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                             "annotations": {RESYNC_ANNOTATION: stamp}}}
        api.request("PATCH", path, body=body, content_type=MERGE_PATCH)
    elif finding["action"] == REMOVE_FINALIZERS:
        body = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
                {"op": "test", "path": "/metadata/finalizers", "value": list(meta.get("finalizers") or [])},
                {"op": "replace", "path": "/metadata/finalizers", "value": []}]
        api.request("PATCH", path, body=body, content_type=JSON_PATCH)
    elif finding["action"] == DELETE:
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}}
        try:
            api.request("DELETE", path, body=body)
        except DraApiError as exc:
            if exc.status != 404:
                raise


def unresolved(api, namespaces, fixed, force, timeout, interval=1.0):
    """Re-examine until none of the fixed findings is found again, or timeout seconds pass.

    Returns (findings of the last look, the fixed ones still found).
    """
    keys = set((f["kind"], f.get("claim")) for f in fixed)
    deadline = time.time() + timeout
    while True:
        again = examine(api, namespaces, force)
        left = [f for f in again["findings"] if (f["kind"], f.get("claim")) in keys]
        if not left or time.time() >= deadline:
            return again["findings"], left
        time.sleep(interval)
