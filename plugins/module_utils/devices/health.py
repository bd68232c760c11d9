# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Device health: what the API says about each DRA device (driver/pool/device).

Pure functions over the JSON objects the API returns. Two sources, both read
from objects the collection LISTs anyway:

* pods' ``status.containerStatuses[].allocatedResourcesStatus`` (and
  ``initContainerStatuses``), written by the kubelet (gate ResourceHealthStatus:
  alpha and off before 1.36, beta and on from 1.36). Each entry is named
  ``claim:<pod claim name>[/<request>]`` and lists ``resources[]`` with a
  ``resourceID``, a ``health`` (Healthy, Unhealthy, Unknown) and, with
  ResourceHealthStatusMessage, a ``message``. The API documents the resourceID
  of a DRA device as ``<driver>/<pool>/<device>``, but the 1.36 kubelet writes the
  device's first CDI device ID when the driver returned one (the example driver's
  is the same ``k8s.gpu.example.com/gpu=common`` for every device). So a report is
  tied to a device through the pod's claim and request: by the resourceID when it
  names one of the request's devices, otherwise when the request holds exactly
  one device; a report on a request holding several devices that the resourceID
  does not name is "unresolved" (the devices it could be are listed).
* the taints drivers publish on devices in their ResourceSlices (gate
  DRADeviceTaints: alpha and off before 1.36, beta and on from 1.36). The API
  server stamps each taint's ``timeAdded`` when the driver does not set it, and the
  kubelet-plugin helper keeps it across updates, so a taint says since when.

A device is unhealthy when a pod reports it Unhealthy or its driver taints it
with effect NoSchedule or NoExecute (effect None is informational); unknown when
a pod reports it Unknown; healthy when pods report it Healthy; otherwise not
reported. "Since when": the earliest ``timeAdded`` of the taints that make it
unhealthy, or the time a caller remembered from an earlier run (``first_seen``,
handed back by every run); the API keeps no time with the pod field, so without
either the answer is "first seen by this run".

Which pods use a device: the claims whose allocation holds it, and the live pods
among their consumers (``status.reservedFor``) or that name the claim in any field
(``claims.claims.pod_claims``: the spec, claims made from templates, the claim made for
extended resources backed by DRA, and the claims of a workload's PodGroup, which
are reserved for the group, not for its pods); where a device is: ``kube.slices``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.dra.admin.plugins.module_utils.common.errors import DraAdminError
from ansible_collections.dra.admin.plugins.module_utils.claims.claims import consumers, pod_ref
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import (
    CONSUMER_POD, allocated_devices, names_claims, pod_claim_names, pod_claims, reserved_for,
)
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import gate_info, parse_minor
from ansible_collections.dra.admin.plugins.module_utils.devices.gpu_health import (
    HEALTHY as GPU_HEALTHY, UNHEALTHY as GPU_UNHEALTHY, UNKNOWN as GPU_UNKNOWN, GpuHealthError, gpu_reasons,
    gpus_by_uuid,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    current_slices, device_attributes, device_fields, device_location,
)
from ansible_collections.dra.admin.plugins.module_utils.common.times import format_time, parse_time as parse_api_time
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import KEEPS_ALLOCATIONS_OFF
from ansible_collections.dra.admin.plugins.module_utils.kube.locations import is_marker
from ansible_collections.dra.admin.plugins.module_utils.drivers.checks import driver_accounts

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
UNKNOWN = "Unknown"
# Worst first: a device two pods report differently is as bad as the worst report.
HEALTH_ORDER = (UNHEALTHY, UNKNOWN, HEALTHY)

COND_UNHEALTHY = "unhealthy"
COND_UNKNOWN = "unknown"
COND_HEALTHY = "healthy"
COND_NOT_REPORTED = "not-reported"
CONDITIONS = (COND_UNHEALTHY, COND_UNKNOWN, COND_HEALTHY, COND_NOT_REPORTED)


