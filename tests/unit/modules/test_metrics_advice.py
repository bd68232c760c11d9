"""dra_metrics_advice: recorded /metrics of the real local cluster's components, a local
HTTP server standing in for Prometheus' API, and the module run by ansible itself."""
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from ansible_collections.dra.admin.plugins.module_utils.metrics import diagnosis
from ansible_collections.dra.admin.plugins.module_utils.kube import prometheus_text
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER
from ansible_collections.dra.admin.plugins.module_utils.metrics import prometheus_service
from ansible_collections.dra.admin.plugins.module_utils.access.http import Http
from conftest import FIXTURES as ALL_FIXTURES, ROOT, UNIT

HERE = UNIT
FIXTURES = os.path.join(ALL_FIXTURES, "metrics")


def recorded(name):
    with gzip.open(os.path.join(FIXTURES, name + ".txt.gz"), "rt") as handle:
        return handle.read()


# ---------------------------------------------------------------------------
# A local HTTP server: /metrics endpoints and a Prometheus API double
# ---------------------------------------------------------------------------

class Server(object):
    """Serves routes[path] -> list of (status, body); each GET pops the next answer (the last repeats)."""

    def __init__(self):
        self.routes = {}
        self.seen = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                url = urlparse(self.path)
                server.seen.append((url.path, parse_qs(url.query), dict(self.headers)))
                answers = server.routes.get(url.path)
                if callable(answers):
                    status, body = answers(parse_qs(url.query))
                elif answers:
                    status, body = answers.pop(0) if len(answers) > 1 else answers[0]
                else:
                    status, body = 404, "not found"
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def closed_port_url():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return "http://127.0.0.1:%d" % port


def params(**kw):
    base = dict(prometheus_url=None, bearer_token=None, headers={}, validate_certs=True, ca_path=None, scrape=None,
                interval=0, timeout=5, checks=list(diagnosis.GROUPS), thresholds={}, current_qps=None,
                current_burst=None, workqueue_depth_selector='endpoint="kube-controller-manager"')
    base.update(kw)
    return base


def prometheus_double(values, names=None, counts=None):
    """A Prometheus API answering instant queries from `values` {expression: number | None}."""
    names = set(names if names is not None else [diagnosis.series_name(q) for q in diagnosis.QUERIES])
    counts = counts or {}

    def query(qs):
        expr = qs["query"][0]
        if expr.startswith("count("):
            n = counts.get(expr[len("count("):-1], 1)
            result = [{"metric": {}, "value": [1, str(n)]}] if n else []
        elif expr == "bad":
            return 400, json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})
        else:
            if expr not in values:
                return 400, json.dumps({"status": "error", "errorType": "bad_data",
                                        "error": "unexpected query %s" % expr})
            value = values[expr]
            result = [] if value is None else [{"metric": {}, "value": [1, value if isinstance(value, str)
                                                                        else repr(float(value))]}]
        return 200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})

    routes = {"/api/v1/label/__name__/values": [(200, json.dumps({"status": "success", "data": sorted(names)}))],
              "/api/v1/query": query}
    return routes


def page_values(**by_id):
    values = {"workqueue_add_rate": 2.0, "workqueue_depth": 0.0, "workqueue_work_duration_p99": 0.05,
              "scheduler_e2e_p99": 0.2, "scheduler_algorithm_p99": 0.01, "kubelet_prepare_p99": 0.1,
              "kubelet_unprepare_p99": 0.1, "plugin_prepare_p99": 0.05, "plugin_unprepare_p99": 0.05}
    values.update(by_id)
    return dict((diagnosis.QUERY_BY_ID[k]["expression"], v) for k, v in values.items())


def run(p):
    http = Http(p["timeout"])
    return prometheus_service.advise(p, http, sleep=lambda s: None), http


# ---------------------------------------------------------------------------
# Recorded metrics from the local cluster (kube-controller-manager and kube-scheduler v1.36.3,
# scraped before and 20s after creating six pods with a ResourceClaimTemplate)
# ---------------------------------------------------------------------------

def test_recorded_component_metrics_parse():
    for name in ("kube-controller-manager-v1.36.3-before", "kube-controller-manager-v1.36.3-after",
                 "kube-scheduler-v1.36.3-before", "kube-scheduler-v1.36.3-after"):
        scrape = prometheus_text.parse_text(recorded(name))
        assert len(scrape.samples) > 500
    kcm = prometheus_text.parse_text(recorded("kube-controller-manager-v1.36.3-after"))
    assert kcm.types["workqueue_work_duration_seconds"] == "histogram"
    assert kcm.types["workqueue_adds_total"] == "counter"
    adds = prometheus_text.select(kcm.samples, "workqueue_adds_total", [("name", "=", "resource_claim")])
    assert [s.value for s in adds] == [12.0]


