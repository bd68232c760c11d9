# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A DRA driver role's inputs checked before anything is planned.

Every problem is reported at once (driver name, method, image or chart, names, the health
port and its collisions with other container ports, env, upgrade settings, host paths),
each naming the field and the fix.

Pure functions over plain values: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.drivers.manifests import DOWNWARD_ENV, ENV_SOURCES
from ansible_collections.dra.admin.plugins.module_utils.drivers.upgrade import (
    DEFAULT_HANDOVER_SECONDS, SEAMLESS_MODES, handover_seconds_problem, max_unavailable_problem,
)


_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


_DRIVER_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class DriverInputError(DraAdminError, ValueError):
    """Role inputs that cannot make a working driver DaemonSet; the message lists every problem."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(DriverInputError, self).__init__("; ".join(self.problems))


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


def container_port_numbers(ports):
    """containerPort values of a list of container port dicts."""
    numbers = []
    for entry in ports or []:
        if isinstance(entry, dict) and entry.get("containerPort") is not None:
            numbers.append(entry.get("containerPort"))
    return numbers


def _name_problems(params):
    """The driver name, the method and what it needs, and the object names."""
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
    if method == "helm" and not str(params.get("chart_version") or "").strip():
        problems.append("chart_version is required with method helm: the chart version that was reviewed and is to "
                        "be installed (helm search repo <chart> --versions, or version in a local chart's "
                        "Chart.yaml); without it Helm takes whatever version is newest when it runs")
    for key in ("daemonset_name", "namespace"):
        value = params.get(key)
        if value and (len(value) > 63 or not _NAME_RE.match(value)):
            problems.append("%s %r is not a valid Kubernetes name (lower case letters, digits and '-')"
                            % (key, value))
    return problems


def _port_problems(health, container_ports):
    """The health port, and the other container ports: valid, not the health port, not listed twice."""
    problem = port_problem(health, "health_port")
    if problem:
        return [problem + " (the port of the driver's gRPC health service)"]
    problems = []
    others = container_port_numbers(container_ports)
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
    return problems


def _env_problems(env):
    if not isinstance(env, dict):
        return ["env must be a mapping of variable names to values"]
    reserved = sorted(set(env) & set(DOWNWARD_ENV))
    if reserved:
        return ["env must not set %s: the role sets them from the downward API (POD_UID is what "
                "lets the driver hand over to its successor during a seamless upgrade)" % ", ".join(reserved)]
    return [problem for name in sorted(env) for problem in _env_source_problems(name, env[name])]


def _env_source_problems(name, value):
    """A variable given as a mapping must name one Secret or ConfigMap key (the DaemonSet then carries the reference,
    never the value)."""
    if not isinstance(value, dict):
        return []
    fix = ("give {secretKeyRef: {name: <Secret in the driver's namespace>, key: <key>}} (or configMapKeyRef), or a "
           "plain value")
    if len(value) != 1 or list(value)[0] not in ENV_SOURCES:
        return ["env.%s: %s is not a variable's source: %s" % (name, sorted(value), fix)]
    ref = value[list(value)[0]]
    if not (isinstance(ref, dict) and all(isinstance(ref.get(k), str) and ref.get(k) for k in ("name", "key"))
            and set(ref) <= {"name", "key", "optional"}
            and isinstance(ref.get("optional", False), bool)):
        return ["env.%s: %s needs a name and a key (strings; optional: true or false): %s"
                % (name, list(value)[0], fix)]
    return []


# The longest AF_UNIX socket path Linux binds is 107 bytes (sun_path holds 108 with its NUL); from 1.38 the kubelet
# also refuses, at plugin registration, a DRA endpoint of 108 bytes or more (pkg/kubelet/cm/dra/plugin).
UNIX_PATH_MAX = 108
# A pod UID as the API server writes it: the seamless upgrade's socket name carries it.
_POD_UID_LENGTH = 36


def plugin_socket_paths(plugin_dir, driver, seamless_upgrade):
    """{what: path} of the DRA socket the driver's kubelet plugin serves, as k8s.io/dynamic-resource-allocation's
    kubeletplugin helper names it: <plugin_dir>/<driver>/dra.sock, and dra-<pod UID>.sock when a seamless upgrade
    may run (the helper's rolling-update mode)."""
    directory = "%s/%s" % (str(plugin_dir or "").rstrip("/"), driver)
    paths = {"socket": directory + "/dra.sock"}
    if seamless_upgrade != "disabled":
        paths["seamless upgrade socket"] = "%s/dra-%s.sock" % (directory, "x" * _POD_UID_LENGTH)
    return paths


def socket_path_problems(params):
    """A DRA socket path the kubelet would refuse (and Linux could not bind): 108 bytes or more."""
    problems = []
    plugin_dir, driver = params["plugin_dir"], params["driver"]
    for what, path in sorted(plugin_socket_paths(plugin_dir, driver, params.get("seamless_upgrade") or "auto").items()):
        if len(path) >= UNIX_PATH_MAX:
            problems.append(
                "plugin_dir %r and driver %r make the plugin's %s %d bytes long (%s): a Unix socket path must be "
                "shorter than %d bytes (Linux cannot bind a longer one, and from Kubernetes 1.38 the kubelet refuses "
                "it at registration); use a shorter plugin_dir%s" % (
                    plugin_dir, driver, what, len(path), path, UNIX_PATH_MAX,
                    " or seamless_upgrade: disabled" if what != "socket" else ""))
    return problems


# A Linux capability as a container's securityContext names it: without the CAP_ prefix (SYS_ADMIN, not CAP_SYS_ADMIN).
_CAPABILITY_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def capability_problems(capabilities, privileged):
    """What is wrong with the capabilities the plugin container is given (added to an empty set)."""
    if not isinstance(capabilities, (list, tuple)):
        return ["capabilities must be a list of Linux capability names (for example [SYS_ADMIN]), got %r"
                % (capabilities,)]
    problems = []
    for name in capabilities:
        if not isinstance(name, str) or not _CAPABILITY_RE.match(name) or name.startswith("CAP_"):
            problems.append("capabilities entry %r is not a capability name as Kubernetes takes it: upper case, "
                            "without the CAP_ prefix (for example SYS_ADMIN)" % (name,))
    if capabilities and privileged:
        problems.append("capabilities %s are given with privileged: true, which has every capability already: "
                        "set privileged: false to run with only those" % ", ".join(str(c) for c in capabilities))
    return problems


def validate_inputs(params):
    """Every problem with the inputs of one driver, as a list of messages (empty when usable).

    params: driver, method (template|helm), image, chart_ref, health_port, container_ports,
    env, capabilities, privileged, seamless_upgrade, seamless_min_ready_seconds, max_unavailable, daemonset_name,
    namespace, plugin_dir, registrar_dir, cdi_dir.
    """
    problems = _name_problems(params)
    problems.extend(_port_problems(params.get("health_port"), params.get("container_ports")))
    problems.extend(_env_problems(params.get("env") or {}))
    problems.extend(capability_problems(params.get("capabilities") or [], params.get("privileged")))
    mode = params.get("seamless_upgrade") or "auto"
    if mode not in SEAMLESS_MODES:
        problems.append("seamless_upgrade must be one of %s, got %r" % (", ".join(SEAMLESS_MODES), mode))
    for problem in (max_unavailable_problem(params.get("max_unavailable", 1)),
                    handover_seconds_problem(params.get("seamless_min_ready_seconds", DEFAULT_HANDOVER_SECONDS))):
        if problem:
            problems.append(problem)
    for key in ("plugin_dir", "registrar_dir", "cdi_dir"):
        value = params.get(key)
        if value is not None and not str(value).startswith("/"):
            problems.append("%s must be an absolute host path, got %r" % (key, value))
    # The socket's path, where the names it is made of are usable (else those are the problems named above).
    driver, plugin_dir = params.get("driver") or "", str(params.get("plugin_dir") or "")
    if len(driver) <= 63 and _DRIVER_RE.match(driver) and plugin_dir.startswith("/"):
        problems.extend(socket_path_problems(params))
    return problems


def default_daemonset_name(driver):
    """A DaemonSet name derived from the driver name: gpu.example.com -> gpu-example-com-kubeletplugin."""
    base = re.sub(r"[^a-z0-9-]+", "-", (driver or "driver").lower()).strip("-")[:48].strip("-")
    return "%s-kubeletplugin" % (base or "driver")
