"""Debian's prometheus (hack/install-test-deps) run for one test: given scrape configs and the monitoring
role's rule files, with its HTTP API for queries. Shared by the KWOK and the kind monitoring tests."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import urllib.request

import yaml


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


class PrometheusServer:
    """prometheus scraping `scrape_configs` every 2 s and evaluating the rule files in `rules_dir`."""

    def __init__(self, scrape_configs, rules_dir, workdir, wait_until):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        config = {"global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
                  "rule_files": [os.path.join(rules_dir, "*.yml")],
                  "scrape_configs": scrape_configs}
        self.dir = tempfile.mkdtemp(dir=workdir)
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as handle:
            yaml.safe_dump(config, handle)
        binary = shutil.which("prometheus")
        assert binary, "prometheus is not on PATH: run hack/install-test-deps"
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "--config.file=" + os.path.join(self.dir, "prometheus.yml"),
             "--storage.tsdb.path=" + os.path.join(self.dir, "data"), "--web.listen-address=127.0.0.1:%d" % self.port],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self.ready, 60, "prometheus ready")

    def ready(self):
        try:
            return urllib.request.urlopen(self.url + "/-/ready", timeout=2).status == 200
        except OSError:
            return False

    def api(self, path, **params):
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        return json.loads(urllib.request.urlopen(url, timeout=10).read())["data"]

    def value(self, query):
        result = self.api("/api/v1/query", query=query)["result"]
        return float(result[0]["value"][1]) if result else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def render_rules(run_playbook, rules_dir):
    """The monitoring role's rule files written to rules_dir (delivery "files", checked by promtool)."""
    play = [{"hosts": "localhost", "gather_facts": False, "roles": [{
        "role": "dra.admin.monitoring",
        "vars": {"dra_monitoring_delivery": "files", "dra_monitoring_rules_dir": rules_dir,
                 "dra_monitoring_promtool": "promtool"}}]}]
    path = os.path.join(rules_dir, "..", "render.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(play, handle)
    res = run_playbook(path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
