import gzip
import math
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.kube import prometheus_text
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER
from conftest import UNIT

TEXT = r'''
# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="resource_claim"} 12
workqueue_adds_total{name="pod"} 7e+02
# TYPE workqueue_depth gauge
workqueue_depth{name="resource_claim"} 3
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="resource_claim",le="0.001"} 0
workqueue_work_duration_seconds_bucket{name="resource_claim",le="0.01"} 4
workqueue_work_duration_seconds_bucket{name="resource_claim",le="0.1"} 10
workqueue_work_duration_seconds_bucket{name="resource_claim",le="+Inf"} 10
workqueue_work_duration_seconds_sum{name="resource_claim"} 0.25
workqueue_work_duration_seconds_count{name="resource_claim"} 10
odd_labels{path="C:\\dir",quote="say \"hi\"",nl="a\nb", spaced = "x" ,} NaN 1700000000000
om_counter_total{a="b"} 1.5 # {trace_id="abc"} 1.0
# EOF
'''


def test_parser_reads_types_labels_escapes_and_special_values():
    scrape = prometheus_text.parse_text(TEXT)
    assert scrape.types["workqueue_work_duration_seconds"] == "histogram"
    adds = prometheus_text.select(scrape.samples, "workqueue_adds_total", [("name", "=", "resource_claim")])
    assert [s.value for s in adds] == [12.0]
    assert prometheus_text.select(scrape.samples, "workqueue_adds_total", [("name", "=", "pod")])[0].value == 700.0
    odd = prometheus_text.select(scrape.samples, "odd_labels")[0]
    assert odd.labels == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb", "spaced": "x"}
    assert math.isnan(odd.value)
    assert prometheus_text.select(scrape.samples, "om_counter_total")[0].value == 1.5
    assert "workqueue_work_duration_seconds" in scrape.family_names()


@pytest.mark.parametrize("line", ['bad{name="x" 1', "9metric 1", 'm{a="1"}', 'm{a="1"} one'])
def test_parser_rejects_malformed_lines_with_line_number(line):
    with pytest.raises(prometheus_text.ParseError, match="line 2"):
        prometheus_text.parse_text("ok 1\n" + line)


def test_regex_matchers_are_anchored_like_promql():
    samples = prometheus_text.parse_text('m{method_name="/v1.DRAPlugin/NodePrepareResources"} 1\n'
                                         'm{method_name="NodePrepareResourcesX"} 2\n').samples
    hits = prometheus_text.select(samples, "m", [("method_name", "=~", ".*NodePrepareResources")])
    assert [s.value for s in hits] == [1.0]
    assert [s.value for s in prometheus_text.select(samples, "m", [("method_name", "!~", ".*Resources")])] == [2.0]


INF = float("inf")


@pytest.mark.parametrize("q,buckets,expected", [
    # Interpolation inside the bucket holding the rank: rank 9.9 of 10, bucket (0.01, 0.1] holds 6.
    (0.99, [(0.001, 0), (0.01, 4), (0.1, 10), (INF, 10)], 0.01 + 0.09 * (5.9 / 6)),
    (0.5, [(1, 2), (2, 4), (4, 8), (INF, 8)], 2.0),
    # First bucket starts at 0.
    (0.25, [(1, 4), (2, 8), (INF, 8)], 0.5),
    # Rank in the +Inf bucket: the largest finite bound.
    (0.99, [(1, 1), (2, 2), (INF, 10)], 2.0),
    # Unsorted input and non-monotonic counts (forced monotonic).
    (0.5, [(INF, 10), (2, 8), (1, 9)], 5 / 9),
    # Negative first bound is returned as is.
    (0.1, [(-1, 5), (0, 6), (INF, 10)], -1.0),
])
def test_histogram_quantile_matches_promql(q, buckets, expected):
    assert diagnosis.histogram_quantile(q, buckets) == pytest.approx(expected)


@pytest.mark.parametrize("buckets", [
    [(1, 1), (2, 2)],                      # no +Inf bucket
    [(INF, 3)],                            # fewer than two buckets
    [(1, 0), (2, 0), (INF, 0)],            # no observations
])
def test_histogram_quantile_is_nan_when_promql_is(buckets):
    assert math.isnan(diagnosis.histogram_quantile(0.99, buckets))