SINCE_TAINT = "taint"
SINCE_FIRST_SEEN = "first-seen"
SINCE_THIS_RUN = "this-run"

POD_HEALTH_GATE = "ResourceHealthStatus"
TAINT_GATE = "DRADeviceTaints"
SOURCE_POD_STATUS = "pod_status"
SOURCE_SLICE_TAINTS = "slice_taints"
_SOURCE_WHAT = {
    SOURCE_POD_STATUS: "pods' status.containerStatuses[].allocatedResourcesStatus",
    SOURCE_SLICE_TAINTS: "device taints in ResourceSlices",
}
_SOURCE_GATE = {SOURCE_POD_STATUS: POD_HEALTH_GATE, SOURCE_SLICE_TAINTS: TAINT_GATE}
_SOURCE_COMPONENTS = {SOURCE_POD_STATUS: "kube-apiserver and the kubelets",
                      SOURCE_SLICE_TAINTS: "kube-apiserver, kube-controller-manager and kube-scheduler"}

CLAIM_PREFIX = "claim:"

# The GPUs' own readings on the nodes (opt-in: dra_gpu_health_facts' facts, matched by the device's uuid attribute).
SOURCE_GPU = "gpu_health"
# The device attribute that carries the GPU's UUID (the NVIDIA DRA driver's, and the example driver's, name).
UUID_ATTRIBUTE = "uuid"
# A MIG device's physical GPU (the NVIDIA DRA driver publishes a MIG device with uuid MIG-... and this attribute).
PARENT_UUID_ATTRIBUTE = "parentUUID"

# The driver's presence on the node (opt-in, dra_device_remediation's dead_drivers): its DaemonSet's pod there.
SOURCE_DRIVER_PODS = "driver_pods"
# A driver pod on the node that is not Ready counts as gone once it has been so this long (its Ready condition's
# lastTransitionTime): a restart or a rolling update's short gap does not.
DRIVER_NOT_READY_AFTER = 30


class HealthInputError(DraAdminError, ValueError):
    """A bad option value (first_seen, unknown_after)."""


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

def device_key(driver, pool, device):
    """The device's name in every report, and the DRA resourceID form: <driver>/<pool>/<device>."""
    return "%s/%s/%s" % (driver, pool, device)


def parse_time(text):
    """common.times.parse_time, with a bad value reported as the module's input error."""
    try:
        return parse_api_time(text)
    except ValueError:
        raise HealthInputError("%r is not an RFC 3339 time such as 2026-11-23T17:06:50Z" % (text,))


def worst_health(values):
    """The worst of Healthy/Unhealthy/Unknown values (None when there is none); unknown words count as Unknown."""
    present = set(v if v in HEALTH_ORDER else UNKNOWN for v in values)
    for health in HEALTH_ORDER:
        if health in present:
            return health
    return None


# ---------------------------------------------------------------------------
# ResourceSlices: devices, where they are, their driver taints
# ---------------------------------------------------------------------------

def _device_taints(device):
    """A device's taints (v1/v1beta2 carry them on the device, v1beta1 under ``basic``)."""
    return device_fields(device).get("taints") or []


def taint_view(taint):
    return {"key": taint.get("key"), "value": taint.get("value") or "", "effect": taint.get("effect"),
            "time_added": taint.get("timeAdded")}


def published_devices(slices):
    """{(driver, pool, device): {"node": location, "taints": [taint views], "uuid": the UUID attribute,
    "gpu_uuid": the physical GPU's UUID (parentUUID for a MIG device, else uuid)}} of each pool's newest generation.

    The location is a node name or a kube.locations marker (kube.slices.device_location).
    """
    devices = {}
    for item in current_slices(slices):
        spec = item.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name")
        for device in spec.get("devices") or []:
            attributes = device_attributes(device, spec.get("driver"))
            devices[(spec.get("driver"), pool, device.get("name"))] = {
                "node": device_location(item, device),
                "taints": [taint_view(t) for t in _device_taints(device)],
                "uuid": attributes.get(UUID_ATTRIBUTE),
                "gpu_uuid": attributes.get(PARENT_UUID_ATTRIBUTE) or attributes.get(UUID_ATTRIBUTE),
            }
    return devices


