"""The monitoring role's rule groups built from diagnosis (plugins/module_utils/rules.py).

The alerts must say what the advice module's checks say: each check of diagnosis.CHECKS is
exactly one alert, whose expression, read back here by a parser of its own, has the check's
clauses with the same queries, operators and thresholds.
"""
import re

import pytest

from ansible_collections.dra.admin.plugins.filter.monitoring_rules import (
    monitoring_queries_filter, monitoring_rules_filter)
from ansible_collections.dra.admin.plugins.module_utils.canary import canary
from ansible_collections.dra.admin.plugins.module_utils.devices import device_map
from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.metrics import rules

from ansible.errors import AnsibleFilterError

RECORD_TO_QUERY = dict((q["record"], q["id"]) for q in diagnosis.QUERIES)
CONDITION = re.compile(r"^(?P<record>[a-z_:0-9]+) (?P<op>>=|<) (?P<value>[0-9.]+)$")

# Distinct thresholds, so a condition comparing with the wrong one cannot pass.
DISTINCT = dict((name, 100 + index) for index, name in enumerate(sorted(diagnosis.DEFAULT_THRESHOLDS)))


def parse_alert_expression(expr):
    """An alert expression over the recording rules, as clauses of (query id, op, value)."""
    clauses = []
    for clause_text in expr.split(" or on() "):
        clause_text = clause_text.strip()
        if clause_text.startswith("(") and clause_text.endswith(")"):
            clause_text = clause_text[1:-1]
        clause = []
        for condition in clause_text.split(" and on() "):
            match = CONDITION.match(condition.strip())
            assert match, "not a condition over a recording rule: %r in %r" % (condition, expr)
            clause.append((RECORD_TO_QUERY[match.group("record")], match.group("op"), float(match.group("value"))))
        clauses.append(tuple(clause))
    return tuple(clauses)


def alerts_of(groups):
    (alerts,) = [g["rules"] for g in groups["groups"] if g["name"].endswith(".alerts")]
    return alerts


@pytest.mark.parametrize("thresholds", [{}, DISTINCT], ids=["defaults", "distinct"])
def test_each_check_is_exactly_its_alert_with_its_thresholds(thresholds):
    limits = dict(diagnosis.DEFAULT_THRESHOLDS, **thresholds)
    alerts = alerts_of(rules.rule_groups(thresholds))
    check_alerts = [a for a in alerts if "absent(" not in a["expr"]
                    and a["alert"] not in (diagnosis.DEVICE_TAINT_EVICTIONS["alert"], rules.GPU_XID_ON_DEVICE)
                    and not a["alert"].startswith("DRACanary")]
    assert len(check_alerts) == len(diagnosis.CHECKS) == len(rules.ALERTS)
    assert set(rules.ALERTS) == set(c["id"] for c in diagnosis.CHECKS)
    for check, alert in zip(diagnosis.CHECKS, check_alerts):
        assert alert["alert"] == rules.ALERTS[check["id"]]["alert"]
        expected = tuple(tuple((query, op, float(limits[threshold])) for query, op, threshold in clause)
                         for clause in check["clauses"])
        assert parse_alert_expression(alert["expr"]) == expected, check["id"]
    assert len(set(a["alert"] for a in alerts)) == len(alerts)


def test_a_moved_check_threshold_moves_only_its_alerts():
    before = dict((a["alert"], a["expr"]) for a in alerts_of(rules.rule_groups({})))
    after = dict((a["alert"], a["expr"]) for a in alerts_of(rules.rule_groups(
        {"scheduler_algorithm_p99_high": 0.25})))
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["DRASchedulerAlgorithmSlow", "DRASchedulerBindingSlow"]
    assert after["DRASchedulerAlgorithmSlow"] == "dra:scheduler_scheduling_algorithm_duration_seconds:p99_5m >= 0.25"


def test_every_alert_description_names_its_thresholds_and_values():
    alerts = alerts_of(rules.rule_groups(DISTINCT))
    for check, alert in zip(diagnosis.CHECKS, alerts):
        description = alert["annotations"]["description"]
        assert "{v[" not in description and "{t[" not in description
        first_threshold = check["clauses"][0][0][2]
        assert "threshold %d" % DISTINCT[first_threshold] in description, check["id"]
        for query_id, _op, _threshold in check["clauses"][0]:
            assert 'with query "%s"' % diagnosis.QUERY_BY_ID[query_id]["record"] in description


def test_recording_rules_are_the_page_queries_in_order():
    (recording,) = [g for g in rules.rule_groups()["groups"] if g["name"] == "dra-admin.recording"]
    assert recording["rules"] == [{"record": q["record"], "expr": q["expression"]} for q in diagnosis.QUERIES]


def test_options_shape_the_groups():
    groups = rules.rule_groups(group_prefix="p", interval="30s", alert_for="2m",
                               alert_labels={"team": "x"}, absent=False,
                               device_taint_eviction_alert=False, canary_rules=False, gpu_xid=False)["groups"]
    assert [g["name"] for g in groups] == ["p.recording", "p.alerts"]
    assert all(g["interval"] == "30s" for g in groups)
    assert len(groups[1]["rules"]) == len(diagnosis.CHECKS)
    assert all(r["for"] == "2m" and r["labels"] == {"team": "x"} for r in groups[1]["rules"])
    assert "interval" not in rules.rule_groups()["groups"][0]