def test_histogram_quantile_out_of_range_quantiles():
    assert diagnosis.histogram_quantile(-0.1, [(1, 1), (INF, 1)]) == -INF
    assert diagnosis.histogram_quantile(1.1, [(1, 1), (INF, 1)]) == INF


def test_counter_increase_handles_resets_and_new_series():
    first = prometheus_text.parse_text('c{a="1"} 10\nc{a="2"} 50\n').samples
    second = prometheus_text.parse_text('c{a="1"} 25\nc{a="2"} 4\nc{a="3"} 2\n').samples
    inc = diagnosis.counter_increase(first, second)
    assert sorted(inc.values()) == [2.0, 4.0, 15.0]


def _scrape(text, component):
    samples = prometheus_text.parse_text(text).samples
    for s in samples:
        s.labels["endpoint"] = component
    return samples


KCM_BEFORE = '''
workqueue_adds_total{name="resource_claim"} 100
workqueue_depth{name="resource_claim"} 0
workqueue_work_duration_seconds_bucket{name="resource_claim",le="0.1"} 10
workqueue_work_duration_seconds_bucket{name="resource_claim",le="1"} 10
workqueue_work_duration_seconds_bucket{name="resource_claim",le="10"} 10
workqueue_work_duration_seconds_bucket{name="resource_claim",le="+Inf"} 10
'''
KCM_AFTER = '''
workqueue_adds_total{name="resource_claim"} 160
workqueue_depth{name="resource_claim"} 42
workqueue_work_duration_seconds_bucket{name="resource_claim",le="0.1"} 10
workqueue_work_duration_seconds_bucket{name="resource_claim",le="1"} 30
workqueue_work_duration_seconds_bucket{name="resource_claim",le="10"} 70
workqueue_work_duration_seconds_bucket{name="resource_claim",le="+Inf"} 70
'''


def test_measure_scrapes_rate_gauge_and_quantile():
    first, second = _scrape(KCM_BEFORE, KUBE_CONTROLLER_MANAGER), _scrape(KCM_AFTER, KUBE_CONTROLLER_MANAGER)
    q = diagnosis.QUERY_BY_ID
    assert diagnosis.measure_scrapes(q["workqueue_add_rate"], first, second, 20)["value"] == 3.0
    assert diagnosis.measure_scrapes(q["workqueue_depth"], first, second, 20)["value"] == 42.0
    p99 = diagnosis.measure_scrapes(q["workqueue_work_duration_p99"], first, second, 20)
    # 60 new observations: 20 in (0.1, 1], 40 in (1, 10]; rank 59.4 -> 1 + 9 * 39.4/40
    assert p99["state"] == "ok" and p99["value"] == pytest.approx(1 + 9 * 39.4 / 40)
    assert p99["window"] == "20s"


def test_depth_needs_the_kube_controller_manager_endpoint():
    first, second = _scrape(KCM_BEFORE, "something-else"), _scrape(KCM_AFTER, "something-else")
    got = diagnosis.measure_scrapes(diagnosis.QUERY_BY_ID["workqueue_depth"], first, second, 20)
    assert got["state"] == "missing-metric" and "no series matches" in got["detail"]


def test_no_observations_in_interval_is_no_data_not_zero():
    first, second = _scrape(KCM_BEFORE, KUBE_CONTROLLER_MANAGER), _scrape(KCM_BEFORE, KUBE_CONTROLLER_MANAGER)
    got = diagnosis.measure_scrapes(diagnosis.QUERY_BY_ID["workqueue_work_duration_p99"], first, second, 20)
    assert got["state"] == "no-data" and got["value"] is None


def test_older_scheduler_metric_name_is_reported_as_missing_with_the_name_found():
    old = _scrape('scheduler_e2e_scheduling_duration_seconds_bucket{le="+Inf"} 3\n', KUBE_SCHEDULER)
    got = diagnosis.measure_scrapes(diagnosis.QUERY_BY_ID["scheduler_e2e_p99"], old, old, 10)
    assert got["state"] == "missing-metric"
    assert "scheduler_e2e_scheduling_duration_seconds" in got["detail"] and "older name" in got["detail"]