def _recorded_rounds():
    def tag(text, component):
        samples = prometheus_text.parse_text(text).samples
        for s in samples:
            s.labels["endpoint"] = component
        return samples
    first = tag(recorded("kube-controller-manager-v1.36.3-before"), KUBE_CONTROLLER_MANAGER) + \
        tag(recorded("kube-scheduler-v1.36.3-before"), KUBE_SCHEDULER)
    second = tag(recorded("kube-controller-manager-v1.36.3-after"), KUBE_CONTROLLER_MANAGER) + \
        tag(recorded("kube-scheduler-v1.36.3-after"), KUBE_SCHEDULER)
    return first, second


def test_recorded_cluster_measurements():
    first, second = _recorded_rounds()
    q = diagnosis.QUERY_BY_ID
    assert diagnosis.measure_scrapes(q["workqueue_add_rate"], first, second, 20)["value"] == pytest.approx(12 / 20)
    assert diagnosis.measure_scrapes(q["workqueue_depth"], first, second, 20)["value"] == 0
    work = diagnosis.measure_scrapes(q["workqueue_work_duration_p99"], first, second, 20)
    # 12 syncs took 0.235s in total: the p99 is below the slowest possible bucket bound of 1s.
    assert work["state"] == "ok" and 0 < work["value"] < 1
    algo = diagnosis.measure_scrapes(q["scheduler_algorithm_p99"], first, second, 20)
    assert algo["state"] == "ok" and algo["value"] > 0
    # No pod could be scheduled (the recording had no ResourceSlices): the SLI histogram does not exist yet.
    e2e = diagnosis.measure_scrapes(q["scheduler_e2e_p99"], first, second, 20)
    assert e2e["state"] == "missing-metric" and "first pod is scheduled" in e2e["detail"]


def test_recorded_cluster_diagnosis_is_not_healthy_while_a_metric_is_missing():
    first, second = _recorded_rounds()
    measured = dict((q["id"], diagnosis.measure_scrapes(q, first, second, 20)) for q in diagnosis.QUERIES
                    if q["group"] in ("controller", "scheduler"))
    findings = diagnosis.diagnose(measured, groups=("controller", "scheduler"))
    assert [f["id"] for f in findings] == ["missing-metric-scheduler_e2e_p99"]


def test_recorded_cluster_with_a_slow_controller_threshold_fires_rule_a():
    first, second = _recorded_rounds()
    measured = dict((q["id"], diagnosis.measure_scrapes(q, first, second, 20)) for q in diagnosis.QUERIES
                    if q["group"] == "controller")
    findings = diagnosis.diagnose(measured, {"workqueue_work_duration_p99_high": 0.001}, 2, 3, groups=("controller",))
    assert [f["id"] for f in findings] == ["resource-claim-controller-not-performing"]
    assert "--kube-api-qps from 2 to 75 and --kube-api-burst from 3 to 150" in findings[0]["advice"]


# ---------------------------------------------------------------------------
# Scrape mode over HTTP
# ---------------------------------------------------------------------------

def test_scrape_mode_reads_each_endpoint_twice_with_its_token(server):
    server.routes["/kcm/metrics"] = [(200, recorded("kube-controller-manager-v1.36.3-before")),
                                     (200, recorded("kube-controller-manager-v1.36.3-after"))]
    server.routes["/sched/metrics"] = [(200, recorded("kube-scheduler-v1.36.3-before")),
                                       (200, recorded("kube-scheduler-v1.36.3-after"))]
    p = params(checks=["controller", "scheduler"], interval=0, scrape=[
        dict(url=server.url + "/kcm/metrics", component="kube-controller-manager", bearer_token="s3cret"),
        dict(url=server.url + "/sched/metrics", component="kube-scheduler")])
    result, http = run(p)
    assert http.requests == 4
    assert [h.get("Authorization") for path, _q, h in server.seen if path == "/kcm/metrics"] == ["Bearer s3cret"] * 2
    assert result["source"] == "scrape"
    assert result["measurements"]["workqueue_add_rate"]["state"] == "ok"
    assert result["measurements"]["workqueue_add_rate"]["value"] > 0
    assert [f["id"] for f in result["findings"]] == ["missing-metric-scheduler_e2e_p99"]
    assert result["healthy"] is False


