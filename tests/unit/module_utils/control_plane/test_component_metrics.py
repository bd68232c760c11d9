"""A component's /metrics after a change (control_plane.component_metrics, module component_metrics_info), on the
kube-controller-manager and kube-scheduler v1.36.3 metrics recorded in fixtures/metrics."""
import functools
import gzip
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_metrics as cm
from ansible_collections.dra.admin.plugins.module_utils.control_plane import tuning
from ansible_collections.dra.admin.plugins.modules import component_metrics_info

import module_harness
from conftest import FIXTURES


def recorded(name="kube-scheduler-v1.36.3-after"):
    with gzip.open(os.path.join(FIXTURES, "metrics", name + ".txt.gz"), "rt") as handle:
        return handle.read()


STARTED = 1795303523.49  # process_start_time_seconds of the recorded processes


def test_recorded_start_time_and_gates():
    state = cm.component_state(recorded())
    assert state["start_time"] == pytest.approx(STARTED)
    assert state["feature_gates"]["DynamicResourceAllocation"] is True
    assert state["feature_gates"]["APIServingWithRoutine"] is False
    assert len(state["feature_gates"]) == 241
    assert state["new_process"] is None and state["ready"] is True and state["missing_gates"] == []


@pytest.mark.parametrize("started_after,new", [(STARTED - 30, True), (STARTED, True), (STARTED + 0.5, False)])
def test_a_new_process_is_one_started_at_or_after_the_note(started_after, new):
    state = cm.component_state(recorded(), started_after=started_after)
    assert state["new_process"] is new and state["ready"] is new


def test_wanted_gates_are_read_as_component_flags_returns_them():
    state = cm.component_state(recorded("kube-controller-manager-v1.36.3-after"),
                               {"DynamicResourceAllocation": "true", "APIServingWithRoutine": "true",
                                "DRANoSuchGate": False}, STARTED - 1)
    assert state["missing_gates"] == ["APIServingWithRoutine=true", "DRANoSuchGate=false"]
    assert state["new_process"] is True and state["ready"] is False
    with pytest.raises(ValueError, match="feature_gates.A='on': the value must be true or false"):
        cm.wanted_gates({"A": "on"})


class Endpoint:
    """One /metrics endpoint on 127.0.0.1 that answers with `status` and `body` (and /configz with `configz`);
    the Authorization header of each request is kept in `seen`."""

    def __init__(self, status, body, configz=None):
        outer = self
        self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                outer.seen.append((self.path, self.headers.get("Authorization")))
                answer = outer.configz if self.path == "/configz" else outer.body
                self.send_response(outer.status if answer is not None else 404)
                self.end_headers()
                self.wfile.write((answer or "").encode())

            def log_message(self, *args):
                pass

        self.status, self.body, self.configz = status, body, configz
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/metrics" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


run_module = functools.partial(module_harness.run_module, component_metrics_info)


def test_module_reads_the_endpoint_and_says_what_is_missing(capsys):
    endpoint = Endpoint(200, recorded())
    try:
        result = run_module(capsys, {"url": endpoint.url, "feature_gates": {"DRADeviceTaints": True},
                                     "started_after": STARTED})
        assert result["ready"] is True and result["status"] == 200 and result["api_requests"] == 1
        result = run_module(capsys, {"url": endpoint.url, "feature_gates": {"DRADeviceTaints": False}})
        assert result["ready"] is False and result["missing_gates"] == ["DRADeviceTaints=false"]
        assert result["changed"] is False and "failed" not in result
    finally:
        endpoint.close()


def test_module_does_not_fail_while_the_component_is_away(capsys):
    endpoint = Endpoint(503, "restarting")
    try:
        result = run_module(capsys, {"url": endpoint.url})
        assert result["ready"] is False and result["status"] == 503 and "503" in result["error"]
        assert "failed" not in result  # `until` keeps trying
    finally:
        endpoint.close()
    bad = run_module(capsys, {"url": endpoint.url, "feature_gates": {"A": "maybe"}})
    assert bad["failed"] and "feature_gates.A" in bad["msg"]


# kube-scheduler's /configz shape (KubeSchedulerConfiguration under its component name), with the QPS the tuning wrote.
CONFIGZ = '{"componentconfig":{"clientConnection":{"qps":75,"burst":150,"contentType":"application/json"}}}'


def test_module_sends_the_token_of_the_file_and_waits_for_configz(capsys, tmp_path):
    token = tmp_path / "reader.token"
    token.write_text("reader-token-value\n")
    token.chmod(0o600)
    endpoint = Endpoint(200, recorded(), CONFIGZ)
    patterns = tuning.tuning_requests(["kube-scheduler"], {}, {"qps": 75, "burst": 150},
                                      "/etc/kubernetes/sched.yaml")["kube-scheduler"]["configz"]
    try:
        result = run_module(capsys, {"url": endpoint.url, "token_file": str(token), "configz_expected": patterns,
                                     "started_after": STARTED})
        assert result["ready"] is True and result["configz_missing"] == [] and result["api_requests"] == 2
        assert endpoint.seen == [("/metrics", "Bearer reader-token-value"), ("/configz", "Bearer reader-token-value")]
        assert "reader-token-value" not in str(result)
        wanted = tuning.tuning_requests(["kube-scheduler"], {}, {"qps": 50, "burst": 150},
                                        "/etc/kubernetes/sched.yaml")["kube-scheduler"]["configz"]
        result = run_module(capsys, {"url": endpoint.url, "token_file": str(token), "configz_expected": wanted})
        assert result["ready"] is False and result["configz_missing"] == [wanted[0]] and "failed" not in result
        # The token as an option, as role component_restart passes it: sent, never returned.
        result = run_module(capsys, {"url": endpoint.url, "token": "option-token-value", "configz_expected": patterns})
        assert result["ready"] is True and endpoint.seen[-1] == ("/configz", "Bearer option-token-value")
        assert "option-token-value" not in str(result)
        both = run_module(capsys, {"url": endpoint.url, "token": "a-token-value", "token_file": str(token)})
        assert both["failed"] and "mutually exclusive" in both["msg"]
    finally:
        endpoint.close()


def test_configz_not_served_keeps_it_waiting_with_the_reason(capsys):
    endpoint = Endpoint(200, recorded())
    try:
        result = run_module(capsys, {"url": endpoint.url, "configz_expected": ["qps"]})
        assert result["ready"] is False and result["status"] == 404 and "/configz" in result["error"]
        assert result["configz_missing"] == ["qps"] and "failed" not in result
    finally:
        endpoint.close()


def test_a_missing_token_file_or_a_bad_pattern_fails_naming_the_option(capsys, tmp_path):
    bad = run_module(capsys, {"url": "https://127.0.0.1:1/metrics", "token_file": str(tmp_path / "none")})
    assert bad["failed"] and "token_file" in bad["msg"]
    (tmp_path / "empty").write_text("")
    bad = run_module(capsys, {"url": "https://127.0.0.1:1/metrics", "token_file": str(tmp_path / "empty")})
    assert bad["failed"] and "token_file" in bad["msg"] and "empty" in bad["msg"]
    bad = run_module(capsys, {"url": "https://127.0.0.1:1/metrics", "configz_expected": ["(unclosed"]})
    assert bad["failed"] and "configz_expected" in bad["msg"]


def test_configz_url_keeps_the_host_and_port():
    assert cm.configz_url("https://[fd00::5]:10259/metrics") == "https://[fd00::5]:10259/configz"
