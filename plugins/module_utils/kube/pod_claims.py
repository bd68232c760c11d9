# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A pod's ResourceClaims from every source, and a claim's allocation and consumers, as the API objects say them.

A pod names a claim in ``spec.resourceClaims`` (by ``resourceClaimName``, or by a template whose claim
``status.resourceClaimStatuses`` names once it is made) and, for extended resources backed by DRA, in
``status.extendedResourceClaimStatus``; a claim's ``status.reservedFor`` names its consumers (pods, a workload's
PodGroup, others). Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _meta(obj):
    return obj.get("metadata") or {}


def _status(obj):
    return obj.get("status") or {}


def allocation(claim):
    return _status(claim).get("allocation")


def reserved_for(claim):
    return _status(claim).get("reservedFor") or []


POD_GROUP_API_GROUP = "scheduling.k8s.io"


POD_GROUP_RESOURCE = "podgroups"


CONSUMER_POD = "pod"


CONSUMER_POD_GROUP = "pod_group"


CONSUMER_OTHER = "other"


# Where a pod's claim is named (pod_claim_refs, pod_claims).
SOURCE_SPEC = "spec.resourceClaims"


SOURCE_TEMPLATE = "status.resourceClaimStatuses"


SOURCE_EXTENDED_RESOURCE = "status.extendedResourceClaimStatus"


# The annotation the scheduler puts on the claim it makes for a pod's extended resources.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def consumer_kind(ref):
    """pod, pod_group (a workload's PodGroup) or other, of one status.reservedFor entry."""
    if ref.get("resource") == "pods" and not ref.get("apiGroup"):
        return CONSUMER_POD
    if ref.get("resource") == POD_GROUP_RESOURCE and ref.get("apiGroup") == POD_GROUP_API_GROUP:
        return CONSUMER_POD_GROUP
    return CONSUMER_OTHER


def consumer_resource(ref):
    """(API group, resource) of a reservedFor entry: the key of a consumer index (see consumers)."""
    return ref.get("apiGroup") or "", ref.get("resource")


def pod_claim_refs(pod):
    """Every claim the pod names itself: [(pod claim name or None, ResourceClaim name or None, source)].

    A claim from a template that is not made yet (or not needed) has no ResourceClaim name; the claim for
    the pod's extended resources has no pod claim name (containers do not name it).
    """
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    made = dict((s.get("name"), s.get("resourceClaimName")) for s in status.get("resourceClaimStatuses") or [])
    refs = []
    for ref in spec.get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            refs.append((ref.get("name"), ref["resourceClaimName"], SOURCE_SPEC))
        else:
            refs.append((ref.get("name"), made.get(ref.get("name")), SOURCE_TEMPLATE))
    named = set(r[0] for r in refs)
    refs.extend((name, claim, SOURCE_TEMPLATE) for name, claim in sorted(made.items(), key=lambda i: i[0] or "")
                if name not in named and claim)
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        refs.append((None, extended, SOURCE_EXTENDED_RESOURCE))
    return refs


def names_claims(pod):
    """Whether the pod names any claim (from any field; one from a template not made yet counts)."""
    return bool(pod_claim_refs(pod))


def pod_claim_names(pod):
    """{pod claim name: ResourceClaim name} of the claims containers can name (claim:<name> in health reports)."""
    return dict((name, claim) for name, claim, dummy in pod_claim_refs(pod) if name and claim)


def reserves(claim, uid):
    """Whether the claim's reservedFor names the pod with this uid."""
    return any(consumer_kind(r) == CONSUMER_POD and r.get("uid") == uid for r in reserved_for(claim))


def pod_claims(pod, claims=()):
    """Sorted names of every ResourceClaim the pod uses, whichever field names it (see the module text):
    those pod_claim_refs finds in the pod, and among `claims` (any claims; only the pod's namespace counts)
    those whose reservedFor names the pod."""
    meta = _meta(pod)
    names = set(claim for dummy, claim, dummy2 in pod_claim_refs(pod) if claim)
    for claim in claims:
        if _meta(claim).get("namespace") == meta.get("namespace") and reserves(claim, meta.get("uid")):
            names.add(_meta(claim).get("name"))
    return sorted(names)


def claims_used_by(pods, claims=()):
    """{(namespace, claim name)} used by any of the pods (pod_claims of each)."""
    return set((_meta(p).get("namespace"), name) for p in pods for name in pod_claims(p, claims))


def allocated_devices(claim):
    results = ((allocation(claim) or {}).get("devices") or {}).get("results") or []
    return [{"request": r.get("request"), "driver": r.get("driver"), "pool": r.get("pool"),
             "device": r.get("device"), "admin_access": bool(r.get("adminAccess"))} for r in results]


def _true_conditions(claim, result):
    """The types of the conditions that are True in the claim's status of this allocated device (the scheduler
    finds the device's status by driver, pool and device)."""
    for device in _status(claim).get("devices") or []:
        if (device.get("driver"), device.get("pool"), device.get("device")) == (
                result.get("driver"), result.get("pool"), result.get("device")):
            return set(c.get("type") for c in device.get("conditions") or [] if c.get("status") == "True")
    return set()


def binding_waits(claim):
    """[{device, waiting, failed}] of the claim's allocated devices with binding conditions that keep kube-scheduler
    from binding the pod (its PreBind, ``isClaimReadyForBinding``): waiting, the binding conditions not True yet;
    failed, the binding failure conditions that are True (the scheduler then gives the allocation up)."""
    waits = []
    for result in ((allocation(claim) or {}).get("devices") or {}).get("results") or []:
        if not result.get("bindingConditions"):
            continue
        true = _true_conditions(claim, result)
        waiting = [c for c in result["bindingConditions"] if c not in true]
        failed = [c for c in result.get("bindingFailureConditions") or [] if c in true]
        if waiting or failed:
            waits.append({"device": "%s/%s/%s" % (result.get("driver"), result.get("pool"), result.get("device")),
                          "waiting": waiting, "failed": failed})
    return waits
