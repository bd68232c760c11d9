# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Canary claims: which device of each pool to probe, the objects of a probe, how far a probe got, and its
result as Prometheus text.

A probe is one short-lived pod with a claim (from a ResourceClaimTemplate) that selects one FREE device of
one pool through a CEL selector and tolerates no device taint; node-local pools are pinned to their node.
Its phases: ``allocation`` (pod created until the claim is allocated), ``prepare`` (allocated until the
container started: the driver's NodePrepareResources and the container's start), ``device`` (the container
saw the device: the environment variables and device nodes the driver injects), ``unprepare`` (pod
deleted until the pod and the claim are gone: NodeUnprepareResources and deallocation).

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import json
import re

from ansible_collections.dra.admin.plugins.module_utils.allocation.extended import class_mapping, pod_backed_resources
from ansible_collections.dra.admin.plugins.module_utils.claims.capacity import (
    allocator_rules, class_drivers, devices_by_pool, judged_devices, request_classes,
)
from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import SOURCE_EXTENDED_RESOURCE, pod_claim_refs
from ansible_collections.dra.admin.plugins.module_utils.kube.locations import is_marker
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import UNSCHEDULABLE_TAINT, is_cordoned
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import (
    current_slices, device_fields, device_location, pool_key,
)
from ansible_collections.dra.admin.plugins.module_utils.common.names import MANAGED_BY, MANAGED_BY_LABEL
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import labels_text

PHASES = ("allocation", "prepare", "device", "unprepare")

METRIC_PHASE_SECONDS = "dra_admin_canary_phase_seconds"
METRIC_SUCCESS = "dra_admin_canary_success"
METRIC_SKIPPED = "dra_admin_canary_skipped"
METRIC_LAST_RUN = "dra_admin_canary_last_run_timestamp_seconds"

RUN_LABEL = "dra.admin/canary-run"
PURPOSE_LABEL = "dra.admin/purpose"
PURPOSE = "canary"
CLAIM_NAME = "device"
CONTAINER = "canary"
PATH_MARK = "dra-canary-path:"

# What the example driver (gpu.example.com) puts into a container through CDI for each prepared device.
DEFAULT_EXPECT_ENV = {"GPU_DEVICE_{device_env}_RESOURCE_CLAIM": "{claim_uid}"}
PLACEHOLDERS = ("driver", "pool", "node", "device", "device_env", "claim_uid")

_NON_WORD = re.compile(r"[^A-Za-z0-9_]")


def device_env(name):
    """A device name as drivers put it into environment variable names (non-word characters to _, upper case)."""
    return _NON_WORD.sub("_", name or "").upper()


def template_errors(field, templates):
    """Messages for templates (strings) that name a placeholder this module does not fill."""
    errors = []
    for text in templates:
        for name in re.findall(r"{([^{}]*)}", text or ""):
            if name not in PLACEHOLDERS:
                errors.append("%s: {%s} in %r is not a placeholder; use %s" % (
                    field, name, text, ", ".join("{%s}" % p for p in PLACEHOLDERS)))
    return errors


def fill(text, values):
    """A template with its placeholders filled (a missing value fills in as empty)."""
    return re.sub(r"{([a-z_]+)}", lambda m: str(values.get(m.group(1)) or ""), text)


# --- which device of which pool -------------------------------------------------------------

def _cel_string(text):
    return json.dumps(text)


def attribute_clause(driver, name, value):
    """A CEL comparison of one device attribute with its value, or None for a value CEL cannot compare here
    (versions). Unqualified names are in the driver's domain."""
    domain, _slash, short = name.rpartition("/")
    ref = "device.attributes[%s].%s" % (_cel_string(domain or driver), short)
    if "string" in value:
        return "%s == %s" % (ref, _cel_string(value["string"]))
    if "bool" in value:
        return "%s == %s" % (ref, "true" if value["bool"] else "false")
    if "int" in value:
        return "%s == %d" % (ref, int(value["int"]))
    return None


def _comparable(driver, attributes):
    """{attribute name: (its value as compared, CEL clause)} of the attributes CEL can compare."""
    out = {}
    for name, value in sorted((attributes or {}).items()):
        clause = attribute_clause(driver, name, value or {})
        if clause:
            out[name] = (json.dumps(value, sort_keys=True), clause)
    return out


