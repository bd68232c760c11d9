# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The objects of a driver installed without a chart: its DaemonSet and its DeviceClasses.

The DaemonSet of the built-in template: gRPC liveness and startup probes on the health port
(service ``liveness``); the driver's own plugin directory, the registrar and CDI host paths; downward-API
NODE_NAME, NAMESPACE and POD_UID (the pod UID lets the driver hand over during a seamless upgrade); an
unprivileged container (every capability dropped but those asked for, no privilege escalation, the
runtime's default seccomp profile) unless the driver is run privileged.

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import RESOURCE_GROUP
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import node_affinity


HEALTH_SERVICE = "liveness"


HEALTH_PORT_NAME = "healthz"


DRIVER_LABEL = "dra.admin/driver"


DOWNWARD_ENV = {
    "NODE_NAME": "spec.nodeName",
    "NAMESPACE": "metadata.namespace",
    "POD_UID": "metadata.uid",
}


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
    labels.update({MANAGED_BY_LABEL: MANAGED_BY, DRIVER_LABEL: driver})
    labels.update(extra or {})
    return labels


# Where a variable may come from instead of a value written into the DaemonSet (a token, a password): a key of a
# Secret or of a ConfigMap in the driver's namespace.
ENV_SOURCES = ("secretKeyRef", "configMapKeyRef")


def env_entry(name, value):
    """One container env entry: a plain value, or {secretKeyRef|configMapKeyRef: {name, key[, optional]}} as the
    variable's valueFrom (checked by inputs.env_problems)."""
    if isinstance(value, dict):
        return {"name": name, "valueFrom": dict(value)}
    return {"name": name, "value": str(value)}


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
        env.append(env_entry(name, params["env"][name]))
    for name in sorted(DOWNWARD_ENV):
        env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": DOWNWARD_ENV[name]}}})
    return env


def _container_ports(params):
    ports = [{"name": HEALTH_PORT_NAME, "containerPort": int(params["health_port"]), "protocol": "TCP"}]
    for entry in params.get("container_ports") or []:
        port = {"containerPort": int(entry["containerPort"]), "protocol": entry.get("protocol") or "TCP"}
        if entry.get("name"):
            port["name"] = entry["name"]
        ports.append(port)
    return ports


def own_plugin_dir(plugin_dir, driver):
    """The driver's own directory under the kubelet's plugins directory: where the kubeletplugin helper
    of k8s.io/dynamic-resource-allocation serves its DRA socket (<plugin_dir>/<driver>/dra.sock), and the
    only part of plugin_dir the driver's pod mounts."""
    return "%s/%s" % (str(plugin_dir).rstrip("/"), driver)


RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}


def container_security(params):
    """The plugin container's securityContext: privileged when asked for (a driver that reaches host
    devices the runtime does not give it); otherwise no privilege escalation, every capability dropped
    but params' capabilities, and the runtime's default seccomp profile."""
    if params.get("privileged"):
        return {"privileged": True}
    context = {"privileged": False, "allowPrivilegeEscalation": False,
               "capabilities": {"drop": ["ALL"]}, "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}
    if params.get("capabilities"):
        context["capabilities"]["add"] = [str(c) for c in params["capabilities"]]
    return context


def _plugin_container(params):
    liveness, startup = probes(params["health_port"], params.get("liveness"), params.get("startup"))
    container = {
        "name": "plugin",
        "image": params["image"],
        "imagePullPolicy": params.get("image_pull_policy") or "IfNotPresent",
        "env": env_list(params),
        "ports": _container_ports(params),
        "livenessProbe": liveness,
        "startupProbe": startup,
        "securityContext": container_security(params),
        "volumeMounts": [
            {"name": "plugins-registry", "mountPath": params["registrar_dir"]},
            {"name": "plugins", "mountPath": own_plugin_dir(params["plugin_dir"], params["driver"])},
            {"name": "cdi", "mountPath": params["cdi_dir"]},
        ],
    }
    if params.get("command"):
        container["command"] = [str(c) for c in params["command"]]
    if params.get("args"):
        container["args"] = [str(a) for a in params["args"]]
    if params.get("resources"):
        container["resources"] = params["resources"]
    return container


def _pod_spec(params):
    pod_spec = {
        "serviceAccountName": params["service_account"],
        "terminationGracePeriodSeconds": int(params.get("termination_grace_period", 30)),
        "affinity": node_affinity(params.get("node_affinity"), params["exclusion_label"]),
        "containers": [_plugin_container(params)],
        "volumes": [
            {"name": "plugins-registry", "hostPath": {"path": params["registrar_dir"], "type": "DirectoryOrCreate"}},
            {"name": "plugins", "hostPath": {"path": own_plugin_dir(params["plugin_dir"], params["driver"]),
                                             "type": "DirectoryOrCreate"}},
            {"name": "cdi", "hostPath": {"path": params["cdi_dir"], "type": "DirectoryOrCreate"}},
        ],
    }
    if params.get("priority_class"):
        pod_spec["priorityClassName"] = params["priority_class"]
    if params.get("node_selector"):
        pod_spec["nodeSelector"] = dict((k, str(v)) for k, v in params["node_selector"].items())
    if params.get("tolerations"):
        pod_spec["tolerations"] = params["tolerations"]
    return pod_spec


def build_daemonset(params, strategy, min_ready_seconds=0):
    """The built-in DaemonSet for a driver without a chart; minReadySeconds only when min_ready_seconds is not 0.

    params: driver, namespace, daemonset_name, image, image_pull_policy, command, args, env,
    health_port, container_ports, plugin_dir, registrar_dir, cdi_dir, privileged, capabilities, resources,
    priority_class, service_account, termination_grace_period, node_selector, node_affinity
    (nodeSelectorTerms), tolerations, exclusion_label, liveness, startup, labels, pod_annotations.
    """
    name = params["daemonset_name"]
    template_meta = {"labels": object_labels(name, params["driver"], params.get("labels"))}
    if params.get("pod_annotations"):
        template_meta["annotations"] = dict(params["pod_annotations"])
    spec = {
        "selector": {"matchLabels": selector_labels(name)},
        "updateStrategy": strategy,
        "template": {"metadata": template_meta, "spec": _pod_spec(params)},
    }
    if min_ready_seconds:
        spec["minReadySeconds"] = int(min_ready_seconds)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": params["namespace"],
                     "labels": object_labels(name, params["driver"], params.get("labels"))},
        "spec": spec,
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
                                       "labels": {MANAGED_BY_LABEL: MANAGED_BY, DRIVER_LABEL: driver}},
                          "spec": spec})
    return manifests