# ---------------------------------------------------------------------------
# ResourceClaims and pods: who uses which device
# ---------------------------------------------------------------------------

def _meta(obj):
    return obj.get("metadata") or {}


def base_request(request):
    """A result's request without its subrequest (``gpus/large`` -> ``gpus``): what containers name."""
    return (request or "").split("/", 1)[0]


def claim_devices(claim):
    """{request: [(driver, pool, device), ...]} of the claim's allocation (subrequests under their request)."""
    by_request = {}
    for dev in allocated_devices(claim):
        by_request.setdefault(base_request(dev["request"]), []).append((dev["driver"], dev["pool"], dev["device"]))
    return by_request


def pod_index(pods):
    """{uid: pod_ref} of pods given as whole objects (what claims.claims.consumers reads)."""
    return dict((_meta(p).get("uid"), pod_ref((p.get("spec") or {}).get("nodeName"), _meta(p).get("ownerReferences")))
                for p in pods)


def pods_naming_claims(pods):
    """{(namespace, claim name): [(pod name, node)]} of the claims the (whole) pods name in any field
    (claims.claims.pod_claims)."""
    named = {}
    for pod in pods:
        meta = _meta(pod)
        for claim in pod_claims(pod):
            named.setdefault((meta.get("namespace"), claim), []).append(
                (meta.get("name"), (pod.get("spec") or {}).get("nodeName")))
    return named


def device_users(claims, pods_by_uid, named_by=None):
    """{(driver, pool, device): {"claims": [ns/name], "pods": [{namespace, name, node}]}} over the allocations.

    A device is in use by the live pods among the consumers (``status.reservedFor``) of the claims holding it,
    and by the live pods that name such a claim (named_by: pods_naming_claims of the live pods; the pods of a
    workload's PodGroup use its claims without being in reservedFor).
    """
    users = {}
    for claim in claims:
        meta = _meta(claim)
        namespace = meta.get("namespace")
        name = "%s/%s" % (namespace, meta.get("name"))
        live = [(c["name"], c["node"]) for c in consumers(claim, pods_by_uid) if c["kind"] == CONSUMER_POD
                and c["exists"]]
        live += (named_by or {}).get((namespace, meta.get("name")), [])
        for devices in claim_devices(claim).values():
            for key in devices:
                entry = users.setdefault(key, {"claims": [], "pods": []})
                if name not in entry["claims"]:
                    entry["claims"].append(name)
                for pod_name, node in live:
                    pod = {"namespace": namespace, "name": pod_name, "node": node}
                    if pod not in entry["pods"]:
                        entry["pods"].append(pod)
    return users


def parse_resource_name(name):
    """``claim:<pod claim>/<request>`` -> (pod claim, request or None); None for non-DRA resources."""
    if not name or not name.startswith(CLAIM_PREFIX):
        return None
    rest = name[len(CLAIM_PREFIX):]
    claim, sep, request = rest.partition("/")
    return claim, (request if sep else None)


def _container_statuses(pod):
    status = pod.get("status") or {}
    return (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])


def has_health_field(pod):
    """Whether any container status of the pod carries allocatedResourcesStatus (the API server kept it)."""
    return any(cs.get("allocatedResourcesStatus") for cs in _container_statuses(pod))


def resolve_device(resource_id, candidates):
    """The device a report is about: named by the resourceID, or the request's only device; else None."""
    for key in candidates:
        if resource_id == device_key(*key):
            return key
    if len(candidates) == 1:
        return candidates[0]
    return None


