"""A kubelet's gates read on its host (upgrade/kubelet_gates.py, upgrade/kubelet_gates_service.py, module
dra_kubelet_gates_info) and judged by the upgrade check from the hosts (checks_service.host_kubelet_gates), on the
files the real kubeadm wrote (fixtures/kubeadm-<release>: kubelet-config.yaml, kubeadm-flags.env).

The command line is the one kubeadm's systemd drop-in (10-kubeadm.conf of the kubeadm package) runs:
`kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS`, with
KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml and KUBELET_KUBEADM_ARGS from kubeadm-flags.env."""
import os
import shlex

import pytest
import yaml

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.upgrade import checks as u
from ansible_collections.dra.admin.plugins.module_utils.upgrade import checks_service, kubelet_gates
from ansible_collections.dra.admin.plugins.module_utils.upgrade.kubelet_gates_service import read
from conftest import FIXTURES

RELEASES = ["v1.33.13", "v1.36.3", "v1.37.2", "v1.38.0-beta.0"]


def kubeadm_file(release, name):
    with open(os.path.join(FIXTURES, "kubeadm-" + release, name)) as handle:
        return handle.read()


def kubeadm_args(release, extra=""):
    """The kubelet's argv under kubeadm's drop-in, from the recorded kubeadm-flags.env."""
    env = dict(line.split("=", 1) for line in kubeadm_file(release, "kubeadm-flags.env").splitlines() if "=" in line)
    kubeadm = shlex.split(env["KUBELET_KUBEADM_ARGS"])[0]
    return (["/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
             "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml"]
            + shlex.split(kubeadm) + shlex.split(extra))


def fake_host(tmp_path, release, args, config_text=None, drop_ins=None, pid=812):
    """A /proc with one kubelet process and its files under tmp_path (the paths in args rewritten there)."""
    proc = tmp_path / "proc" / str(pid)
    proc.mkdir(parents=True)
    (tmp_path / "proc" / "1").mkdir()
    (tmp_path / "proc" / "1" / "comm").write_text("systemd\n")
    (tmp_path / "proc" / "1" / "cmdline").write_bytes(b"/sbin/init\0")
    config = tmp_path / "config.yaml"
    config.write_text(config_text if config_text is not None else kubeadm_file(release, "kubelet-config.yaml"))
    args = [a.replace("/var/lib/kubelet/config.yaml", str(config)) for a in args]
    if drop_ins is not None:
        directory = tmp_path / "kubelet.conf.d"
        directory.mkdir()
        for name, text in drop_ins.items():
            (directory / name).write_text(text)
        args.append("--config-dir=%s" % directory)
    (proc / "comm").write_text("kubelet\n")
    (proc / "cmdline").write_bytes("\0".join(args).encode() + b"\0")
    return str(tmp_path / "proc")


def with_gates(release, gates):
    config = yaml.safe_load(kubeadm_file(release, "kubelet-config.yaml"))
    config["featureGates"] = gates
    return yaml.safe_dump(config)


@pytest.mark.parametrize("release", RELEASES)
def test_kubeadm_kubelet_sets_no_gate_and_registers_under_its_hostname_override(tmp_path, release):
    got = read(proc_dir=fake_host(tmp_path, release, kubeadm_args(release)), hostname="CP-1.example")
    assert got["error"] == "" and got["gates"] == {} and got["node"] == "cp-1" and got["pid"] == 812
    assert got["sources"]["command_line"] == "/proc/812/cmdline"
    assert got["sources"]["config_file"].endswith("config.yaml")


