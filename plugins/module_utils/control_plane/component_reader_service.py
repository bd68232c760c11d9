# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Makes the component reader (``component_reader.reader_objects``) what it must be through ``api.DraApi``, and
asks for its token. Requests: one GET per object (three), a create, update or delete-and-create only where one
differs, and one TokenRequest (not in check mode)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_reader
from ansible_collections.dra.admin.plugins.module_utils.control_plane.component_reader import READER_ACCOUNT

_PATHS = {
    "ServiceAccount": ("/api/v1/namespaces/%(namespace)s/serviceaccounts", "/api/v1/namespaces/%(namespace)s/"
                       "serviceaccounts/%(name)s"),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
                    "/apis/rbac.authorization.k8s.io/v1/clusterroles/%(name)s"),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                           "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/%(name)s"),
}


def _paths(obj):
    where = {"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace", "")}
    collection, item = _PATHS[obj["kind"]]
    return collection % where, item % where


def ensure(api, namespace, check_mode=False):
    """[{kind, name, action}] of the objects that were (or in check mode would be) created, updated or replaced."""
    done = []
    for wanted in component_reader.reader_objects(namespace):
        collection, item = _paths(wanted)
        current = api.get_or_none(item)
        action = component_reader.object_change(current, wanted)
        if action is None:
            continue
        done.append({"kind": wanted["kind"], "name": wanted["metadata"]["name"], "action": action})
        if check_mode:
            continue
        if action == "update":
            api.request("PUT", item, body=component_reader.updated(current, wanted), content_type="application/json")
            continue
        if action == "replace":
            api.request("DELETE", item)
        api.request("POST", collection, body=wanted, content_type="application/json")
    return done


def request_token(api, namespace, seconds):
    """{token, expiration_timestamp} of a new token of the reader's ServiceAccount, `seconds` long."""
    answer = api.request("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, READER_ACCOUNT),
                         body=component_reader.token_request(seconds), content_type="application/json") or {}
    status = answer.get("status") or {}
    return {"token": status.get("token"), "expiration_timestamp": status.get("expirationTimestamp")}
