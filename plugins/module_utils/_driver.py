# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A DRA driver's DaemonSet, decided from role inputs and the cluster's nodes.

- input validation (health port range and collisions, image or chart, upgrade settings);
- node selection: nodeSelector, required node affinity and taints evaluated the way the
  DaemonSet controller does, the drain's exclusion label added to EVERY nodeSelectorTerm;
- the upgrade strategy: seamless (``maxSurge: 1, maxUnavailable: 0``) only when the driver
  supports it and every selected node's kubelet is new enough, otherwise ``maxUnavailable``
  with the reason;
- the DaemonSet manifest of the built-in template (gRPC liveness and startup probes on the
  health port, service ``liveness``; plugin, registrar and CDI host paths; downward-API
  NODE_NAME, NAMESPACE and POD_UID), DeviceClasses, and Helm values for known charts;
- checks of a DaemonSet (rendered by Helm or read back from the cluster) and its rollout.

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.dra.admin.plugins.module_utils._gates import RESOURCE_GROUP, VersionError, parse_minor
from ansible_collections.dra.admin.plugins.module_utils._merge import deep_merge
from ansible_collections.dra.admin.plugins.module_utils._node_selection import (
    EXCLUSION_VALUE, required_terms, term_matches, terms_exclude, with_exclusion,
)

# kubeletplugin.RollingUpdate (two plugin instances on one node during an update) needs a
# kubelet of 1.33 or newer. A version fact: it belongs in the catalog (_gates.py), which
# does not carry it yet; kept here as the single place this collection states it.
SEAMLESS_UPGRADE_MIN_KUBELET_MINOR = 33

HEALTH_SERVICE = "liveness"
HEALTH_PORT_NAME = "healthz"
MANAGED_BY = "dra.admin"
DRIVER_LABEL = "dra.admin/driver"
DOWNWARD_ENV = {
    "NODE_NAME": "spec.nodeName",
    "NAMESPACE": "metadata.namespace",
    "POD_UID": "metadata.uid",
}
SEAMLESS_MODES = ("auto", "required", "disabled")

# Tolerations the DaemonSet controller adds to every DaemonSet pod.
DAEMONSET_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)

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

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DRIVER_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class DriverInputError(ValueError):
    """Role inputs that cannot make a working driver DaemonSet; the message lists every problem."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(DriverInputError, self).__init__("; ".join(self.problems))


class NoSelectedNodesError(ValueError):
    """No node matches the driver's node selection."""


class SeamlessUpgradeError(ValueError):
    """A seamless upgrade was required but cannot be done on this cluster."""


# --- inputs -------------------------------------------------------------------------------

def port_problem(value, what):
    """None when value is a usable TCP port (1-65535), otherwise a message naming `what`."""
    if isinstance(value, bool):
        return "%s must be a port number 1-65535, got %r" % (what, value)
    try:
        port = int(value)
    except (TypeError, ValueError):
        return "%s must be a port number 1-65535, got %r" % (what, value)
    if str(value).strip() != str(port) or not 1 <= port <= 65535:
        return "%s must be a port number 1-65535, got %r" % (what, value)
    return None


def max_unavailable_problem(value):
    """None when value is a usable DaemonSet maxUnavailable (integer >= 1 or 'N%' with N 1-100)."""
    text = str(value).strip()
    match = re.match(r"^(\d+)%$", text)
    if match and 1 <= int(match.group(1)) <= 100:
        return None
    if not isinstance(value, bool) and re.match(r"^\d+$", text) and int(text) >= 1:
        return None
    return ("max_unavailable must be an integer of at least 1 or a percentage such as '25%%', got %r "
            "(0 would let no pod be replaced without a surge)" % (value,))


def normalize_max_unavailable(value):
    text = str(value).strip()
    return text if text.endswith("%") else int(text)


def container_port_numbers(ports):
    """containerPort values of a list of container port dicts."""
    numbers = []
    for entry in ports or []:
        if isinstance(entry, dict) and entry.get("containerPort") is not None:
            numbers.append(entry.get("containerPort"))
    return numbers


