# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The page's DRA metrics, and its diagnosis rules, as data.

Pure: no Ansible, no network. It holds

* a parser for the Prometheus text exposition format (counters, gauges,
  histograms, labels with escapes; OpenMetrics exemplars are ignored),
* ``histogram_quantile`` with PromQL's interpolation, and rates from two
  scrapes taken an interval apart,
* ``QUERIES``: every query the "Good practices for Dynamic Resource
  Allocation as a Cluster Admin" page names, with its expression verbatim,
* ``CHECKS``: the page's two workqueue diagnosis rules and the scheduler and
  node latency checks, as clauses over those queries, and ``diagnose()``.

A measurement that could not be taken is a finding of kind ``missing-metric``,
``no-data`` or ``unreachable``; it is never read as healthy.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET
from ansible_collections.dra.admin.plugins.module_utils.control_plane.tuning import DEFAULT_KCM_BURST, DEFAULT_KCM_QPS
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import (
    HISTOGRAM_SUFFIXES, label_value, parse_value, select,
)


def counter_increase(first, second):
    """Per series increase between two lists of counter samples, keyed like Sample.key().

    A series whose value went down was reset: its increase is its new value (as PromQL
    does). A series only present in the second scrape started from zero in between
    (client libraries create labelled series on their first observation).
    """
    before = dict((s.key(), s.value) for s in first)
    increases = {}
    for sample in second:
        old = before.get(sample.key(), 0.0)
        increases[sample.key()] = sample.value - old if sample.value >= old else sample.value
    return increases


