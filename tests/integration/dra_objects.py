"""Builders for DRA test objects in the API version a cluster serves."""
import os
import sys

# The checkout as ansible_collections.dra.admin (the link `make collection-link` keeps), for the constants.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_COLLECTIONS = os.path.join(_ROOT, ".tmp", "collections")
_LINK = os.path.join(_COLLECTIONS, "ansible_collections", "dra", "admin")
if not os.path.islink(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(_ROOT, _LINK)
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)
from ansible_collections.dra.admin.plugins.module_utils._node_selection import (  # noqa: E402
    DEFAULT_EXCLUSION_LABEL as EXCLUSION_LABEL,
)

DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"


def device_request(api_version, name="gpu", count=1, selector=None):
    """One device request; v1 and v1beta2 nest it under `exactly`, v1beta1 does not."""
    body = {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": count}
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    if api_version == "v1beta1":
        return dict(name=name, **body)
    return {"name": name, "exactly": body}


def claim_template(api_version, namespace, name, selector=None):
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [device_request(api_version, selector=selector)]}}}}


def claim(api_version, namespace, name, selector=None):
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [device_request(api_version, selector=selector)]}}}


def pod(namespace, name, template=None, claim_name=None, node=None, labels=None, grace=None):
    """A pod consuming one claim, either from a template or an existing claim."""
    ref = {"name": "gpu"}
    if template:
        ref["resourceClaimTemplateName"] = template
    else:
        ref["resourceClaimName"] = claim_name
    spec = {
        "resourceClaims": [ref],
        "containers": [{"name": "main", "image": "registry.invalid/pause:none",
                        "resources": {"claims": [{"name": "gpu"}]}}],
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
            "spec": spec}
