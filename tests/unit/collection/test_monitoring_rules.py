"""roles/monitoring rendered by Ansible itself, checked and unit-tested with promtool.

promtool is a hard requirement (hack/install-test-deps installs Debian's prometheus
package): without it these tests fail instead of skipping.
"""
import json
import math
import os
import random
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.canary import canary
from ansible_collections.dra.admin.plugins.module_utils.claims import capacity
from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.metrics import rules as metrics_rules
from conftest import ROOT

ROLE = os.path.join(ROOT, "roles", "monitoring")
PROMTOOL_TESTS = os.path.join(ROOT, "tests", "monitoring")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def promtool(*args, cwd=None):
    path = shutil.which("promtool")
    assert path, "promtool is not on PATH: run hack/install-test-deps (Debian package prometheus)"
    return subprocess.run([path] + list(args), capture_output=True, text=True, cwd=cwd, check=False)


def render(tmp_path, delivery="files", **role_vars):
    """Run the role in files or manifests mode into tmp_path; return the output directory."""
    out = tmp_path / ("out-" + delivery)
    play = [{"hosts": "localhost", "gather_facts": False, "roles": [{
        "role": "dra.admin.monitoring",
        "vars": dict({"dra_monitoring_delivery": delivery, "dra_monitoring_rules_dir": str(out),
                      "dra_monitoring_manifests_dir": str(out)}, **role_vars)}]}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"))
    res = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e",
                          "ansible_python_interpreter=" + sys.executable, str(playbook)],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return render(tmp_path_factory.mktemp("monitoring"))


def rule_file(out):
    return out / "dra-admin.rules.yml"


def test_promtool_check_rules_accepts_the_rendered_rules(rendered):
    res = promtool("check", "rules", str(rule_file(rendered)))
    assert res.returncode == 0, res.stdout + res.stderr
    groups = yaml.safe_load(rule_file(rendered).read_text())["groups"]
    assert "SUCCESS: %d rules found" % sum(len(g["rules"]) for g in groups) in res.stdout
    assert [g["name"] for g in groups] == ["dra-admin.recording", "dra-admin.alerts"]


def test_promtool_unit_tests_pass(rendered, tmp_path):
    for name in os.listdir(PROMTOOL_TESTS):
        shutil.copy(os.path.join(PROMTOOL_TESTS, name), tmp_path / name)
    shutil.copy(rule_file(rendered), tmp_path / "dra-admin.rules.yml")
    res = promtool("test", "rules", *sorted(n for n in os.listdir(PROMTOOL_TESTS) if n.endswith("_test.yml")),
                   cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_every_alert_has_a_firing_and_a_silent_promtool_case(rendered):
    alerts = [r["alert"] for g in yaml.safe_load(rule_file(rendered).read_text())["groups"]
              for r in g["rules"] if "alert" in r]
    tests = yaml.safe_load(open(os.path.join(PROMTOOL_TESTS, "alerts_test.yml")))["tests"]
    fired, silent = set(), set()
    for case in tests:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else silent).add(check["alertname"])
    assert len(alerts) == 15
    assert set(alerts) == fired == silent


def test_promtool_cases_fail_when_a_threshold_moves(tmp_path):
    out = render(tmp_path, dra_monitoring_workqueue_depth_high=100)
    for name in os.listdir(PROMTOOL_TESTS):
        shutil.copy(os.path.join(PROMTOOL_TESTS, name), out / name)
    res = promtool("test", "rules", "alerts_test.yml", cwd=str(out))
    assert res.returncode != 0
    assert "DRAResourceClaimControllerNotPerforming" in res.stdout + res.stderr


def test_recording_rules_are_the_page_queries(rendered):
    groups = yaml.safe_load(rule_file(rendered).read_text())["groups"]
    recorded = dict((r["record"], r["expr"]) for r in groups[0]["rules"])
    assert recorded == dict((q["record"], q["expression"]) for q in diagnosis.QUERIES)


def test_device_taint_eviction_alert_is_the_metrics_module_one(rendered):
    alerts = dict((r["alert"], r) for g in yaml.safe_load(rule_file(rendered).read_text())["groups"]
                  for r in g["rules"] if "alert" in r)
    evictions = diagnosis.DEVICE_TAINT_EVICTIONS
    assert alerts[evictions["alert"]]["expr"] == evictions["expression"] + " > 0"
    assert "[%s]" % evictions["window"] in evictions["expression"]


