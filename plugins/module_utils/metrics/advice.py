# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""dra_metrics_advice on data: its parameters checked, measurements from two rounds of scraped
samples, and the advice (findings, measurements, thresholds) as the module returns it.

Pure functions; the queries, thresholds and diagnosis rules are diagnosis'. Prometheus and the
scraped endpoints are read by prometheus.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_parameter_errors


def input_error(params):
    """The first problem of the parameters, as the message to fail with, or None."""
    errors = wait_parameter_errors(params, timeouts=("timeout",), intervals=("interval",))
    if errors:
        return "; ".join(errors)
    if params["scrape"] is not None and not params["scrape"]:
        return "scrape is empty: give at least one metrics endpoint, or prometheus_url"
    unknown = set(params["thresholds"]) - set(diagnosis.DEFAULT_THRESHOLDS)
    if unknown:
        return "unknown threshold(s) %s; known: %s" % (
            ", ".join(sorted(unknown)), ", ".join(sorted(diagnosis.DEFAULT_THRESHOLDS)))
    for key, value in params["thresholds"].items():
        try:
            float(value)
        except (TypeError, ValueError):
            return "threshold %s is %r, not a number" % (key, value)
    return None


def failed(state, detail, window):
    """A measurement that has no value, with its state and why."""
    return diagnosis.measurement(state=state, detail=detail, window=window)


def measure_scrape_rounds(endpoints, first, second, queries):
    """Measurements from two scrape rounds, each {endpoint index: (samples, time) or error text}."""
    ok = [i for i in range(len(endpoints))
          if not isinstance(first.get(i), str) and not isinstance(second.get(i), str)]
    before = [s for i in ok for s in first[i][0]]
    after = [s for i in ok for s in second[i][0]]
    elapsed = [second[i][1] - first[i][1] for i in ok]
    interval = sum(elapsed) / len(elapsed) if elapsed else 0.0
    results = {}
    for query in queries:
        mine = [i for i, e in enumerate(endpoints) if e["component"] == query["component"]]
        if not mine:
            results[query["id"]] = failed(
                "missing-metric", "no %s endpoint was given in scrape" % query["component"], None)
            continue
        answered = [i for i in mine if i in ok]
        if not answered:
            errors = [first.get(i) if isinstance(first.get(i), str) else second.get(i) for i in mine]
            results[query["id"]] = failed("unreachable", "; ".join(errors), None)
            continue
        results[query["id"]] = diagnosis.measure_scrapes(query, before, after, interval)
    return results


def advice(params, queries, measured, source):
    """The module's result from the measurements: healthy, findings, measurements (with their queries),
    source and the thresholds in force."""
    findings = diagnosis.diagnose(measured, params.get("thresholds"), params.get("current_qps"),
                                  params.get("current_burst"), groups=params["checks"])
    thresholds = dict(diagnosis.DEFAULT_THRESHOLDS)
    thresholds.update(dict((k, float(v)) for k, v in (params.get("thresholds") or {}).items()))
    measurements = {}
    for query in queries:
        entry = dict(measured[query["id"]])
        entry.update(query=diagnosis.expression(query, params.get("workqueue_depth_selector"))
                     if source == "prometheus" else query["expression"],
                     component=query["component"], unit=query["unit"])
        measurements[query["id"]] = entry
    return {
        "healthy": not findings and all(m["state"] == "ok" for m in measurements.values()),
        "findings": findings,
        "measurements": measurements,
        "source": source,
        "thresholds": thresholds,
    }