def histogram_quantile(quantile, buckets):
    """PromQL's histogram_quantile over ``[(upper_bound, cumulative_count), ...]``.

    Same rules as Prometheus: NaN without a +Inf bucket, with fewer than two buckets
    or with no observations; linear interpolation inside the bucket holding the rank;
    the lower bound of the first bucket is 0 (unless its upper bound is <= 0); a rank
    in the +Inf bucket returns the largest finite upper bound; counts are forced to
    be monotonic.
    """
    if math.isnan(quantile):
        return float("nan")
    if quantile < 0:
        return float("-inf")
    if quantile > 1:
        return float("inf")
    ordered = sorted((float(bound), float(count)) for bound, count in buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return float("nan")
    # Merge equal bounds and force monotonic counts.
    merged = []
    for bound, count in ordered:
        if merged and merged[-1][0] == bound:
            merged[-1] = (bound, merged[-1][1] + count)
        else:
            merged.append((bound, count))
    monotonic = []
    highest = float("-inf")
    for bound, count in merged:
        highest = max(highest, count)
        monotonic.append((bound, highest))
    if len(monotonic) < 2:
        return float("nan")
    observations = monotonic[-1][1]
    if observations == 0 or math.isnan(observations):
        return float("nan")
    rank = quantile * observations
    index = 0
    while index < len(monotonic) - 1 and monotonic[index][1] < rank:
        index += 1
    if index == len(monotonic) - 1:
        return monotonic[-2][0]
    if index == 0 and monotonic[0][0] <= 0:
        return monotonic[0][0]
    start = 0.0
    end, count = monotonic[index]
    if index > 0:
        start = monotonic[index - 1][0]
        count -= monotonic[index - 1][1]
        rank -= monotonic[index - 1][1]
    if count == 0:
        return start
    return start + (end - start) * (rank / count)


def _sum_by_le(increases):
    totals = {}
    for (name, labels), value in increases.items():
        le = dict(labels).get("le")
        if le is None:
            continue
        bound = parse_value(le)
        totals[bound] = totals.get(bound, 0.0) + value
    return sorted(totals.items())


# ---------------------------------------------------------------------------
# The page's queries
# ---------------------------------------------------------------------------

# A driver's kubelet plugin: not a Kubernetes component, but a metrics endpoint the page reads.
PLUGIN = "dra-kubeletplugin"
# Whose metrics the queries read (the "component" of a scraped endpoint).
SCRAPED_COMPONENTS = (KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KUBELET, PLUGIN)

# kind: "rate" = sum(rate(metric[5m])); "gauge" = sum(metric);
# "quantile" = histogram_quantile(q, sum(rate|increase(metric_bucket[5m])) by (le)).
# target_matchers are labels Prometheus adds to a target, not labels the component
# exposes; in scrape mode they are matched against the endpoint's component.
QUERIES = (
    dict(id="workqueue_add_rate", group="controller", component=KUBE_CONTROLLER_MANAGER, unit="items/s",
         title="ResourceClaim workqueue add rate",
         record="dra:resource_claim_workqueue_adds:rate5m",
         expression='sum(rate(workqueue_adds_total{name="resource_claim"}[5m]))',
         kind="rate", metric="workqueue_adds_total", matchers=(("name", "=", "resource_claim"),),
         target_matchers=()),
    dict(id="workqueue_depth", group="controller", component=KUBE_CONTROLLER_MANAGER, unit="items",
         title="ResourceClaim workqueue depth",
         record="dra:resource_claim_workqueue_depth:sum",
         expression='sum(workqueue_depth{endpoint="kube-controller-manager", name="resource_claim"})',
         kind="gauge", metric="workqueue_depth", matchers=(("name", "=", "resource_claim"),),
         target_matchers=(("endpoint", "=", KUBE_CONTROLLER_MANAGER),)),
    dict(id="workqueue_work_duration_p99", group="controller", component=KUBE_CONTROLLER_MANAGER, unit="s",
         title="ResourceClaim workqueue work duration (p99)",
         record="dra:resource_claim_workqueue_work_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(rate(workqueue_work_duration_seconds_bucket'
                    '{name="resource_claim"}[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="workqueue_work_duration_seconds",
         matchers=(("name", "=", "resource_claim"),), target_matchers=()),
    dict(id="scheduler_e2e_p99", group="scheduler", component=KUBE_SCHEDULER, unit="s",
         title="Scheduler end-to-end scheduling duration (p99)",
         record="dra:scheduler_pod_scheduling_sli_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(increase(scheduler_pod_scheduling_sli_duration_seconds_bucket'
                    '[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="scheduler_pod_scheduling_sli_duration_seconds",
         matchers=(), target_matchers=(),
         older_names=("scheduler_pod_scheduling_duration_seconds", "scheduler_e2e_scheduling_duration_seconds")),
    dict(id="scheduler_algorithm_p99", group="scheduler", component=KUBE_SCHEDULER, unit="s",
         title="Scheduler algorithm latency (p99)",
         record="dra:scheduler_scheduling_algorithm_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(increase(scheduler_scheduling_algorithm_duration_seconds_bucket'
                    '[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="scheduler_scheduling_algorithm_duration_seconds",
         matchers=(), target_matchers=()),
    dict(id="kubelet_prepare_p99", group="kubelet", component=KUBELET, unit="s",
         title="Kubelet PrepareResources duration (p99)",
         record="dra:kubelet_prepare_resources_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(rate(dra_operations_duration_seconds_bucket'
                    '{operation_name="PrepareResources"}[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="dra_operations_duration_seconds",
         matchers=(("operation_name", "=", "PrepareResources"),), target_matchers=()),
    dict(id="kubelet_unprepare_p99", group="kubelet", component=KUBELET, unit="s",
         title="Kubelet UnprepareResources duration (p99)",
         record="dra:kubelet_unprepare_resources_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(rate(dra_operations_duration_seconds_bucket'
                    '{operation_name="UnprepareResources"}[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="dra_operations_duration_seconds",
         matchers=(("operation_name", "=", "UnprepareResources"),), target_matchers=()),
    dict(id="plugin_prepare_p99", group="plugin", component=PLUGIN, unit="s",
         title="DRA kubeletplugin gRPC NodePrepareResources duration (p99)",
         record="dra:kubeletplugin_node_prepare_resources_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(rate(dra_grpc_operations_duration_seconds_bucket'
                    '{method_name=~".*NodePrepareResources"}[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="dra_grpc_operations_duration_seconds",
         matchers=(("method_name", "=~", ".*NodePrepareResources"),), target_matchers=()),
    dict(id="plugin_unprepare_p99", group="plugin", component=PLUGIN, unit="s",
         title="DRA kubeletplugin gRPC NodeUnprepareResources duration (p99)",
         record="dra:kubeletplugin_node_unprepare_resources_duration_seconds:p99_5m",
         expression='histogram_quantile(0.99, sum(rate(dra_grpc_operations_duration_seconds_bucket'
                    '{method_name=~".*NodeUnprepareResources"}[5m])) by (le))',
         kind="quantile", quantile=0.99, metric="dra_grpc_operations_duration_seconds",
         matchers=(("method_name", "=~", ".*NodeUnprepareResources"),), target_matchers=()),
)
QUERY_BY_ID = dict((q["id"], q) for q in QUERIES)
GROUPS = ("controller", "scheduler", "kubelet", "plugin")

# Device health (not on the page). No component exports a device's health as a metric: the kubelet's
# DRA metrics (1.36) are dra_operations_duration_seconds, dra_grpc_operations_duration_seconds and
# dra_resource_claims_in_use; kube-state-metrics has ResourceSlice and ResourceClaim info series without
# taints or health; pods' allocatedResourcesStatus reaches no exporter. What exists is kube-controller-manager's
# device taint eviction controller (runs with DRADeviceTaints: on from 1.36), which counts the pods it deletes
# because a device they use carries a NoExecute taint (from its driver's ResourceSlice or a DeviceTaintRule).
# The monitoring role's alert is built on that counter; unhealthy devices still in use (Unhealthy in pod
# status, NoSchedule taints) are found by dra_device_health_info, which playbooks/health.yml runs.
DEVICE_TAINT_EVICTIONS = dict(
    id="device_taint_evictions", component=KUBE_CONTROLLER_MANAGER, alert="DRADeviceTaintEvictions",
    metric="device_taint_eviction_controller_pod_deletions_total", window="10m",
    expression="sum(increase(device_taint_eviction_controller_pod_deletions_total[10m]))")


def series_name(query):
    """The series a query reads: the metric, or its _bucket series for histograms."""
    return query["metric"] + "_bucket" if query["kind"] == "quantile" else query["metric"]


def series_selector(query, target_matchers=None):
    """PromQL selector of the series a query reads, e.g. ``workqueue_depth{name="resource_claim"}``."""
    matchers = tuple(target_matchers if target_matchers is not None else query["target_matchers"])
    matchers += tuple(query["matchers"])
    inner = ", ".join("%s%s%s" % (label, op, label_value(value)) for label, op, value in matchers)
    return series_name(query) + ("{%s}" % inner if inner else "")


def workqueue_depth_selector_text(workqueue_depth_selector):
    """The ResourceClaim workqueue depth series with the given target matchers (text, e.g.
    ``job="kcm"``; "" matches every target): ``workqueue_depth{job="kcm", name="resource_claim"}``.
    The one place the depth selector is built (the query, its series, the role's absent alert)."""
    text = (workqueue_depth_selector or "").strip().rstrip(",").strip()
    return 'workqueue_depth{%sname="resource_claim"}' % ((text + ", ") if text else "")


def expression(query, workqueue_depth_selector=None):
    """The query's PromQL; the depth query's target matchers can be replaced (None keeps the page's)."""
    if query["id"] != "workqueue_depth" or workqueue_depth_selector is None:
        return query["expression"]
    return "sum(%s)" % workqueue_depth_selector_text(workqueue_depth_selector)


def selector_for_prometheus(query, workqueue_depth_selector=None):
    """Selector of the series a query reads, with the same target matchers as expression()."""
    if query["id"] == "workqueue_depth" and workqueue_depth_selector is not None:
        return workqueue_depth_selector_text(workqueue_depth_selector)
    return series_selector(query)


def measurement(value=None, state=None, detail="", window=None):
    """A measurement of one query: a number (state ``ok``) or why there is none."""
    if state is None:
        state = "ok" if value is not None and not math.isnan(value) else "no-data"
    if state != "ok":
        value = None
    return {"value": value, "state": state, "detail": detail, "window": window}


def measure_scrapes(query, first, second, interval):
    """Evaluate one of QUERIES over two scrapes ``interval`` seconds apart.

    ``first`` and ``second`` are lists of Samples from every scraped endpoint, each
    carrying an ``endpoint`` label with the endpoint's component name (the label
    prometheus-operator puts on its targets), so the page's target matchers apply.
    """
    window = "%gs" % interval
    matchers = tuple(query["target_matchers"]) + tuple(query["matchers"])
    name = series_name(query)
    now = select(second, name, matchers)
    if not now:
        return measurement(state="missing-metric", window=window,
                           detail=missing_detail(query, [s.name for s in second]))
    if query["kind"] == "gauge":
        return measurement(sum(s.value for s in now), window=window)
    before = select(first, name, matchers)
    increases = counter_increase(before, now)
    if interval <= 0:
        return measurement(state="no-data", window=window, detail="the scrapes were not taken apart in time")
    if query["kind"] == "rate":
        return measurement(sum(increases.values()) / interval, window=window)
    buckets = _sum_by_le(increases)
    value = histogram_quantile(query["quantile"], buckets)
    if math.isnan(value):
        return measurement(state="no-data", window=window,
                           detail="%s has no observations in the last %s" % (query["metric"], window))
    return measurement(value, window=window)


def missing_detail(query, names_present):
    """Why a query has no series, given the metric names that are present."""
    present = set(names_present)
    families = set(present)
    for name in present:
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix):
                families.add(name[:-len(suffix)])
    older = [n for n in query.get("older_names", ()) if n in families]
    if older:
        return ("%s is not exposed, but %s is: that is an older name of this metric; the page's query needs "
                "Kubernetes >= 1.30" % (query["metric"], older[0]))
    name = series_name(query)
    if name in present:
        return "%s is exposed but no series matches %s%s" % (
            name, series_selector(query), _absent_reason(query))
    return "%s is not exposed by any scraped %s endpoint%s" % (
        query["metric"], query["component"], _absent_reason(query))


