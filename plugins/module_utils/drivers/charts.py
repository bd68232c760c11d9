# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Helm values for driver charts whose layout is known: the user's values plus the role's overlay.

The overlay sets the update strategy, node selection with the exclusion label, tolerations,
the health port and the driver name where each known chart keeps them. No known chart has a value for the
DaemonSet's minReadySeconds: a seamless update's handover time goes into the checked rendering
(with_handover).

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.dra.admin.plugins.module_utils.drivers.inputs import DriverInputError
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import node_affinity
from ansible_collections.dra.admin.plugins.module_utils.common.merge import deep_merge
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import required_terms


# Charts whose values layout is known: where the role puts strategy, selection and health port.
#   names: chart names (last path element of the chart reference, without version suffix)
#   seamless: whether the driver calls kubeletplugin.RollingUpdate with its pod UID
#   health_ports: (value path, chart default) per container, the main container first
#   node_terms: the chart's own default nodeSelectorTerms (kept when the user gives none,
#               because a Helm list value replaces the chart's list)
KNOWN_CHARTS = {
    "dra-example-driver": {
        "names": ("dra-example-driver",),
        "seamless": True,
        "strategy_path": ("kubeletPlugin", "updateStrategy"),
        "node_selector_path": ("kubeletPlugin", "nodeSelector"),
        "affinity_path": ("kubeletPlugin", "affinity"),
        "tolerations_path": ("kubeletPlugin", "tolerations"),
        "health_ports": ((("kubeletPlugin", "containers", "plugin", "healthcheckPort"), 51515),),
        "driver_name_path": ("driverName",),
        "node_terms": (),
    },
    "nvidia": {
        "names": ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu", "k8s-dra-driver-gpu", "k8s-dra-driver"),
        # Its kubelet plugins are not given their pod UID: no seamless upgrade.
        "seamless": False,
        "strategy_path": ("kubeletPlugin", "updateStrategy"),
        "node_selector_path": ("kubeletPlugin", "nodeSelector"),
        "affinity_path": ("kubeletPlugin", "affinity"),
        "tolerations_path": ("kubeletPlugin", "tolerations"),
        "health_ports": ((("kubeletPlugin", "containers", "gpus", "healthcheckPort"), 51516),
                         (("kubeletPlugin", "containers", "computeDomains", "healthcheckPort"), 51515)),
        "driver_name_path": None,
        "node_terms": (
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In",
                                   "values": ["true"]}]},
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-0302_10de.present", "operator": "In",
                                   "values": ["true"]}]},
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/pci-0300_10de.present", "operator": "In",
                                   "values": ["true"]}]},
            {"matchExpressions": [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In",
                                   "values": ["NVIDIA"]}]},
            {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]},
        ),
    },
}


def chart_kind(chart_ref, requested="auto"):
    """The KNOWN_CHARTS key of a chart reference, or None for a chart whose values are unknown."""
    if requested and requested != "auto":
        return requested if requested in KNOWN_CHARTS else None
    if not chart_ref:
        return None
    name = str(chart_ref).rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"-\d+(\.\d+)*([-+][0-9A-Za-z.-]+)?\.tgz$", "", name)
    name = re.sub(r"\.tgz$", "", name)
    for kind, info in KNOWN_CHARTS.items():
        if name in info["names"]:
            return kind
    return None


def _set_path(values, path, value):
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def _get_path(values, path):
    node = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def chart_node_terms(kind, user_values):
    """The nodeSelectorTerms a known chart runs its driver with when the role is given none: those of the
    user's values, else the chart's own defaults (a Helm list value replaces the chart's whole list)."""
    info = KNOWN_CHARTS[kind]
    return required_terms({"affinity": _get_path(user_values or {}, info["affinity_path"]) or {}}) \
        or list(info["node_terms"])


def chart_values(kind, user_values, params, strategy):
    """The values to install a known chart with: the user's values, then the role's overlay
    (strategy, node selection with the exclusion label, tolerations, health port, driver name).

    Returns (values, health_ports) where health_ports are the ports the chart's containers will
    probe. For an unknown chart the user's values are returned unchanged.
    """
    values = copy.deepcopy(user_values or {})
    if kind is None:
        return values, [int(params["health_port"])]
    info = KNOWN_CHARTS[kind]
    overlay = {}
    _set_path(overlay, info["strategy_path"], strategy)
    user_terms = params.get("node_affinity") or chart_node_terms(kind, values)
    _set_path(overlay, info["affinity_path"], node_affinity(user_terms, params["exclusion_label"]))
    if params.get("node_selector"):
        _set_path(overlay, info["node_selector_path"], dict((k, str(v)) for k, v in params["node_selector"].items()))
    if params.get("tolerations"):
        _set_path(overlay, info["tolerations_path"], params["tolerations"])
    health_ports = []
    for index, (path, default) in enumerate(info["health_ports"]):
        # The main container takes the role's health port; others keep the user's or the chart's.
        port = int(params["health_port"]) if index == 0 else int(_get_path(values, path) or default)
        if port in health_ports:
            raise DriverInputError(["health_port %s collides with the health port of another container of the "
                                    "chart (%s): containers of one pod share its ports; pick another"
                                    % (port, ".".join(path))])
        _set_path(overlay, path, port)
        health_ports.append(port)
    if info["driver_name_path"] and params.get("driver"):
        _set_path(overlay, info["driver_name_path"], params["driver"])
    return deep_merge(values, overlay), health_ports


def default_release_name(driver):
    """The Helm release name when none is given: the driver name with every run of other characters than
    lowercase letters, digits and '-' replaced by '-' (gpu.example.com -> gpu-example-com)."""
    return re.sub(r"[^a-z0-9-]+", "-", str(driver or ""))


