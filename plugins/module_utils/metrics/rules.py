# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The monitoring role's Prometheus rule groups and dashboard queries, built from diagnosis.

Pure: no Ansible, no IO. ``diagnosis.QUERIES`` gives one recording rule per query,
``diagnosis.CHECKS`` one alert per check (its clauses become the alert expression over
the recording rules: ``and on()`` inside a clause, ``or on()`` between clauses), and
``diagnosis.DEVICE_TAINT_EVICTIONS`` the device-health alert. What is added here is only
what a Prometheus rule has and a check has not: the alert name and its annotations.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.canary import canary as canary_metrics
from ansible_collections.dra.admin.plugins.module_utils.devices import device_map
from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis

# Grafana's unit of each query unit.
GRAFANA_UNITS = {"items/s": "ops", "items": "short", "s": "s"}

_DRIVER_ADVICE = ("Check the DRA driver's logs, CPU/memory limits and the hardware operation behind the call "
                  "(role dra.admin.driver).")

# Per check of diagnosis.CHECKS: its alert's name and annotations. In the description,
# {v[<query id>]} is the query's current value (a Go template over its recording rule)
# and {t[<threshold name>]} the threshold.
ALERTS = {
    "resource-claim-controller-not-performing": dict(
        alert="DRAResourceClaimControllerNotPerforming",
        summary="The ResourceClaim controller in kube-controller-manager is not keeping up.",
        description="ResourceClaim workqueue depth {v[workqueue_depth]} (threshold {t[workqueue_depth_high]}), "
                    "add rate {v[workqueue_add_rate]}/s (high from {t[workqueue_add_rate_high]}), "
                    "p99 work duration {v[workqueue_work_duration_p99]}s "
                    "(threshold {t[workqueue_work_duration_p99_high]}s). "
                    "Tune kube-controller-manager --kube-api-qps/--kube-api-burst (the page's baseline is "
                    "%d/%d; role dra.admin.control_plane_tuning) and its CPU/memory; module "
                    "dra.admin.dra_metrics_advice gives the numbers."
                    % (diagnosis.BASELINE_KCM_QPS, diagnosis.BASELINE_KCM_BURST)),
    "resource-claim-controller-concurrency-insufficient": dict(
        alert="DRAResourceClaimControllerConcurrencyInsufficient",
        summary="Claims arrive faster than the ResourceClaim controller's fixed concurrency drains them.",
        description="ResourceClaim workqueue add rate {v[workqueue_add_rate]}/s "
                    "(threshold {t[workqueue_add_rate_high]}), depth {v[workqueue_depth]} "
                    "(threshold {t[workqueue_depth_high]}), p99 work duration {v[workqueue_work_duration_p99]}s "
                    "is reasonable. The controller's concurrency is hard-coded: reduce the pod creation rate."),
    "scheduler-binding-slow": dict(
        alert="DRASchedulerBindingSlow",
        summary="Pods take long to schedule end to end while the scheduling algorithm is fast.",
        description="Scheduler end-to-end p99 {v[scheduler_e2e_p99]}s (threshold {t[scheduler_e2e_p99_high]}s), "
                    "algorithm p99 {v[scheduler_algorithm_p99]}s. Raise kube-scheduler's client QPS/burst "
                    "(role dra.admin.control_plane_tuning) and check the ResourceClaim controller, which creates "
                    "the claims pods wait for."),
    "scheduler-algorithm-slow": dict(
        alert="DRASchedulerAlgorithmSlow",
        summary="The scheduling algorithm is slow.",
        description="Scheduler algorithm p99 {v[scheduler_algorithm_p99]}s "
                    "(threshold {t[scheduler_algorithm_p99_high]}s). Give kube-scheduler more CPU; look for "
                    "expensive CEL selectors or nodes with very many devices."),
    "kubelet-prepare-resources-slow": dict(
        alert="DRAKubeletPrepareResourcesSlow",
        summary="Kubelet PrepareResources calls to the DRA driver are slow.",
        description="Kubelet PrepareResources p99 {v[kubelet_prepare_p99]}s "
                    "(threshold {t[kubelet_prepare_p99_high]}s). " + _DRIVER_ADVICE),
    "kubelet-unprepare-resources-slow": dict(
        alert="DRAKubeletUnprepareResourcesSlow",
        summary="Kubelet UnprepareResources calls to the DRA driver are slow.",
        description="Kubelet UnprepareResources p99 {v[kubelet_unprepare_p99]}s "
                    "(threshold {t[kubelet_unprepare_p99_high]}s). " + _DRIVER_ADVICE),
    "plugin-node-prepare-resources-slow": dict(
        alert="DRAPluginNodePrepareResourcesSlow",
        summary="DRA kubeletplugin NodePrepareResources calls to the DRA driver are slow.",
        description="DRA kubeletplugin NodePrepareResources p99 {v[plugin_prepare_p99]}s "
                    "(threshold {t[plugin_prepare_p99_high]}s). " + _DRIVER_ADVICE),
    "plugin-node-unprepare-resources-slow": dict(
        alert="DRAPluginNodeUnprepareResourcesSlow",
        summary="DRA kubeletplugin NodeUnprepareResources calls to the DRA driver are slow.",
        description="DRA kubeletplugin NodeUnprepareResources p99 {v[plugin_unprepare_p99]}s "
                    "(threshold {t[plugin_unprepare_p99_high]}s). " + _DRIVER_ADVICE),
}

