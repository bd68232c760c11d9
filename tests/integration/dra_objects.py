"""Builders for DRA test objects in the API version a cluster serves."""
import os
import sys

# The checkout as ansible_collections.dra.admin (hack/cluster/clusterlib.py keeps the link), for the constants.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

clusterlib.collection_on_path()
# EXCLUSION_LABEL is re-exported for the tests and the drain benchmark.
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import (  # noqa: E402  pylint: disable=unused-import
    DEFAULT_EXCLUSION_LABEL as EXCLUSION_LABEL,
)

DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"


def device_request(api_version, name="gpu", count=1, selector=None, device_class=DEVICE_CLASS):
    """One device request; v1 and v1beta2 nest it under `exactly`, v1beta1 does not."""
    body = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    if api_version == "v1beta1":
        return dict(name=name, **body)
    return {"name": name, "exactly": body}


def claim_template(api_version, namespace, name, selector=None, device_class=DEVICE_CLASS):
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [device_request(api_version, selector=selector,
                                                                      device_class=device_class)]}}}}


def claim(api_version, namespace, name, selector=None, device_class=DEVICE_CLASS):
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [device_request(api_version, selector=selector,
                                                             device_class=device_class)]}}}


def device_class(api_version, driver):
    """A DeviceClass named like the driver, selecting all its devices."""
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "DeviceClass", "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def resource_slice(api_version, driver, pool, devices, **where):
    """A ResourceSlice of one pool; `where` is nodeName=, allNodes=, nodeSelector= or perDeviceNodeSelection=.

    devices: names, or (name, {nodeName|allNodes|nodeSelector: ...}) with perDeviceNodeSelection.
    """
    entries = []
    for device in devices:
        name, placement = (device, {}) if isinstance(device, str) else device
        # v1beta1 keeps a device's fields (placement included) under `basic`.
        entries.append({"name": name, "basic": placement} if api_version == "v1beta1" else dict({"name": name}, **placement))
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "ResourceSlice",
            "metadata": {"name": f"{driver}-{pool}".replace(".", "-")},
            "spec": dict({"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                          "devices": entries}, **where)}


def hostname_selector(*nodes):
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}]}


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