def _absent_reason(query):
    if query["group"] == "controller":
        return " (is the ResourceClaim controller running, i.e. DRA enabled in kube-controller-manager?)"
    if query["group"] in ("kubelet", "plugin"):
        return " (the series appears after the first claim is prepared on a node)"
    if query["id"] == "scheduler_e2e_p99":
        return " (the series appears after the first pod is scheduled)"
    return ""


# ---------------------------------------------------------------------------
# Diagnosis
# ---------------------------------------------------------------------------

# Defaults of the thresholds; roles/monitoring/defaults/main.yml holds the same numbers
# with the reasons, and a unit test keeps both equal.
DEFAULT_THRESHOLDS = {
    "workqueue_add_rate_high": 10.0,
    "workqueue_depth_high": 10.0,
    "workqueue_work_duration_p99_high": 1.0,
    "scheduler_e2e_p99_high": 5.0,
    "scheduler_algorithm_p99_high": 1.0,
    "kubelet_prepare_p99_high": 5.0,
    "kubelet_unprepare_p99_high": 5.0,
    "plugin_prepare_p99_high": 5.0,
    "plugin_unprepare_p99_high": 5.0,
}

# The page's baseline from its 100-node scale test (kube-controller-manager's defaults are control_plane.tuning's).
BASELINE_KCM_QPS = 75
BASELINE_KCM_BURST = 150

