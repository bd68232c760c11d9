"""Two DeviceClasses naming one extended resource, the newer deleted, then a pod asking for that resource: what
kube-scheduler's mapping of the name does, and that the explainer is never certain where it says otherwise.

kube-scheduler before 1.38 keeps only the class that last took a name in its cache, and deleting any class naming
it drops the name: the pod stays Unschedulable with "Insufficient <name>" though the older class still names it,
until a class naming it is created (or updated, or the scheduler restarts). The explainer reads only the classes
that exist, so there it answers cannot_tell and says why. From 1.38 the cache keeps every class naming the name
and the older class takes it over: the explainer answers fits and the scheduler binds the pod.

A made-up driver without a kubelet plugin: the scheduler allocates from any published slice and a KWOK node
"runs" any pod, which is all this needs.
"""
import pytest

from dra_objects import device_class, resource_slice
from test_allocation_explain import pods_state, ungate
from test_claim_consumers import has_extended_resources

DRIVER = "mapped.example.com"
MODULE = "dra.admin.dra_allocation_explain_info"
TOLERATE_KWOK = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]


def naming(api, name, resource):
    body = device_class(api, DRIVER)
    body["metadata"]["name"] = name
    body["spec"]["extendedResourceName"] = resource
    return body


def asking(namespace, name, resource):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingGates": [{"name": "example.com/hold"}], "tolerations": TOLERATE_KWOK,
                     "containers": [{"name": "main", "image": "registry.invalid/pause:none",
                                     "resources": {"limits": {resource: "1"}}}]}}


def explained(cluster, namespace, name):
    (found,) = cluster.run_module(MODULE, {"namespace": namespace, "pod": name})["explanations"]
    return found


def scheduled(cluster, namespace, name):
    def probe():
        node, unschedulable = pods_state(cluster, namespace)[name]
        return (node, unschedulable) if node or unschedulable else None
    return cluster.wait_until(probe, 120, f"pod {name} bound or Unschedulable")


@pytest.mark.per_release("allocation.extended:MAPPING_FROM_CURRENT_CLASSES_FROM")
def test_the_newer_class_naming_an_extended_resource_deleted(cluster, cluster_objects, namespace):
    if not has_extended_resources(cluster):
        pytest.skip("DRAExtendedResource is not on by default in this release")
    api = cluster.resource_version
    node = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])[0]
    resource = f"example.com/mapped-{abs(hash(namespace)) % 100000}"
    # The newer class has the lower name: it wins the name even when both are created in the same second.
    older, newer = naming(api, f"z-older-{namespace}"[:60], resource), naming(api, f"a-newer-{namespace}"[:60], resource)
    cluster_objects([device_class(api, DRIVER), resource_slice(api, DRIVER, node, ["dev-0", "dev-1"], nodeName=node),
                     older])
    cluster_objects([newer])
    cluster.kubectl("delete", "deviceclass", newer["metadata"]["name"])
    cluster.apply([asking(namespace, "first", resource)])

    found = explained(cluster, namespace, "first")
    ungate(cluster, namespace, ["first"])
    bound, unschedulable = scheduled(cluster, namespace, "first")
    if cluster.minor < 38:
        # The scheduler forgot the name; the explainer cannot see that from the classes left, and says so.
        assert unschedulable and not bound, (bound, unschedulable)
        pod = cluster.get_json("pod", "first", "-n", namespace)
        (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert f"Insufficient {resource}" in condition["message"], condition
        assert found["verdict"] == "cannot_tell" and found["fits_on"] == [node], found
        assert any(f"forgets extended resource {resource} when any DeviceClass naming it is deleted" in p
                   for p in found["problems"]), found["problems"]
        # A class naming it created again: the scheduler maps the name to it and takes the waiting pod.
        again = naming(api, f"b-again-{namespace}"[:60], resource)
        cluster_objects([again])
        cluster.wait_until(lambda: pods_state(cluster, namespace)["first"][0], 120, "pod first bound")
    else:
        # The older class takes the name over: the current classes decide, and the explainer is certain.
        assert bound == node and not unschedulable, (bound, unschedulable)
        assert found["verdict"] == "fits" and found["fits_on"] == [node], found
        assert not [p for p in found["problems"] if "forgets extended resource" in p], found["problems"]
