"""A component's /metrics after a change (control_plane.component_metrics, module component_metrics_info), on the
kube-controller-manager and kube-scheduler v1.36.3 metrics recorded in fixtures/metrics."""
import functools
import gzip
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.dra.admin.plugins.module_utils.control_plane import component_metrics as cm
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
    """One /metrics endpoint on 127.0.0.1 that answers with `status` and `body`."""

    def __init__(self, status, body):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                self.send_response(outer.status)
                self.end_headers()
                self.wfile.write(outer.body.encode())

            def log_message(self, *args):
                pass

        self.status, self.body = status, body
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