def device_selector(driver, attributes, others):
    """(CEL expression selecting the device, whether it selects only this device among `others`).

    `attributes`: the device's; `others`: the attributes of every other device it must be told apart from.
    The first attribute whose value no other device has is enough; without one, every attribute (the
    selector then also matches the devices that look the same, which are as good a probe)."""
    own = _comparable(driver, attributes)
    theirs = [_comparable(driver, other) for other in others]
    base = "device.driver == %s" % _cel_string(driver)
    for name, (value, clause) in own.items():
        if all(other.get(name, (None,))[0] != value for other in theirs):
            return "%s && %s" % (base, clause), True
    clauses = [clause for _value, clause in own.values()]
    unique = not any(all(other.get(n, (None,))[0] == v for n, (v, _c) in own.items()) for other in theirs)
    return " && ".join([base] + clauses), unique


def class_for_driver(device_classes, driver, wanted=None):
    """The DeviceClass a probe of the driver asks for: `wanted` (the user's, by driver), else the first class
    (by name) whose selectors are only ``device.driver == "<driver>"``; None when there is none."""
    if wanted and wanted.get(driver):
        return wanted[driver]
    names = sorted((c.get("metadata") or {}).get("name") for c in device_classes
                   if class_drivers(c) == {driver})
    return names[0] if names else None


def _published(slices):
    """{(driver, pool, device): (location, attributes)} of the current slices."""
    out = {}
    for item in current_slices(slices):
        driver, pool = pool_key(item)
        for device in (item.get("spec") or {}).get("devices") or []:
            attributes = device_fields(device).get("attributes") or {}
            out[(driver, pool, device.get("name"))] = (device_location(item, device), attributes)
    return out


def _pool_counts(mine):
    """Counts of one pool's devices (their records)."""
    return {"total": len(mine), "free": sum(1 for d in mine if d["free"]),
            "tainted": sum(1 for d in mine if d["tainted"])}


ANY_DRIVER = None  # waiting_pods' key for pods whose claims' drivers cannot be told (they may want any pool)


def _key(obj):
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


def _wanted_classes(pod, by_key, mapping):
    """The DeviceClass names a waiting pod asks for: its claims' (every source, claims.pod_claim_refs) that are
    not allocated, and, until the scheduler has made the claim for them, its extended resources a class backs
    (allocation.extended: the claim exists only once the pod is bound)."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    names, extended_claimed = [], False
    for _name, claim_name, source in pod_claim_refs(pod):
        extended_claimed = extended_claimed or source == SOURCE_EXTENDED_RESOURCE
        claim = by_key.get((namespace, claim_name)) if claim_name else None
        if claim is not None and not (claim.get("status") or {}).get("allocation"):
            names.extend(request_classes(claim).values())
    if not extended_claimed:
        names.extend(mapping[r] for r in pod_backed_resources(pod.get("spec") or {}, mapping))
    return names


def waiting_pods(pods, claims, device_classes):
    """{driver (ANY_DRIVER when it cannot be told): [namespace/pod]} of the pods that wait for devices: Pending,
    not yet on a node, not being deleted, with a claim that is not allocated or an extended resource a
    DeviceClass backs. A claim's drivers are those its requests' DeviceClasses select (class_drivers); a class
    that selects otherwise, or that does not exist, may be satisfied by any driver's pool."""
    by_key = dict((_key(c), c) for c in claims)
    classes = dict(((c.get("metadata") or {}).get("name"), c) for c in device_classes)
    mapping = class_mapping(device_classes)
    out = {}
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if status.get("phase") != "Pending" or (pod.get("spec") or {}).get("nodeName") or meta.get(
                "deletionTimestamp"):
            continue
        namespace = meta.get("namespace")
        wanted = set()
        for class_name in _wanted_classes(pod, by_key, mapping):
            drivers = class_drivers(classes[class_name]) if class_name in classes else None
            wanted.update(drivers or [ANY_DRIVER])
        for driver in wanted:
            out.setdefault(driver, []).append("%s/%s" % (namespace, meta.get("name")))
    return dict((driver, sorted(names)) for driver, names in out.items())