def pod_reports(pod, claims_by_name):
    """Every DRA health report of one pod, each tied to a device where it can be.

    claims_by_name: {(namespace, claim name): claim_devices(claim)}. A report carries the pod, container,
    resource name, claim, request, resourceID, health, message, ``device`` ((driver, pool, device) or None)
    and ``candidates`` (the request's devices).
    """
    meta = _meta(pod)
    namespace = meta.get("namespace")
    node = (pod.get("spec") or {}).get("nodeName")
    claim_names = pod_claim_names(pod)
    reports = []
    for container in _container_statuses(pod):
        for entry in container.get("allocatedResourcesStatus") or []:
            parsed = parse_resource_name(entry.get("name"))
            if parsed is None:
                continue
            pod_claim, request = parsed
            claim_name = claim_names.get(pod_claim)
            by_request = claims_by_name.get((namespace, claim_name)) or {}
            if request is not None:
                candidates = list(by_request.get(request) or [])
            else:
                candidates = [key for devices in by_request.values() for key in devices]
            for resource in entry.get("resources") or []:
                resource_id = resource.get("resourceID")
                reports.append({
                    "namespace": namespace, "pod": meta.get("name"), "uid": meta.get("uid"), "node": node,
                    "container": container.get("name"), "resource": entry.get("name"),
                    "claim": claim_name, "request": request, "resource_id": resource_id,
                    "health": resource.get("health") or UNKNOWN, "message": resource.get("message"),
                    "device": resolve_device(resource_id, candidates), "candidates": candidates,
                })
    return reports


# ---------------------------------------------------------------------------
# Which sources this cluster has
# ---------------------------------------------------------------------------

def source_availability(server_version, seen):
    """{source: {available, gate, detail}} from the release's gate defaults and what the objects showed.

    seen: {source: count of objects carrying the field}. A field seen proves the gate on; a gate on by
    default is taken as on (the objects may simply have nothing to report); a gate off by default, with
    nothing seen, is reported as not available: the API server drops the field on write.
    """
    minor = parse_minor(server_version)
    release = "1.%d" % minor
    out = {}
    for source, gate in sorted(_SOURCE_GATE.items()):
        count = seen.get(source, 0)
        info = gate_info(release, gate) if 30 <= minor <= 37 else None
        what = _SOURCE_WHAT[source]
        if count:
            available, detail = True, "%s: present on %d object(s)" % (what, count)
        elif info is None:
            available = minor > 37
            detail = ("%s: gate %s is not known to this collection's catalog for %s" % (what, gate, release)
                      if available else "%s: Kubernetes %s has no %s gate; this source does not exist there"
                      % (what, release, gate))
        elif info["default"]:
            available, detail = True, "%s: gate %s is %s and on by default on %s; nothing reported yet" % (
                what, gate, info["stage"], release)
        else:
            available = False
            detail = ("%s not available: gate %s is %s and off by default on %s, and no object carries the field "
                      "(the API server drops it while the gate is off). Switch %s on for %s (role "
                      "dra.admin.feature_gates) to have it."
                      % (what, gate, info["stage"], release, gate, _SOURCE_COMPONENTS[source]))
        out[source] = {"available": available, "gate": gate, "detail": detail}
    return out


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def _since(key, condition, taints, first_seen, now):
    """(since, source) of an unhealthy or unknown device; (None, None) otherwise."""
    if condition not in (COND_UNHEALTHY, COND_UNKNOWN):
        return None, None
    candidates = []
    if condition == COND_UNHEALTHY:
        candidates += [(parse_time(t["time_added"]), SINCE_TAINT) for t in taints
                       if t["effect"] in KEEPS_ALLOCATIONS_OFF and t.get("time_added")]
    remembered = first_seen.get(key)
    if remembered and remembered.get("condition") == condition:
        candidates.append((parse_time(remembered["since"]), SINCE_FIRST_SEEN))
    if not candidates:
        return now, SINCE_THIS_RUN
    return min(candidates, key=lambda c: c[0])