CONTROLLER_METRICS_ABSENT = "DRAResourceClaimControllerMetricsAbsent"
CANARY_FAILED = "DRACanaryPhaseFailed"
CANARY_SLOW = "DRACanaryPhaseSlow"
CANARY_STALE = "DRACanaryNotRun"
CANARY_DEFAULTS = {"phase_seconds_high": 60, "stale_seconds": 7200}
_BY_PHASE = "by (driver, pool, phase)"
SCHEDULER_METRICS_ABSENT = "DRASchedulerMetricsAbsent"
GPU_XID_ON_DEVICE = "DRAGPUXidOnDevice"


class RulesError(DraAdminError, ValueError):
    """A rule input that would not make valid rules; the message names it."""


def threshold_of(query):
    """The threshold name a query's dashboard panel draws (``<query id>_high``)."""
    return query["id"] + "_high"


def _text(value):
    """A threshold as the rules spell it: as given (10 stays 10, 2.5 stays 2.5)."""
    return value.strip() if isinstance(value, str) else str(value)


def _thresholds(thresholds):
    """diagnosis.DEFAULT_THRESHOLDS with the given ones over them (kept as given, for the text)."""
    unknown = sorted(set(thresholds or {}) - set(diagnosis.DEFAULT_THRESHOLDS))
    if unknown:
        raise RulesError("unknown threshold(s) %s; known: %s"
                         % (", ".join(unknown), ", ".join(sorted(diagnosis.DEFAULT_THRESHOLDS))))
    limits = dict(diagnosis.DEFAULT_THRESHOLDS)
    limits.update((key, value) for key, value in (thresholds or {}).items() if value is not None)
    for key, value in limits.items():
        try:
            float(value)
        except (TypeError, ValueError):
            raise RulesError("threshold %s=%r is not a number" % (key, value))
    return dict((key, _text(value)) for key, value in limits.items())


def _value_of(query_id):
    """A Go template printing a query's current value, from its recording rule ("n/a" without one)."""
    return ('{{ with query "%s" }}{{ . | first | value | printf "%%.3g" }}{{ else }}n/a{{ end }}'
            % diagnosis.QUERY_BY_ID[query_id]["record"])


def condition_text(condition, limits):
    """One condition of a check as PromQL over the recording rules: ``<record> <op> <threshold>``."""
    query_id, op, threshold = condition
    return "%s %s %s" % (diagnosis.QUERY_BY_ID[query_id]["record"], op, limits[threshold])