def test_scrape_mode_unreachable_endpoint_is_reported_per_component(server):
    server.routes["/kcm/metrics"] = [(200, recorded("kube-controller-manager-v1.36.3-after"))]
    p = params(checks=["controller", "scheduler"], scrape=[
        dict(url=server.url + "/kcm/metrics", component="kube-controller-manager"),
        dict(url=closed_port_url() + "/metrics", component="kube-scheduler")])
    result, _http = run(p)
    kinds = dict((f["id"], f["kind"]) for f in result["findings"])
    assert kinds == {"unreachable-scheduler_e2e_p99": "unreachable", "unreachable-scheduler_algorithm_p99": "unreachable",
                     "no-data-workqueue_work_duration_p99": "no-data"}
    assert "Connection refused" in result["measurements"]["scheduler_e2e_p99"]["detail"]
    # The same text twice: no adds in between is a measured 0, not missing data.
    add_rate = result["measurements"]["workqueue_add_rate"]
    assert (add_rate["state"], add_rate["value"], add_rate["component"]) == ("ok", 0.0, "kube-controller-manager")
    assert add_rate["query"] == diagnosis.QUERY_BY_ID["workqueue_add_rate"]["expression"]
    assert result["healthy"] is False


def test_scrape_mode_not_metrics_text_is_an_error_not_health(server):
    server.routes["/kcm/metrics"] = [(200, "<html>login</html>")]
    result, _http = run(params(checks=["controller"], scrape=[
        dict(url=server.url + "/kcm/metrics", component="kube-controller-manager")]))
    assert set(f["kind"] for f in result["findings"]) == {"unreachable"}
    assert "expected a metric name" in result["findings"][0]["evidence"]["detail"]
    assert not result["healthy"]


def test_scrape_mode_without_an_endpoint_for_a_needed_component(server):
    server.routes["/kcm/metrics"] = [(200, recorded("kube-controller-manager-v1.36.3-before")),
                                     (200, recorded("kube-controller-manager-v1.36.3-after"))]
    result, _http = run(params(scrape=[dict(url=server.url + "/kcm/metrics", component="kube-controller-manager")]))
    missing = [f for f in result["findings"] if f["kind"] == "missing-metric"]
    assert len(missing) == 6  # scheduler 2, kubelet 2, plugin 2
    assert "no kubelet endpoint was given" in [f for f in missing if "kubelet_prepare" in f["id"]][0]["evidence"]["detail"]


# ---------------------------------------------------------------------------
# Prometheus mode
# ---------------------------------------------------------------------------

def test_prometheus_healthy_when_every_metric_has_data(server):
    server.routes.update(prometheus_double(page_values()))
    result, http = run(params(prometheus_url=server.url + "/", bearer_token="tok", headers={"X-Scope-OrgID": "a"}))
    assert result["findings"] == [] and result["healthy"] is True
    assert http.requests == 1 + len(diagnosis.QUERIES)
    for _path, _query, headers in server.seen:
        lowered = dict((k.lower(), v) for k, v in headers.items())
        assert lowered["authorization"] == "Bearer tok" and lowered["x-scope-orgid"] == "a"
    assert result["measurements"]["workqueue_depth"]["query"] == \
        'sum(workqueue_depth{endpoint="kube-controller-manager", name="resource_claim"})'


def test_prometheus_rule_a_with_numbers(server):
    server.routes.update(prometheus_double(page_values(workqueue_work_duration_p99=7.5, workqueue_depth=60,
                                                       workqueue_add_rate=0.5)))
    result, _http = run(params(prometheus_url=server.url, current_qps=2, current_burst=3))
    assert [f["id"] for f in result["findings"]] == ["resource-claim-controller-not-performing"]
    finding = result["findings"][0]
    assert finding["evidence"]["workqueue_work_duration_p99"] == 7.5 and finding["evidence"]["window"] == "5m"
    assert finding["advice"].startswith(
        "raise kube-controller-manager --kube-api-qps from 2 to 75 and --kube-api-burst from 3 to 150")
    assert finding["role"] == "dra.admin.control_plane_tuning"
    assert result["healthy"] is False


def test_prometheus_rule_b(server):
    server.routes.update(prometheus_double(page_values(workqueue_add_rate=35, workqueue_depth=70)))
    result, _http = run(params(prometheus_url=server.url))
    assert [f["id"] for f in result["findings"]] == ["resource-claim-controller-concurrency-insufficient"]


def test_prometheus_scheduler_checks(server):
    server.routes.update(prometheus_double(page_values(scheduler_e2e_p99=8)))
    result, _http = run(params(prometheus_url=server.url))
    assert [f["id"] for f in result["findings"]] == ["scheduler-binding-slow"]
    assert result["findings"][0]["evidence"]["scheduler_e2e_p99"] == 8.0


def test_prometheus_custom_depth_selector(server):
    values = page_values()
    values['sum(workqueue_depth{job="kcm", name="resource_claim"})'] = 0
    server.routes.update(prometheus_double(values))
    result, _http = run(params(prometheus_url=server.url, workqueue_depth_selector='job="kcm"'))
    assert result["healthy"] is True
    sent = [query["query"][0] for _path, query, _headers in server.seen if "query" in query]
    assert 'sum(workqueue_depth{job="kcm", name="resource_claim"})' in sent