# kubernetes.core's K8S_AUTH_* environment variables (what AWX's Kubernetes credential injects, and what
# every dra.admin module reads) and the settings Helm reads instead (as kubernetes.core.helm passes them).
HELM_ENV_FROM_K8S_AUTH = (
    ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"),
    ("K8S_AUTH_CONTEXT", "HELM_KUBECONTEXT"),
    ("K8S_AUTH_HOST", "HELM_KUBEAPISERVER"),
    ("K8S_AUTH_API_KEY", "HELM_KUBETOKEN"),
    ("K8S_AUTH_SSL_CA_CERT", "HELM_KUBECAFILE"),
)


def helm_credentials_script():
    """A POSIX shell prologue that hands the K8S_AUTH_* variables of the process's own environment to Helm
    (KUBECONFIG, HELM_KUBEAPISERVER, HELM_KUBETOKEN, ...; K8S_AUTH_VERIFY_SSL false/no/0 as
    HELM_KUBEINSECURE_SKIP_TLS_VERIFY=true) and then runs its arguments. The values never appear in an
    argv or a task result (a bearer token would be in both)."""
    lines = ['if [ -n "${%s:-}" ]; then %s="$%s"; export %s; fi' % (source, target, source, target)
             for source, target in HELM_ENV_FROM_K8S_AUTH]
    lines.append('case "${K8S_AUTH_VERIFY_SSL:-}" in [Ff]alse|[Nn]o|0) '
                 'HELM_KUBEINSECURE_SKIP_TLS_VERIFY=true; export HELM_KUBEINSECURE_SKIP_TLS_VERIFY;; esac')
    lines.append('exec "$@"')
    return "\n".join(lines)


def helm_template_argv(binary, release, chart_ref, namespace, version=None, repo_url=None, kubeconfig=None,
                       context=None):
    """`helm template` of the chart as `helm install` would render it on the cluster: with --validate,
    Helm reads the cluster's version and API groups (a chart's kubeVersion constraint and its
    .Capabilities checks see the real cluster, not Helm's offline default of Kubernetes 1.20) and
    validates the manifests against it. The values come on stdin ("--values -").

    The cluster is the one the collection's modules reach: the kubeconfig and context given as options
    (flags, which win), else the K8S_AUTH_* environment variables of the host it runs on, handed to Helm
    by `/bin/sh -c helm_credentials_script()` (Helm itself reads neither; without them it would ask
    localhost:8080)."""
    helm = [binary or "helm", "template", release, str(chart_ref), "--namespace", namespace, "--values", "-",
            "--validate"]
    if version:
        helm += ["--version", str(version)]
    if repo_url:
        helm += ["--repo", repo_url]
    if isinstance(kubeconfig, str) and kubeconfig:
        helm += ["--kubeconfig", kubeconfig]
    if context:
        helm += ["--kube-context", context]
    return ["/bin/sh", "-c", helm_credentials_script(), "helm-template"] + helm


HOOK_ANNOTATION = "helm.sh/hook"


def is_hook(document):
    """Whether a rendered document is a Helm hook (Helm runs hooks itself, outside the release's manifest)."""
    return HOOK_ANNOTATION in ((document.get("metadata") or {}).get("annotations") or {})


def with_handover(documents, min_ready_seconds):
    """Every rendered DaemonSet (not a hook) with minReadySeconds min_ready_seconds, unless the chart set its
    own or min_ready_seconds is 0 (documents are changed in place)."""
    if not min_ready_seconds:
        return documents
    for document in documents:
        if document.get("kind") == "DaemonSet" and not is_hook(document):
            spec = document.setdefault("spec", {})
            if not spec.get("minReadySeconds"):
                spec["minReadySeconds"] = int(min_ready_seconds)
    return documents


def release_manifest(documents):
    """The checked rendering as Helm is to apply it: every document that is not a hook, as one YAML stream in the
    rendered order. The role's post-renderer hands Helm exactly this in place of Helm's own second rendering."""
    import yaml
    return yaml.safe_dump_all([d for d in documents if not is_hook(d)], sort_keys=False, default_flow_style=False)


# The file the post-renderer hands to Helm, beside the script in the role's scratch directory.
RELEASE_MANIFEST_FILE = "manifest.yaml"


def post_renderer_script():
    """A Helm post-renderer that reads and drops the manifest Helm rendered for the install and prints the checked
    one (RELEASE_MANIFEST_FILE in the script's own directory) instead: what Helm applies is what was checked."""
    return "\n".join(['#!/bin/sh', 'set -eu', 'cat >/dev/null',
                      'exec cat "$(dirname "$0")/%s"' % RELEASE_MANIFEST_FILE, ''])


def local_chart_version_problem(chart_ref, chart_yaml, version):
    """A chart directory whose Chart.yaml names another version than chart_version (Helm ignores --version for a
    chart on disk), or None."""
    if chart_yaml is None or not version:
        return None
    found = str(chart_yaml.get("version") or "")
    if found != str(version):
        return ("chart_version %s is not the version of the chart at %s (its Chart.yaml says %s): set chart_version to "
                "the version of the chart you reviewed, or point chart_ref at it" % (version, chart_ref, found or "none"))
    return None


def chart_device_class_names(manifests):
    """Names of the DeviceClasses a rendered chart installs itself (the role leaves those to the chart)."""
    return sorted(m["metadata"]["name"] for m in manifests or []
                  if isinstance(m, dict) and m.get("kind") == "DeviceClass" and (m.get("metadata") or {}).get("name"))
