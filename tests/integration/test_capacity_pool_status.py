"""dra_capacity_info with pool_status on a cluster that serves ResourcePoolStatusRequest (Kubernetes 1.36+,
alpha gate DRAResourcePoolStatus, resource.k8s.io/v1alpha3): one more two-node cluster with the gate
(`hack/cluster/up --feature-gates`, which adds the runtime-config), three claims allocated by the real
scheduler, and the real kube-controller-manager answering the module's request. Both sources must give the same
counts for the same pools, the request must be gone afterwards, and check mode must create none.

The shared `cluster` (gate off) gets the quick "not served" path in test_capacity.py."""
import os
import sys

import pytest

from conftest import own_cluster
from dra_objects import DRIVER, claim, pod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

VERSIONS = clusterlib.supported_k8s_versions()
SERVED = [v for v in VERSIONS if int(v.split(".")[1]) >= 36]
MODULE = "dra.admin.dra_capacity_info"


@pytest.fixture(scope="module", params=SERVED)
def pool_status_cluster(request):
    with own_cluster("it-pools", request.param, 2, 500, "DRAResourcePoolStatus=true") as cluster:
        yield cluster


def test_pool_status_and_computed_counts_agree(pool_status_cluster):
    cluster = pool_status_cluster
    v = cluster.resource_version
    namespace = "pools"
    cluster.kubectl("create", "namespace", namespace)
    cluster.wait_until(lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", namespace,
                                               check=False).returncode == 0, 30, "ServiceAccount pools/default")
    objects = []
    for i in range(3):
        objects += [claim(v, namespace, f"c{i}", device_class=DRIVER), pod(namespace, f"p{i}", claim_name=f"c{i}")]
    cluster.apply(objects)

    def allocated():
        found = cluster.get_json("resourceclaims", "-n", namespace)["items"]
        return len(found) == 3 and all((c.get("status") or {}).get("allocation") for c in found)
    cluster.wait_until(allocated, 120, "3 claims allocated")

    out = cluster.run_module(MODULE, {"pool_status": True})
    status = out["pool_status"]
    assert status["source"] == "ResourcePoolStatusRequest" and status["skipped"] is None, status
    assert status["disagreements"] == [], status
    pools = sorted(k for k in out["by_pool"] if k.startswith(DRIVER + "/"))
    assert pools and sorted(status["pools"]) == pools
    for key in pools:
        theirs, ours = status["pools"][key], out["by_pool"][key]
        assert (theirs["totalDevices"], theirs["allocatedDevices"], theirs["availableDevices"]) == (
            ours["total"], ours["allocated"], ours["free"])
    assert sum(status["pools"][k]["allocatedDevices"] for k in pools) == 3
    assert out["pool_status_served"] is True and out["changed"] is False and len(status["requests"]) == 1
    assert cluster.get_json("resourcepoolstatusrequests")["items"] == []

    checked = cluster.run_module(MODULE, {"pool_status": True}, check=True)
    assert checked["pool_status"]["skipped"].startswith("check mode") and checked["pool_status"]["pools"] == {}
    assert checked["by_pool"] == out["by_pool"]
    assert cluster.get_json("resourcepoolstatusrequests")["items"] == []