def test_flags_win_gate_by_gate_and_the_drop_ins_merge_over_the_file(tmp_path):
    release = "v1.37.2"
    args = kubeadm_args(release, "--feature-gates=DRADeviceTaints=false --feature-gates DRAPrioritizedList=true")
    drop_ins = {"20-gpu.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                               "featureGates:\n  DRAConsumableCapacity: false\n  DRAPrioritizedList: false\n",
                "10-base.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                "featureGates:\n  DRAConsumableCapacity: true\n",
                "README": "not a drop-in"}
    proc = fake_host(tmp_path, release, args, with_gates(release, {"DRADeviceTaints": True,
                                                                   "DRADeviceTaintRules": False}), drop_ins)
    got = read(proc_dir=proc, hostname="worker-1")
    assert got["gates"] == {"DRADeviceTaints": "false", "DRAPrioritizedList": "true",
                            "DRADeviceTaintRules": False, "DRAConsumableCapacity": False}
    assert got["from_flags"] == {"DRADeviceTaints": "false", "DRAPrioritizedList": "true"}
    assert [os.path.basename(p) for p in got["sources"]["config_dir_files"]] == ["10-base.conf", "20-gpu.conf"]


def test_no_kubelet_or_an_unreadable_file_is_said_never_guessed(tmp_path):
    empty = tmp_path / "empty-proc"
    empty.mkdir()
    got = read(proc_dir=str(empty), hostname="api-host")
    assert got["gates"] is None and "no kubelet process runs on api-host" in got["error"]
    proc = fake_host(tmp_path, "v1.37.2", kubeadm_args("v1.37.2"), config_text="kind: KubeProxyConfiguration\n")
    got = read(proc_dir=proc, hostname="n")
    assert got["gates"] is None and "is not a KubeletConfiguration" in got["error"]


def test_flag_forms_pflag_accepts():
    args = ["kubelet", "-config", "/a", "--config=/b", "--hostname-override", "Node-X", "--", "--config=/c"]
    assert kubelet_gates.flag_values(args, "config") == ["/a", "/b"]
    assert kubelet_gates.node_name(args, "host") == "node-x"
    assert kubelet_gates.node_name(args, "host", "given") == "given"


def test_the_check_judges_the_hosts_gates_and_names_the_nodes_no_host_read():
    """From 1.37 to 1.38 a kubelet with device taints switched off does not start (both locked on): found from the
    gates its host holds, for exactly that node; a node no host answered for is named, with the fix."""
    nodes = [{"metadata": {"name": n}} for n in ("cp-1", "worker-1", "worker-2", "kwok-node")]
    hosts = {"cp-host": {"node": "cp-1", "gates": {}, "error": ""},
             "w1": {"node": "worker-1", "gates": {"DRADeviceTaints": "false", "DRADeviceTaintRules": False},
                    "error": ""},
             "w2": {"node": "worker-2", "gates": None, "error": "no kubelet process runs on w2"},
             "unreached": {"unreachable": True, "msg": "ssh: timeout"}}
    per_node = checks_service.host_kubelet_gates(nodes, hosts)
    assert per_node["worker-1"] == {"gates": hosts["w1"]["gates"]} and per_node["cp-1"] == {"gates": {}}
    assert "no kubelet process" in per_node["worker-2"]["error"]
    assert "dra_upgrade_kubelet_hosts" in per_node["kwok-node"]["error"]
    assert catalog.validate_gates("v1.37.2", {"DRADeviceTaints": False, "DRADeviceTaintRules": False}) == []
    facts = {"kubelet_gates": per_node, "kubelet_gates_from": checks_service.FROM_HOSTS}
    found = u.findings(facts, "v1.37.2", "v1.38")
    breaking = sorted(f["subject"] for f in found if f["severity"] == "breaking" and "kubelet" in f["subject"])
    assert breaking == ["kubelet on worker-1: DRADeviceTaintRules", "kubelet on worker-1: DRADeviceTaints"]
    assert all("on its host" in f["message"] for f in found if f["subject"].startswith("kubelet on worker-1"))
    (unread,) = [f for f in found if f["id"] == "kubelet-gates-unread"]
    assert sorted(unread["evidence"]["nodes"]) == ["kwok-node", "worker-2"]
    assert "dra_kubelet_gates_info" in unread["fix"] and "opt" not in unread["fix"].split("node_proxy")[0][-3:]
    assert "exec" in unread["fix"]
