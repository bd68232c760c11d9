# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Metrics read over HTTP for dra_metrics_advice: a Prometheus HTTP API client and its measurements,
rounds of scrapes of components' /metrics, and the advice from either (through advice).

GETs go through http_endpoints.Http."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import time
from urllib.parse import urlencode

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.kube import prometheus_text
from ansible_collections.dra.admin.plugins.module_utils.metrics import advice
from ansible_collections.dra.admin.plugins.module_utils.access.http import SourceError


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
            raise SourceError("GET %s did not return JSON; is %s a Prometheus HTTP API?" % (url, self.url))
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


def _measure_query(prom, query, depth_selector, names, window):
    """One query's measurement; QueryError and SourceError are the caller's."""
    values = prom.instant(diagnosis.expression(query, depth_selector))
    if values and not math.isnan(values[0]):
        return diagnosis.measurement(values[0], window=window)
    if diagnosis.series_name(query) not in names:
        return advice.failed("missing-metric", diagnosis.missing_detail(query, names), window)
    selector = diagnosis.selector_for_prometheus(query, depth_selector)
    if not prom.instant("count(%s)" % selector):
        return advice.failed(
            "missing-metric", "%s is stored but no current series matches %s" % (
                diagnosis.series_name(query), selector), window)
    return advice.failed(
        "no-data", "%s has no observations (or too few samples) in the last %s" % (query["metric"], window), window)


def measure_prometheus(prom, queries, depth_selector):
    window = "5m"
    try:
        names = prom.metric_names()
    except (SourceError, QueryError) as exc:
        return dict((q["id"], advice.failed("unreachable", "Prometheus: %s" % exc, window)) for q in queries)
    results = {}
    for query in queries:
        try:
            results[query["id"]] = _measure_query(prom, query, depth_selector, names, window)
        except QueryError as exc:
            results[query["id"]] = advice.failed(
                "query-error", "%s: %s" % (diagnosis.expression(query, depth_selector), exc), window)
        except SourceError as exc:
            results[query["id"]] = advice.failed("unreachable", "Prometheus: %s" % exc, window)
    return results


def scrape_once(http, endpoints):
    """One round over every endpoint: {index: (samples, time) or error text}."""
    round_ = {}
    for index, endpoint in enumerate(endpoints):
        try:
            text = http.get(endpoint["url"], auth_headers(endpoint.get("bearer_token")),
                            endpoint.get("validate_certs", True), endpoint.get("ca_path"),
                            endpoint.get("client_cert"), endpoint.get("client_key"))
            samples = prometheus_text.parse_text(text).samples
        except (SourceError, prometheus_text.ParseError) as exc:
            round_[index] = str(exc)
            continue
        for sample in samples:
            sample.labels["endpoint"] = endpoint["component"]
            sample.labels["instance"] = endpoint["url"]
        round_[index] = (samples, time.time())
    return round_


def advise(params, http, sleep=time.sleep):
    """dra_metrics_advice's result: measured from Prometheus (prometheus_url) or from two scrape rounds
    `interval` seconds apart (scrape)."""
    queries = diagnosis.needed_queries(params["checks"])
    if params.get("prometheus_url"):
        prom = Prometheus(http, params["prometheus_url"], params.get("bearer_token"), params.get("headers"),
                          params.get("validate_certs", True), params.get("ca_path"))
        measured = measure_prometheus(prom, queries, params.get("workqueue_depth_selector"))
        source = "prometheus"
    else:
        endpoints = params["scrape"]
        first = scrape_once(http, endpoints)
        sleep(params["interval"])
        second = scrape_once(http, endpoints)
        measured = advice.measure_scrape_rounds(endpoints, first, second, queries)
        source = "scrape"
    return advice.advice(params, queries, measured, source)
