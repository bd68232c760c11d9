# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What kube-scheduler checks of a pod besides its node filters (``selection.pod_refusal``) and its devices.

- Resources (the NodeResourcesFit filter): the pod's requests as the scheduler counts them (``pod_requests``:
  containers, sidecars running beside them, the largest init step, the pod's overhead; pod-level requests where
  the pod has them) against the node's allocatable less the requests of the pods bound to it, and the node's pod
  count (``fit_refusal``).
- What is not modelled here (``unchecked_filters``): required inter-pod (anti-)affinity, topology spread with
  DoNotSchedule, host ports, volumes the scheduler places (PersistentVolumeClaims, generic ephemeral volumes), and
  bound pods' required anti-affinity that selects this pod. A pod that uses one of them may fit as far as what was
  checked goes, and still be refused by the scheduler: the explainer says so instead of "fits".

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

from ansible_collections.dra.admin.plugins.module_utils.kube.quantity import QuantityError, quantity
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import label_selector_matches

PODS = "pods"
TERMINAL_PHASES = ("Succeeded", "Failed")
# Resources the pod-level requests (PodLevelResources) replace the containers' sum of.
POD_LEVEL_RESOURCES = ("cpu", "memory")


def _requests(resources):
    out = {}
    for name, value in ((resources or {}).get("requests") or {}).items():
        try:
            out[name] = quantity(value)
        except QuantityError:
            continue  # the API server refuses such a request: a pod never carries one
    return out


def _add(total, more):
    for name, value in more.items():
        total[name] = total.get(name, 0) + value
    return total


def _at_least(total, other):
    for name, value in other.items():
        total[name] = max(total.get(name, 0), value)
    return total


def pod_requests(pod_spec):
    """{resource: Fraction} the scheduler counts for the pod: the containers' requests and those of the sidecars
    (init containers with restartPolicy Always, which run beside them), or the largest init step (an init
    container with the sidecars started before it) where more, plus spec.overhead; spec.resources.requests
    replaces the cpu and memory of that where the pod sets them."""
    spec = pod_spec or {}
    total = {}
    for container in spec.get("containers") or []:
        _add(total, _requests(container.get("resources")))
    sidecars, init_step = {}, {}
    for container in spec.get("initContainers") or []:
        asked = _requests(container.get("resources"))
        if container.get("restartPolicy") == "Always":
            _add(total, asked)
            _add(sidecars, asked)
            _at_least(init_step, sidecars)
        else:
            _at_least(init_step, _add(dict(sidecars), asked))
    _at_least(total, init_step)
    pod_level = _requests(spec.get("resources"))
    for name in POD_LEVEL_RESOURCES:
        if name in pod_level:
            total[name] = pod_level[name]
    overhead = {}
    for name, value in (spec.get("overhead") or {}).items():
        try:
            overhead[name] = quantity(value)
        except QuantityError:
            continue
    return _add(total, overhead)


def active(pods):
    """The pods that hold their requests on their node: not Succeeded or Failed, not being deleted."""
    return [p for p in pods or [] if ((p.get("status") or {}).get("phase") not in TERMINAL_PHASES)]


def _shown(name, value):
    if name == "cpu":
        return "%s" % (float(value) if value != int(value) else int(value))
    if value == int(value) and value >= 2 ** 20 and value % 2 ** 20 == 0:
        return "%dMi" % (value // 2 ** 20)
    return "%s" % (int(value) if value == int(value) else float(value))


def fit_refusal(node, pod_spec, bound, backed_by_dra=()):
    """Why the node's resources cannot hold the pod (the scheduler's "Insufficient <resource>", "Too many pods"),
    or None. bound: the pods bound to the node; backed_by_dra: the pod's extended resources a DeviceClass backs,
    which the node's allocatable does not list (DRA allocates those, not this filter)."""
    allocatable = {}
    for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            allocatable[name] = quantity(value)
        except QuantityError:
            continue
    holding = active(bound)
    if PODS in allocatable and len(holding) + 1 > allocatable[PODS]:
        return "Too many pods: the node allows %s, %d are bound to it" % (_shown(PODS, allocatable[PODS]),
                                                                          len(holding))
    used = {}
    for pod in holding:
        _add(used, pod_requests(pod.get("spec")))
    missing = []
    for name, asked in sorted(pod_requests(pod_spec).items()):
        if asked <= 0 or name == PODS or (name in backed_by_dra and name not in allocatable):
            continue
        free = allocatable.get(name, Fraction(0)) - used.get(name, 0)
        if asked > free:
            missing.append("Insufficient %s (the pod requests %s; %s of %s free)" % (
                name, _shown(name, asked), _shown(name, max(free, 0)), _shown(name, allocatable.get(name, 0))))
    return "; ".join(missing) or None


def scheduler_verdict(pod):
    """kube-scheduler's own last word on a pod it has tried: {reason, message, since} of its PodScheduled condition
    when False (Unschedulable, SchedulerError, ...), or None (not tried yet, or scheduled)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return {"reason": condition.get("reason") or "", "message": condition.get("message") or "",
                    "since": condition.get("lastTransitionTime")}
    return None


def _required(affinity, kind):
    return ((affinity or {}).get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []


def _anti_affinity_selects(term, owner_namespace, pod):
    """Whether a required pod anti-affinity term of a pod in owner_namespace selects `pod` (a namespaceSelector
    counts as selecting: it is not read here)."""
    meta = pod.get("metadata") or {}
    namespaces = term.get("namespaces") or ([] if term.get("namespaceSelector") is not None else [owner_namespace])
    if namespaces and meta.get("namespace") not in namespaces:
        return False
    return label_selector_matches(term.get("labelSelector") or {}, meta.get("labels") or {}) \
        if term.get("labelSelector") is not None else False


def anti_affinity_holders(bound_pods):
    """[(namespace/name, namespace, term)] of every required pod anti-affinity term of the bound pods that hold their
    node: read once per run, then matched against each pod explained (unchecked_filters)."""
    out = []
    for pod in active(bound_pods):
        meta = pod.get("metadata") or {}
        for term in _required((pod.get("spec") or {}).get("affinity"), "podAntiAffinity"):
            out.append(("%s/%s" % (meta.get("namespace"), meta.get("name")), meta.get("namespace"), term))
    return out


def unchecked_filters(pod, holders=()):
    """What kube-scheduler checks of this pod that the explainer does not model, as short texts (empty: every
    filter the pod exercises was checked). holders: anti_affinity_holders of the bound pods."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    out = []
    if _required(affinity, "podAffinity"):
        out.append("required pod affinity")
    if _required(affinity, "podAntiAffinity"):
        out.append("required pod anti-affinity")
    if any(c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
           for c in spec.get("topologySpreadConstraints") or []):
        out.append("topology spread constraints (DoNotSchedule)")
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    if any(p.get("hostPort") for c in containers for p in c.get("ports") or []):
        out.append("host ports")
    if any(v.get("persistentVolumeClaim") or v.get("ephemeral") for v in spec.get("volumes") or []):
        out.append("volumes the scheduler places (PersistentVolumeClaims, ephemeral volumes)")
    selecting = sorted(set(label for label, namespace, term in holders
                           if _anti_affinity_selects(term, namespace, pod)))
    if selecting:
        out.append("the required anti-affinity of pod(s) %s, which selects this pod" % ", ".join(selecting[:3])
                   + (" and more" if len(selecting) > 3 else ""))
    return out