def check_expression(check, limits):
    """A check's alert expression: its conditions joined by ``and on()``, its clauses by ``or on()``."""
    clauses = check["clauses"]
    texts = []
    for clause in clauses:
        text = " and on() ".join(condition_text(condition, limits) for condition in clause)
        texts.append("(%s)" % text if len(clauses) > 1 and len(clause) > 1 else text)
    return " or on() ".join(texts)


def recording_rules(workqueue_depth_selector=None):
    """One recording rule per query of the page, in diagnosis.QUERIES order."""
    return [{"record": query["record"], "expr": diagnosis.expression(query, workqueue_depth_selector)}
            for query in diagnosis.QUERIES]


def check_alerts(limits, alert_for, labels):
    """One alert per check of diagnosis.CHECKS, in that order."""
    values = dict((query["id"], _value_of(query["id"])) for query in diagnosis.QUERIES)
    alerts = []
    for check in diagnosis.CHECKS:
        texts = ALERTS[check["id"]]
        alerts.append({
            "alert": texts["alert"],
            "expr": check_expression(check, limits),
            "for": alert_for,
            "labels": dict(labels),
            "annotations": {"summary": texts["summary"],
                            "description": texts["description"].format(v=values, t=limits)},
        })
    return alerts


def eviction_alert(labels):
    """The device-health alert: pods deleted because a device they used is tainted NoExecute."""
    evictions = diagnosis.DEVICE_TAINT_EVICTIONS
    return {
        "alert": evictions["alert"],
        "expr": evictions["expression"] + " > 0",
        "labels": dict(labels),
        "annotations": {
            "summary": "Pods were deleted because a device they used is tainted NoExecute.",
            "description": "kube-controller-manager's device taint eviction controller deleted "
                           '{{ $value | printf "%%.0f" }} pod(s) in the last %s: a DRA driver (in its '
                           "ResourceSlice) or a DeviceTaintRule tainted a device they used with NoExecute. Module "
                           "dra.admin.dra_device_health_info (playbooks/health.yml) names the unhealthy devices, "
                           "their taints and the pods still using them." % evictions["window"]},
    }


def absent_alerts(workqueue_depth_selector, absent_for, labels):
    """Alerts on the controller's and the scheduler's metrics being absent: missing must not look healthy."""
    depth = diagnosis.selector_for_prometheus(diagnosis.QUERY_BY_ID["workqueue_depth"], workqueue_depth_selector)
    scheduler = diagnosis.QUERY_BY_ID["scheduler_e2e_p99"]
    return [
        {"alert": CONTROLLER_METRICS_ABSENT,
         "expr": "absent(%s)" % depth,
         "for": absent_for,
         "labels": dict(labels),
         "annotations": {
             "summary": "No ResourceClaim workqueue metrics from kube-controller-manager.",
             "description": "No series matches %s: Prometheus does not scrape kube-controller-manager, its target "
                            "lacks these labels (role variable dra_monitoring_workqueue_depth_selector), or the "
                            "ResourceClaim controller is not running. The DRA alerts above cannot fire without it."
                            % depth}},
        {"alert": SCHEDULER_METRICS_ABSENT,
         "expr": "absent(%s)" % diagnosis.series_selector(scheduler),
         "for": absent_for,
         "labels": dict(labels),
         "annotations": {
             "summary": "No %s from kube-scheduler." % scheduler["metric"],
             "description": "Prometheus does not scrape kube-scheduler, no pod was scheduled since it started, or "
                            "it is older than this metric (Kubernetes < 1.30 may expose %s instead). The scheduler "
                            "alerts cannot fire without it." % scheduler["older_names"][0]}},
    ]


