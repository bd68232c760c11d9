# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Filters dra.admin.monitoring_rules, dra.admin.monitoring_queries, dra.admin.monitoring_canary_queries and
dra.admin.monitoring_device_map_queries: the monitoring role's Prometheus rule groups and dashboard queries (see
plugins/filter/monitoring_rules.yml, monitoring_queries.yml, monitoring_canary_queries.yml and
monitoring_device_map_queries.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.module_utils.metrics.rules import (
    RulesError, canary_queries, dashboard_queries, device_map_queries, rule_groups,
)


def monitoring_rules_filter(thresholds, group_prefix="dra-admin", interval="", alert_for="10m", alert_labels=None,
                            workqueue_depth_selector=None, absent_alerts=True, absent_for="15m",
                            device_taint_eviction_alert=True, canary_alerts=True, canary_thresholds=None,
                            gpu_xid_alert=True):
    try:
        return rule_groups(thresholds, group_prefix=group_prefix, interval=interval, alert_for=alert_for,
                           alert_labels=alert_labels, workqueue_depth_selector=workqueue_depth_selector,
                           absent=absent_alerts, absent_for=absent_for,
                           device_taint_eviction_alert=device_taint_eviction_alert,
                           canary_rules=canary_alerts, canary_limits=canary_thresholds, gpu_xid=gpu_xid_alert)
    except RulesError as error:
        raise AnsibleFilterError("dra.admin.monitoring_rules: %s" % error)


def monitoring_queries_filter(thresholds, workqueue_depth_selector=None):
    try:
        return dashboard_queries(thresholds, workqueue_depth_selector)
    except RulesError as error:
        raise AnsibleFilterError("dra.admin.monitoring_queries: %s" % error)


def monitoring_canary_queries_filter(canary_thresholds=None):
    try:
        return canary_queries(canary_thresholds)
    except RulesError as error:
        raise AnsibleFilterError("dra.admin.monitoring_canary_queries: %s" % error)


def monitoring_device_map_queries_filter(value=None):
    return device_map_queries()


class FilterModule(object):
    def filters(self):
        return {"monitoring_rules": monitoring_rules_filter, "monitoring_queries": monitoring_queries_filter,
                "monitoring_canary_queries": monitoring_canary_queries_filter,
                "monitoring_device_map_queries": monitoring_device_map_queries_filter}
