"""The local cluster is real: the upstream scheduler allocates devices that the
upstream example driver published, and the resource claim controller cleans up."""
import json

import pytest

from dra_objects import DRIVER, claim_template, pod


@pytest.mark.every_release("the release's own binaries serve the cluster")
def test_server_reports_pinned_version(cluster):
    version = json.loads(cluster.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == cluster.version
    assert version["minor"] == str(cluster.minor)


def test_every_node_publishes_slices(cluster):
    nodes = [n["metadata"]["name"] for n in cluster.get_json("nodes")["items"]]
    slices = cluster.get_json("resourceslices")["items"]
    published = {s["spec"]["nodeName"] for s in slices if s["spec"]["driver"] == DRIVER}
    assert nodes and set(nodes) == published


@pytest.mark.per_release("default_served_api_versions")
def test_scheduler_allocates_published_device_and_cleanup_releases_it(cluster, namespace):
    api = cluster.resource_version
    cluster.apply(claim_template(api, namespace, "one-gpu"))
    cluster.apply(pod(namespace, "worker", template="one-gpu"))

    def running_pod():
        p = cluster.get_json("pod", "-n", namespace, "worker")
        return p if p["status"].get("phase") == "Running" else None

    p = cluster.wait_until(running_pod, 90, "pod worker Running")
    node = p["spec"]["nodeName"]
    claim_name = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = cluster.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", namespace, claim_name)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1 and results[0]["driver"] == DRIVER
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [p["metadata"]["uid"]]

    slices = [s for s in cluster.get_json("resourceslices")["items"] if s["spec"].get("nodeName") == node]
    published = {(s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"]["devices"]}
    assert (results[0]["pool"], results[0]["device"]) in published

    cluster.kubectl("delete", "pod", "-n", namespace, "worker", "--wait=true", "--timeout=60s")

    def claim_gone():
        res = cluster.kubectl("get", f"resourceclaims.{api}.resource.k8s.io", "-n", namespace, claim_name,
                              check=False)
        return "NotFound" in res.stderr

    cluster.wait_until(claim_gone, 60, f"generated claim {claim_name} removed")
