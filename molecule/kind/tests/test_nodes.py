"""Verify inside the kind node containers (testinfra's podman backend) after converge."""
import os

import pytest
import testinfra

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


def test_dra_is_on_in_every_component():
    """site.yml's feature_gates role switched DRA on where the release needs it (1.33); later releases
    have it on by default, so the kubelet config either names the gate true or not at all."""
    host = node(CONTROL_PLANE)
    manifest = host.file("/etc/kubernetes/manifests/kube-apiserver.yaml").content_string
    assert "DynamicResourceAllocation=false" not in manifest
    for name in [CONTROL_PLANE] + WORKERS:
        config = node(name).file("/var/lib/kubelet/config.yaml").content_string
        assert "DynamicResourceAllocation: false" not in config


@pytest.mark.parametrize("name", WORKERS)
def test_driver_registered_with_the_kubelet_and_wrote_its_cdi_spec(name):
    host = node(name)
    assert host.socket(f"unix:///var/lib/kubelet/plugins_registry/{DRIVER}-reg.sock").is_listening
    specs = host.check_output("ls /var/run/cdi")
    assert "example.com" in specs, f"no CDI spec of {DRIVER} on {name}: {specs!r}"
