"""One way to the API for every module and role: kubeconfig + context, reached through module_defaults.

The kubeconfig of these tests has two contexts: its current context points at a port where nothing
listens, the other one ("real") at the test cluster. Only a run that passes the context reaches the
cluster. No K8S_AUTH_* variable, KUBECONFIG or ~/.kube/config is left for the runs to fall back on.
"""
import json
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures")
DEAD_SERVER = "https://127.0.0.1:1"

KUBEADM_TASK = "Carry the changes into kubeadm-config (kubeadm upgrade renders the manifests from it)"
CLUSTER_CONFIGURATION = {
    "apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration", "kubernetesVersion": "v1.33.13",
    "apiServer": {"extraArgs": [{"name": "audit-log-maxage", "value": "7"}]},
    "controllerManager": {}, "scheduler": {},
}


@pytest.fixture
def two_contexts(cluster, tmp_path):
    """A kubeconfig whose current context is dead and whose context "real" is the test cluster."""
    with open(cluster.kubeconfig) as handle:
        real = yaml.safe_load(handle)
    current = next(c for c in real["contexts"] if c["name"] == real["current-context"])["context"]
    cluster_entry = next(c for c in real["clusters"] if c["name"] == current["cluster"])
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "real", "cluster": cluster_entry["cluster"]},
                     {"name": "dead", "cluster": dict(cluster_entry["cluster"], server=DEAD_SERVER)}],
        "users": real["users"],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": current["user"]}},
                     {"name": "real", "context": {"cluster": "real", "user": current["user"]}}],
        "current-context": "dead",
    }
    path = tmp_path / "two-contexts.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def run_playbook(cluster, tmp_path, plays, *extra):
    """The plays on localhost with nothing but the playbook to say where the cluster is."""
    playbook = tmp_path / ("play-%d.yml" % len(list(tmp_path.glob("play-*.yml"))))
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in cluster.env.items() if not k.startswith("K8S_AUTH_") and k != "KUBECONFIG"}
    env.update(HOME=str(home), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_LOCAL_TEMP=str(home / ".ansible" / "tmp"))
    res = subprocess.run(["ansible-playbook", "-i", os.path.join(ROOT, "inventory", "kwok.yml"), str(playbook)]
                         + list(extra),
                         env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    try:
        out = json.loads(res.stdout)
    except ValueError:
        raise AssertionError("rc=%s\n%s\n%s" % (res.returncode, res.stdout[-4000:], res.stderr[-4000:]))
    results = {}
    for play in out["plays"]:
        for task in play["tasks"]:
            results.setdefault(task["task"]["name"], []).append(task["hosts"]["localhost"])
    return res.returncode, results, res.stdout


def test_module_defaults_group_names_the_context(cluster, tmp_path, two_contexts):
    """group/dra.admin.k8s reaches the collection's modules and kubernetes.core's k8s modules alike."""
    access = {"kubeconfig": two_contexts, "context": "real"}
    plays = [{"hosts": "localhost", "gather_facts": False,
              "module_defaults": {"group/dra.admin.k8s": access},
              "tasks": [
                  {"name": "cluster info", "dra.admin.dra_cluster_info": {}, "register": "info"},
                  {"name": "slices", "dra.admin.dra_slices_info": {}},
                  {"name": "kube-system", "kubernetes.core.k8s_info": {"kind": "Namespace", "name": "kube-system"}},
              ]}]
    rc, results, out = run_playbook(cluster, tmp_path, plays)
    assert rc == 0, out[-6000:]
    info = results["cluster info"][0]
    assert info["kubernetes_version"] == cluster.version, info
    assert [r["metadata"]["name"] for r in results["kube-system"][0]["resources"]] == ["kube-system"]

    # The same play without the context goes to the kubeconfig's current (dead) one.
    plays[0]["module_defaults"] = {"group/dra.admin.k8s": {"kubeconfig": two_contexts}}
    rc, results, out = run_playbook(cluster, tmp_path, plays)
    assert rc == 2 and results["cluster info"][0]["failed"] is True
    assert "127.0.0.1" in results["cluster info"][0]["msg"] and "port=1" in results["cluster info"][0]["msg"], \
        results["cluster info"][0]["msg"]


@pytest.fixture
def kubeadm_config(cluster):
    cluster.apply({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
                   "data": {"ClusterConfiguration": yaml.safe_dump(CLUSTER_CONFIGURATION)}})
    yield
    cluster.kubectl("delete", "configmap", "-n", "kube-system", "kubeadm-config", check=False)


def control_plane_host(tmp_path):
    """kubeadm v1.33.13 manifests in a directory of the test's own (nothing runs them: check mode)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name in ("kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"):
        shutil.copy(os.path.join(FIXTURES, "kubeadm-v1.33.13", name), str(manifests / name))
    return {"dra_feature_gates_manifest_dir": str(manifests), "dra_feature_gates_manage_kubelet": False,
            "dra_feature_gates_backup_dir": str(tmp_path / "backups"),
            "dra_control_plane_tuning_manifest_dir": str(manifests),
            "dra_control_plane_tuning_backup_dir": str(tmp_path / "backups"),
            "dra_control_plane_tuning_scheduler_config": str(tmp_path / "scheduler.yaml")}


@pytest.mark.parametrize("how", ["role variables", "play module_defaults"])
def test_control_plane_roles_read_kubeadm_config_through_the_context(cluster, tmp_path, two_contexts,
                                                                     kubeadm_config, how):
    """feature_gates and control_plane_tuning (through the kubeadm_config module) in check mode:
    kubeadm-config is read from the cluster the context names, and the write it plans is reported."""
    role_vars = control_plane_host(tmp_path)
    play = {"hosts": "localhost", "gather_facts": False,
            "roles": [{"role": "dra.admin.feature_gates", "vars": role_vars},
                      {"role": "dra.admin.control_plane_tuning", "vars": role_vars}]}
    if how == "role variables":
        role_vars.update(dra_kubeconfig=two_contexts, dra_context="real")
    else:
        play["module_defaults"] = {"group/dra.admin.k8s": {"kubeconfig": two_contexts, "context": "real"}}
    rc, results, out = run_playbook(cluster, tmp_path, [play], "--check")
    assert rc == 0, out[-6000:]
    writes = [results["dra.admin.%s : %s" % (role, KUBEADM_TASK)][0] for role in ("feature_gates", "control_plane_tuning")]
    for write in writes:  # read from the cluster the context names, and a write planned there
        assert write["found"] is True and write["changed"] is True, write
        assert write["cluster_configuration"]["kubernetesVersion"] == CLUSTER_CONFIGURATION["kubernetesVersion"]
        assert write["cluster_configuration"]["apiServer"]["extraArgs"][0] == {"name": "audit-log-maxage", "value": "7"}
    live = cluster.get_json("configmap", "-n", "kube-system", "kubeadm-config")
    assert yaml.safe_load(live["data"]["ClusterConfiguration"]) == CLUSTER_CONFIGURATION, "check mode wrote"


def test_roles_keep_a_play_module_defaults_where_their_variables_are_empty(cluster, tmp_path, two_contexts):
    """dra_context alone (the kubeconfig from the play's group/dra.admin.k8s) reaches the cluster."""
    play = {"hosts": "localhost", "gather_facts": False,
            "module_defaults": {"group/dra.admin.k8s": {"kubeconfig": two_contexts}},
            "roles": [{"role": "dra.admin.preflight", "vars": {"dra_context": "real"}}]}
    rc, results, out = run_playbook(cluster, tmp_path, [play])
    assert rc == 0, out[-6000:]
    info = results["dra.admin.preflight : Read DRA state of the cluster"][0]
    assert info["kubernetes_version"] == cluster.version, info
