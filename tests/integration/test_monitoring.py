"""Monitoring against the real local cluster: the role's rules loaded by Debian's Prometheus
scraping kube-controller-manager and kube-scheduler, and dra_metrics_advice telling a
throttled ResourceClaim controller (QPS 2 / burst 3) from a tuned one (75 / 150) under the
same burst of pods with claims. The role's Kubernetes delivery goes to a PrometheusRule CRD.

No fixed sleeps and no machine-speed thresholds: the burst is over when kube-controller-manager's
own counters say so, Prometheus has it when its samples reach those counters, and "throttled"
is read from the controller's client rate limiter, not from how fast this machine happens to be."""
import json
import os
import re
import shutil
import sys
import tempfile

import pytest
import yaml

from components import ControllerManager
from dra_objects import claim_template, pod
from prometheus_server import PrometheusServer, render_rules as render_role_rules

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import kube  # noqa: E402  pylint: disable=wrong-import-position
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.metrics.rules import (  # noqa: E402
    canary_queries, dashboard_queries, device_map_queries,
)

BURST_PODS = 30


def pki(cluster):
    return os.path.join(cluster.state_dir, "kwok", "clusters", cluster.name, "pki")


def control_plane_scrapes(cluster):
    """Scrape configs for the KWOK cluster's kube-controller-manager and kube-scheduler (host processes)."""
    keys = pki(cluster)
    tls = {"insecure_skip_verify": True, "cert_file": os.path.join(keys, "admin.crt"),
           "key_file": os.path.join(keys, "admin.key")}
    return [{"job_name": name, "scheme": "https", "tls_config": tls,
             "static_configs": [{"targets": ["127.0.0.1:%d" % (cluster.port + offset)], "labels": {"endpoint": name}}]}
            for name, offset in (("kube-controller-manager", 1), ("kube-scheduler", 2))]


def render_rules(cluster, rules_dir):
    render_role_rules(cluster.run_playbook, rules_dir)


def claim_burst(cluster, namespace):
    api = cluster.resource_version
    # The namespace was made before kube-controller-manager restarted with the phase's QPS.
    cluster.wait_for_default_service_account(namespace)
    cluster.apply([claim_template(api, namespace, "one-gpu")]
                  + [pod(namespace, "burst-%02d" % i, template="one-gpu") for i in range(BURST_PODS)])

    def all_claims_created():
        claims = cluster.get_json("resourceclaims.%s.resource.k8s.io" % api, "-n", namespace)["items"]
        return len(claims) == BURST_PODS
    cluster.wait_until(all_claims_created, 300, "%d generated claims" % BURST_PODS, interval=2)


def pods_settled(cluster, namespace):
    """Every pod of the burst Running, or found unschedulable (3 nodes x 8 devices < 30 pods)."""
    def settled(p):
        if p["status"].get("phase") == "Running":
            return True
        return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
                   for c in p["status"].get("conditions") or [])
    pods = cluster.get_json("pods", "-n", namespace)["items"]
    return len(pods) == BURST_PODS and all(settled(p) for p in pods)


KCM_SERIES = {"adds": "workqueue_adds_total", "depth": "workqueue_depth",
              "done": "workqueue_work_duration_seconds_count"}


def kcm_counters(client, cluster):
    """kube-controller-manager's resource_claim workqueue and client rate limiter, from its own /metrics."""
    text = client.text("https://127.0.0.1:%d/metrics" % (cluster.port + 1))
    values = dict.fromkeys(list(KCM_SERIES) + ["limiter_wait", "limiter_requests"], 0.0)
    for name, labels, value in re.findall(r"^(\w+)\{([^}]*)\} (\S+)$", text, re.M):
        for key, series in KCM_SERIES.items():
            if name == series and 'name="resource_claim"' in labels:
                values[key] += float(value)
        if name == "rest_client_rate_limiter_duration_seconds_sum":
            values["limiter_wait"] += float(value)
        elif name == "rest_client_rate_limiter_duration_seconds_count":
            values["limiter_requests"] += float(value)
    return values


def wait_burst_over(cluster, client, namespace):
    """The counters once the burst is over: pods settled, the queue empty and nothing added or done between
    two reads one scrape interval apart."""
    previous = {}

    def over():
        if not pods_settled(cluster, namespace):
            return None
        now = kcm_counters(client, cluster)
        quiet = (now["depth"] == 0 and previous
                 and (now["adds"], now["done"]) == (previous["adds"], previous["done"]))
        previous.update(now)
        return now if quiet else None
    return cluster.wait_until(over, 300, "the burst to be over in kube-controller-manager", interval=2)