def test_queries_carry_the_page_expressions():
    page = open(_page_path()).read().replace("\n", " ")
    for query in diagnosis.QUERIES:
        assert query["expression"] in page, query["id"]
        assert query["record"].startswith("dra:")
    assert len(diagnosis.QUERIES) == 9
    assert len(set(q["record"] for q in diagnosis.QUERIES)) == 9


def _page_path():
    import os
    here = UNIT
    return os.path.join(here, "fixtures", "metrics", "page-metrics-section.txt")


def test_series_selector():
    q = diagnosis.QUERY_BY_ID
    assert diagnosis.series_selector(q["workqueue_depth"]) == \
        'workqueue_depth{endpoint="kube-controller-manager", name="resource_claim"}'
    assert diagnosis.series_selector(q["scheduler_e2e_p99"]) == "scheduler_pod_scheduling_sli_duration_seconds_bucket"
    assert diagnosis.series_selector(q["plugin_prepare_p99"]) == \
        'dra_grpc_operations_duration_seconds_bucket{method_name=~".*NodePrepareResources"}'


# ---------------------------------------------------------------------------
# diagnose
# ---------------------------------------------------------------------------

HEALTHY = {"workqueue_add_rate": 2.0, "workqueue_depth": 0.0, "workqueue_work_duration_p99": 0.05,
           "scheduler_e2e_p99": 0.2, "scheduler_algorithm_p99": 0.01, "kubelet_prepare_p99": 0.1,
           "kubelet_unprepare_p99": 0.1, "plugin_prepare_p99": 0.05, "plugin_unprepare_p99": 0.05}


def _ids(findings):
    return sorted(f["id"] for f in findings)


def test_healthy_numbers_give_no_finding():
    assert diagnosis.diagnose(HEALTHY) == []


def test_rule_a_low_add_rate_high_depth_advises_qps_with_numbers():
    m = dict(HEALTHY, workqueue_add_rate=1.0, workqueue_depth=50.0)
    findings = diagnosis.diagnose(m, current_qps=20, current_burst=30)
    assert _ids(findings) == ["resource-claim-controller-not-performing"]
    f = findings[0]
    assert "raise kube-controller-manager --kube-api-qps from 20 to 75 and --kube-api-burst from 30 to 150" \
        in f["advice"]
    assert f["role"] == "dra.admin.control_plane_tuning"
    assert f["evidence"]["workqueue_depth"] == 50.0 and f["evidence"]["workqueue_add_rate"] == 1.0
    assert f["evidence"]["workqueue_depth_high"] == 10.0
    assert "depth 50" in f["summary"]


def test_rule_a_high_work_duration_alone_fires():
    findings = diagnosis.diagnose(dict(HEALTHY, workqueue_work_duration_p99=4.2), current_qps=2, current_burst=3)
    assert _ids(findings) == ["resource-claim-controller-not-performing"]
    assert "from 2 to 75" in findings[0]["advice"] and "from 3 to 150" in findings[0]["advice"]


def test_rule_a_at_baseline_doubles():
    findings = diagnosis.diagnose(dict(HEALTHY, workqueue_work_duration_p99=4.2), current_qps=75, current_burst=150)
    assert "from 75 to 150 and --kube-api-burst from 150 to 300" in findings[0]["advice"]


def test_rule_a_without_current_values_names_baseline_and_defaults():
    advice = diagnosis.diagnose(dict(HEALTHY, workqueue_work_duration_p99=4.2))[0]["advice"]
    assert "--kube-api-qps to 75 and --kube-api-burst to 150" in advice and "defaults are 20 and 30" in advice


def test_rule_b_high_add_rate_high_depth_reasonable_duration():
    m = dict(HEALTHY, workqueue_add_rate=40.0, workqueue_depth=80.0, workqueue_work_duration_p99=0.2)
    findings = diagnosis.diagnose(m)
    assert _ids(findings) == ["resource-claim-controller-concurrency-insufficient"]
    assert "reduce the rate at which pods with claims are created" in findings[0]["advice"]
    assert findings[0]["role"] is None


def test_rule_b_does_not_fire_with_low_depth():
    assert diagnosis.diagnose(dict(HEALTHY, workqueue_add_rate=40.0, workqueue_depth=2.0)) == []