def test_eviction_and_absent_alerts():
    alerts = dict((a["alert"], a) for a in alerts_of(rules.rule_groups(
        workqueue_depth_selector='job="kcm"')))
    evictions = alerts[diagnosis.DEVICE_TAINT_EVICTIONS["alert"]]
    assert evictions["expr"] == diagnosis.DEVICE_TAINT_EVICTIONS["expression"] + " > 0" and "for" not in evictions
    absent = alerts[rules.CONTROLLER_METRICS_ABSENT]
    assert absent["expr"] == 'absent(workqueue_depth{job="kcm", name="resource_claim"})'
    assert absent["for"] == "15m"
    assert alerts[rules.SCHEDULER_METRICS_ABSENT]["expr"] == \
        "absent(scheduler_pod_scheduling_sli_duration_seconds_bucket)"


def test_canary_alerts_read_the_canary_metric_names_with_their_thresholds():
    alerts = dict((a["alert"], a) for a in alerts_of(rules.rule_groups(
        canary_limits={"phase_seconds_high": 30, "stale_seconds": None}, alert_labels={"team": "x"})))
    assert alerts[rules.CANARY_FAILED]["expr"] == "min by (driver, pool, phase) (%s) == 0" % canary.METRIC_SUCCESS
    assert alerts[rules.CANARY_SLOW]["expr"] == "max by (driver, pool, phase) (%s) > 30" % canary.METRIC_PHASE_SECONDS
    assert alerts[rules.CANARY_STALE]["expr"] == "time() - max(%s) > 7200" % canary.METRIC_LAST_RUN
    assert all("for" not in alerts[name] and alerts[name]["labels"] == {"team": "x"}
               for name in (rules.CANARY_FAILED, rules.CANARY_SLOW, rules.CANARY_STALE))
    assert "threshold 30s" in alerts[rules.CANARY_SLOW]["annotations"]["description"]
    panels = rules.canary_queries({"phase_seconds_high": 30})
    assert [p["threshold"] for p in panels] == ["30", None]
    assert panels[0]["expr"] == "max by (driver, pool, phase) (%s)" % canary.METRIC_PHASE_SECONDS


@pytest.mark.parametrize("limits,message", [
    ({"phase_seconds": 5}, "unknown canary threshold(s) phase_seconds; known: phase_seconds_high, stale_seconds"),
    ({"phase_seconds_high": "fast"}, "canary threshold phase_seconds_high='fast' is not a number of seconds above 0"),
    ({"stale_seconds": 0}, "canary threshold stale_seconds=0 is not a number of seconds above 0"),
])
def test_bad_canary_thresholds_are_refused_naming_them(limits, message):
    with pytest.raises(rules.RulesError) as raised:
        rules.rule_groups(canary_limits=limits)
    assert str(raised.value) == message
    with pytest.raises(rules.RulesError):
        rules.canary_queries(limits)


@pytest.mark.parametrize("selector,series", [
    (None, 'workqueue_depth{name="resource_claim"}'),
    ("", 'workqueue_depth{name="resource_claim"}'),
    ('job="kcm"', 'workqueue_depth{job="kcm", name="resource_claim"}'),
    (' job="kcm", ', 'workqueue_depth{job="kcm", name="resource_claim"}'),
])
def test_the_one_depth_selector(selector, series):
    assert diagnosis.workqueue_depth_selector_text(selector) == series
    depth = diagnosis.QUERY_BY_ID["workqueue_depth"]
    if selector is not None:
        assert diagnosis.expression(depth, selector) == "sum(%s)" % series
        assert diagnosis.selector_for_prometheus(depth, selector) == series
        (query,) = [q for q in rules.dashboard_queries(None, selector) if q["id"] == "workqueue_depth"]
        assert query["expr"] == "sum(%s)" % series


def test_dashboard_queries_carry_the_alert_thresholds():
    queries = rules.dashboard_queries({"workqueue_depth_high": 12})
    assert [q["id"] for q in queries] == [q["id"] for q in diagnosis.QUERIES]
    by_id = dict((q["id"], q) for q in queries)
    assert by_id["workqueue_depth"]["threshold"] == "12"
    assert by_id["workqueue_add_rate"]["grafana_unit"] == "ops"
    assert all(rules.threshold_of(q) in diagnosis.DEFAULT_THRESHOLDS for q in diagnosis.QUERIES)


@pytest.mark.parametrize("thresholds,words", [
    ({"no_such_high": 1}, "unknown threshold(s) no_such_high"),
    ({"workqueue_depth_high": "ten"}, "workqueue_depth_high='ten' is not a number"),
])
def test_bad_thresholds_fail_with_the_name(thresholds, words):
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        monitoring_rules_filter(thresholds)
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        monitoring_queries_filter(thresholds)


def test_the_gpu_xid_alert_joins_the_device_map_by_the_physical_gpus_uuid():
    alerts = dict((a["alert"], a) for a in alerts_of(rules.rule_groups(alert_labels={"team": "x"})))
    xid = alerts[rules.GPU_XID_ON_DEVICE]
    assert xid["expr"] == device_map.XID_CONSUMERS_QUERY
    assert xid["expr"].startswith("dra_admin_device_consumer_info * on(gpu_uuid) group_left(err_code) ")
    # Bounded in time, and without the codes whose catalog action keeps the GPU in service (tests/monitoring has
    # the cases that show it on Prometheus itself).
    assert "offset 3600s" in xid["expr"] and "DCGM_EXP_XID_ERRORS_COUNT" in xid["expr"]
    assert all(" != %d " % code in xid["expr"] for code in (13, 31, 43, 45, 63, 94))
    assert " != 79 " not in xid["expr"] and " != 48 " not in xid["expr"]
    assert xid["labels"] == {"team": "x"} and "for" not in xid
    assert rules.GPU_XID_ON_DEVICE not in [a["alert"] for a in alerts_of(rules.rule_groups(gpu_xid=False))]
    (panel,) = rules.device_map_queries()
    assert panel["expr"] == xid["expr"]