def validate_inputs(params):
    """Every problem with the inputs of one driver, as a list of messages (empty when usable).

    params: driver, method (template|helm), image, chart_ref, health_port, container_ports,
    env, seamless_upgrade, max_unavailable, daemonset_name, namespace, plugin_dir,
    registrar_dir, cdi_dir.
    """
    problems = []
    driver = params.get("driver") or ""
    if not driver:
        problems.append("driver (the DRA driver name, for example gpu.example.com) is required")
    elif len(driver) > 63 or not _DRIVER_RE.match(driver):
        problems.append("driver %r is not a DNS subdomain of at most 63 characters (the name the driver "
                        "publishes in its ResourceSlices, for example gpu.example.com)" % driver)
    method = params.get("method") or "template"
    if method not in ("template", "helm"):
        problems.append("method must be template or helm, got %r" % method)
    if method == "template" and not params.get("image"):
        problems.append("image is required with method template (the driver's kubelet plugin image)")
    if method == "helm" and not params.get("chart_ref"):
        problems.append("chart_ref is required with method helm (a chart path, repo/chart or oci:// reference)")
    for key in ("daemonset_name", "namespace"):
        value = params.get(key)
        if value and (len(value) > 63 or not _NAME_RE.match(value)):
            problems.append("%s %r is not a valid Kubernetes name (lower case letters, digits and '-')"
                            % (key, value))
    health = params.get("health_port")
    problem = port_problem(health, "health_port")
    if problem:
        problems.append(problem + " (the port of the driver's gRPC health service)")
    else:
        others = container_port_numbers(params.get("container_ports"))
        for other in others:
            other_problem = port_problem(other, "container port")
            if other_problem:
                problems.append(other_problem)
            elif int(other) == int(health):
                problems.append("health_port %s collides with another container port of the driver (%s): "
                                "pick a free port for the gRPC health service" % (health, other))
        seen = set()
        for other in others:
            if not port_problem(other, "container port"):
                if int(other) in seen:
                    problems.append("container port %s is listed twice" % other)
                seen.add(int(other))
    env = params.get("env") or {}
    if not isinstance(env, dict):
        problems.append("env must be a mapping of variable names to values")
    else:
        reserved = sorted(set(env) & set(DOWNWARD_ENV))
        if reserved:
            problems.append("env must not set %s: the role sets them from the downward API (POD_UID is what "
                            "lets the driver hand over to its successor during a seamless upgrade)"
                            % ", ".join(reserved))
    mode = params.get("seamless_upgrade") or "auto"
    if mode not in SEAMLESS_MODES:
        problems.append("seamless_upgrade must be one of %s, got %r" % (", ".join(SEAMLESS_MODES), mode))
    problem = max_unavailable_problem(params.get("max_unavailable", 1))
    if problem:
        problems.append(problem)
    for key in ("plugin_dir", "registrar_dir", "cdi_dir"):
        value = params.get(key)
        if value is not None and not str(value).startswith("/"):
            problems.append("%s must be an absolute host path, got %r" % (key, value))
    return problems


def default_daemonset_name(driver):
    """A DaemonSet name derived from the driver name: gpu.example.com -> gpu-example-com-kubeletplugin."""
    base = re.sub(r"[^a-z0-9-]+", "-", (driver or "driver").lower()).strip("-")[:48].strip("-")
    return "%s-kubeletplugin" % (base or "driver")


# --- node selection -----------------------------------------------------------------------

def node_affinity(terms, label):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": with_exclusion(terms, label)}}}


def _toleration_matches(toleration, taint):
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    key = toleration.get("key")
    if operator == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(node, tolerations):
    """NoSchedule/NoExecute taints of the node that the tolerations (plus the DaemonSet's own) miss."""
    all_tolerations = list(tolerations or []) + list(DAEMONSET_TOLERATIONS)
    missing = []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_toleration_matches(t, taint) for t in all_tolerations):
            missing.append("%s=%s:%s" % (taint.get("key"), taint.get("value") or "", taint.get("effect")))
    return missing


