"""dra_capacity_info on the real cluster. Every version: the example driver's devices and the claims of the test's
pods, counted independently from `kubectl get resourceslices,resourceclaims -o json`. 1.36 (consumable capacity
and device taints are beta there): a pool made by hand with a shared device (80Gi memory) that the scheduler
gives to two claims of 10Gi each, a device with a NoSchedule taint, and a DeviceClass whose CEL is not a driver
selector. ResourcePoolStatusRequest is not served by the test cluster (alpha, off): pool_status falls back to the
computed counts (test_capacity_pool_status.py has a cluster that serves it)."""
import pytest

from dra_objects import DRIVER, claim, claim_template, device_class, pod, resource_slice

GI = 2 ** 30


def independent_counts(cluster, driver):
    slices = [s for s in cluster.get_json("resourceslices")["items"] if s["spec"]["driver"] == driver]
    total = sum(len(s["spec"].get("devices") or []) for s in slices)
    allocated = set()
    for item in cluster.get_json("resourceclaims", "-A")["items"]:
        for res in (((item.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            if res["driver"] == driver and not res.get("adminAccess"):
                allocated.add((res["pool"], res["device"]))
    return total, len(allocated)


def shared_pool_objects(v, namespace, driver):
    item = resource_slice(v, driver, "shared", ["big", "spare", "tainted"], allNodes=True)
    item["spec"]["devices"][0].update(allowMultipleAllocations=True, capacity={"memory": {"value": "80Gi"}})
    item["spec"]["devices"][2]["taints"] = [{"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}]
    by_attribute = device_class(v, DRIVER)
    by_attribute["metadata"]["name"] = f"{namespace}-model"
    by_attribute["spec"]["selectors"].append(
        {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "LATEST-GPU-MODEL"'}})
    objects = [item, device_class(v, driver), by_attribute]
    for i in range(2):
        share = claim(v, namespace, f"share-{i}", device_class=driver)
        share["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {"requests": {"memory": "10Gi"}}
        objects += [share, pod(namespace, f"share-pod-{i}", claim_name=f"share-{i}", grace=1)]
    objects += [claim(v, namespace, "model", device_class=f"{namespace}-model"),
                pod(namespace, "model-pod", claim_name="model", grace=1)]
    return objects


@pytest.mark.per_release("gate_info", "DRAConsumableCapacity", key="default")
def test_capacity_counts(cluster, namespace):
    v = cluster.resource_version
    shared = cluster.minor >= 36
    driver = f"{namespace}.example.com"
    objects = [claim_template(v, namespace, "gpu")] + [
        pod(namespace, f"gpu-pod-{i}", template="gpu", grace=1) for i in range(3)]
    if shared:
        objects += shared_pool_objects(v, namespace, driver)
    cluster.apply(objects)
    want = 6 if shared else 3

    def all_allocated():
        found = cluster.get_json("resourceclaims", "-n", namespace)["items"]
        return len(found) == want and all((c.get("status") or {}).get("allocation") for c in found)
    try:
        cluster.wait_until(all_allocated, 120, f"{want} claims allocated")
        out = cluster.run_module("dra.admin.dra_capacity_info")
        total, allocated = independent_counts(cluster, DRIVER)
        assert out["by_driver"][DRIVER] == {"total": total, "allocated": allocated, "tainted": 0,
                                            "free": total - allocated, "unavailable": 0, "capacity": {}}
        assert allocated >= 3 and out["by_device_class"][DRIVER]["total"] == total
        assert sum(e["total"] for k, e in out["by_pool"].items() if k.startswith(DRIVER + "/")) == total
        assert out["pool_status_served"] is False and out["unpublished_allocations"] == []
        # discovery (group, each served version), /version, the LISTs (DeviceTaintRules where served)
        assert out["api_requests"] <= 7 and not out["changed"]
        if shared:
            pool = out["by_pool"][f"{driver}/shared"]
            assert (pool["total"], pool["allocated"], pool["tainted"], pool["free"]) == (3, 1, 1, 1)
            assert pool["capacity"] == {"memory": {"total": 80 * GI, "used": 20 * GI, "left": 60 * GI}}
            assert out["by_node"]["<all-nodes>"]["total"] >= 3
            model = out["by_device_class"][f"{namespace}-model"]
            assert model["selectors_evaluated"] is False and model["total"] is None and model["allocated"] == 1
        one = cluster.run_module("dra.admin.dra_capacity_info", {"driver": DRIVER, "pool_status": True})
        assert list(one["by_driver"]) == [DRIVER] and one["totals"]["total"] == total
        assert one["pool_status"]["source"] == "computed" and "not served" in one["pool_status"]["skipped"]
        none = cluster.run_module("dra.admin.dra_capacity_info", {"driver": "no-such-driver.example.com"})
        assert none["by_driver"] == {} and none["totals"]["total"] == 0
    finally:
        if shared:
            cluster.kubectl("delete", "pods", "--all", "-n", namespace, "--force", "--grace-period=0", check=False)
            cluster.kubectl("delete", "resourceslice", f"{driver}-shared".replace(".", "-"), check=False)
            cluster.kubectl("delete", "deviceclass", driver, f"{namespace}-model", check=False)