def waited_for(waiting, driver):
    """The pods of waiting_pods that may wait for a pool of `driver`."""
    return sorted(set((waiting or {}).get(driver, []) + (waiting or {}).get(ANY_DRIVER, [])))


def _skip(driver, pool, reason, counts=None):
    out = {"driver": driver, "pool": pool, "reason": reason}
    out.update(counts or {})
    return out


# A probe of a cordoned node named in `on_nodes` tolerates the taint the cordon stands for.
CORDON_TOLERATION = dict(UNSCHEDULABLE_TAINT, operator="Exists")


def _pool_problem(key, pools, counts, nodes, location, on_nodes=()):
    """Why a pool is not probed, or None. A node of `on_nodes` is probed even when cordoned."""
    if not pools[key]["allocatable"]:
        return "the scheduler does not allocate from it: %s" % pools[key]["problem"]
    if counts["free"] == 0:
        return "no free device (%d devices, %d tainted, the rest allocated or unavailable)" % (
            counts["total"], counts["tainted"])
    if not is_marker(location) and location not in nodes:
        return "its node %s is not in the cluster" % location
    if not is_marker(location) and is_cordoned(nodes[location]) and location not in on_nodes:
        return "its node %s is cordoned" % location
    return None


def plan_probes(slices, claims, device_classes, nodes, server_version=None, taint_rules=(), drivers=(), pools=(),
                classes=None, waiting=None, on_nodes=()):
    """{probes: [...], skipped: [...]}: one probe per pool of `drivers` (every driver when empty) and `pools`
    (every pool when empty) with a free device, each {driver, pool, node, device, device_class, selector,
    unique, free, total}; the other pools in `skipped` with the reason. `nodes`: {name: Node}; `classes`:
    {driver: DeviceClass name} to use instead of the one found; `waiting`: waiting_pods' map - a pool that a
    pod may be waiting for is skipped (the canary never takes a device a user's pod waits for), naming the
    pods (`waiting_pods`). `on_nodes`: only the node-local pools of these nodes, probed even when cordoned (the
    probe's `cordoned` says so, and its pod tolerates the cordon)."""
    judged = judged_devices(slices, claims, allocator_rules(server_version), taint_rules)
    devices, published = judged["devices"], _published(slices)
    probes, skipped = [], []
    local = pools_on(published, on_nodes) if on_nodes else set()
    pool_devices = devices_by_pool(devices)
    for key in sorted(judged["pools"], key=lambda k: tuple(x or "" for x in k)):
        driver, pool = key
        if (drivers and driver not in drivers) or (pools and pool not in pools) or (on_nodes and key not in local):
            continue
        mine = pool_devices.get(key) or []
        counts = _pool_counts([d for dummy, d in mine])
        free = [name for name, d in mine if d["free"]]
        location = published[key + (free[0],)][0] if free else None
        problem = _pool_problem(key, judged["pools"], counts, nodes, location, on_nodes)
        device_class = class_for_driver(device_classes, driver, classes)
        if problem is None and device_class is None:
            problem = ('no DeviceClass selects only device.driver == "%s": name one in device_classes' % driver)
        contending = waited_for(waiting, driver) if problem is None else []
        if contending:
            problem = ("pods wait for devices that this pool may give (%s): its free devices are left to them "
                       "(skip_waited_pools: false probes it anyway)" % ", ".join(contending[:5]))
        if problem is None:
            probe, problem = _probe(key, free[0], location, published)
        if problem is not None:
            entry = _skip(driver, pool, problem, counts)
            if contending:
                entry["waiting_pods"] = contending
            skipped.append(entry)
            continue
        probe.update(device_class=device_class, cordoned=bool(probe["node"]) and is_cordoned(nodes[probe["node"]]),
                     **counts)
        probes.append(probe)
    return {"probes": probes, "skipped": skipped}


def pools_on(published, on_nodes):
    """{(driver, pool)} with a device node-local to one of `on_nodes` (published: {(driver, pool, device):
    (location, attributes)})."""
    return set(k[:2] for k, (loc, _attrs) in published.items() if loc in on_nodes)


