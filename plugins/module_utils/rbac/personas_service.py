# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_rbac_plan_info against the cluster: the server's version and what resource.k8s.io serves, and
the RBAC objects dra.admin made earlier, read through api.DraApi; the personas rendered by _rbac."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.rbac.personas import (
    MANAGED_BY, PERSONA_LABEL, granular_status, render, stale_objects,
)


def existing_objects(api):
    query = {"labelSelector": "app.kubernetes.io/managed-by=%s,%s" % (MANAGED_BY, PERSONA_LABEL)}
    found = []
    for path, kind in (("/apis/rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole"),
                       ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding"),
                       ("/apis/rbac.authorization.k8s.io/v1/rolebindings", "RoleBinding")):
        for item in api.list_items(path, query):
            item["kind"] = kind
            found.append(item)
    return found


def plan(api, params):
    """dra_rbac_plan_info's result: the personas' objects for this cluster and the stale ones."""
    version = api.server_version().get("gitVersion")
    served = api.served_resources()
    granular = granular_status(version)
    objects = render(served, params["admins"], params["drivers"], params["operators"],
                     prefix=params["name_prefix"], granular_status=granular, jobs=params.get("jobs"))
    return {"kubernetes_version": version, "resource_api_versions": api.served_resource_versions(),
            "served_resources": served, "granular_status_authorization": granular, "objects": objects,
            "stale": stale_objects(existing_objects(api), objects)}