def advice(cluster, prometheus, qps, burst, thresholds=None):
    args = {"prometheus_url": prometheus.url, "checks": ["controller", "scheduler"],
            "current_qps": qps, "current_burst": burst}
    if thresholds:
        args["thresholds"] = thresholds
    return cluster.run_module("dra.admin.dra_metrics_advice", args)


@pytest.fixture
def workdir():
    path = tempfile.mkdtemp(prefix="dra-monitoring-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_phase(cluster, namespace, workdir, kcm, qps, burst, thresholds=None):
    """(advice, recorded p99, kube-controller-manager's counters before and after the burst)."""
    kcm.start(qps, burst)
    client = kube.Api(cluster.kubeconfig)
    rules_dir = os.path.join(workdir, "rules-%s" % qps)
    os.makedirs(rules_dir)
    render_rules(cluster, rules_dir)
    prometheus = PrometheusServer(control_plane_scrapes(cluster), rules_dir, workdir, cluster.wait_until)
    try:
        groups = [g["name"] for g in prometheus.api("/api/v1/rules")["groups"]]
        assert sorted(groups) == ["dra-admin.alerts", "dra-admin.recording"]
        # Two scrapes of the fresh kube-controller-manager before the burst, so rate() sees all of it.
        cluster.wait_until(lambda: (prometheus.value(
            'count_over_time(workqueue_adds_total{name="resource_claim"}[1m])') or 0) >= 2,
            60, "two scrapes of kube-controller-manager")
        before = kcm_counters(client, cluster)
        claim_burst(cluster, namespace)
        after = wait_burst_over(cluster, client, namespace)
        # Prometheus has the whole burst once a sample reaches the controller's final count ...
        cluster.wait_until(lambda: (prometheus.value(
            'sum(workqueue_work_duration_seconds_count{name="resource_claim"})') or -1) >= after["done"],
            60, "a scrape of kube-controller-manager after the burst (%d syncs)" % after["done"])
        # ... and the recording rules have been evaluated after that sample could be read. A sample carries
        # the time its scrape began, and a rule evaluation stamped later may still have run before the scrape
        # was stored; Prometheus' clock at the moment the sample was read is past both.
        readable_at = prometheus.value("vector(time())")
        cluster.wait_until(lambda: (prometheus.value(
            "timestamp(dra:resource_claim_workqueue_work_duration_seconds:p99_5m)") or 0) > readable_at,
            60, "the recording rules evaluated after the last scrape of the burst was stored")
        assert prometheus.value("dra:resource_claim_workqueue_adds:rate5m") > 0
        return (advice(cluster, prometheus, qps, burst, thresholds),
                prometheus.value("dra:resource_claim_workqueue_work_duration_seconds:p99_5m"), before, after)
    finally:
        prometheus.stop()


def limiter_wait_per_request(before, after):
    """Mean time kube-controller-manager's requests waited for its client rate limiter during the burst."""
    requests = after["limiter_requests"] - before["limiter_requests"]
    assert requests > 0, (before, after)
    return (after["limiter_wait"] - before["limiter_wait"]) / requests


def test_throttled_controller_gets_qps_advice_and_tuned_one_does_not(cluster, workdir):
    kcm = ControllerManager(cluster, workdir)
    namespaces = ["it-monitoring-throttled", "it-monitoring-tuned"]
    waits = {}
    try:
        cluster.kubectl("create", "namespace", namespaces[0])
        throttled, p99_throttled, before, after = run_phase(cluster, namespaces[0], workdir, kcm, 2, 3)
        waits["throttled"] = limiter_wait_per_request(before, after)
        cluster.kubectl("delete", "namespace", namespaces[0], "--wait=true", "--timeout=180s")
        cluster.kubectl("create", "namespace", namespaces[1])
        # This machine's speed is no yardstick (on a busy one every controller is slow, tuned or not): the
        # tuned controller is judged against what the throttled one showed here minutes before.
        tuned, p99_tuned, before, after = run_phase(cluster, namespaces[1], workdir, kcm, 75, 150,
                                                    {"workqueue_work_duration_p99_high": p99_throttled})
        waits["tuned"] = limiter_wait_per_request(before, after)
    finally:
        for name in namespaces:
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
        kcm.restore()
    print("\np99 throttled %.3f s, tuned %.3f s; rate-limiter wait per request: %s" % (p99_throttled, p99_tuned, waits))

    # The throttled controller really was held back by its client rate limit (QPS 2: a token each 0.5 s),
    # and the tuned one was not.
    assert waits["throttled"] >= 0.1, waits
    assert waits["tuned"] < waits["throttled"] / 10, waits

    # Throttled, with the module's default thresholds: a busy machine only makes it slower.
    found = dict((f["id"], f) for f in throttled["findings"])
    assert "resource-claim-controller-not-performing" in found, json.dumps(throttled, indent=1)[:3000]
    finding = found["resource-claim-controller-not-performing"]
    assert "raise kube-controller-manager --kube-api-qps from 2 to 75 and --kube-api-burst from 3 to 150" \
        in finding["advice"]
    assert finding["evidence"]["workqueue_work_duration_p99"] >= finding["evidence"][
        "workqueue_work_duration_p99_high"] == 1.0
    assert throttled["healthy"] is False

    # Tuned: measured, faster than the throttled run, and no advice to raise the rate limits.
    assert tuned["measurements"]["workqueue_work_duration_p99"]["state"] == "ok", json.dumps(tuned, indent=1)[:3000]
    assert tuned["measurements"]["workqueue_add_rate"]["value"] > 0
    assert p99_tuned < p99_throttled
    ids = [f["id"] for f in tuned["findings"]]
    assert "resource-claim-controller-not-performing" not in ids, json.dumps(tuned, indent=1)[:3000]
    assert "resource-claim-controller-concurrency-insufficient" not in ids


PROMETHEUS_RULE_CRD = {
    # A minimal stand-in for prometheus-operator's CRD: same group, kind and scope.
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"plural": "prometheusrules", "singular": "prometheusrule", "kind": "PrometheusRule",
                       "listKind": "PrometheusRuleList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def expected_dashboard_titles():
    """The dashboard's panel titles in order: the page's queries, device capacity, the canary's panels, then the
    device map's."""
    return ([q["title"] for q in dashboard_queries()] + ["Free DRA devices per pool"]
            + [q["title"] for q in canary_queries()] + [q["title"] for q in device_map_queries()])


def test_role_delivers_prometheusrule_and_dashboard_configmap(cluster, namespace, workdir):
    play_vars = {"dra_monitoring_namespace": namespace, "dra_monitoring_rule_labels": {"release": "kps"}}
    play = [{"hosts": "localhost", "gather_facts": False,
             "roles": [{"role": "dra.admin.monitoring", "vars": play_vars}]}]
    path = os.path.join(workdir, "deliver.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(play, handle)

    # Without the CRD, auto falls back to files; asking for kubernetes fails with the way out.
    res = cluster.run_playbook(path, "-e", json.dumps({"dra_monitoring_delivery": "kubernetes"}))
    assert res.returncode != 0 and "does not serve the CRD" in res.stdout
    cluster.apply(PROMETHEUS_RULE_CRD)
    cluster.wait_until(lambda: cluster.kubectl("get", "prometheusrules", "-n", namespace, check=False).returncode == 0,
                       60, "PrometheusRule CRD served")
    try:
        res = cluster.run_playbook(path, "--check")
        assert res.returncode == 0, res.stdout[-3000:]
        assert cluster.get_json("prometheusrules", "-n", namespace)["items"] == []
        res = cluster.run_playbook(path)
        assert res.returncode == 0, res.stdout[-3000:]
        assert "changed=2" in res.stdout
        rule = cluster.get_json("prometheusrule", "-n", namespace, "dra-admin")
        assert rule["metadata"]["labels"]["release"] == "kps"
        assert [g["name"] for g in rule["spec"]["groups"]] == ["dra-admin.recording", "dra-admin.alerts"]
        cm = cluster.get_json("configmap", "-n", namespace, "dra-admin-dashboard")
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        panels = json.loads(cm["data"]["dra-admin.json"])["panels"]
        assert [p["title"] for p in panels] == expected_dashboard_titles()
        assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
        res = cluster.run_playbook(path)
        assert res.returncode == 0 and "changed=0" in res.stdout, res.stdout[-3000:]
    finally:
        cluster.kubectl("delete", "crd", "prometheusrules.monitoring.coreos.com", "--wait=false", check=False)
