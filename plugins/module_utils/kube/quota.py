# -*- coding: utf-8 -*-
# Copyright: dra.admin contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""ResourceQuota on ResourceClaims, as kube-apiserver's quota admission charges a claim when it is created
(kubernetes pkg/quota/v1/evaluator/core/resource_claims.go): one ``count/resourceclaims.resource.k8s.io``, and per
DeviceClass ``<class>.deviceclass.resource.k8s.io/devices`` the devices its requests may take - a count as asked,
an ``All`` request the per-claim limit (the worst case), a ``firstAvailable`` request the most any of its
subrequests of that class may take. A claim whose charge takes a quota of its namespace past its hard limit (with
``status.used``) is refused: a claim from a pod's template is then not made, and the pod waits (the ResourceClaim
controller's event ``FailedResourceClaimCreation``).

Pure: no Ansible, no network.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dra.admin.plugins.module_utils.kube.quantity import QuantityError, quantity
from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import ALLOCATION_RESULTS_MAX_SIZE

CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"
DEVICES_PER_CLASS = ".deviceclass.resource.k8s.io/devices"
EXACT_COUNT = "ExactCount"
ALL = "All"


def devices_of_class(class_name):
    """The quota resource name of a DeviceClass's devices (``gpu.example.com`` ->
    ``gpu.example.com.deviceclass.resource.k8s.io/devices``)."""
    return class_name + DEVICES_PER_CLASS


def _devices(request):
    """Devices one (sub)request may take: its count, the per-claim limit for All, none for an unknown mode."""
    mode = request.get("allocationMode") or EXACT_COUNT
    if mode == EXACT_COUNT:
        return int(request.get("count") or 1)
    return ALLOCATION_RESULTS_MAX_SIZE if mode == ALL else 0


def claim_charge(spec):
    """{quota resource name: amount} a claim of this spec is charged on creation (v1 ``exactly`` and
    ``firstAvailable``; v1beta1's request fields on the request itself)."""
    charge = {CLAIM_COUNT: 1}
    for request in ((spec or {}).get("devices") or {}).get("requests") or []:
        if request.get("firstAvailable"):
            worst = {}
            for sub in request["firstAvailable"]:
                name = devices_of_class(sub.get("deviceClassName") or "")
                worst[name] = max(worst.get(name, 0), _devices(sub))
        else:
            exactly = request.get("exactly") or request
            worst = {devices_of_class(exactly.get("deviceClassName") or ""): _devices(exactly)}
        for name, amount in worst.items():
            charge[name] = charge.get(name, 0) + amount
    return charge


def _amount(text):
    try:
        return quantity(text)
    except QuantityError:
        return None


def quota_refusals(quotas, namespace, charge):
    """[{quota, resource, used, hard, asked}] of the namespace's ResourceQuotas the charge would take past their
    hard limit (``status.hard``, as admission reads it; ``spec.hard`` before the quota controller wrote it). A quota
    with scopes never matches a claim (claims have no scope), so only quotas without scopes count."""
    refusals = []
    for quota in quotas:
        meta, spec, status = quota.get("metadata") or {}, quota.get("spec") or {}, quota.get("status") or {}
        if meta.get("namespace") != namespace or spec.get("scopes") or spec.get("scopeSelector"):
            continue
        hard = status.get("hard") or spec.get("hard") or {}
        used = status.get("used") or {}
        for resource, asked in sorted(charge.items()):
            limit = _amount(hard[resource]) if resource in hard else None
            if limit is None or not asked:
                continue
            now = _amount(used.get(resource, "0")) or 0
            if now + asked > limit:
                refusals.append({"quota": meta.get("name"), "resource": resource, "used": str(used.get(resource, "0")),
                                 "hard": str(hard[resource]), "asked": asked})
    return refusals
