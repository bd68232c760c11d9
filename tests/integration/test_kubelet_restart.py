"""feature_gates' kubelet step: after the restart it waits for evidence from the NEW kubelet, and rolls
back when none comes, although the Node still says Ready=True from before the restart.

This machine plays the node: a kubeadm v1.33.13 kubelet configuration file of the test's own, and a
`service` that is a module of the test's own (`library/fakesvc.py`, chosen through module_defaults
`use:`) recording each restart. The Node object is the test's own too (no kubelet, no KWOK stage): it
is Ready=True with a Lease last renewed before the run, as a node whose kubelet was just stopped.
In the test where the kubelet comes back, a stand-in does what a starting kubelet does once the
service restarts: it renews the Node Lease every half second and reports the Node Ready.
"""
import datetime
import json
import os
import shutil
import threading

import pytest
import yaml

from conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")

FAKE_SERVICE = '''#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(name=dict(type="str", required=True), state=dict(type="str"),
                                              enabled=dict(type="bool")))
    with open(module.params["name"], "a") as handle:
        handle.write(module.params["state"] + "\\n")
    module.exit_json(changed=True, name=module.params["name"], state="started")


if __name__ == "__main__":
    main()
'''


def now(micro=True):
    stamp = datetime.datetime.now(datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def ready_status():
    stamp = now(micro=False)
    return {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status",
                                       "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}}


def renew(cluster, node):
    cluster.kubectl("patch", "lease", "-n", "kube-node-lease", node, "--type=merge",
                    "-p", json.dumps({"spec": {"renewTime": now()}}))


@pytest.fixture
def node(cluster, request):
    """A Node of the test's own whose Lease the "old kubelet" last renewed before the run. The Lease comes
    first, held by the node and not expiring during the test: KWOK (which manages every node here) takes
    over only leases that are missing or expired, so it leaves this one alone."""
    name = "it-kubelet-%d-%s" % (os.getpid(), "back" if "awaited" in request.node.name else "gone")
    cluster.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": name, "namespace": "kube-node-lease"},
                   "spec": {"holderIdentity": name, "leaseDurationSeconds": 3600, "renewTime": now()}})
    cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    cluster.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(ready_status()))
    yield name
    cluster.kubectl("delete", "node", name, "--wait=false", check=False)
    cluster.kubectl("delete", "lease", "-n", "kube-node-lease", name, "--wait=false", check=False)


class KubeletStandIn:
    """Once the service has been restarted: renew the Lease every half second, and report Ready."""

    def __init__(self, cluster, node, service_log):
        self.cluster, self.node, self.service_log = cluster, node, service_log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def _loop(self):
        while not self._stop.is_set() and not os.path.exists(self.service_log):
            self._stop.wait(0.2)
        if self._stop.is_set():
            return
        self.cluster.kubectl("patch", "node", self.node, "--subresource=status", "--type=merge",
                             "-p", json.dumps(ready_status()), check=False)
        while not self._stop.is_set():
            renew(self.cluster, self.node)
            self._stop.wait(0.5)


def run_role(cluster, tmp_path, node):
    config = tmp_path / "kubelet-config.yaml"
    shutil.copy(os.path.join(FIXTURES, "kubeadm-v1.33.13", "kubelet-config.yaml"), str(config))
    (tmp_path / "manifests").mkdir()
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "fakesvc.py").write_text(FAKE_SERVICE)
    service_log = tmp_path / "kubelet-service.log"
    play = [{"hosts": "localhost", "gather_facts": False,
             "module_defaults": {"ansible.builtin.service": {"use": "ansible.legacy.fakesvc"}},
             "roles": [{"role": "dra.admin.feature_gates", "vars": {
                 "dra_feature_gates_components": [],
                 "dra_feature_gates_kubernetes_version": "v1.33.13",
                 "dra_feature_gates_kubelet_config": str(config),
                 "dra_feature_gates_kubelet_service": str(service_log),
                 "dra_feature_gates_manifest_dir": str(tmp_path / "manifests"),
                 "dra_feature_gates_backup_dir": str(tmp_path / "backups"),
                 "dra_feature_gates_node_name": node,
                 "dra_feature_gates_wait_timeout": 20,
                 "dra_feature_gates_poll_interval": 1}}]}]
    playbook = tmp_path / "kubelet.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    return config, service_log, playbook


def test_new_kubelet_heartbeat_is_awaited(cluster, tmp_path, node):
    config, service_log, playbook = run_role(cluster, tmp_path, node)
    with KubeletStandIn(cluster, node, str(service_log)):
        res = cluster.run_playbook(str(playbook), env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    assert res.returncode == 0, res.stdout[-6000:]
    assert yaml.safe_load(config.read_text())["featureGates"] == {"DynamicResourceAllocation": True}
    assert service_log.read_text() == "restarted\n"
    assert "Kubelet: wait for a Lease renewal by the new kubelet: " + node in res.stdout


def test_kubelet_that_does_not_come_back_is_rolled_back_while_the_node_still_says_ready(cluster, tmp_path, node):
    config, service_log, playbook = run_role(cluster, tmp_path, node)
    original = config.read_text()
    res = cluster.run_playbook(str(playbook), env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    output = " ".join((res.stdout + res.stderr).split())
    assert res.returncode == 2, output[-6000:]
    assert ("did not come back with gates {'DynamicResourceAllocation': True} within 20s: no renewal of Lease "
            "kube-node-lease/%s after the restart at " % node) in output, output[-6000:]
    assert config.read_text() == original
    assert service_log.read_text() == "restarted\nrestarted\n"  # the change, then the rollback
