# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Metrics read over HTTP for dra_metrics_advice: the page's measurements through the Prometheus client
(access.prometheus), rounds of scrapes of components' /metrics, and the advice from either (through advice).

GETs go through access.http.Http."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import time

from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.kube import prometheus_text
from ansible_collections.dra.admin.plugins.module_utils.metrics import advice
from ansible_collections.dra.admin.plugins.module_utils.access.prometheus import Prometheus, QueryError, auth_headers
from ansible_collections.dra.admin.plugins.module_utils.access.http import SourceError


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