def _probe(key, device, location, published):
    """(probe, None) for the chosen device, or (None, why it cannot be probed)."""
    driver, pool = key
    node = None if is_marker(location) else location
    attributes = published[key + (device,)][1]
    # Node-local: told apart from the driver's other devices on the same node; else from all of the driver's.
    others = [attrs for k, (loc, attrs) in published.items()
              if k[0] == driver and k != key + (device,) and (node is None or loc == node)]
    selector, unique = device_selector(driver, attributes, others)
    if node is None and not unique:
        return None, ("its devices are not bound to one node (%s) and no attribute tells device %s apart from "
                      "the driver's other devices" % (location, device))
    return {"driver": driver, "pool": pool, "node": node, "device": device, "selector": selector,
            "unique": unique}, None


def published_pools(slices):
    """{(driver, pool)} of every pool the current slices publish (whatever the canary would make of it)."""
    return set(pool_key(item) for item in current_slices(slices))


def wanted_pools(published, drivers, pools):
    """Input errors for drivers or pools asked for that the cluster does not publish. published: {(driver,
    pool)} (published_pools). A pool is looked for among the asked drivers' pools (every driver's when none)."""
    errors = []
    for driver in drivers or ():
        if driver not in set(d for d, _p in published):
            errors.append("drivers: %s publishes no ResourceSlice pool; check the name (dra_slices_info lists "
                          "the drivers)" % driver)
    theirs = sorted(p for d, p in published if not drivers or d in drivers)
    for pool in pools or ():
        if pool not in theirs:
            errors.append("pools: no pool %s%s (%s); check the name (dra_slices_info lists the pools)"
                          % (pool, " of %s" % ", ".join(drivers) if drivers else "",
                             "its pools: %s" % ", ".join(theirs[:10]) if theirs else "no pool is published"))
    return errors


def device_class_errors(device_classes, classes):
    """Input errors for the user's {driver: DeviceClass name} naming a class the cluster does not have."""
    names = set((c.get("metadata") or {}).get("name") for c in device_classes)
    return ["device_classes: DeviceClass %s (for driver %s) does not exist; create it or name one of: %s"
            % (name, driver, ", ".join(sorted(n for n in names if n)[:10]) or "none")
            for driver, name in sorted((classes or {}).items()) if name not in names]


# --- the objects of a probe ---------------------------------------------------------------------

def object_name(run_id, index):
    """The name of a probe's template and pod: ``dra-canary-<run>-<n>``."""
    return "dra-canary-%s-%d" % (run_id, index)


def labels(run_id):
    return {MANAGED_BY_LABEL: MANAGED_BY, PURPOSE_LABEL: PURPOSE, RUN_LABEL: run_id}


def annotations(probe):
    return {"dra.admin/canary-driver": probe["driver"], "dra.admin/canary-pool": probe["pool"],
            "dra.admin/canary-device": probe["device"]}


def claim_template(api_version, name, namespace, run_id, probe):
    """The ResourceClaimTemplate of one probe: one device of the probe's DeviceClass matching its selector, no
    toleration (a tainted device is never chosen). v1beta1 puts the request's fields on the request itself."""
    request = {"deviceClassName": probe["device_class"], "selectors": [{"cel": {"expression": probe["selector"]}}],
               "allocationMode": "ExactCount", "count": 1}
    if api_version != "v1beta1":
        request = {"exactly": request}
    request["name"] = "device"
    meta = {"labels": labels(run_id), "annotations": annotations(probe)}
    return {"apiVersion": "resource.k8s.io/%s" % api_version, "kind": "ResourceClaimTemplate",
            "metadata": dict(meta, name=name, namespace=namespace),
            "spec": {"metadata": meta, "spec": {"devices": {"requests": [request]}}}}


def check_script(paths):
    """The container's command: its environment and the device nodes it finds, into its termination message."""
    found = " ".join("'%s'" % p.replace("'", "") for p in paths)
    script = "env"
    if paths:
        script += "; for p in %s; do if [ -e \"$p\" ]; then echo \"%s$p\"; fi; done" % (found, PATH_MARK)
    return ["sh", "-c", "{ %s; } > /dev/termination-log 2>&1" % script]