def gpu_xid_alert(labels):
    """The device map's alert: a GPU with an Xid new within the last device_map.XID_ALERT_WINDOW seconds whose
    catalog action takes it out of service (or is unknown), named as the DRA device and the pod holding it
    (devices.device_map: the join on the physical GPU's UUID, a MIG device's parentUUID)."""
    return {
        "alert": GPU_XID_ON_DEVICE,
        "expr": device_map.XID_CONSUMERS_QUERY,
        "labels": dict(labels),
        "annotations": {
            "summary": "A GPU held by a DRA claim reported an Xid that takes it out of service.",
            "description": "GPU {{ $labels.gpu_uuid }} - DRA device {{ $labels.driver }}/{{ $labels.pool }}/"
                           "{{ $labels.device }} on {{ $labels.node }}, claim {{ $labels.namespace }}/"
                           "{{ $labels.claim }}, pod {{ $labels.pod }} - reported Xid {{ $labels.err_code }} within "
                           "the last %d minutes (the DCGM exporter's %s or %s); the application's own codes and those "
                           "NVIDIA's catalog ignores are left out. Module dra.admin.dra_gpu_health_facts says what "
                           "the code asks for; role dra.admin.device_maintenance (remediate, with the node in "
                           "dra_device_maintenance_remediate_gpu_nodes) takes this one device out of service, "
                           "not the whole node." % (device_map.XID_ALERT_WINDOW // 60, device_map.DCGM_XID_ERRORS,
                                                    device_map.DCGM_XID_COUNT)},
    }