def test_device_taint_eviction_alert_can_be_switched_off(tmp_path):
    out = render(tmp_path, dra_monitoring_device_taint_eviction_alert=False)
    alerts = [r["alert"] for g in yaml.safe_load(rule_file(out).read_text())["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) == 14 and diagnosis.DEVICE_TAINT_EVICTIONS["alert"] not in alerts


def test_role_thresholds_equal_the_advice_module_defaults():
    defaults = yaml.safe_load(open(os.path.join(ROLE, "defaults", "main.yml")))
    for key, value in diagnosis.DEFAULT_THRESHOLDS.items():
        assert float(defaults["dra_monitoring_" + key]) == value, key


def test_role_passes_every_threshold_by_its_role_variable():
    """vars/main.yml's dra_monitoring_thresholds: the advice module's names, each from dra_monitoring_<name>."""
    thresholds = yaml.safe_load(open(os.path.join(ROLE, "vars", "main.yml")))["dra_monitoring_thresholds"]
    assert thresholds == dict((key, "{{ dra_monitoring_%s }}" % key) for key in diagnosis.DEFAULT_THRESHOLDS)


def test_rendered_alerts_are_the_checks_with_the_role_thresholds(tmp_path):
    """Each check of diagnosis.CHECKS is exactly one alert of the rendered file, with the role's thresholds."""
    out = render(tmp_path, dra_monitoring_workqueue_depth_high=11, dra_monitoring_kubelet_unprepare_p99_high=2.5)
    alerts = dict((r["alert"], r["expr"]) for g in yaml.safe_load(rule_file(out).read_text())["groups"]
                  for r in g["rules"] if "alert" in r)
    limits = dict(diagnosis.DEFAULT_THRESHOLDS, workqueue_depth_high=11, kubelet_unprepare_p99_high=2.5)
    for check in diagnosis.CHECKS:
        (name,) = [a for a, expr in alerts.items() if expr == metrics_rules.check_expression(
            check, dict((k, ("%g" % v)) for k, v in limits.items()))]
        assert name == metrics_rules.ALERTS[check["id"]]["alert"]


def test_role_argument_specs_cover_every_default():
    defaults = yaml.safe_load(open(os.path.join(ROLE, "defaults", "main.yml")))
    spec = yaml.safe_load(open(os.path.join(ROLE, "meta", "argument_specs.yml")))
    options = spec["argument_specs"]["main"]["options"]
    assert set(options) == set(defaults)
    for name, value in defaults.items():
        assert options[name]["default"] == value, name
        assert options[name]["description"], name


def test_dashboard_has_one_panel_per_page_query_with_threshold(rendered):
    dashboard = json.loads((rendered / "dra-admin.json").read_text())
    panels = dashboard["panels"][:len(diagnosis.QUERIES)]
    assert [p["targets"][0]["expr"] for p in panels] == [q["expression"] for q in diagnosis.QUERIES]
    assert [p["title"] for p in panels] == [q["title"] for q in diagnosis.QUERIES]
    steps = dict((p["title"], p["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"]) for p in panels)
    assert steps["ResourceClaim workqueue depth"] == 10.0
    assert steps["Scheduler end-to-end scheduling duration (p99)"] == 5.0
    assert len(set(p["id"] for p in dashboard["panels"])) == len(dashboard["panels"])
    assert len(set((p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"])) == len(dashboard["panels"])


def test_dashboard_shows_the_capacity_health_yml_exports(rendered):
    """The panel after the page's reads the gauges of dra_capacity_info's metrics_text (playbooks/health.yml)."""
    panels = json.loads((rendered / "dra-admin.json").read_text())["panels"]
    panel = panels[len(diagnosis.QUERIES)]
    (target,) = panel["targets"]
    assert target["expr"] == 'max by (driver, pool) (%s{state="free"})' % capacity.METRIC_DEVICES
    assert target["legendFormat"] == "{{driver}}/{{pool}}"
    assert panel["gridPos"]["y"] >= max(p["gridPos"]["y"] for p in panels[:len(diagnosis.QUERIES)]) + 8


def test_dashboard_shows_the_canary_phases_with_the_slow_threshold(tmp_path):
    """The last two panels read the canary's metrics by the names dra_canary writes (canary.canary), the phase
    duration panel with the slow-phase alert's threshold as its line."""
    out = render(tmp_path, dra_monitoring_canary_phase_seconds_high=45)
    panels = json.loads((out / "dra-admin.json").read_text())["panels"]
    seconds, success = panels[-3:-1]
    assert seconds["targets"][0]["expr"] == "max by (driver, pool, phase) (%s)" % canary.METRIC_PHASE_SECONDS
    assert success["targets"][0]["expr"] == "min by (driver, pool, phase) (%s)" % canary.METRIC_SUCCESS
    assert seconds["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 45.0
    assert len(success["fieldConfig"]["defaults"]["thresholds"]["steps"]) == 1
    assert seconds["gridPos"]["y"] > panels[len(diagnosis.QUERIES)]["gridPos"]["y"]
    alerts = dict((r["alert"], r) for g in yaml.safe_load(rule_file(out).read_text())["groups"]
                  for r in g["rules"] if "alert" in r)
    assert alerts[metrics_rules.CANARY_SLOW]["expr"] == "max by (driver, pool, phase) (%s) > 45" % (
        canary.METRIC_PHASE_SECONDS)
    assert alerts[metrics_rules.CANARY_FAILED]["expr"] == "min by (driver, pool, phase) (%s) == 0" % (
        canary.METRIC_SUCCESS)
    assert "for" not in alerts[metrics_rules.CANARY_FAILED]
    assert len(set(p["id"] for p in panels)) == len(panels)
    assert len(set((p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels)) == len(panels)


def test_canary_alerts_can_be_switched_off(tmp_path):
    out = render(tmp_path, dra_monitoring_canary_alerts=False)
    alerts = [r["alert"] for g in yaml.safe_load(rule_file(out).read_text())["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) == 12 and not [a for a in alerts if a.startswith("DRACanary")]


@pytest.mark.parametrize("selector,expected", [
    ('job="kube-controller-manager"', 'sum(workqueue_depth{job="kube-controller-manager", name="resource_claim"})'),
    ("", 'sum(workqueue_depth{name="resource_claim"})'),
])
def test_depth_selector_is_configurable(tmp_path, selector, expected):
    out = render(tmp_path, dra_monitoring_workqueue_depth_selector=selector, dra_monitoring_rule_interval="30s",
                 dra_monitoring_alert_labels={"severity": "critical", "team": "platform"})
    groups = yaml.safe_load(rule_file(out).read_text())["groups"]
    recorded = dict((r["record"], r["expr"]) for r in groups[0]["rules"])
    assert recorded["dra:resource_claim_workqueue_depth:sum"] == expected
    assert all(g["interval"] == "30s" for g in groups)
    assert all(r["labels"] == {"severity": "critical", "team": "platform"} for r in groups[1]["rules"])
    assert expected in json.loads((out / "dra-admin.json").read_text())["panels"][1]["targets"][0]["expr"]
    res = promtool("check", "rules", str(rule_file(out)))
    assert res.returncode == 0, res.stdout + res.stderr


def test_manifests_are_a_prometheusrule_and_a_sidecar_configmap(tmp_path, rendered):
    out = render(tmp_path, delivery="manifests", dra_monitoring_rule_labels={"release": "kps"},
                 dra_monitoring_dashboard_annotations={"grafana_folder": "DRA"})
    rule = yaml.safe_load((out / "prometheusrule.yml").read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == "monitoring" and rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"] == yaml.safe_load(rule_file(rendered).read_text())
    cm = yaml.safe_load((out / "dashboard-configmap.yml").read_text())
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "DRA"}
    assert json.loads(cm["data"]["dra-admin.json"]) == json.loads((rendered / "dra-admin.json").read_text())


def test_rendering_twice_changes_nothing_and_keeps_no_backup(tmp_path):
    out = render(tmp_path)
    before = sorted(os.listdir(out))
    render(tmp_path)
    assert sorted(os.listdir(out)) == before == ["dra-admin.json", "dra-admin.rules.yml"]


def test_a_changed_threshold_rewrites_the_file_with_a_backup(tmp_path):
    out = render(tmp_path)
    render(tmp_path, dra_monitoring_scheduler_e2e_p99_high=3)
    names = os.listdir(out)
    backups = [n for n in names if n.startswith("dra-admin.rules.yml.")]
    assert len(backups) == 1
    assert "dra:scheduler_pod_scheduling_sli_duration_seconds:p99_5m >= 3" in rule_file(out).read_text()
    assert "dra:scheduler_pod_scheduling_sli_duration_seconds:p99_5m >= 5" in (out / backups[0]).read_text()


def _random_histogram(rng):
    choices = [-1, 0, 0.001, 0.005, 0.01, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60]
    bounds = sorted(set(rng.choice(choices) for _draw in range(rng.randint(1, 8))))
    counts, total = [], 0
    for _bound in bounds:
        total += rng.randint(0, 50)
        counts.append(total)
    if rng.random() < 0.2 and len(counts) > 1:  # a non-monotonic bucket, as after a partial scrape
        counts[0] = counts[-1] + 3
    counts.append(total + rng.randint(0, 20))
    return list(zip(bounds + [float("inf")], counts))


def test_histogram_quantile_agrees_with_promql(tmp_path):
    """diagnosis.histogram_quantile against Prometheus' own, on bucket gauges (no rate extrapolation)."""
    rng = random.Random(20240611)
    series, exprs, rules = [], [], []
    for index in range(40):
        buckets = _random_histogram(rng)
        quantile = rng.choice([0.0, 0.01, 0.5, 0.9, 0.99, 1.0])
        for bound, count in buckets:
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            series.append({"series": 'h_bucket{h="%d", le="%s"}' % (index, le), "values": "%sx2" % count})
        expected = diagnosis.histogram_quantile(quantile, buckets)
        rules.append({"record": "q%d" % index,
                      "expr": 'histogram_quantile(%r, h_bucket{h="%d"})' % (quantile, index)})
        exprs.append({"expr": "q%d" % index, "eval_time": "1m",
                      "exp_samples": [] if math.isnan(expected) else
                      [{"labels": 'q%d{h="%d"}' % (index, index), "value": expected}]})
    (tmp_path / "q.rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
    (tmp_path / "q_test.yml").write_text(yaml.safe_dump({
        "rule_files": ["q.rules.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": exprs}]}))
    res = promtool("test", "rules", "q_test.yml", cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