# The probe's container as Pod Security's restricted level wants it: not root (the nobody user, since the default image
# runs as root), no privilege escalation, no capability, the runtime's default seccomp profile. The check reads its
# environment and tests paths, and writes its termination message (the kubelet makes that file writable for any user).
CANARY_USER = 65534
CONTAINER_SECURITY = {"runAsNonRoot": True, "runAsUser": CANARY_USER, "runAsGroup": CANARY_USER,
                      "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                      "seccompProfile": {"type": "RuntimeDefault"}}


def canary_pod(name, namespace, run_id, probe, image, expect_paths=(), tolerations=()):
    """The probe's pod: no restarts, the check as its command, pinned to the pool's node when it has one; its
    container unprivileged (CONTAINER_SECURITY), so that it passes Pod Security's restricted level."""
    values = dict(probe, device_env=device_env(probe["device"]))
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "enableServiceLinks": False,
            "automountServiceAccountToken": False,
            "resourceClaims": [{"name": CLAIM_NAME, "resourceClaimTemplateName": name}],
            "containers": [{"name": CONTAINER, "image": image, "imagePullPolicy": "IfNotPresent",
                            "command": check_script([fill(p, values) for p in expect_paths]),
                            "terminationMessagePolicy": "File",
                            "securityContext": copy.deepcopy(CONTAINER_SECURITY),
                            "resources": {"claims": [{"name": CLAIM_NAME}]}}]}
    if probe.get("node"):
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [probe["node"]]}]}]}}}
    tolerations = list(tolerations) + ([CORDON_TOLERATION] if probe.get("cordoned") else [])
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels(run_id),
                         "annotations": annotations(probe)},
            "spec": spec}


# --- how far a probe got ------------------------------------------------------------------------