def device_condition(health, taints, gpu=None):
    """(condition, reasons) of one device from its worst pod-reported health, its driver taints and its GPU's
    reading on the node (devices.gpu_health, or None)."""
    reasons = []
    bad_taints = [t for t in taints if t["effect"] in KEEPS_ALLOCATIONS_OFF]
    if health == UNHEALTHY:
        reasons.append("a pod reports it Unhealthy")
    reasons += ["driver taint %s=%s:%s" % (t["key"], t["value"], t["effect"]) for t in bad_taints]
    if gpu and gpu["condition"] == GPU_UNHEALTHY:
        reasons += gpu_reasons(gpu)
    if reasons:
        return COND_UNHEALTHY, reasons
    if health == UNKNOWN:
        return COND_UNKNOWN, ["a pod reports it Unknown"]
    if gpu and gpu["condition"] == GPU_UNKNOWN:
        return COND_UNKNOWN, gpu_reasons(gpu) or ["GPU %s: nvidia-smi gave no report on it" % gpu["uuid"]]
    if health == HEALTHY or (gpu and gpu["condition"] == GPU_HEALTHY):
        return COND_HEALTHY, []
    return COND_NOT_REPORTED, []


def check_first_seen(first_seen):
    """A first_seen mapping as given by a caller: {device key: {condition, since}}; raises naming the fix."""
    if not first_seen:
        return {}
    if not isinstance(first_seen, dict):
        raise HealthInputError("first_seen must be a mapping of device (driver/pool/device) to {condition, since}: "
                               "pass the first_seen value an earlier run returned")
    checked = {}
    for key, entry in first_seen.items():
        if not isinstance(entry, dict) or entry.get("condition") not in (COND_UNHEALTHY, COND_UNKNOWN) \
                or not entry.get("since"):
            raise HealthInputError(
                "first_seen[%r] is %r; each entry must be {condition: unhealthy|unknown, since: <RFC 3339 time>}, "
                "as an earlier run returned it" % (key, entry))
        parse_time(entry["since"])
        checked[key] = entry
    return checked


def check_gpu_health(gpu_health):
    """devices.gpu_health.gpus_by_uuid of the option, its error as the module's input error."""
    try:
        return gpus_by_uuid(gpu_health)
    except GpuHealthError as exc:
        raise HealthInputError(str(exc))


def gpu_source(gpu_health, devices):
    """The availability entry of the GPUs' readings: how many nodes and GPUs, how many matched a device."""
    gpus = sum(len(facts["gpus"]) for facts in gpu_health)
    matched = sum(1 for d in devices if d.get("gpu"))
    unread = [facts.get("node") or "?" for facts in gpu_health if not facts.get("available")]
    detail = ("the GPUs' own readings (nvidia-smi, the kernel log's Xids) on %d node(s): %d GPU(s), %d matched to a "
              "DRA device by its %s attribute" % (len(gpu_health), gpus, matched, UUID_ATTRIBUTE))
    if unread:
        detail += "; nvidia-smi gave no report on %s" % ", ".join(sorted(unread))
    return {"available": True, "gate": None, "detail": detail}


def gpus_unmatched(gpus, devices, driver):
    """The GPUs read on the nodes that no published device names by its uuid (or, for a MIG device, parentUUID)
    attribute (without a driver filter: with one, the other drivers' devices are not read)."""
    if not gpus or driver is not None:
        return []
    named = set(d.get("gpu_uuid") or d["uuid"] for d in devices if d.get("gpu_uuid") or d.get("uuid"))
    return [dict(gpu) for uuid, gpu in sorted(gpus.items()) if uuid not in named]


def check_inputs(first_seen, unknown_after):
    """The checked first_seen; raises HealthInputError naming the option and the fix."""
    if isinstance(unknown_after, bool) or not isinstance(unknown_after, int) or unknown_after < 0:
        raise HealthInputError("unknown_after is %r; give a whole number of seconds, 0 or more" % (unknown_after,))
    return check_first_seen(first_seen)


