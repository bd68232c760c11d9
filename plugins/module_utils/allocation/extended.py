# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Extended resources backed by DRA (DRAExtendedResource): the claim kube-scheduler makes for a pod's extended
resource requests, as the allocation explainer searches it.

A pod asking for an extended resource (``example.com/gpu: 2`` in a container's requests) that a DeviceClass
maps - its ``spec.extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/<class name>`` -
gets, on each node whose allocatable does not list the resource (a device plugin would serve it there), a claim
the scheduler writes only when it binds the pod. Its requests: per resource, one ExactCount request per
long-lived container (a regular container or a sidecar init container) of what it asks; the other init
containers reuse the devices of the long-lived containers after them and ask for the rest, of which the
largest is requested once. When several classes name the same resource, the class created last is used
(the first name in order when created at the same time).

Before 1.38 (``MAPPING_FROM_CURRENT_CLASSES_FROM``) kube-scheduler's cache of these names keeps only the class that
last took a name, so its mapping depends on the order of events the cluster's objects do not record: deleting any
class that names a resource (the winner or not), or renaming its resource, drops the name until a class naming it
is created or updated or the scheduler restarts (the pod then stays Pending with "Insufficient <name>"); and a
class added after a class that wins its resource gets no implicit name. ``unsure_mappings`` names the resources
whose mapping the current classes cannot decide there. From 1.38 the cache keeps every class naming a resource and
maps it to the winner among those that exist, which the current classes decide.

Pure functions: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from ansible_collections.dra.admin.plugins.module_utils.common.times import parse_time

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
CLAIM_ANNOTATION = EXTENDED_RESOURCE_CLAIM_ANNOTATION
# The name the scheduler gives the claim until it is written (its label in the explanations).
CLAIM_NAME = "<extended-resources>"
_INTEGER = re.compile(r"^\+?([0-9]+)$")
# From this release kube-scheduler maps an extended resource name to the winner among the DeviceClasses that exist
# (k8s.io/dynamic-resource-allocation deviceclass/extendedresourcecache keeps every class naming it); before, to
# the class that last took it, forgotten when any class naming it is deleted or renamed.
MAPPING_FROM_CURRENT_CLASSES_FROM = 38


def is_extended_resource_name(name):
    """A name a DeviceClass may back: an extended resource (qualified, not in the kubernetes.io namespaces, not a
    quota ``requests.`` name) or a class's implicit name."""
    if name.startswith(IMPLICIT_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def class_mapping(classes):
    """{resource name: DeviceClass name} of the classes (a list or {name: class}): each class's implicit name, and
    its spec.extendedResourceName (the class created last wins; at the same time, the first name)."""
    items = list(classes.values()) if isinstance(classes, dict) else list(classes)
    mapping, explicit = {}, {}
    for item in items:
        meta, spec = item.get("metadata") or {}, item.get("spec") or {}
        name = meta.get("name")
        mapping[IMPLICIT_PREFIX + name] = name
        resource = spec.get("extendedResourceName")
        if resource:
            created = parse_time(meta.get("creationTimestamp")) or 0
            best = explicit.get(resource)
            if best is None or created > best[0] or (created == best[0] and name < best[1]):
                explicit[resource] = (created, name)
    mapping.update((resource, name) for resource, (dummy, name) in explicit.items())
    return mapping


def unsure_mappings(classes, release):
    """{resource name: why}: the names kube-scheduler of the release (minor; None: the newest) may map otherwise
    than ``class_mapping`` of the current classes says, because its cache depends on their history
    (``MAPPING_FROM_CURRENT_CLASSES_FROM``): before 1.38 each explicit name (a class naming it may have been
    deleted or renamed since), and the implicit name of a class another class wins the explicit name from (not
    mapped when it was added after the winner). Empty from 1.38."""
    if release is None or release >= MAPPING_FROM_CURRENT_CLASSES_FROM:
        return {}
    items = list(classes.values()) if isinstance(classes, dict) else list(classes)
    mapping, out = class_mapping(items), {}
    for item in items:
        name = (item.get("metadata") or {}).get("name")
        resource = (item.get("spec") or {}).get("extendedResourceName")
        if not resource:
            continue
        out[resource] = (
            "kube-scheduler before 1.%d forgets extended resource %s when any DeviceClass naming it is deleted or "
            "renames it, until a class naming it is created or updated or the scheduler restarts (the pod then stays "
            "Pending with \"Insufficient %s\"); the cluster's current classes cannot show whether that happened"
            % (MAPPING_FROM_CURRENT_CLASSES_FROM, resource, resource))
        if mapping.get(resource) != name:
            out[IMPLICIT_PREFIX + name] = (
                "kube-scheduler before 1.%d gives DeviceClass %s no name %s%s when it was added after %s, which "
                "wins %s from it; the cluster's current classes cannot show the order the scheduler saw them in"
                % (MAPPING_FROM_CURRENT_CLASSES_FROM, name, IMPLICIT_PREFIX, name, mapping.get(resource), resource))
    return out


def claims_by_owner(claims):
    """{pod UID: [claim, ...]}: the claims the scheduler made for pods' extended resources (its annotation), by the
    pod that controls them - read once for every pod of a run."""
    out = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        if (meta.get("annotations") or {}).get(CLAIM_ANNOTATION) != "true":
            continue
        for owner in meta.get("ownerReferences") or []:
            if owner.get("controller") and owner.get("uid"):
                out.setdefault(owner["uid"], []).append(claim)
    return out


def whole_quantity(value):
    """The integer a quantity such as "2" stands for; None for a fraction or a suffix ("500m", "1k")."""
    match = _INTEGER.match(str(value).strip())
    return int(match.group(1)) if match else None


def _containers(pod_spec):
    """[(index, container, long_lived)]: init containers first, then the containers (the scheduler's indices)."""
    inits = pod_spec.get("initContainers") or []
    out = [(i, c, c.get("restartPolicy") == "Always") for i, c in enumerate(inits)]
    out.extend((len(inits) + i, c, True) for i, c in enumerate(pod_spec.get("containers") or []))
    return out


def pod_backed_resources(pod_spec, mapping):
    """The resources of the pod's containers that a DeviceClass backs, with a non-zero request, sorted."""
    names = set()
    for dummy, container, dummy2 in _containers(pod_spec):
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name in mapping and is_extended_resource_name(name) and whole_quantity(value) != 0:
                names.add(name)
    return sorted(names)


def _request(index, container, resource, class_name, reusable):
    """(request dict or None, reused count) of one container for one resource, as the scheduler builds it."""
    requests = (container.get("resources") or {}).get("requests") or {}
    if resource not in requests:
        return None
    wanted = whole_quantity(requests[resource])
    if not wanted:
        return None
    reused = 0
    for other in reusable:
        if other is not None:
            reused += other["exactly"]["count"]
            if reused >= wanted:
                return None
    position = sorted(requests).index(resource)
    return {"name": "container-%d-request-%d" % (index, position),
            "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": wanted - reused}}


def claim_spec(pod_spec, resources, mapping):
    """The spec of the claim for the resources (those to allocate through DRA on a node), v1 request form."""
    containers = _containers(pod_spec)
    requests = []
    for resource in sorted(resources):
        class_name = mapping[resource]
        long_lived = [None] * len(containers)
        for index, container, lasting in containers:
            if lasting:
                long_lived[index] = _request(index, container, resource, class_name, ())
        largest = None
        for index, container, lasting in containers:
            if not lasting:
                request = _request(index, container, resource, class_name, long_lived[index:])
                if request is not None and (largest is None or largest["exactly"]["count"] < request["exactly"]["count"]):
                    largest = request
        requests.extend(r for r in [largest] + long_lived if r is not None)
    return {"devices": {"requests": sorted(requests, key=lambda r: r["name"])}}


def served_by_device_plugin(node, resources):
    """The resources the node's allocatable lists (non-zero): a device plugin serves them there, not DRA."""
    allocatable = ((node.get("status") or {}).get("allocatable") or {})
    return [r for r in resources if r in allocatable and whole_quantity(allocatable[r]) != 0]