# Each check fires when any clause holds; a clause holds when all its conditions do.
# A condition is (query id, operator, threshold name).
CHECKS = (
    dict(id="resource-claim-controller-not-performing", group="controller", severity="warning",
         role="dra.admin.control_plane_tuning",
         summary="The ResourceClaim controller in kube-controller-manager is not keeping up: "
                 "{reason}.",
         clauses=(
             (("workqueue_depth", ">=", "workqueue_depth_high"),
              ("workqueue_add_rate", "<", "workqueue_add_rate_high")),
             (("workqueue_work_duration_p99", ">=", "workqueue_work_duration_p99_high"),),
         ),
         advice="kcm_tuning"),
    dict(id="resource-claim-controller-concurrency-insufficient", group="controller", severity="warning",
         role=None,
         summary="The ResourceClaim controller processes work at a reasonable speed but items arrive "
                 "faster than its fixed concurrency drains them: {reason}.",
         clauses=(
             (("workqueue_add_rate", ">=", "workqueue_add_rate_high"),
              ("workqueue_depth", ">=", "workqueue_depth_high"),
              ("workqueue_work_duration_p99", "<", "workqueue_work_duration_p99_high")),
         ),
         advice="reduce_creation_rate"),
    dict(id="scheduler-binding-slow", group="scheduler", severity="warning",
         role="dra.admin.control_plane_tuning",
         summary="Pods take long to schedule end to end while the scheduling algorithm is fast: {reason}.",
         clauses=(
             (("scheduler_e2e_p99", ">=", "scheduler_e2e_p99_high"),
              ("scheduler_algorithm_p99", "<", "scheduler_algorithm_p99_high")),
         ),
         advice="scheduler_qps"),
    dict(id="scheduler-algorithm-slow", group="scheduler", severity="warning", role=None,
         summary="The scheduling algorithm itself is slow: {reason}.",
         clauses=((("scheduler_algorithm_p99", ">=", "scheduler_algorithm_p99_high"),),),
         advice="scheduler_cpu"),
    dict(id="kubelet-prepare-resources-slow", group="kubelet", severity="warning", role="dra.admin.driver",
         summary="Kubelet waits long for the DRA driver to prepare devices: {reason}.",
         clauses=((("kubelet_prepare_p99", ">=", "kubelet_prepare_p99_high"),),),
         advice="driver_slow"),
    dict(id="kubelet-unprepare-resources-slow", group="kubelet", severity="warning", role="dra.admin.driver",
         summary="Kubelet waits long for the DRA driver to unprepare devices: {reason}.",
         clauses=((("kubelet_unprepare_p99", ">=", "kubelet_unprepare_p99_high"),),),
         advice="driver_slow"),
    dict(id="plugin-node-prepare-resources-slow", group="plugin", severity="warning", role="dra.admin.driver",
         summary="The DRA driver's NodePrepareResources gRPC calls are slow: {reason}.",
         clauses=((("plugin_prepare_p99", ">=", "plugin_prepare_p99_high"),),),
         advice="driver_slow"),
    dict(id="plugin-node-unprepare-resources-slow", group="plugin", severity="warning", role="dra.admin.driver",
         summary="The DRA driver's NodeUnprepareResources gRPC calls are slow: {reason}.",
         clauses=((("plugin_unprepare_p99", ">=", "plugin_unprepare_p99_high"),),),
         advice="driver_slow"),
)