def _new_entry(key, where, published):
    return {"driver": key[0], "pool": key[1], "device": key[2], "id": device_key(*key),
            "node": where.get("node"), "published": published, "taints": list(where.get("taints") or []),
            "uuid": where.get("uuid"), "gpu_uuid": where.get("gpu_uuid") or where.get("uuid"), "reports": [],
            "claims": [], "pods": []}


def _report_view(report):
    return {"namespace": report["namespace"], "pod": report["pod"], "container": report["container"],
            "resource": report["resource"], "resource_id": report["resource_id"], "health": report["health"],
            "message": report["message"]}


def _unresolved_view(report):
    view = _report_view(report)
    view.update(node=report["node"], claim=report["claim"], request=report["request"],
                candidates=[device_key(*k) for k in report["candidates"]])
    return view


def _reported_entries(pods, claims_by_name, published, driver):
    """Devices the pods report on (entries keyed by device), the reports naming no single device, and how
    many pods carry the health field."""
    entries, unresolved, pods_with_field = {}, [], 0
    for pod in pods:
        if not has_health_field(pod):
            continue
        pods_with_field += 1
        for report in pod_reports(pod, claims_by_name):
            key = report["device"]
            if key is None:
                if driver is None or any(k[0] == driver for k in report["candidates"]) or not report["candidates"]:
                    unresolved.append(_unresolved_view(report))
                continue
            if driver is not None and key[0] != driver:
                continue
            if key not in entries:
                entries[key] = _new_entry(key, published.get(key) or {"node": report["node"]}, key in published)
            entries[key]["reports"].append(_report_view(report))
    return entries, unresolved, pods_with_field


def _add_published(entries, published, driver):
    """Every published device gets an entry; returns how many published devices carry taints."""
    devices_with_taints = 0
    for key, where in published.items():
        if driver is not None and key[0] != driver:
            continue
        if where["taints"]:
            devices_with_taints += 1
        if key not in entries:
            entries[key] = _new_entry(key, where, True)
    return devices_with_taints


def _judged(entry, used, first_seen, now, gpus):
    """An entry with its users, health, condition and since filled in (gpus: devices.gpu_health.gpus_by_uuid)."""
    entry["claims"] = sorted(used["claims"])
    entry["pods"] = sorted(used["pods"], key=lambda p: (p["namespace"] or "", p["name"] or ""))
    entry["health"] = worst_health(r["health"] for r in entry["reports"])
    gpu_uuid = entry.get("gpu_uuid") or entry["uuid"]
    entry["gpu"] = (gpus or {}).get(gpu_uuid) if gpu_uuid else None
    entry["condition"], entry["reasons"] = device_condition(entry["health"], entry["taints"], entry["gpu"])
    since, source = _since(entry["id"], entry["condition"], entry["taints"], first_seen, now)
    entry["since"] = format_time(since) if since else None
    entry["since_source"] = source
    entry["for_seconds"] = int((now - since).total_seconds()) if since else None
    entry["in_use"] = bool(entry["pods"])
    return entry


def _summary(devices, unhealthy, long_unknown, unresolved, pods_with_field):
    summary = dict((c.replace("-", "_"), 0) for c in CONDITIONS)
    for entry in devices:
        summary[entry["condition"].replace("-", "_")] += 1
    summary.update(devices=len(devices), published=sum(1 for d in devices if d["published"]),
                   tainted=sum(1 for d in devices if d["taints"]),
                   unhealthy_in_use=sum(1 for d in unhealthy if d["in_use"]),
                   long_unknown=len(long_unknown), unresolved=len(unresolved),
                   pods_reporting=pods_with_field)
    return summary


