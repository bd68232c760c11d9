"""Role node_upgrade checks the sha256 of the binaries it installs before any of them runs or replaces anything.

Runs the real role on this machine with a directory of stand-in binaries and their .sha256 files as the release
publishes them: a binary whose digest differs stops the run before the drain, and /usr/bin-to-be is untouched.
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

ROLE = "dra.admin.node_upgrade : "


def binaries(tmp_path, published=True):
    source = tmp_path / "release"
    source.mkdir()
    for name in ("kubeadm", "kubelet", "kubectl"):
        (source / name).write_text("#!/bin/sh\necho Kubernetes v1.37.2\n")
        (source / name).chmod(0o755)
        if published:
            (source / (name + ".sha256")).write_text(hashlib.sha256((source / name).read_bytes()).hexdigest())
    return source


def run_role(tmp_path, source, **extra):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False, "roles": ["dra.admin.node_upgrade"]}]))
    extra_vars = dict({"dra_node_upgrade_node": "node-a", "dra_node_upgrade_version": "v1.37.2",
                       "dra_node_upgrade_binaries_dir": str(source), "dra_node_upgrade_bin_dir": str(bin_dir),
                       "ansible_python_interpreter": sys.executable, "ansible_become": False,
                       "dra_kubeconfig": str(tmp_path / "no-such-kubeconfig")}, **extra)
    (tmp_path / "vars.json").write_text(json.dumps(extra_vars))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                          "-c", "local", str(tmp_path / "play.yml"), "-e", "@%s" % (tmp_path / "vars.json")],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    tasks = {t["task"]["name"]: t["hosts"]["localhost"] for t in json.loads(res.stdout)["plays"][0]["tasks"]}
    return res, tasks, bin_dir


CHECK = ROLE + "The binaries are the release's (sha256), or nothing is installed"
RUN_BINARY = ROLE + "The binaries are the release's (never an older kubelet)"


def test_published_digests_that_match_let_the_run_go_on(tmp_path):
    res, tasks, dummy = run_role(tmp_path, binaries(tmp_path))
    assert not tasks[CHECK].get("failed"), tasks[CHECK]
    assert RUN_BINARY in tasks  # the next step ran (the run stops later: there is no cluster here)


@pytest.mark.parametrize("change,expected", [
    ("tamper", "kubelet: sha256 {digest} is not the one kubelet.sha256 gives"),
    ("unpublished", "kubelet: no kubelet.sha256 beside it and no dra_node_upgrade_checksums.kubelet"),
    ("given", "kubelet: sha256 {digest} is not the one dra_node_upgrade_checksums.kubelet gives ({given})"),
])
def test_a_binary_that_is_not_the_releases_stops_the_run_before_anything_runs(tmp_path, change, expected):
    source = binaries(tmp_path)
    extra = {}
    if change == "tamper":
        (source / "kubelet").write_text("#!/bin/sh\necho Kubernetes v1.37.2 # changed\n")
    elif change == "unpublished":
        (source / "kubelet.sha256").unlink()
    else:
        extra["dra_node_upgrade_checksums"] = {"kubelet": "a" * 64}
    digest = hashlib.sha256((source / "kubelet").read_bytes()).hexdigest()
    res, tasks, bin_dir = run_role(tmp_path, source, **extra)
    assert res.returncode != 0
    message = tasks[CHECK]["msg"]
    assert message.startswith("node-a is not touched: ") and expected.format(digest=digest, given="a" * 64) in message
    assert RUN_BINARY not in tasks and not any("Drain" in name for name in tasks)
    assert list(bin_dir.iterdir()) == []