def claim_name_of(pod):
    """The name of the claim made for the pod from its template, once the controller made it."""
    for status in ((pod or {}).get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == CLAIM_NAME:
            return status.get("resourceClaimName")
    return None


def allocated_device(claim):
    """(driver, pool, device) of the claim's allocation, or None while it is not allocated."""
    results = ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
    if not results:
        return None
    return results[0].get("driver"), results[0].get("pool"), results[0].get("device")


def container_state(pod):
    """The canary container's state ({} while it has none): ``running`` or ``terminated`` once it started."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return status.get("state") or {}
    return {}


def waiting_reason(pod):
    """Why the pod is not running yet, from its status: the scheduler's condition or the container's waiting
    state ("" when the status says nothing)."""
    status = (pod or {}).get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return "not scheduled: %s" % (cond.get("message") or cond.get("reason") or "")
    waiting = container_state(pod).get("waiting") or {}
    if waiting:
        return ("%s %s" % (waiting.get("reason") or "", waiting.get("message") or "")).strip()
    return status.get("phase") or ""


def parse_report(message):
    """({environment variable: value}, [device paths found]) from the container's termination message."""
    env, paths = {}, []
    for line in (message or "").splitlines():
        if line.startswith(PATH_MARK):
            paths.append(line[len(PATH_MARK):])
        elif "=" in line:
            name, _equals, value = line.partition("=")
            env[name] = value
    return env, paths


def device_check(message, values, expect_env, expect_paths):
    """(whether the container saw the device, what is missing): each expected variable set to its value (an
    empty expected value: set to anything), each expected path present. `values` fill the placeholders."""
    env, paths = parse_report(message)
    missing = []
    for name_template, value_template in sorted((expect_env or {}).items()):
        name, value = fill(name_template, values), fill(value_template or "", values)
        if name not in env:
            missing.append("no %s in the container's environment" % name)
        elif value and env[name] != value:
            missing.append("%s=%s in the container, expected %s" % (name, env[name], value))
    for path_template in expect_paths or ():
        path = fill(path_template, values)
        if path not in paths:
            missing.append("no %s in the container" % path)
    return not missing, missing


# --- a probe's progress, phase by phase ---------------------------------------------------------

def new_state(now):
    """A probe's progress right after its pod was created."""
    return {"phase": "allocation", "since": now, "phases": {}, "claim": None, "claim_uid": None,
            "allocated": None, "delete": False, "deleted_at": None, "done": False}


def _finish_phase(state, now, ok, detail=""):
    state["phases"][state["phase"]] = {"ok": ok, "seconds": round(now - state["since"], 3), "detail": detail}
    state["since"] = now


def _fail(state, now, detail):
    _finish_phase(state, now, False, detail)
    state["delete"] = True


def _allocation(state, probe, pod, claim, now, timeouts):
    allocated = allocated_device(claim)
    if allocated:
        state["allocated"] = {"driver": allocated[0], "pool": allocated[1], "device": allocated[2]}
        if allocated[:2] != (probe["driver"], probe["pool"]):
            return _fail(state, now, "the claim got device %s/%s/%s, not one of pool %s" % (
                allocated + (probe["pool"],)))
        _finish_phase(state, now, True)
        state["phase"] = "prepare"
    elif now - state["since"] > timeouts["allocation"]:
        _fail(state, now, "no device allocated after %ss: %s" % (timeouts["allocation"], waiting_reason(pod)))


def _prepare(state, pod, now, timeouts):
    started = container_state(pod)
    if started.get("running") or started.get("terminated"):
        _finish_phase(state, now, True)
        state["phase"] = "device"
    elif now - state["since"] > timeouts["prepare"]:
        _fail(state, now, "the container did not start within %ss: %s" % (timeouts["prepare"], waiting_reason(pod)))


def _device(state, probe, pod, now, timeouts, expect):
    ended = container_state(pod).get("terminated")
    if ended:
        values = dict(probe, device=state["allocated"]["device"], claim_uid=state["claim_uid"],
                      device_env=device_env(state["allocated"]["device"]))
        ok, missing = device_check(ended.get("message"), values, expect["env"], expect["paths"])
        if ended.get("exitCode") not in (0, None):
            ok, missing = False, missing + ["the check exited with %s" % ended.get("exitCode")]
        _finish_phase(state, now, ok, "; ".join(missing))
        state["delete"] = True
    elif now - state["since"] > timeouts["prepare"]:
        _fail(state, now, "the container did not finish its check within %ss" % timeouts["prepare"])


def advance(state, probe, pod, claim, now, timeouts, expect):
    """The probe's progress after one look at its pod and claim (None: not there). `timeouts`: seconds per
    phase {allocation, prepare, unprepare}; `expect`: {env, paths} the container must see. Sets
    ``delete`` when the pod is to be deleted (the caller deletes it and sets ``deleted_at``), ``done`` at
    the end."""
    if claim:
        state["claim"] = (claim.get("metadata") or {}).get("name")
        state["claim_uid"] = (claim.get("metadata") or {}).get("uid")
    if state["deleted_at"] is not None:
        state["phase"] = "unprepare"
        if pod is None and claim is None:
            _finish_phase(state, now, True)
            state["done"] = True
        elif now - state["since"] > timeouts["unprepare"]:
            left = ["pod %s" % probe["pod"]] if pod is not None else []
            left += ["claim %s (%s)" % (state["claim"], claim_state(claim))] if claim is not None else []
            _finish_phase(state, now, False, "still there %ss after the pod was deleted: %s" % (
                timeouts["unprepare"], ", ".join(left)))
            state["done"] = True
        return state
    if state["phase"] == "allocation":
        _allocation(state, probe, pod, claim, now, timeouts)
    if state["phase"] == "prepare" and not state["delete"]:
        _prepare(state, pod, now, timeouts)
    if state["phase"] == "device" and not state["delete"]:
        _device(state, probe, pod, now, timeouts, expect)
    return state


def claim_state(claim):
    status = (claim or {}).get("status") or {}
    words = ["allocated" if status.get("allocation") else "not allocated"]
    if status.get("reservedFor"):
        words.append("reserved for %d" % len(status["reservedFor"]))
    if ((claim or {}).get("metadata") or {}).get("deletionTimestamp"):
        words.append("being deleted")
    return ", ".join(words)


def owned_by(obj, kind, name):
    return any(ref.get("kind") == kind and ref.get("name") == name
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def latest_warning(events):
    """The newest Warning event's "reason: message" ("" without one)."""
    warnings = [e for e in events or () if e.get("type") == "Warning"]
    if not warnings:
        return ""
    newest = max(warnings, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return "%s: %s" % (newest.get("reason"), newest.get("message"))


def probe_result(probe, state):
    """One probe's result: the probe, its phases {phase: {ok, seconds, detail}} in order, ``ok``, the first
    ``failed_phase`` (null when it passed) and the device it was given."""
    phases = dict((name, state["phases"][name]) for name in PHASES if name in state["phases"])
    failed = [name for name, phase in phases.items() if not phase["ok"]]
    if not state["done"] and "unprepare" not in phases:
        phases["unprepare"] = {"ok": False, "seconds": None, "detail": "not waited for"}
        failed.append("unprepare")
    out = dict(probe)
    out.update(phases=phases, ok=not failed, failed_phase=failed[0] if failed else None,
               allocated=state["allocated"], claim=state["claim"])
    return out


# --- results ------------------------------------------------------------------------------------


def metrics_text(results, skipped, now):
    """The run in the Prometheus text format (node-exporter's textfile collector): per driver, pool and phase
    its seconds and success (1 or 0; phases after a failed one are not run and have neither), skipped pools,
    and the time of the run (epoch seconds)."""
    lines = ["# HELP %s Seconds each phase of the DRA canary probe took (allocation, prepare, device, unprepare)."
             % METRIC_PHASE_SECONDS, "# TYPE %s gauge" % METRIC_PHASE_SECONDS]
    success = ["# HELP %s Whether each phase of the DRA canary probe passed (1) or failed (0)." % METRIC_SUCCESS,
               "# TYPE %s gauge" % METRIC_SUCCESS]
    for result in results:
        for phase, entry in result["phases"].items():
            labels_ = labels_text(driver=result["driver"], pool=result["pool"], phase=phase)
            if entry["seconds"] is not None:
                lines.append("%s%s %s" % (METRIC_PHASE_SECONDS, labels_, entry["seconds"]))
            success.append("%s%s %d" % (METRIC_SUCCESS, labels_, 1 if entry["ok"] else 0))
    lines += success
    lines += ["# HELP %s Pools the DRA canary did not probe (no free device, cordoned node, ...)." % METRIC_SKIPPED,
              "# TYPE %s gauge" % METRIC_SKIPPED]
    lines += ["%s%s 1" % (METRIC_SKIPPED, labels_text(driver=s["driver"], pool=s["pool"])) for s in skipped]
    lines += ["# HELP %s When the DRA canary last ran (Unix time)." % METRIC_LAST_RUN,
              "# TYPE %s gauge" % METRIC_LAST_RUN, "%s %d" % (METRIC_LAST_RUN, int(now))]
    return "\n".join(lines) + "\n"


def failed_pools(results):
    """``<driver>/<pool>: <first failed phase>`` of every probe that failed."""
    return ["%s/%s: %s" % (r["driver"], r["pool"], r["failed_phase"]) for r in results if not r["ok"]]


def would_probe(probes):
    """Check mode's lines: what each probe would be."""
    return ["would probe %s/%s: device %s%s, selector %s" % (
        p["driver"], p["pool"], p["device"], " on node " + p["node"] if p["node"] else "", p["selector"])
        for p in probes]


def summary_lines(results, skipped):
    """One line per probe and per skipped pool."""
    lines = []
    for r in results:
        times = ", ".join("%s %s" % (name, ("%.1fs" % p["seconds"]) if p["seconds"] is not None else "-")
                          + ("" if p["ok"] else " FAILED") for name, p in r["phases"].items())
        node = " on " + r["node"] if r["node"] else ""
        head = "%s/%s (device %s%s): %s" % (r["driver"], r["pool"], r["device"], node, "ok" if r["ok"] else "FAILED")
        detail = "; ".join("%s: %s" % (n, p["detail"]) for n, p in r["phases"].items() if p["detail"])
        lines.append("%s - %s%s" % (head, times, (" - " + detail) if detail else ""))
    for s in skipped:
        lines.append("%s/%s: skipped, %s" % (s["driver"], s["pool"], s["reason"]))
    return lines