def device_health(slices, claims, pods, now, first_seen=None, unknown_after=600, driver=None, gpu_health=None):
    """The device health report (see the module dra_device_health_info for every field).

    slices, claims, pods: the API's objects (pods: live ones, whole). now: aware datetime.
    first_seen: an earlier run's ``first_seen``; unknown_after: seconds a device must have been Unknown to
    count as long Unknown; driver: only this driver's devices; gpu_health: the nodes' dra_gpu_health facts.
    """
    first_seen = check_inputs(first_seen, unknown_after)
    gpus = check_gpu_health(gpu_health)
    claims = list(claims)
    reserved = set(r.get("uid") for c in claims for r in reserved_for(c))
    pods = [p for p in pods if names_claims(p) or _meta(p).get("uid") in reserved]  # only these can hold devices
    published = published_devices(slices)
    users = device_users(claims, pod_index(pods), pods_naming_claims(pods))
    claims_by_name = dict(((_meta(c).get("namespace"), _meta(c).get("name")), claim_devices(c)) for c in claims)

    entries, unresolved, pods_with_field = _reported_entries(pods, claims_by_name, published, driver)
    devices_with_taints = _add_published(entries, published, driver)
    devices = [_judged(entries[key], users.get(key) or {"claims": [], "pods": []}, first_seen, now, gpus)
               for key in sorted(entries, key=lambda k: tuple(x or "" for x in k))]

    unhealthy = [d for d in devices if d["condition"] == COND_UNHEALTHY]
    long_unknown = [d for d in devices if d["condition"] == COND_UNKNOWN and d["for_seconds"] >= unknown_after]
    return {
        "devices": devices,
        "summary": _summary(devices, unhealthy, long_unknown, unresolved, pods_with_field),
        "unhealthy": [_brief(d) for d in unhealthy],
        "unhealthy_in_use": [_brief(d, pods=True) for d in unhealthy if d["in_use"]],
        "long_unknown": [_brief(d, pods=True) for d in long_unknown],
        "driver_taints": [dict(t, driver=d["driver"], pool=d["pool"], device=d["device"], node=d["node"])
                          for d in devices for t in d["taints"]],
        "unresolved": unresolved,
        "first_seen": dict((d["id"], {"condition": d["condition"], "since": d["since"]})
                           for d in devices if d["since"]),
        "seen": {SOURCE_POD_STATUS: pods_with_field, SOURCE_SLICE_TAINTS: devices_with_taints},
        "gpus_unmatched": gpus_unmatched(gpus, devices, driver),
    }


def _brief(entry, pods=False):
    """What acting on a device needs: driver, pool, device (a DeviceTaintRule's selector), node, since, why."""
    brief = {"driver": entry["driver"], "pool": entry["pool"], "device": entry["device"], "id": entry["id"],
             "node": entry["node"], "since": entry["since"], "since_source": entry["since_source"],
             "for_seconds": entry["for_seconds"], "reasons": entry["reasons"], "in_use": entry["in_use"]}
    if pods:
        brief.update(claims=entry["claims"], pods=entry["pods"])
    return brief


def problems(report, unknown_after):
    """One line per finding an operator must act on: unhealthy devices in use, long Unknown, unresolved."""
    lines = []
    for dev in report["unhealthy_in_use"]:
        lines.append("device %s on %s is unhealthy (%s) since %s and in use by pod(s) %s" % (
            dev["id"], dev["node"], "; ".join(dev["reasons"]), dev["since"],
            ", ".join("%s/%s" % (p["namespace"], p["name"]) for p in dev["pods"])))
    for dev in report["long_unknown"]:
        lines.append("device %s on %s has been Unknown for %ds (since %s, %s; limit %ds)" % (
            dev["id"], dev["node"], dev["for_seconds"], dev["since"], dev["since_source"], unknown_after))
    for rep in report["unresolved"]:
        if rep["health"] != HEALTHY:
            lines.append("pod %s/%s reports %s for %s (resourceID %s), which does not say which of %s" % (
                rep["namespace"], rep["pod"], rep["health"], rep["resource"], rep["resource_id"],
                ", ".join(rep["candidates"]) or "no allocated device"))
    for gpu in report.get("gpus_unmatched") or []:
        if gpu["condition"] == GPU_UNHEALTHY:
            lines.append("%s, and no DRA device publishes its %s: take it out of service on the node"
                         % ("; ".join(gpu_reasons(gpu)), UUID_ATTRIBUTE))
    return lines


