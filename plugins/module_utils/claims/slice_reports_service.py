# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_cluster_info and dra_slices_info against the cluster: the server's version and what
resource.k8s.io serves, DeviceClasses, ResourceSlices and Nodes read through api.DraApi, reported
by slice_reports."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.claims import slice_reports
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraNotServedError
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import node_label_map


def cluster_info(api, require_dra, node_selector):
    """dra_cluster_info's result; DraNotServedError when DRA is not served and require_dra."""
    result = {
        "kubernetes_version": api.server_version().get("gitVersion"),
        "resource_api_versions": api.served_resource_versions(),
        "dra_served": False, "resource_api_version": None, "device_classes": [], "pools": [],
        "nodes": {}, "nodes_without_slices": [], "drivers": {},
    }
    try:
        version = api.resource_api_version()
    except DraNotServedError:
        if require_dra:
            raise
        return result
    result["dra_served"] = True
    result["resource_api_version"] = version
    query = {"labelSelector": node_selector} if node_selector else {}
    labels = node_label_map(api.list_items("/api/v1/nodes", query))
    result["device_classes"] = slice_reports.device_class_summary(api.list_items(api.resource_path("deviceclasses")))
    slices = list(api.list_items(api.resource_path("resourceslices")))
    result.update(slice_reports.cluster_devices(slices, labels))
    return result


def slices_info(api, params):
    """dra_slices_info's result (without api_requests)."""
    version = api.resource_api_version()
    path = api.resource_path("resourceslices", version=version)
    slices = list(api.list_items(path, slice_reports.slice_query(params["driver"])))
    labels = node_label_map(api.list_items("/api/v1/nodes", slice_reports.node_query(params), metadata_only=True))
    result = {"resource_api_version": version}
    result.update(slice_reports.slices_report(slices, labels, params))
    return result