_OPS = {">=": lambda a, b: a >= b, "<": lambda a, b: a < b}
_OP_WORDS = {">=": ">=", "<": "<"}


def _normalise(value):
    if isinstance(value, dict):
        return value
    if value is None:
        return measurement(state="no-data", detail="no value")
    return measurement(float(value))


def _fmt(number):
    if number is None:
        return "n/a"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == int(number) and abs(number) < 1e6:
        return "%d" % number
    return "%.3g" % number


def _evaluate(check, values, thresholds):
    """Three-valued: (True | False | None, the conditions of the clause that held)."""
    outcome = False
    for clause in check["clauses"]:
        clause_result = True
        for query_id, op, threshold in clause:
            value = values[query_id]["value"]
            if values[query_id]["state"] != "ok":
                if clause_result is True:
                    clause_result = None
                continue
            if not _OPS[op](value, thresholds[threshold]):
                clause_result = False
        if clause_result is True:
            return True, clause
        if clause_result is None:
            outcome = None
    return outcome, ()


def target_kcm_rate_limits(current_qps=None, current_burst=None):
    """Next kube-controller-manager --kube-api-qps/--kube-api-burst: the page's 75/150, or double."""
    qps = BASELINE_KCM_QPS if current_qps is None or current_qps < BASELINE_KCM_QPS else 2 * current_qps
    burst_floor = current_burst if current_burst is not None else 0
    burst = max(BASELINE_KCM_BURST, 2 * qps, burst_floor)
    return qps, burst


def _advice(kind, current_qps, current_burst):
    if kind == "kcm_tuning":
        qps, burst = target_kcm_rate_limits(current_qps, current_burst)
        if current_qps is not None and current_burst is not None:
            change = ("raise kube-controller-manager --kube-api-qps from %s to %s and --kube-api-burst from %s "
                      "to %s" % (_fmt(current_qps), _fmt(qps), _fmt(current_burst), _fmt(burst)))
        elif current_qps is not None:
            change = ("raise kube-controller-manager --kube-api-qps from %s to %s and set --kube-api-burst to "
                      "%s" % (_fmt(current_qps), _fmt(qps), _fmt(burst)))
        else:
            change = ("set kube-controller-manager --kube-api-qps to %s and --kube-api-burst to %s (its "
                      "defaults are %d and %d; the page's scale test met its targets from %d/%d)"
                      % (_fmt(qps), _fmt(burst), DEFAULT_KCM_QPS, DEFAULT_KCM_BURST, BASELINE_KCM_QPS,
                         BASELINE_KCM_BURST))
        return (change + " (role dra.admin.control_plane_tuning), and check kube-controller-manager's CPU and "
                "memory: raise its requests/limits if it is throttled or near its memory limit.")
    if kind == "reduce_creation_rate":
        return ("The controller's concurrency is hard-coded: reduce the rate at which pods with claims are "
                "created (for example the QPS of the job or workload controller creating them) so that the "
                "resource_claim workqueue add rate stays below its drain rate.")
    if kind == "scheduler_qps":
        return ("Raise kube-scheduler's client QPS and burst (clientConnection.qps/burst in its "
                "KubeSchedulerConfiguration; role dra.admin.control_plane_tuning) so binding is not throttled; "
                "in deployments that rely on ResourceClaimTemplates also check the ResourceClaim controller "
                "findings, since pods wait for kube-controller-manager to create their claims.")
    if kind == "scheduler_cpu":
        return ("Give kube-scheduler more CPU, and check for DeviceClasses or claims with expensive CEL "
                "selectors or nodes publishing very many devices.")
    if kind == "driver_slow":
        return ("Check the DRA driver on the affected nodes: its logs, its CPU/memory limits and the hardware "
                "operation behind the call (role dra.admin.driver manages the driver DaemonSet).")
    raise InputError("unknown advice kind %s" % kind)


