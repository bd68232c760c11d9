"""Verify inside the kind node containers (testinfra's podman backend) after converge."""
import os

import pytest
import testinfra
import yaml

CLUSTER = os.environ.get("KIND_CLUSTER_NAME", "dra-molecule")
CONTROL_PLANE = f"{CLUSTER}-control-plane"
WORKERS = [f"{CLUSTER}-worker", f"{CLUSTER}-worker2"]
DRIVER = "gpu.example.com"


def node(name):
    return testinfra.get_host(f"podman://{name}")


@pytest.mark.parametrize("name", [CONTROL_PLANE] + WORKERS)
def test_kubelet_and_containerd_run_with_cdi(name):
    host = node(name)
    assert host.service("containerd").is_running
    assert host.service("kubelet").is_running
    assert "enable_cdi = true" in host.file("/etc/containerd/config.toml").content_string


def test_control_plane_runs_as_static_pods():
    host = node(CONTROL_PLANE)
    for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"):
        assert host.file(f"/etc/kubernetes/manifests/{component}.yaml").exists
        out = host.check_output(f"crictl ps --name '^{component}$' --state running -q")
        assert out.strip(), f"no running {component} container on {CONTROL_PLANE}"


def k8s_minor(host):
    """Minor version of the node's kubelet ("Kubernetes v1.33.13" -> 33)."""
    return int(host.check_output("kubelet --version").split("v", 1)[1].split(".")[1])


def flag_values(manifest, flag):
    """Values of --flag=value in a static pod manifest's command."""
    command = yaml.safe_load(manifest)["spec"]["containers"][0]["command"]
    return [arg.split("=", 1)[1] for arg in command if arg.startswith(f"--{flag}=")]


def test_dra_is_on_in_every_component():
    """Before 1.34 DRA is off by default and the cluster was created with it off: site.yml's feature_gates
    role must have switched it on in every control-plane component, the API's runtime-config and every
    kubelet. From 1.34 it is on by default: then nothing may switch it off."""
    host = node(CONTROL_PLANE)
    needs_gate = k8s_minor(host) < 34
    for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        manifest = host.file(f"/etc/kubernetes/manifests/{component}.yaml").content_string
        gates = ",".join(flag_values(manifest, "feature-gates"))
        if needs_gate:
            assert "DynamicResourceAllocation=true" in gates, f"{component}: --feature-gates={gates}"
        else:
            assert "DynamicResourceAllocation=false" not in gates, f"{component}: --feature-gates={gates}"
    apiserver = host.file("/etc/kubernetes/manifests/kube-apiserver.yaml").content_string
    if needs_gate:
        assert "resource.k8s.io" in ",".join(flag_values(apiserver, "runtime-config"))
    for name in [CONTROL_PLANE] + WORKERS:
        config = yaml.safe_load(node(name).file("/var/lib/kubelet/config.yaml").content_string)
        gate = (config.get("featureGates") or {}).get("DynamicResourceAllocation")
        assert (gate is True) if needs_gate else (gate is not False), f"{name}: featureGates {config.get('featureGates')}"


@pytest.mark.parametrize("name", WORKERS)
def test_driver_registered_with_the_kubelet_and_wrote_its_cdi_spec(name):
    host = node(name)
    # <driver>-reg.sock, or <driver>-<pod uid>-reg.sock when the driver hands over with rolling updates.
    sockets = host.check_output("find /var/lib/kubelet/plugins_registry -maxdepth 1 -type s -name '%s-*reg.sock'"
                                % DRIVER).split()
    assert sockets, f"no registration socket of {DRIVER} on {name}"
    specs = host.check_output("ls /var/run/cdi")
    assert "example.com" in specs, f"no CDI spec of {DRIVER} on {name}: {specs!r}"