def test_prometheus_unreachable_is_never_healthy():
    result, http = run(params(prometheus_url=closed_port_url()))
    assert http.requests == 1
    assert result["healthy"] is False
    assert len(result["findings"]) == len(diagnosis.QUERIES)
    assert set(f["kind"] for f in result["findings"]) == {"unreachable"}
    assert all(f["severity"] == "unknown" for f in result["findings"])


def test_prometheus_not_an_api(server):
    server.routes["/api/v1/label/__name__/values"] = [(200, "<html>grafana</html>")]
    result, _http = run(params(prometheus_url=server.url, checks=["controller"]))
    assert set(f["kind"] for f in result["findings"]) == {"unreachable"}
    assert "is %s a Prometheus HTTP API" % server.url in result["findings"][0]["evidence"]["detail"]


def test_prometheus_no_data_yet_and_nan(server):
    values = page_values(workqueue_work_duration_p99="NaN", scheduler_e2e_p99=None)
    server.routes.update(prometheus_double(values))
    result, _http = run(params(prometheus_url=server.url))
    assert sorted(f["id"] for f in result["findings"]) == ["no-data-scheduler_e2e_p99",
                                                           "no-data-workqueue_work_duration_p99"]
    assert result["measurements"]["workqueue_work_duration_p99"]["value"] is None
    assert result["healthy"] is False


def test_prometheus_missing_metric_with_older_name(server):
    names = [diagnosis.series_name(q) for q in diagnosis.QUERIES if q["id"] != "scheduler_e2e_p99"]
    names.append("scheduler_pod_scheduling_duration_seconds_bucket")
    server.routes.update(prometheus_double(page_values(scheduler_e2e_p99=None), names=names))
    result, _http = run(params(prometheus_url=server.url))
    assert [f["id"] for f in result["findings"]] == ["missing-metric-scheduler_e2e_p99"]
    assert "scheduler_pod_scheduling_duration_seconds is" in result["findings"][0]["evidence"]["detail"]
    assert "older name" in result["findings"][0]["evidence"]["detail"]


def test_prometheus_metric_stored_but_not_for_the_selected_target(server):
    selector = 'workqueue_depth{endpoint="kube-controller-manager", name="resource_claim"}'
    server.routes.update(prometheus_double(page_values(workqueue_depth=None), counts={selector: 0}))
    result, _http = run(params(prometheus_url=server.url, checks=["controller"]))
    assert [f["id"] for f in result["findings"]] == ["missing-metric-workqueue_depth"]
    assert selector in result["findings"][0]["evidence"]["detail"]


def test_prometheus_rejected_query(server):
    server.routes.update(prometheus_double({}))
    result, _http = run(params(prometheus_url=server.url, checks=["scheduler"]))
    assert set(f["kind"] for f in result["findings"]) == {"query-error"}
    assert "bad_data" in result["findings"][0]["evidence"]["detail"]


# ---------------------------------------------------------------------------
# The module run by ansible
# ---------------------------------------------------------------------------

def ansible_module(args, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=" + sys.executable, "-m", "dra.admin.dra_metrics_advice",
           ] + (["-a", json.dumps(args)] if args else []) + (["--check"] if check else [])
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    out = json.loads(res.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_module_through_ansible(server):
    server.routes.update(prometheus_double(page_values(workqueue_work_duration_p99=3.0)))
    result = ansible_module({"prometheus_url": server.url, "current_qps": 20, "current_burst": 30,
                             "thresholds": {"scheduler_e2e_p99_high": "0.1"}}, check=True)
    assert not result.get("failed") and result["changed"] is False
    assert sorted(f["id"] for f in result["findings"]) == ["resource-claim-controller-not-performing",
                                                           "scheduler-binding-slow"]
    assert "from 20 to 75" in result["findings"][0]["advice"]
    assert result["thresholds"]["scheduler_e2e_p99_high"] == 0.1 and result["healthy"] is False
    assert result["api_requests"] == 1 + len(diagnosis.QUERIES) and "requests" not in result


def test_module_rejects_bad_input():
    result = ansible_module({"prometheus_url": "http://x", "thresholds": {"depth": 1}})
    assert result["failed"] and "unknown threshold(s) depth" in result["msg"]
    result = ansible_module({"prometheus_url": "http://x", "scrape": [{"url": "http://y", "component": "kubelet"}]})
    assert result["failed"] and "mutually exclusive" in result["msg"]
    result = ansible_module({})
    assert result["failed"] and "one of the following is required" in result["msg"]
