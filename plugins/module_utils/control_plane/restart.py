# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the steps around a control-plane component change compute (the internal role component_restart,
used by feature_gates and control_plane_tuning).

Pure functions; no IO:

* ``component_endpoint``: where a component answers on its host (https URL of /metrics,
  /configz and its health path) from its flags after the change and kubeadm's defaults, and how its serving
  certificate is verified;
* ``tuning_written``: from component_flags' result for a QPS/Burst change, what kubeadm-config
  must carry (extraArgs, the config file's hostPath volume) and the files a rollback puts back.
* ``manifest_image``, ``image_tag``: the image of a static Pod's container and its tag (the kube-apiserver's
  version when nothing else gives it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import (
    KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER,
)
from ansible_collections.dra.admin.plugins.module_utils.control_plane.tuning import SCHEDULER_CONFIG_VOLUME
from ansible_collections.dra.admin.plugins.module_utils.control_plane.manifest import find_container, load_manifest

# Addresses that mean "every interface": the component is then reached on the endpoint host.
_ANY_ADDRESS = ("", "0.0.0.0", "::")

# The flags of a QPS/Burst change that kubeadm-config's extraArgs carry, per component:
# kube-controller-manager's rate flags, kube-scheduler's --config (its QPS/Burst are in that file).
KUBEADM_TUNING_FLAGS = {
    KUBE_CONTROLLER_MANAGER: ("kube-api-qps", "kube-api-burst"),
    KUBE_SCHEDULER: ("config",),
}


class RestartInputError(DraAdminError, ValueError):
    """An input of the restart steps that cannot be used; the message names it and the fix."""


def _flag(flags, name):
    value = (flags or {}).get(name)
    if isinstance(value, list):
        value = value[-1] if value else None
    return value


def component_endpoint(component, flags, endpoints, endpoint_host, ca_file=None):
    """{url, health_url, validate_certs, ca_path, verified_by}: where the changed component answers on this host,
    and how its serving certificate is checked.

    The host is ``--bind-address`` unless that is unset or an any-address; then kube-apiserver's
    ``--advertise-address`` (kubeadm puts it in the serving certificate, 127.0.0.1 it does not), else
    ``endpoint_host``. The port is ``--secure-port``, else the endpoint's default port.

    The certificate is verified against ``ca_file`` (the cluster CA) where the component serves one from a file:
    kube-apiserver always, kube-controller-manager and kube-scheduler with ``--tls-cert-file``. Without that flag
    they serve a certificate they signed themselves in memory at start-up, which no file on the host can verify:
    then ``validate_certs`` is false and ``verified_by`` says so.
    """
    endpoint = (endpoints or {}).get(component)
    if not isinstance(endpoint, dict) or "port" not in endpoint or "health" not in endpoint:
        raise RestartInputError("no endpoint {port, health} for %s in the endpoints (%s): add it, e.g. "
                                "%s: {port: 10257, health: /healthz}"
                                % (component, ", ".join(sorted(endpoints or {})) or "none", component))
    bind = _flag(flags, "bind-address")
    advertise = _flag(flags, "advertise-address") if component == KUBE_APISERVER else None
    if bind not in _ANY_ADDRESS and bind is not None:
        host = bind
    elif advertise not in _ANY_ADDRESS and advertise is not None:
        host = advertise
    else:
        host = endpoint_host
    port = _flag(flags, "secure-port")
    if port in (None, ""):
        port = endpoint["port"]
    if ":" in str(host) and not str(host).startswith("["):
        host = "[%s]" % host
    url = "https://%s:%s" % (host, port)
    tls = serving_verification(component, flags, ca_file)
    return dict(tls, url=url, health_url=url + endpoint["health"])


def serving_verification(component, flags, ca_file):
    """{validate_certs, ca_path, verified_by}: how the component's serving certificate is checked (see
    component_endpoint)."""
    if component == KUBE_APISERVER or _flag(flags, "tls-cert-file"):
        if not ca_file:
            raise RestartInputError("no CA file to verify %s's serving certificate with: set "
                                    "dra_component_restart_ca_file (kubeadm: /etc/kubernetes/pki/ca.crt)" % component)
        return {"validate_certs": True, "ca_path": ca_file, "verified_by": ca_file}
    return {"validate_certs": False, "ca_path": None,
            "verified_by": "none: %s serves a certificate it signed itself at start-up (no --tls-cert-file)" % component}


def tuning_written(component, result):
    """What a QPS/Burst change written by component_flags (its ``result``) means beyond the manifest.

    Returns {kubeadm_args, kubeadm_volumes, restore_extra}: the flags kubeadm-config's extraArgs
    must carry (only those set to a value), kube-scheduler's config file as a read-only hostPath
    volume (when component_flags gave its path and host path), and the config file to put back
    on rollback (when the change wrote it: its backup, or no backup when it created the file).
    """
    if component not in KUBEADM_TUNING_FLAGS:
        raise RestartInputError("%s is not tuned by control_plane_tuning; known: %s"
                                % (component, ", ".join(sorted(KUBEADM_TUNING_FLAGS))))
    result = result or {}
    flags = result.get("flags") or {}
    args = dict((name, flags[name]) for name in KUBEADM_TUNING_FLAGS[component]
                if isinstance(flags.get(name), str))
    config = result.get("config_file") or {}
    volumes = []
    if config.get("path") and config.get("host_path"):
        volumes.append({"name": SCHEDULER_CONFIG_VOLUME, "mountPath": config["path"], "hostPath": config["host_path"],
                        "readOnly": True, "pathType": "File"})
    restore = []
    if config.get("changed"):
        restore.append({"backup": config.get("backup_file"), "dest": config.get("host_path")})
    return {"kubeadm_args": args, "kubeadm_volumes": volumes, "restore_extra": restore}


def image_tag(image):
    """The tag of a container image reference, "" when it has none: the digest goes first, then the tag is what
    follows the last ':' after the last '/' (a registry's port is not a tag).
    ``registry:5000/kube-apiserver:v1.33.13@sha256:...`` -> ``v1.33.13``."""
    name = str(image or "").split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else ""


def manifest_image(text, container):
    """{image, tag} of a container of a static Pod manifest's text (the kube-apiserver's, for its version)."""
    where = "the %s manifest" % container
    image = find_container(load_manifest(text, where), container, where).get("image")
    if not image:
        raise RestartInputError("%s names no image for its container %s" % (where, container))
    return {"image": image, "tag": image_tag(image)}
