# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's one way to talk to a cluster.

Authentication, kubeconfig, contexts, proxies and the ``K8S_AUTH_*``
environment variables are kubernetes.core's (``get_api_client``); this layer
only adds what DRA modules need on top: raw JSON reads (no object wrapping,
so 10,000 claims cost what their JSON costs), paginated LISTs, and discovery
of the resource.k8s.io versions the server actually serves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import gc
import json
import math
import threading

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    RESOURCE_GROUP,
    preferred_api_version,
)

from ansible.module_utils.basic import AnsibleModule, _load_params

# The kubernetes.core releases galaxy.yml declares as the collection's dependency (the upper bound:
# this file uses kubernetes.core's client internals, tested with the releases below it).
K8S_CORE_MIN_VERSION = "5.0.0"
K8S_CORE_BELOW_VERSION = "7.0.0"
K8S_CORE_VERSIONS = ">=%s,<%s" % (K8S_CORE_MIN_VERSION, K8S_CORE_BELOW_VERSION)
K8S_CORE_MISSING = (
    "this module needs the kubernetes.core collection (%s) and the kubernetes Python package; "
    "kubernetes.core cannot be imported here (%%s). Install both where the module runs: "
    "ansible-galaxy collection install 'kubernetes.core:%s' and pip install kubernetes "
    "(or use an execution environment built from the collection's execution-environment.yml)"
    % (K8S_CORE_VERSIONS, K8S_CORE_VERSIONS))

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
    HAS_K8S_CORE = True
    K8S_CORE_IMPORT_ERROR = None
except ImportError as exc:  # reported by AnsibleK8SModule below, when a module starts
    AUTH_ARG_SPEC = {}
    get_api_client = None
    HAS_K8S_CORE = False
    K8S_CORE_IMPORT_ERROR = str(exc)

    class AnsibleK8SModule(object):  # pylint: disable=function-redefined
        """Stands in for kubernetes.core's class when that collection is missing: fails saying what to install.

        The module's own argument spec cannot be checked (it names kubernetes.core's auth options), so every
        given option is accepted as it is, only to be able to report the failure the usual way.
        """

        def __init__(self, argument_spec=None, **kwargs):
            params = _load_params()
            spec = dict((name, {"type": "raw"}) for name in params if not name.startswith("_ansible_"))
            module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
            module.fail_json(msg=K8S_CORE_MISSING % K8S_CORE_IMPORT_ERROR)

try:
    from kubernetes.client.rest import ApiException
except ImportError:  # pragma: no cover
    class ApiException(Exception):
        status = None
        reason = None
        body = None

try:
    from urllib3.exceptions import HTTPError as StreamError
except ImportError:  # pragma: no cover
    class StreamError(Exception):
        pass

# AnsibleK8SModule is re-exported: modules build their AnsibleModule through this layer.
__all__ = ["AnsibleK8SModule", "DraApi", "DraApiError", "DraNotServedError", "auth_argument_spec"]

LIST_PAGE_SIZE = 500
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
MERGE_PATCH = "application/merge-patch+json"


class DraApiError(DraAdminError):
    """An API failure with a message a user can act on."""

    def __init__(self, message, status=None, causes=(), cause_messages=()):
        super(DraApiError, self).__init__(message)
        self.status = status
        self.causes = tuple(causes)  # the reasons of the Status's details.causes, e.g. "NamespaceTerminating"
        # their messages, e.g. "The disruption budget web needs 2 healthy pods and has 2 currently"
        self.cause_messages = tuple(cause_messages)


class DraNotServedError(DraApiError):
    """The cluster does not serve a resource.k8s.io version this collection understands."""


def auth_argument_spec():
    """kubernetes.core's auth options, to merge into a module's argument spec."""
    return dict(AUTH_ARG_SPEC)


def _error_text(exc):
    try:
        return json.loads(exc.body).get("message") or exc.reason
    except (TypeError, ValueError, AttributeError):
        return getattr(exc, "reason", None) or str(exc)


def status_causes(body):
    """The reasons listed in a Status body's details.causes (empty when the body is not a Status)."""
    try:
        details = json.loads(body).get("details") or {}
    except (TypeError, ValueError, AttributeError):
        return ()
    return tuple(c.get("reason") for c in details.get("causes") or [] if isinstance(c, dict) and c.get("reason"))


def status_cause_messages(body):
    """The messages of a Status body's details.causes (empty when the body is not a Status): an eviction that a
    PodDisruptionBudget refuses names the budget and its counts there."""
    try:
        details = json.loads(body).get("details") or {}
    except (TypeError, ValueError, AttributeError):
        return ()
    return tuple(c.get("message") for c in details.get("causes") or [] if isinstance(c, dict) and c.get("message"))


