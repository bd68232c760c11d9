# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The client of Prometheus' HTTP API (instant queries: values, or series with their labels), over access.http.Http.
Used by dra_metrics_advice (metrics/prometheus_service.py) and dra_dcgm_health_info (devices/dcgm_service.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from urllib.parse import urlencode

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.access.http import SourceError, shown_url


def connection_options():
    """The argument spec of how a module reaches Prometheus (doc fragment dra.admin.prometheus), besides its own
    prometheus_url."""
    return dict(bearer_token=dict(type="str", no_log=True), headers=dict(type="dict", default={}, no_log=True),
                validate_certs=dict(type="bool", default=True), ca_path=dict(type="path"))


class QueryError(DraAdminError):
    """Prometheus answered but rejected a query."""


def auth_headers(token, extra=None):
    headers = dict(extra or {})
    if token:
        headers["Authorization"] = "Bearer %s" % token
    return headers


class Prometheus(object):
    def __init__(self, http, url, token=None, headers=None, validate_certs=True, ca_path=None):
        self.http = http
        self.url = url.rstrip("/")
        self.headers = auth_headers(token, headers)
        self.validate_certs = validate_certs
        self.ca_path = ca_path

    def _api(self, path, params=None):
        url = self.url + path + ("?" + urlencode(params) if params else "")
        try:
            text = self.http.get(url, self.headers, self.validate_certs, self.ca_path)
        except SourceError as exc:
            # Prometheus answers a query it rejects with 400/422 and a JSON error.
            if exc.status in (400, 422) and exc.body:
                text = exc.body
            else:
                raise
        try:
            body = json.loads(text)
        except ValueError:
            raise SourceError("GET %s did not return JSON; is %s a Prometheus HTTP API?" % (
                shown_url(url), shown_url(self.url)))
        if body.get("status") != "success":
            raise QueryError("%s: %s" % (body.get("errorType"), body.get("error")))
        return body["data"]

    def metric_names(self):
        return set(self._api("/api/v1/label/__name__/values"))

    def instant(self, query):
        data = self._api("/api/v1/query", {"query": query})
        if data.get("resultType") == "scalar":
            return [float(data["result"][1])]
        return [float(item["value"][1]) for item in data.get("result") or []]

    def series(self, query):
        """[(labels, value)] of an instant vector query."""
        data = self._api("/api/v1/query", {"query": query})
        return [(dict(item.get("metric") or {}), float(item["value"][1])) for item in data.get("result") or []]
