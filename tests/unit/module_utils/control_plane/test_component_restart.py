"""The computations of the internal role component_restart and of control_plane_tuning's kubeadm-config step
(plugins/module_utils/control_plane/restart.py, filters component_endpoint and tuning_written; wait_retries,
the filter the restart waits take their rounds from, in plugins/module_utils/common/waits.py)."""
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.dra.admin.plugins.filter.component_restart import (
    component_endpoint_filter, manifest_image_filter, tuning_written_filter)
from ansible_collections.dra.admin.plugins.filter.wait_retries import wait_retries_filter
from ansible_collections.dra.admin.plugins.module_utils.control_plane import restart
from ansible_collections.dra.admin.plugins.module_utils.control_plane import tuning
from ansible_collections.dra.admin.plugins.module_utils.control_plane.command_line import flags_dict, read_flags
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import find_container, load_manifest
from conftest import FIXTURES

ENDPOINTS = {"kube-apiserver": {"port": 6443, "health": "/readyz"},
             "kube-controller-manager": {"port": 10257, "health": "/healthz"},
             "kube-scheduler": {"port": 10259, "health": "/healthz"}}


@pytest.mark.parametrize("flags,url", [
    ({}, "https://127.0.0.1:10257"),
    ({"bind-address": "0.0.0.0"}, "https://127.0.0.1:10257"),
    ({"bind-address": "::"}, "https://127.0.0.1:10257"),
    ({"bind-address": ""}, "https://127.0.0.1:10257"),
    ({"bind-address": "10.0.0.5"}, "https://10.0.0.5:10257"),
    ({"bind-address": "10.0.0.5", "secure-port": "20257"}, "https://10.0.0.5:20257"),
    ({"secure-port": "20257"}, "https://127.0.0.1:20257"),
    ({"bind-address": "fd00::5"}, "https://[fd00::5]:10257"),
    ({"bind-address": ["10.0.0.4", "10.0.0.5"]}, "https://10.0.0.5:10257"),
])
def test_endpoint_from_the_flags_and_the_defaults(flags, url):
    got = restart.component_endpoint("kube-controller-manager", flags, ENDPOINTS, "127.0.0.1")
    assert (got["url"], got["health_url"]) == (url, url + "/healthz")


def test_endpoint_of_the_apiserver_uses_its_health_path():
    got = component_endpoint_filter({"secure-port": "6443"}, "kube-apiserver", ENDPOINTS, "127.0.0.1", CA)
    assert got["health_url"] == "https://127.0.0.1:6443/readyz"


CA = "/etc/kubernetes/pki/ca.crt"


def kubeadm_flags(release, component):
    """The flags of a component in the static Pod manifest the real kubeadm wrote."""
    with open(os.path.join(FIXTURES, "kubeadm-" + release, component + ".yaml")) as handle:
        text = handle.read()
    manifest = load_manifest(text)
    return flags_dict(read_flags(find_container(manifest, component)))


@pytest.mark.parametrize("release", ["v1.33.13", "v1.37.2", "v1.38.0-beta.0"])
def test_kubeadm_apiserver_is_reached_on_its_advertise_address_and_verified_with_the_cluster_ca(release):
    """kubeadm's serving certificate names the advertise address, not 127.0.0.1: the endpoint is there, and the
    certificate is checked against the CA."""
    got = restart.component_endpoint("kube-apiserver", kubeadm_flags(release, "kube-apiserver"), ENDPOINTS,
                                     "127.0.0.1", CA)
    assert got == {"url": "https://192.0.2.2:6443", "health_url": "https://192.0.2.2:6443/readyz",
                   "validate_certs": True, "ca_path": CA, "verified_by": CA}


@pytest.mark.parametrize("component", ["kube-controller-manager", "kube-scheduler"])
@pytest.mark.parametrize("release", ["v1.33.13", "v1.37.2", "v1.38.0-beta.0"])
def test_kubeadm_controllers_serve_a_certificate_no_file_verifies_and_say_so(release, component):
    """Without --tls-cert-file (kubeadm's manifests) the component signs its own certificate at start-up."""
    got = restart.component_endpoint(component, kubeadm_flags(release, component), ENDPOINTS, "127.0.0.1", CA)
    assert got["url"].startswith("https://127.0.0.1:")
    assert got["validate_certs"] is False and got["ca_path"] is None
    assert "signed itself" in got["verified_by"] and component in got["verified_by"]


def test_a_component_with_its_own_serving_certificate_is_verified():
    got = restart.component_endpoint("kube-scheduler", {"tls-cert-file": "/etc/kubernetes/pki/sched.crt"},
                                     ENDPOINTS, "127.0.0.1", CA)
    assert (got["validate_certs"], got["ca_path"]) == (True, CA)


def test_apiserver_without_a_ca_file_fails_naming_the_variable():
    with pytest.raises(AnsibleFilterError, match="dra_component_restart_ca_file"):
        component_endpoint_filter({}, "kube-apiserver", ENDPOINTS, "127.0.0.1", "")


def test_apiserver_bound_to_one_address_is_reached_there():
    got = restart.component_endpoint("kube-apiserver", {"bind-address": "10.0.0.7", "advertise-address": "10.0.0.8"},
                                     ENDPOINTS, "127.0.0.1", CA)
    assert got["url"] == "https://10.0.0.7:6443"


def test_endpoint_missing_for_a_component_fails_naming_it():
    with pytest.raises(AnsibleFilterError, match="no endpoint {port, health} for kube-scheduler"):
        component_endpoint_filter({}, "kube-scheduler", {"kube-apiserver": ENDPOINTS["kube-apiserver"]}, "h")