def pod_spec_of(daemonset):
    return (((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})


def why_not_selected(node, node_selector, terms, tolerations):
    """None when a DaemonSet pod with this selection would run on the node, else the reason."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    mismatched = sorted(k for k, v in (node_selector or {}).items() if labels.get(k) != str(v))
    if mismatched:
        return "nodeSelector %s does not match" % ", ".join("%s=%s" % (k, node_selector[k]) for k in mismatched)
    if terms is not None and not any(term_matches(t, meta.get("name"), labels) for t in terms):
        return "no required node affinity term matches (labels or exclusion label)"
    taints = untolerated_taints(node, tolerations)
    if taints:
        return "taints not tolerated: %s" % ", ".join(taints)
    return None


def select_nodes(nodes, node_selector=None, terms=None, tolerations=None):
    """Split nodes into (selected names, {excluded name: reason}), both sorted by name."""
    selected, excluded = [], {}
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        name = (node.get("metadata") or {}).get("name")
        reason = why_not_selected(node, node_selector, terms, tolerations)
        if reason:
            excluded[name] = reason
        else:
            selected.append(name)
    return selected, excluded


def select_nodes_for_daemonset(nodes, daemonset):
    spec = pod_spec_of(daemonset)
    return select_nodes(nodes, spec.get("nodeSelector"), required_terms(spec), spec.get("tolerations"))


# --- upgrade strategy ---------------------------------------------------------------------

def kubelet_version(node):
    return (((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")) or ""


def kubelet_minor(node):
    """The kubelet's minor version, or None when the reported version cannot be read."""
    try:
        return parse_minor(kubelet_version(node))
    except VersionError:
        return None


def old_kubelets(nodes):
    """{node: reported kubelet version} of the nodes whose kubelet cannot do seamless upgrades
    (older than 1.33, or a version that cannot be read)."""
    old = {}
    for node in nodes:
        minor = kubelet_minor(node)
        if minor is None or minor < SEAMLESS_UPGRADE_MIN_KUBELET_MINOR:
            old[(node.get("metadata") or {}).get("name")] = kubelet_version(node) or "<none>"
    return old


def decide_strategy(nodes, mode="auto", driver_supports=True, max_unavailable=1):
    """The DaemonSet updateStrategy for the selected nodes.

    Returns a dict: strategy (the updateStrategy), seamless (bool), reason (one sentence),
    warning (a sentence saying why seamless upgrades are not used, or None).
    Raises SeamlessUpgradeError when mode is 'required' and a seamless upgrade is impossible.
    """
    fallback = {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": normalize_max_unavailable(max_unavailable)}}
    if mode == "disabled":
        return {"strategy": fallback, "seamless": False, "warning": None,
                "reason": "seamless upgrades disabled by seamless_upgrade=disabled; maxUnavailable %s"
                          % fallback["rollingUpdate"]["maxUnavailable"]}
    if not driver_supports:
        reason = ("the driver does not support seamless upgrades (it must hand over with "
                  "kubeletplugin.RollingUpdate and its pod UID)")
    else:
        old = old_kubelets(nodes)
        reason = None
        if old:
            reason = ("seamless upgrades need kubelet >= 1.%d on every selected node; %s"
                      % (SEAMLESS_UPGRADE_MIN_KUBELET_MINOR,
                         ", ".join("%s runs %s" % (name, old[name]) for name in sorted(old))))
    if reason is None:
        return {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "seamless": True, "warning": None,
                "reason": "every selected node runs kubelet >= 1.%d and the driver supports seamless upgrades: "
                          "maxSurge 1, maxUnavailable 0" % SEAMLESS_UPGRADE_MIN_KUBELET_MINOR}
    if mode == "required":
        raise SeamlessUpgradeError(
            "a seamless upgrade was required (seamless_upgrade=required) but %s. Upgrade those kubelets, "
            "exclude those nodes from the driver's selection, or set seamless_upgrade=auto to fall back to "
            "maxUnavailable" % reason)
    warning = ("not using a seamless upgrade: %s; updating with maxSurge 0, maxUnavailable %s (the driver is "
               "briefly absent on each node being updated)" % (reason, fallback["rollingUpdate"]["maxUnavailable"]))
    return {"strategy": fallback, "seamless": False, "warning": warning, "reason": reason}


# --- manifests ----------------------------------------------------------------------------

def grpc_probe(port, period, failure_threshold, timeout, initial_delay=0):
    probe = {"grpc": {"port": int(port), "service": HEALTH_SERVICE}, "periodSeconds": int(period),
             "failureThreshold": int(failure_threshold), "timeoutSeconds": int(timeout)}
    if initial_delay:
        probe["initialDelaySeconds"] = int(initial_delay)
    return probe


def probes(health_port, liveness=None, startup=None):
    """(livenessProbe, startupProbe) on the health port, service 'liveness'.

    The startup probe gives a slow driver time to register (600 x 1 s by default) before the
    liveness probe (3 x 10 s) starts counting.
    """
    liveness = dict({"period": 10, "failure_threshold": 3, "timeout": 5}, **(liveness or {}))
    startup = dict({"period": 1, "failure_threshold": 600, "timeout": 5}, **(startup or {}))
    return (grpc_probe(health_port, liveness["period"], liveness["failure_threshold"], liveness["timeout"]),
            grpc_probe(health_port, startup["period"], startup["failure_threshold"], startup["timeout"]))


def selector_labels(name):
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "kubeletplugin"}


def object_labels(name, driver, extra=None):
    labels = dict(selector_labels(name))
    labels.update({"app.kubernetes.io/managed-by": MANAGED_BY, DRIVER_LABEL: driver})
    labels.update(extra or {})
    return labels


def env_list(params):
    env = [{"name": "DRIVER_NAME", "value": params["driver"]},
           {"name": "HEALTHCHECK_PORT", "value": str(int(params["health_port"]))},
           {"name": "KUBELET_PLUGINS_DIRECTORY_PATH", "value": params["plugin_dir"]},
           {"name": "KUBELET_REGISTRAR_DIRECTORY_PATH", "value": params["registrar_dir"]},
           {"name": "CDI_ROOT", "value": params["cdi_dir"]}]
    fixed = set(e["name"] for e in env)
    for name in sorted(params.get("env") or {}):
        if name in fixed:
            env = [e for e in env if e["name"] != name]
        env.append({"name": name, "value": str(params["env"][name])})
    for name in sorted(DOWNWARD_ENV):
        env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": DOWNWARD_ENV[name]}}})
    return env


def build_daemonset(params, strategy):
    """The built-in DaemonSet for a driver without a chart.

    params: driver, namespace, daemonset_name, image, image_pull_policy, command, args, env,
    health_port, container_ports, plugin_dir, registrar_dir, cdi_dir, privileged, resources,
    priority_class, service_account, termination_grace_period, node_selector, node_affinity
    (nodeSelectorTerms), tolerations, exclusion_label, liveness, startup, labels, pod_annotations.
    """
    name = params["daemonset_name"]
    liveness, startup = probes(params["health_port"], params.get("liveness"), params.get("startup"))
    ports = [{"name": HEALTH_PORT_NAME, "containerPort": int(params["health_port"]), "protocol": "TCP"}]
    for entry in params.get("container_ports") or []:
        port = {"containerPort": int(entry["containerPort"]), "protocol": entry.get("protocol") or "TCP"}
        if entry.get("name"):
            port["name"] = entry["name"]
        ports.append(port)
    container = {
        "name": "plugin",
        "image": params["image"],
        "imagePullPolicy": params.get("image_pull_policy") or "IfNotPresent",
        "env": env_list(params),
        "ports": ports,
        "livenessProbe": liveness,
        "startupProbe": startup,
        "securityContext": {"privileged": bool(params.get("privileged", True))},
        "volumeMounts": [
            {"name": "plugins-registry", "mountPath": params["registrar_dir"]},
            {"name": "plugins", "mountPath": params["plugin_dir"]},
            {"name": "cdi", "mountPath": params["cdi_dir"]},
        ],
    }
    if params.get("command"):
        container["command"] = [str(c) for c in params["command"]]
    if params.get("args"):
        container["args"] = [str(a) for a in params["args"]]
    if params.get("resources"):
        container["resources"] = params["resources"]
    pod_spec = {
        "serviceAccountName": params["service_account"],
        "terminationGracePeriodSeconds": int(params.get("termination_grace_period", 30)),
        "affinity": node_affinity(params.get("node_affinity"), params["exclusion_label"]),
        "containers": [container],
        "volumes": [
            {"name": "plugins-registry", "hostPath": {"path": params["registrar_dir"], "type": "DirectoryOrCreate"}},
            {"name": "plugins", "hostPath": {"path": params["plugin_dir"], "type": "DirectoryOrCreate"}},
            {"name": "cdi", "hostPath": {"path": params["cdi_dir"], "type": "DirectoryOrCreate"}},
        ],
    }
    if params.get("priority_class"):
        pod_spec["priorityClassName"] = params["priority_class"]
    if params.get("node_selector"):
        pod_spec["nodeSelector"] = dict((k, str(v)) for k, v in params["node_selector"].items())
    if params.get("tolerations"):
        pod_spec["tolerations"] = params["tolerations"]
    template_meta = {"labels": object_labels(name, params["driver"], params.get("labels"))}
    if params.get("pod_annotations"):
        template_meta["annotations"] = dict(params["pod_annotations"])
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": params["namespace"],
                     "labels": object_labels(name, params["driver"], params.get("labels"))},
        "spec": {
            "selector": {"matchLabels": selector_labels(name)},
            "updateStrategy": strategy,
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


def build_device_classes(driver, classes, api_version):
    """DeviceClasses selecting the driver's devices. classes: [{name, expression?, config?}];
    an expression is ANDed with `device.driver == "<driver>"`."""
    manifests = []
    for entry in classes or []:
        selectors = [{"cel": {"expression": 'device.driver == "%s"' % driver}}]
        if entry.get("expression"):
            selectors.append({"cel": {"expression": entry["expression"]}})
        spec = {"selectors": selectors}
        if entry.get("config"):
            spec["config"] = [{"opaque": {"driver": driver, "parameters": entry["config"]}}]
        manifests.append({"apiVersion": "%s/%s" % (RESOURCE_GROUP, api_version), "kind": "DeviceClass",
                          "metadata": {"name": entry["name"],
                                       "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, DRIVER_LABEL: driver}},
                          "spec": spec})
    return manifests


# --- Helm ---------------------------------------------------------------------------------

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
    user_terms = params.get("node_affinity")
    if not user_terms:
        chart_affinity = _get_path(values, info["affinity_path"]) or {}
        user_terms = required_terms({"affinity": chart_affinity}) or list(info["node_terms"])
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


# --- checks -------------------------------------------------------------------------------

def daemonsets_in(manifests):
    return [m for m in manifests or [] if isinstance(m, dict) and m.get("kind") == "DaemonSet"]


def _probe_on(container, kind, port):
    probe = container.get(kind) or {}
    grpc = probe.get("grpc") or {}
    return grpc.get("port") == port and grpc.get("service", "") == HEALTH_SERVICE


def check_daemonset(daemonset, exclusion_label, health_ports=None, strategy=None, require_startup=False):
    """What is wrong with a driver DaemonSet, as a list of messages (empty when it is right).

    Checks: every required nodeSelectorTerm excludes `exclusion_label`; some container has a gRPC
    liveness probe (service 'liveness') on each health port (and a startup probe when asked);
    the update strategy equals `strategy` when given.
    """
    name = "%s/%s" % ((daemonset.get("metadata") or {}).get("namespace"), (daemonset.get("metadata") or {}).get("name"))
    problems = []
    spec = pod_spec_of(daemonset)
    if not terms_exclude(required_terms(spec), exclusion_label):
        problems.append("DaemonSet %s: not every required nodeSelectorTerm has %s DoesNotExist (or NotIn [%s]), so "
                        "a drain cannot keep the driver off a node" % (name, exclusion_label, EXCLUSION_VALUE))
    containers = spec.get("containers") or []
    for port in health_ports or []:
        if not any(_probe_on(c, "livenessProbe", port) for c in containers):
            problems.append("DaemonSet %s: no container has a gRPC livenessProbe on port %s with service %s"
                            % (name, port, HEALTH_SERVICE))
        if require_startup and not any(_probe_on(c, "startupProbe", port) for c in containers):
            problems.append("DaemonSet %s: no container has a gRPC startupProbe on port %s" % (name, port))
    if strategy is not None:
        actual = (daemonset.get("spec") or {}).get("updateStrategy") or {}
        want = strategy.get("rollingUpdate") or {}
        have = actual.get("rollingUpdate") or {}
        if actual.get("type", "RollingUpdate") != strategy.get("type") or any(
                str(have.get(k, 0 if k == "maxSurge" else 1)) != str(v) for k, v in want.items()):
            problems.append("DaemonSet %s: updateStrategy is %s, expected %s" % (name, actual, strategy))
    return problems


def rollout_state(daemonset):
    """Rollout of a DaemonSet from its status: done, desired, updated, available, ready, text."""
    meta = daemonset.get("metadata") or {}
    status = daemonset.get("status") or {}
    desired = int(status.get("desiredNumberScheduled") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    available = int(status.get("numberAvailable") or 0)
    ready = int(status.get("numberReady") or 0)
    observed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    done = observed and updated == desired and available == desired and not status.get("numberUnavailable")
    text = "%d/%d pods updated, %d/%d available" % (updated, desired, available, desired)
    if not observed:
        text += " (controller has not seen the newest spec yet)"
    return {"done": bool(done), "desired": desired, "updated": updated, "available": available,
            "ready": ready, "text": text}
