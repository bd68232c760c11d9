"""playbooks/site.yml switches the DRA gate on in the kubelets of dra_nodes too (before 1.34 a DRA pod
never starts on a node whose kubelet lacks it), kubelet only and one node at a time.

Runs the real playbook in check mode (`--tags feature_gates`) against two dra_nodes that are this
machine, each with its own copy of a kubeadm v1.33.13 kubelet configuration and a `kubelet` that
answers `--version` like the real one.
"""
import json
import os
import shutil
import subprocess
import sys

import yaml

from conftest import FIXTURES, ROOT

ROLE = "dra.admin.feature_gates : "


def test_site_changes_the_kubelet_of_every_dra_node_one_at_a_time(tmp_path):
    kubelet = tmp_path / "kubelet"
    kubelet.write_text("#!/bin/sh\necho Kubernetes v1.33.13\n")
    kubelet.chmod(0o755)
    hosts = {}
    originals = {}
    for node in ("gpu-a", "gpu-b"):
        config = tmp_path / node / "config.yaml"
        config.parent.mkdir()
        shutil.copy(os.path.join(FIXTURES, "kubeadm-v1.33.13", "kubelet-config.yaml"), str(config))
        originals[node] = config.read_text()
        (tmp_path / node / "manifests").mkdir()
        hosts[node] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "ansible_become": False,
                       "dra_feature_gates_kubelet_config": str(config),
                       "dra_feature_gates_manifest_dir": str(tmp_path / node / "manifests"),
                       "dra_feature_gates_backup_dir": str(tmp_path / node / "backups"),
                       "dra_feature_gates_kubelet_binary": str(kubelet)}
    inventory = {"all": {"children": {"k8s_api": {"hosts": {}}, "control_plane": {"hosts": {}},
                                      "dra_nodes": {"hosts": hosts}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                          "-i", str(tmp_path / "inventory.yml"), os.path.join(ROOT, "playbooks", "site.yml"),
                          "--check", "--tags", "feature_gates"],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    plays = json.loads(res.stdout)["plays"]
    kubelet_plays = [p for p in plays if p["play"]["name"] == "DRA feature gates on the kubelets of the DRA nodes"]
    # serial: 1 -> one batch per node, each with that node only
    batches = []
    for play in kubelet_plays:
        written = [t for t in play["tasks"]
                   if t["task"]["name"] == ROLE + "Kubelet: write the gates into its configuration file (backup first)"]
        assert len(written) == 1, [t["task"]["name"] for t in play["tasks"]]
        batches.append(sorted(written[0]["hosts"]))
        for node, result in written[0]["hosts"].items():
            assert result["changed"] is True, result
            assert result["feature_gates"] == {"DynamicResourceAllocation": True}, result
        # kubelet only: no control-plane component was looked at
        checked = [t for t in play["tasks"]
                   if t["task"]["name"] == ROLE + "Check every change against the version catalog before writing anything"]
        assert len(checked) == 1
        assert [r.get("results") for r in checked[0]["hosts"].values()] == [[]]
    assert batches == [["gpu-a"], ["gpu-b"]]
    for node, text in originals.items():  # check mode
        assert (tmp_path / node / "config.yaml").read_text() == text