def test_high_add_rate_high_depth_and_slow_work_is_rule_a_not_b():
    m = dict(HEALTHY, workqueue_add_rate=40.0, workqueue_depth=80.0, workqueue_work_duration_p99=3.0)
    assert _ids(diagnosis.diagnose(m)) == ["resource-claim-controller-not-performing"]


def test_scheduler_checks():
    assert _ids(diagnosis.diagnose(dict(HEALTHY, scheduler_e2e_p99=9.0))) == ["scheduler-binding-slow"]
    assert _ids(diagnosis.diagnose(dict(HEALTHY, scheduler_e2e_p99=9.0, scheduler_algorithm_p99=2.0))) == \
        ["scheduler-algorithm-slow"]


def test_node_checks():
    m = dict(HEALTHY, kubelet_prepare_p99=6.0, plugin_unprepare_p99=7.5)
    assert _ids(diagnosis.diagnose(m)) == ["kubelet-prepare-resources-slow", "plugin-node-unprepare-resources-slow"]


def test_thresholds_override_and_unknown_threshold_is_an_error():
    assert _ids(diagnosis.diagnose(HEALTHY, {"scheduler_e2e_p99_high": 0.1})) == ["scheduler-binding-slow"]
    with pytest.raises(ValueError, match="unknown threshold 'depth'"):
        diagnosis.diagnose(HEALTHY, {"depth": 1})


def test_missing_and_no_data_are_findings_never_healthy():
    m = dict(HEALTHY)
    m["workqueue_work_duration_p99"] = None
    m["scheduler_e2e_p99"] = diagnosis.measurement(state="missing-metric", detail="gone")
    findings = diagnosis.diagnose(m)
    assert _ids(findings) == ["missing-metric-scheduler_e2e_p99", "no-data-workqueue_work_duration_p99"]
    assert all(f["kind"] != "problem" and f["severity"] == "unknown" for f in findings)
    assert findings[0]["evidence"]["detail"] in ("gone", "no value")


def test_nothing_measured_reports_every_query():
    findings = diagnosis.diagnose({})
    assert len(findings) == len(diagnosis.QUERIES) and all(f["kind"] == "no-data" for f in findings)


def test_a_rule_fires_on_the_data_it_has():
    # Work duration alone proves rule (a) even when depth is unknown.
    m = dict(HEALTHY, workqueue_work_duration_p99=3.0, workqueue_depth=None)
    assert _ids(diagnosis.diagnose(m)) == ["no-data-workqueue_depth", "resource-claim-controller-not-performing"]


def test_groups_limit_checks_and_needed_metrics():
    findings = diagnosis.diagnose({"workqueue_add_rate": 1, "workqueue_depth": 0, "workqueue_work_duration_p99": 0.1},
                                  groups=("controller",))
    assert findings == []
    with pytest.raises(ValueError, match="unknown check group"):
        diagnosis.diagnose({}, groups=("gpu",))


@pytest.mark.parametrize("release", ["v1.33.13", "v1.36.3"])
def test_parsing_only_named_families_keeps_exactly_their_samples_of_a_recorded_api_server(release):
    path = os.path.join(UNIT, "fixtures", "upgrade", "kube-apiserver-%s-metrics.txt.gz" % release)
    with gzip.open(path, "rt") as fh:
        text = fh.read()
    whole = prometheus_text.parse_text(text)
    names = (prometheus_text.FEATURE_ENABLED, "apiserver_request_total")
    some = prometheus_text.parse_text(text, names=names)
    expected = [s for s in whole.samples if s.name in names]
    assert [(s.name, s.labels, s.value) for s in some.samples] == [(s.name, s.labels, s.value) for s in expected]
    assert len(expected) > 20
    assert len(whole.samples) > 10 * len(expected)
    assert prometheus_text.enabled_gates(some.samples) == prometheus_text.enabled_gates(whole.samples)
    # a name that only begins like a wanted one is not taken for it
    assert not prometheus_text.parse_text("kubernetes_feature_enabled_x 1\n", names=names).samples


def test_lines_of_other_families_are_passed_over_unread():
    text = 'wanted{a="1"} 2\nother{broken 3\n'
    assert [(s.name, s.value) for s in prometheus_text.parse_text(text, names=("wanted",)).samples] == [("wanted", 2)]
    with pytest.raises(prometheus_text.ParseError):
        prometheus_text.parse_text(text)
