"""The version detection of the internal role component_restart (entry point version, used by feature_gates
and control_plane_tuning),
run by Ansible on a kubeadm kube-apiserver manifest whose image is written in each form a registry allows."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import FIXTURES, ROOT

DIGEST = "sha256:" + "0123456789abcdef" * 4


def settle_version(tmp_path, image):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    with open(os.path.join(FIXTURES, "kubeadm-v1.33.13", "kube-apiserver.yaml")) as handle:
        manifest = yaml.safe_load(handle)
    manifest["spec"]["containers"][0]["image"] = image
    (manifests / "kube-apiserver.yaml").write_text(yaml.safe_dump(manifest))
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Settle", "ansible.builtin.include_role": {"name": "dra.admin.component_restart",
                                                            "tasks_from": "version"},
         "vars": {"dra_component_restart_manifest_dir": str(manifests),
                  "dra_component_restart_present": ["kube-apiserver"],
                  "dra_component_restart_version_variable": "dra_feature_gates_kubernetes_version"}},
        {"name": "Show", "ansible.builtin.debug": {"msg": "VERSION={{ dra_component_restart_version }}"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                          "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                          str(tmp_path / "play.yml")], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=False)
    tasks = json.loads(res.stdout)["plays"][0]["tasks"]
    results = [t["hosts"]["localhost"] for t in tasks]
    return res.returncode, results


@pytest.mark.parametrize("image,version", [
    ("registry.k8s.io/kube-apiserver:v1.33.13", "v1.33.13"),
    ("registry.k8s.io/kube-apiserver:v1.33.13@" + DIGEST, "v1.33.13"),
    ("registry.example:5000/k8s/kube-apiserver:v1.36.3@" + DIGEST, "v1.36.3"),
    ("registry.example:5000/kube-apiserver:v1.33.13", "v1.33.13"),
])
def test_version_from_tag_with_or_without_digest(tmp_path, image, version):
    rc, results = settle_version(tmp_path, image)
    assert rc == 0, results
    assert results[-1]["msg"] == "VERSION=" + version


@pytest.mark.parametrize("image,why", [
    ("registry.k8s.io/kube-apiserver@" + DIGEST, "it has no tag, only a digest or nothing"),
    ("registry.example:5000/kube-apiserver@" + DIGEST, "it has no tag, only a digest or nothing"),
    ("registry.example:5000/kube-apiserver", "it has no tag, only a digest or nothing"),
    ("registry.k8s.io/kube-apiserver:latest", "its tag latest is not a version"),
])
def test_no_version_in_the_image_is_a_clear_error(tmp_path, image, why):
    rc, results = settle_version(tmp_path, image)
    assert rc == 2
    failed = [r for r in results if r.get("failed")]
    assert len(failed) == 1, results
    message = " ".join(failed[0]["msg"].split())
    assert message.startswith("Cannot tell the Kubernetes version of localhost from the kube-apiserver image "
                              + image), message
    assert why in message and "dra_feature_gates_kubernetes_version: v1.33.13" in message, message