@pytest.mark.parametrize("timeout,interval,retries", [(300, 5, 60), (301, 5, 61), ("10", "3", 4), (0, 5, 1)])
def test_wait_retries_round_up(timeout, interval, retries):
    assert wait_retries_filter(timeout, interval) == retries


@pytest.mark.parametrize("timeout,interval", [(300, 0), ("x", 5)])
def test_wait_retries_refuse_bad_input(timeout, interval):
    with pytest.raises(AnsibleFilterError, match="dra.admin.wait_retries"):
        wait_retries_filter(timeout, interval)


def test_controller_manager_carries_its_rate_flags_only():
    result = {"flags": {"kube-api-qps": "75", "kube-api-burst": "150", "bind-address": "127.0.0.1",
                        "leader-elect": None}}
    assert tuning_written_filter(result, "kube-controller-manager") == {
        "kubeadm_args": {"kube-api-qps": "75", "kube-api-burst": "150"}, "kubeadm_volumes": [],
        "restore_extra": []}


def test_scheduler_carries_config_its_volume_and_the_file_to_restore():
    result = {"flags": {"config": "/etc/kubernetes/kube-scheduler-config.yaml", "kube-api-qps": "10"},
              "config_file": {"path": "/etc/kubernetes/kube-scheduler-config.yaml",
                              "host_path": "/etc/kubernetes/kube-scheduler-config.yaml", "changed": True,
                              "created": False, "backup_file": "/backups/kube-scheduler-config.yaml.1"}}
    written = tuning_written_filter(result, "kube-scheduler")
    assert written["kubeadm_args"] == {"config": "/etc/kubernetes/kube-scheduler-config.yaml"}
    assert written["kubeadm_volumes"] == [{"name": tuning.SCHEDULER_CONFIG_VOLUME,
                                           "mountPath": "/etc/kubernetes/kube-scheduler-config.yaml",
                                           "hostPath": "/etc/kubernetes/kube-scheduler-config.yaml",
                                           "readOnly": True, "pathType": "File"}]
    assert written["restore_extra"] == [{"backup": "/backups/kube-scheduler-config.yaml.1",
                                         "dest": "/etc/kubernetes/kube-scheduler-config.yaml"}]


def test_a_created_config_file_is_removed_on_rollback_and_an_unchanged_one_left():
    config_file = {"path": "/c.yaml", "host_path": "/h/c.yaml", "changed": True, "created": True}
    created = {"flags": {"config": "/c.yaml"}, "config_file": config_file}
    assert tuning_written_filter(created, "kube-scheduler")["restore_extra"] == [
        {"backup": None, "dest": "/h/c.yaml"}]
    unchanged = dict(created, config_file=dict(created["config_file"], changed=False))
    assert tuning_written_filter(unchanged, "kube-scheduler")["restore_extra"] == []


def test_no_config_file_no_volume():
    assert tuning_written_filter({"flags": {}}, "kube-scheduler") == {
        "kubeadm_args": {}, "kubeadm_volumes": [], "restore_extra": []}


def test_a_component_control_plane_tuning_does_not_change_is_refused():
    with pytest.raises(AnsibleFilterError, match="kube-apiserver is not tuned"):
        tuning_written_filter({}, "kube-apiserver")


def test_the_volume_name_is_component_flags_default():
    from ansible_collections.dra.admin.plugins.modules import component_flags
    spec = component_flags.argument_spec()["config_file"]["options"]["volume_name"]
    assert spec["default"] == tuning.SCHEDULER_CONFIG_VOLUME


# --- the kube-apiserver's image and tag (filter manifest_image, the role's version entry point) ------------------

MANIFEST = """apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  containers:
    - name: kube-apiserver
      image: %s
"""


@pytest.mark.parametrize("image,tag", [
    ("registry.k8s.io/kube-apiserver:v1.33.13", "v1.33.13"),
    ("registry.k8s.io/kube-apiserver:v1.33.13@sha256:" + "0" * 64, "v1.33.13"),
    ("registry.example:5000/k8s/kube-apiserver:v1.36.3@sha256:" + "0" * 64, "v1.36.3"),
    ("registry.example:5000/kube-apiserver", ""),
    ("registry.k8s.io/kube-apiserver@sha256:" + "0" * 64, ""),
    ("kube-apiserver:latest", "latest"),
])
def test_manifest_image_and_its_tag(image, tag):
    assert manifest_image_filter(MANIFEST % image, "kube-apiserver") == {"image": image, "tag": tag}
    assert restart.image_tag(image) == tag


def test_manifest_image_of_the_recorded_kubeadm_manifest():
    with open(os.path.join(FIXTURES, "kubeadm-v1.33.13", "kube-apiserver.yaml")) as handle:
        got = manifest_image_filter(handle.read(), "kube-apiserver")
    assert got["tag"] == "v1.33.13" and got["image"].endswith(":v1.33.13")


@pytest.mark.parametrize("text,why", [
    ("", "the kube-apiserver manifest is empty"),
    ("kind: Deployment", "has kind 'Deployment'"),
    (MANIFEST.replace("name: kube-apiserver\n      image", "name: other\n      image") % "x:1",
     "has no container named 'kube-apiserver'"),
    (MANIFEST % "''", "names no image"),
])
def test_manifest_image_refuses_what_is_not_the_apiserver_manifest(text, why):
    with pytest.raises(AnsibleFilterError, match="dra.admin.manifest_image: .*%s" % why):
        manifest_image_filter(text, "kube-apiserver")
