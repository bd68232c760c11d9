# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Checks of a driver DaemonSet (rendered by Helm or read back from the cluster) and of its rollout.

Pure functions over plain dicts: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.drivers.manifests import DRIVER_LABEL, HEALTH_SERVICE
from ansible_collections.dra.admin.plugins.module_utils.drivers.nodes import pod_spec_of
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import EXCLUSION_VALUE, required_terms, terms_exclude


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


# Where kubelets find plugin registration sockets: a DaemonSet mounting it (or /var/lib/kubelet) runs a plugin.
PLUGIN_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"


def _container_text(spec):
    parts = []
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        parts += container.get("args") or []
        parts += container.get("command") or []
        parts += [str(e.get("value")) for e in container.get("env") or [] if e.get("value")]
    return " ".join(parts)


def driver_accounts(daemonsets, drivers):
    """[{namespace, service_account, daemonset, driver}] for DaemonSets that run a DRA driver's kubelet plugin.

    A DaemonSet is a driver's when it carries the driver role's label (dra.admin/driver), or mounts the
    kubelet's plugin registry and names a driver that publishes ResourceSlices in its arguments or environment.
    """
    accounts = []
    for ds in daemonsets or []:
        meta = ds.get("metadata") or {}
        spec = pod_spec_of(ds)
        names = [(meta.get("labels") or {}).get(DRIVER_LABEL)]
        if not names[0]:
            registry = any(((v.get("hostPath") or {}).get("path") or "").rstrip("/").startswith(PLUGIN_REGISTRY_DIR)
                           or ((v.get("hostPath") or {}).get("path") or "").rstrip("/") == "/var/lib/kubelet"
                           for v in spec.get("volumes") or [])
            text = _container_text(spec)
            names = [d for d in sorted(drivers or []) if registry and d in text]
        for name in names:
            if name:
                accounts.append({"namespace": meta.get("namespace"), "daemonset": meta.get("name"), "driver": name,
                                 "service_account": spec.get("serviceAccountName") or "default"})
    return accounts