def device_map_queries():
    """The dashboard's device map panel: the pods and DRA devices on GPUs with a new out-of-service Xid."""
    return [dict(id="gpu_xid_devices", title="GPU Xids on DRA devices", unit="", grafana_unit="short",
                 expr=device_map.XID_CONSUMERS_QUERY, threshold=None,
                 description="dra.admin device map (playbooks/health.yml with dra_health_device_map_file) joined to "
                             "the DCGM exporter's %s by GPU UUID: per pod and device, an Xid new in the last %d "
                             "minutes that takes the GPU out of service (its code in err_code)"
                             % (device_map.DCGM_XID_ERRORS, device_map.XID_ALERT_WINDOW // 60))]


def _canary_limits(canary_limits):
    limits = dict(CANARY_DEFAULTS)
    unknown = sorted(set(canary_limits or {}) - set(limits))
    if unknown:
        raise RulesError("unknown canary threshold(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(limits))))
    limits.update((k, v) for k, v in (canary_limits or {}).items() if v is not None)
    for key, value in limits.items():
        try:
            if float(value) <= 0 or float(value) != float(value):
                raise ValueError(value)
        except (TypeError, ValueError):
            raise RulesError("canary threshold %s=%r is not a number of seconds above 0" % (key, value))
    return dict((key, _text(value)) for key, value in limits.items())


def canary_alerts(canary_limits, labels):
    """Alerts on the canary's results (role dra.admin.canary's metrics file, read by node-exporter): a phase
    failed, a phase took longer than its threshold, or the canary has not run for a while."""
    limits = _canary_limits(canary_limits)
    where = "{{ $labels.driver }}/{{ $labels.pool }}, phase {{ $labels.phase }}"
    return [
        {"alert": CANARY_FAILED,
         "expr": "min %s (%s) == 0" % (_BY_PHASE, canary_metrics.METRIC_SUCCESS),
         "labels": dict(labels),
         "annotations": {
             "summary": "A DRA canary claim failed.",
             "description": "The canary of %s failed: a pod whose claim takes one free device of that pool did not "
                            "get through this phase (allocation: no device allocated; prepare: the driver did not "
                            "prepare it or the container did not start; device: the container did not see it; "
                            "unprepare: the pod or claim stayed). Playbook canary.yml (role dra.admin.canary) names "
                            "why; check the driver's pod on that node." % where}},
        {"alert": CANARY_SLOW,
         "expr": "max %s (%s) > %s" % (_BY_PHASE, canary_metrics.METRIC_PHASE_SECONDS, limits["phase_seconds_high"]),
         "labels": dict(labels),
         "annotations": {
             "summary": "A phase of a DRA canary claim is slow.",
             "description": "The canary of %s took {{ $value }}s (threshold %ss). " % (
                 where, limits["phase_seconds_high"]) + _DRIVER_ADVICE}},
        {"alert": CANARY_STALE,
         "expr": "time() - max(%s) > %s" % (canary_metrics.METRIC_LAST_RUN, limits["stale_seconds"]),
         "labels": dict(labels),
         "annotations": {
             "summary": "The DRA canary has not run for a while.",
             "description": "The canary's last result is {{ $value | humanizeDuration }} old (threshold %ss): its "
                            "schedule (AWX job template DRA canary) stopped, or its metrics file is no longer "
                            "written. Its alerts cannot fire without it." % limits["stale_seconds"]}},
    ]


def canary_queries(canary_limits=None):
    """The dashboard's canary panels: phase seconds (with the slow threshold) and phase success."""
    limits = _canary_limits(canary_limits)
    return [
        dict(id="canary_phase_seconds", title="DRA canary phase duration", unit="s", grafana_unit="s",
             expr="max %s (%s)" % (_BY_PHASE, canary_metrics.METRIC_PHASE_SECONDS), threshold=limits["phase_seconds_high"],
             description="dra.admin canary (playbooks/canary.yml with dra_canary_metrics_file): seconds per driver, "
                         "pool and phase (allocation, prepare, device, unprepare)"),
        dict(id="canary_success", title="DRA canary phase success", unit="", grafana_unit="short",
             expr="min %s (%s)" % (_BY_PHASE, canary_metrics.METRIC_SUCCESS), threshold=None,
             description="dra.admin canary: 1 when the phase passed, 0 when it failed"),
    ]


def rule_groups(thresholds=None, group_prefix="dra-admin", interval="", alert_for="10m", alert_labels=None,
                workqueue_depth_selector=None, absent=True, absent_for="15m", device_taint_eviction_alert=True,
                canary_rules=True, canary_limits=None, gpu_xid=True):
    """The Prometheus rule file's content: ``{"groups": [<prefix>.recording, <prefix>.alerts]}``.

    thresholds: overrides of diagnosis.DEFAULT_THRESHOLDS by name; workqueue_depth_selector:
    the depth query's target matchers (None keeps the page's); interval: the groups'
    evaluation interval ("" = Prometheus' global one); canary_rules: the canary alerts, with canary_limits
    overriding CANARY_DEFAULTS; gpu_xid: the device map's alert on GPU Xids (gpu_xid_alert).
    """
    if not group_prefix:
        raise RulesError("the rule group prefix is empty: give a name such as dra-admin")
    limits = _thresholds(thresholds)
    labels = dict(alert_labels or {})
    alerts = check_alerts(limits, alert_for, labels)
    if device_taint_eviction_alert:
        alerts.append(eviction_alert(labels))
    if absent:
        alerts.extend(absent_alerts(workqueue_depth_selector, absent_for, labels))
    if canary_rules:
        alerts.extend(canary_alerts(canary_limits, labels))
    if gpu_xid:
        alerts.append(gpu_xid_alert(labels))
    groups = []
    for suffix, rules in (("recording", recording_rules(workqueue_depth_selector)), ("alerts", alerts)):
        group = {"name": "%s.%s" % (group_prefix, suffix)}
        if interval:
            group["interval"] = interval
        group["rules"] = rules
        groups.append(group)
    return {"groups": groups}


def dashboard_queries(thresholds=None, workqueue_depth_selector=None):
    """The dashboard's panels' data, one per query of the page in diagnosis.QUERIES order.

    Each: id, title, component, unit, grafana_unit, record, expr (the query as the rules
    record it) and threshold (the threshold its alert compares with, as text).
    """
    limits = _thresholds(thresholds)
    return [dict(id=query["id"], title=query["title"], component=query["component"], unit=query["unit"],
                 grafana_unit=GRAFANA_UNITS[query["unit"]], record=query["record"],
                 expr=diagnosis.expression(query, workqueue_depth_selector),
                 threshold=limits[threshold_of(query)])
            for query in diagnosis.QUERIES]