def _limits(thresholds, groups):
    """DEFAULT_THRESHOLDS with the overrides; ValueError naming an unknown threshold or check group."""
    limits = dict(DEFAULT_THRESHOLDS)
    for key, value in (thresholds or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise InputError("unknown threshold %r; known: %s" % (key, ", ".join(sorted(DEFAULT_THRESHOLDS))))
        limits[key] = float(value)
    unknown_groups = set(groups) - set(GROUPS)
    if unknown_groups:
        raise InputError("unknown check group(s) %s; known: %s" % (", ".join(sorted(unknown_groups)),
                                                                   ", ".join(GROUPS)))
    return limits


def _state_finding(query, got):
    """The finding of a query that has no usable value (missing-metric, no-data, unreachable)."""
    return {
        "id": "%s-%s" % (got["state"], query["id"]),
        "kind": got["state"],
        "severity": "unknown",
        "summary": "%s: %s" % (query["title"], _state_words(got["state"])),
        "evidence": {"query": query["expression"], "component": query["component"], "detail": got["detail"]},
        "advice": _state_advice(got["state"], query),
        "role": None,
    }


def _problem_finding(check, clause, values, limits, current_qps, current_burst):
    """The finding of a check whose `clause` holds, with the numbers and thresholds as evidence."""
    evidence = {}
    for clause_ in check["clauses"]:
        for query_id, _op, threshold in clause_:
            evidence[query_id] = values[query_id]["value"]
            evidence[threshold] = limits[threshold]
    windows = set(values[q]["window"] for q, _o, _t in clause if values[q]["window"])
    if windows:
        evidence["window"] = sorted(windows)[0]
    reason = ", ".join(
        "%s %s (%s %s %s)" % (QUERY_BY_ID[q]["title"], _fmt(values[q]["value"]), _OP_WORDS[op],
                              _fmt(limits[t]), QUERY_BY_ID[q]["unit"])
        for q, op, t in clause)
    return {
        "id": check["id"],
        "kind": "problem",
        "severity": check["severity"],
        "summary": check["summary"].format(reason=reason),
        "evidence": evidence,
        "advice": _advice(check["advice"], current_qps, current_burst),
        "role": check["role"],
    }


def diagnose(measurements, thresholds=None, current_qps=None, current_burst=None, groups=GROUPS):
    """Apply CHECKS to measurements; return the findings (a list of dicts).

    ``measurements`` maps query ids to numbers or to measurement() dicts. Every query of
    the selected ``groups`` without a value yields a finding of its state (``missing-metric``,
    ``no-data``, ``unreachable``), so an empty result means: every needed number was there
    and none crossed a threshold.
    """
    limits = _limits(thresholds, groups)
    values = dict((query["id"], _normalise(measurements.get(query["id"]))) for query in QUERIES)
    findings = [_state_finding(query, values[query["id"]]) for query in QUERIES
                if query["group"] in groups and values[query["id"]]["state"] != "ok"]
    for check in CHECKS:
        if check["group"] not in groups:
            continue
        outcome, clause = _evaluate(check, values, limits)
        if outcome is True:
            findings.append(_problem_finding(check, clause, values, limits, current_qps, current_burst))
    return findings


def _state_words(state):
    return {"missing-metric": "metric missing",
            "no-data": "no data yet",
            "unreachable": "source unreachable",
            "query-error": "query failed"}.get(state, state)


def _state_advice(state, query):
    if state == "missing-metric":
        return ("Make sure Prometheus scrapes %s and that it exposes %s; until then this check cannot say "
                "whether the component is healthy." % (query["component"], query["metric"]))
    if state == "no-data":
        return ("Wait until %s has observed work for a full window (5m for Prometheus, the scrape interval "
                "otherwise), then run again." % query["component"])
    if state == "query-error":
        return ("Prometheus rejected the query; check the workqueue depth selector and the Prometheus "
                "version, then run again.")
    return "Fix access to the metrics source of %s, then run again." % query["component"]


def needed_queries(groups=GROUPS):
    return [q for q in QUERIES if q["group"] in groups]