# ---------------------------------------------------------------------------
# Drivers gone from the nodes they publish for (kubernetes#141912)
# ---------------------------------------------------------------------------

def _pod_readiness(pod):
    """(ready, since) of a pod: its Ready condition (a pod being deleted is not ready), since its last change."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True" and not _meta(pod).get("deletionTimestamp")
            return ready, cond.get("lastTransitionTime")
    return False, None


def _daemonset_pods(pods, namespace, names, node):
    return [p for p in pods if _meta(p).get("namespace") == namespace and (p.get("spec") or {}).get("nodeName") == node
            and any(r.get("controller") and r.get("kind") == "DaemonSet" and r.get("name") in names
                    for r in _meta(p).get("ownerReferences") or [])]


def _driver_absence(driver, node, sets, pods, now):
    """Why the driver's plugin is not on the node (its DaemonSets' pods there), or None while it is (or has been
    not ready for less than DRIVER_NOT_READY_AFTER seconds)."""
    found = []
    for namespace, names in sorted(sets.items()):
        found += _daemonset_pods(pods, namespace, names, node)
    states = [(_meta(p).get("namespace"), _meta(p).get("name")) + _pod_readiness(p) for p in found]
    if any(ready for dummy, dummy2, ready, dummy3 in states):
        return None
    recent = [since for dummy, dummy2, dummy3, since in states
              if since and (now - parse_api_time(since)).total_seconds() < DRIVER_NOT_READY_AFTER]
    if recent:
        return None
    where = ", ".join("%s/%s" % (ns, n) for ns, names in sorted(sets.items()) for n in sorted(names))
    if not states:
        return "driver %s publishes devices for node %s but no pod of its DaemonSet %s runs there" % (
            driver, node, where)
    return "driver %s publishes devices for node %s but its pod %s there is not ready (since %s)" % (
        driver, node, ", ".join("%s/%s" % (ns, n) for ns, n, dummy, dummy2 in states),
        ", ".join(since or "unknown" for dummy, dummy2, dummy3, since in states))


def drivers_gone(devices, daemonsets, pods, now):
    """[{driver, node, daemonsets, reason}] of the drivers whose kubelet plugin is gone from a node they still
    publish devices for: no pod of the driver's DaemonSets (drivers.checks.driver_accounts) on the node is Ready,
    and none has turned not Ready less than DRIVER_NOT_READY_AFTER seconds ago. Only node-local devices count
    (published with a node name); a driver no DaemonSet runs is not judged.

    devices: device_health()'s devices; daemonsets: the DaemonSet objects; pods: live pods (whole); now: aware.
    """
    pairs = sorted(set((d["driver"], d["node"]) for d in devices
                       if d.get("published") and d.get("node") and not is_marker(d["node"])))
    sets_of = {}
    for entry in driver_accounts(daemonsets, sorted(set(driver for driver, dummy in pairs))):
        sets_of.setdefault(entry["driver"], {}).setdefault(entry["namespace"], set()).add(entry["daemonset"])
    out = []
    for driver, node in pairs:
        sets = sets_of.get(driver)
        reason = _driver_absence(driver, node, sets, pods, now) if sets else None
        if reason:
            out.append({"driver": driver, "node": node, "reason": reason, "daemonsets": sorted(
                "%s/%s" % (ns, n) for ns, names in sets.items() for n in names)})
    return out