def _open(api_client, method, path, query, headers, body=None):
    """One raw request; returns the urllib3 response, its body not read yet (a watch reads it as it arrives), to be
    read or closed by the caller. Works with both generations of the kubernetes client."""
    if hasattr(api_client, "param_serialize"):  # kubernetes >= 37 (OpenAPI generator 7 layout)
        request = api_client.param_serialize(method, path, query_params=query, header_params=headers,
                                             body=body, auth_settings=["BearerToken"])
        response = api_client.call_api(*request)
        if not 200 <= response.status <= 299:
            data = response.read()
            raise ApiException.from_response(http_resp=response, body=data.decode("utf-8", "replace"), data=None)
        return response.response
    return api_client.call_api(path, method, query_params=query, header_params=headers, body=body,
                               auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True)


def _call(api_client, method, path, query, headers, body):
    """One raw request; returns the body bytes."""
    return _open(api_client, method, path, query, headers, body).data


def json_lines(chunks):
    """The JSON documents of a byte stream holding one per line (a watch's events), as each line completes."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        lines = pending.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line.strip():
                yield json.loads(line)
    if pending.strip():
        yield json.loads(pending)


class DraApi(object):
    """Raw JSON access to the Kubernetes API through kubernetes.core's client."""

    def __init__(self, module=None, api_client=None):
        if api_client is None:
            api_client = get_api_client(module=module).client.client
        self.api_client = api_client
        self.requests = 0
        self._counting = threading.Lock()  # requests are made from several threads (evictions, kubelet reads)
        self._served = None
        self._discovery = None

    def count_request(self):
        with self._counting:
            self.requests += 1

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        """One API call; returns the decoded JSON body."""
        self.count_request()
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            data = _call(self.api_client, method, path, list((query or {}).items()), headers, body)
        except ApiException as exc:
            raise DraApiError("%s %s failed: HTTP %s: %s" % (method, path, exc.status, _error_text(exc)),
                              status=exc.status, causes=status_causes(getattr(exc, "body", None)),
                              cause_messages=status_cause_messages(getattr(exc, "body", None)))
        return json.loads(data) if data else None

    def get(self, path, query=None, accept="application/json"):
        return self.request("GET", path, query, accept=accept)

    def get_text(self, path):
        """One GET of a plain-text endpoint, such as kube-apiserver's /metrics; returns the text."""
        self.count_request()
        try:
            data = _call(self.api_client, "GET", path, [], {"Accept": "text/plain"}, None)
        except ApiException as exc:
            raise DraApiError("GET %s failed: HTTP %s: %s" % (path, exc.status, _error_text(exc)), status=exc.status)
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")

    def get_or_none(self, path, query=None):
        try:
            return self.get(path, query)
        except DraApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list_items(self, path, query=None, page_size=LIST_PAGE_SIZE, metadata_only=False):
        """Every item of a LIST, fetched in pages (a fixed number of requests per page, not per object).

        With metadata_only, the server sends only each object's metadata (name, uid, labels,
        deletionTimestamp, ownerReferences): a fraction of the bytes for pods and nodes.
        """
        accept = METADATA_LIST_ACCEPT if metadata_only else "application/json"
        for page in self.list_pages(path, query, page_size, accept=accept):
            yield from page.get("items") or []

    def list_snapshot(self, path, query=None, page_size=LIST_PAGE_SIZE):
        """(items, resourceVersion) of a LIST, every page read: the objects and the version a watch of the same
        collection continues from (the first page's; a continued LIST reads the same snapshot)."""
        items, version = [], None
        for page in self.list_pages(path, query, page_size):
            if version is None:
                version = (page.get("metadata") or {}).get("resourceVersion")
            items.extend(page.get("items") or [])
        return items, version

    def watch(self, path, query=None, timeout=60):
        """The events ({type, object}) of one watch of a collection, as the server sends them, until it ends the
        watch after `timeout` seconds (whole seconds, at least 1) or the caller stops reading. Give the
        resourceVersion of a LIST in `query` to see only what changed after it; an event of type ERROR (code 410)
        says the server no longer has that version: LIST again. A connection that drops ends the events as the
        server's end does. One request."""
        self.count_request()
        params = dict(query or {}, watch="true", timeoutSeconds=max(1, int(math.ceil(timeout))))
        try:
            response = _open(self.api_client, "GET", path, list(params.items()), {"Accept": "application/json"})
        except ApiException as exc:
            raise DraApiError("watch of %s failed: HTTP %s: %s" % (path, exc.status, _error_text(exc)),
                              status=exc.status)
        try:
            yield from json_lines(response.stream(None))
        except (StreamError, ValueError):
            return  # the connection dropped mid-stream: the watch has ended, as when the server ends it
        finally:
            response.close()  # a stream left open cannot serve another request: closed, then given back to the pool
            response.release_conn()

    def list_pages(self, path, query=None, page_size=LIST_PAGE_SIZE, accept="application/json"):
        """Every page of a LIST (a fixed number of requests per page, not per object)."""
        params = dict(query or {})
        params["limit"] = page_size
        while True:
            page = self.get(path, params, accept=accept)
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = token

    def list_table_rows(self, path, columns, query=None, page_size=LIST_PAGE_SIZE):
        """(metadata, {column: cell}) per object of a LIST in the server's Table form.

        The server sends each object's metadata and its printed columns instead of the
        whole object (for pods, ``Node`` is ``spec.nodeName``) at a fraction of the
        bytes. ``columns`` maps each wanted column to a function reading the same value
        from a whole object, used if the server answers with a plain list instead.
        """
        params = dict(query or {}, includeObject="Metadata")
        for page in self.list_pages(path, params, page_size, accept=TABLE_ACCEPT):
            if page.get("kind") != "Table":
                for item in page.get("items") or []:
                    yield item.get("metadata") or {}, dict((n, read(item)) for n, read in columns.items())
                continue
            names = [c.get("name") for c in page.get("columnDefinitions") or []]
            missing = sorted(set(columns) - set(names))
            if missing:
                raise DraApiError("the server's table of %s has no column %s (it has %s); this collection reads "
                                  "them to place objects on nodes" % (path, ", ".join(missing), ", ".join(names)))
            wanted = [(i, n) for i, n in enumerate(names) if n in columns]
            for row in page.get("rows") or []:
                cells = row.get("cells") or []
                yield ((row.get("object") or {}).get("metadata") or {},
                       dict((n, cells[i]) for i, n in wanted if i < len(cells)))

    def server_version(self):
        return self.get("/version")

    def served_resource_versions(self):
        """resource.k8s.io versions the server serves, newest first (cached)."""
        if self._served is None:
            group = self.get_or_none("/apis/%s" % RESOURCE_GROUP)
            self._served = [v["version"] for v in (group or {}).get("versions", [])]
        return self._served

    def resource_discovery(self):
        """{version: its APIResourceList (None when it could not be read)} of every served resource.k8s.io
        version, newest first: the one discovery of the group every reader shares (one GET per served version,
        cached for the client's life)."""
        if self._discovery is None:
            self._discovery = dict((version, self.get_or_none("/apis/%s/%s" % (RESOURCE_GROUP, version)))
                                   for version in self.served_resource_versions())
        return self._discovery

    def served_resources(self):
        """Resource names (with subresources, e.g. resourceclaims/status) served in resource.k8s.io across
        every served version, sorted."""
        return served_resource_names(self.resource_discovery().values())

    def versions_by_resource(self):
        """{resource name: resource.k8s.io versions serving it, newest first}."""
        return versions_by_resource(self.resource_discovery())

    def versions_serving(self, resource):
        """The served resource.k8s.io versions whose discovery lists `resource` (for example devicetaintrules),
        newest first."""
        return self.versions_by_resource().get(resource, [])

    def resource_api_version(self):
        """The resource.k8s.io version to use, or DraNotServedError naming what is served."""
        served = self.served_resource_versions()
        chosen = preferred_api_version(served)
        if chosen is None:
            raise DraNotServedError(
                "DRA is not served by this cluster: resource.k8s.io versions served: %s; this collection "
                "needs v1, v1beta2 or v1beta1. On Kubernetes 1.32/1.33 enable the DynamicResourceAllocation "
                "feature gate and --runtime-config=resource.k8s.io/v1beta1=true (role dra.admin.feature_gates)."
                % (", ".join(served) or "none"))
        return chosen

    def resource_path(self, plural, namespace=None, name=None, version=None):
        """URL path of a resource.k8s.io collection or object."""
        path = "/apis/%s/%s" % (RESOURCE_GROUP, version or self.resource_api_version())
        if namespace:
            path += "/namespaces/%s" % namespace
        path += "/" + plural
        if name:
            path += "/" + name
        return path


def hold_reads():
    """Say that the objects read so far stay until the module returns (a reader that keeps the cluster's state, such
    as the explainer's): they leave the cyclic garbage collector's generations (``gc.freeze``), so the full
    collections the module's later work triggers do not walk again the millions of dicts and lists that the JSON of a
    large cluster became (about 0.3 s of a 2 s run at 10,000 claims). Parsed JSON holds no reference cycles, and
    reference counting still frees what is dropped."""
    gc.freeze()


def served_resource_names(discovery_lists):
    """Union of resource names (with subresources, e.g. resourceclaims/status) from the
    APIResourceList of every served resource.k8s.io version."""
    names = set()
    for resource_list in discovery_lists or []:
        for resource in (resource_list or {}).get("resources") or []:
            if resource.get("name"):
                names.add(resource["name"])
    return sorted(names)


def versions_by_resource(discovery):
    """{resource name: versions listing it, in the order of ``discovery`` ({version: APIResourceList})}."""
    out = {}
    for version, listing in discovery.items():
        for resource in (listing or {}).get("resources") or []:
            out.setdefault(resource.get("name"), []).append(version)
    return out
