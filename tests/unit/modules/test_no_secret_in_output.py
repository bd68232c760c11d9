"""No secret in a result, a message or the -vvv output: each module that takes credentials is run by
ansible-playbook, as a job template runs it (the secrets in variables, the task's arguments templated from them), with
marker secrets (a bearer token, a header, a password in the URL) against an endpoint that answers and one that
refuses, and every byte ansible prints is searched for them. The markers are short, so that no truncated display
could hide one."""
import os
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from conftest import ROOT

TOKEN, HEADER, PASSWORD = "Tk5c1e", "Hd77ab", "Pw9f03"


class _Prometheus(BaseHTTPRequestHandler):
    """Answers every GET as Prometheus does when it knows no series (and as an empty /metrics page)."""

    def do_GET(self):  # noqa: N802 (the handler's name is http.server's)
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        if self.path.endswith("/metrics"):
            body = b"# no samples\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def answering():
    server = HTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def refusing():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return "127.0.0.1:%d" % port


def with_password(host, path=""):
    return "http://reader:%s@%s%s" % (PASSWORD, host, path)


def run_verbose(module, args, tmp_path, callback):
    """ansible-playbook -vvv running module with args given as a variable, its results written by `callback` (json:
    whole, as an AWX job event keeps them); everything it printed."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "the module", module: "{{ secret_args }}"}]}]))
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps({"secret_args": args, "ansible_python_interpreter": sys.executable}))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"), ANSIBLE_STDOUT_CALLBACK=callback)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "@%s" % variables, str(playbook), "-vvv"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False, timeout=300)
    return res.stdout + res.stderr


CASES = {
    "dra.admin.dra_dcgm_health_info": lambda host: {
        "prometheus_url": with_password(host), "bearer_token": TOKEN, "headers": {"X-Scope-OrgID": HEADER},
        "timeout": 5},
    "dra.admin.dra_metrics_advice": lambda host: {
        "prometheus_url": with_password(host), "bearer_token": TOKEN, "headers": {"X-Scope-OrgID": HEADER},
        "timeout": 5},
    "dra.admin.dra_metrics_advice scrape": lambda host: {
        "scrape": [{"url": with_password(host, "/metrics"), "component": "kube-scheduler", "bearer_token": TOKEN}],
        "interval": 0, "timeout": 5},
    "dra.admin.component_metrics_info": lambda host: {"url": with_password(host, "/metrics"), "timeout": 5},
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["answering", "refusing"])
@pytest.mark.parametrize("callback", ["default", "json"])
def test_no_marker_secret_anywhere_in_the_output(case, where, callback, answering, tmp_path):
    host = answering if where == "answering" else refusing()
    output = run_verbose(case.split()[0], CASES[case](host), tmp_path, callback)
    assert "the module" in output and ("PLAY RECAP" in output or '"stats"' in output), output[-2000:]  # it ran
    for marker in (TOKEN, HEADER, PASSWORD):
        assert marker not in output, (marker, output[max(0, output.find(marker) - 300):output.find(marker) + 100])
