"""dra_capacity_info's free devices against the real kube-scheduler: a pool reported with a free device takes one
more claim of that pool, and a pool reported full does not.

A cluster of the test's own per release (one KWOK node), with DRAPartitionableDevices where the catalog has it off
by default (1.33: alpha), and a made-up driver without a kubelet plugin: the scheduler allocates from the slices
the test publishes. Each device carries its pool and name as attributes, so a DeviceClass pins a pool and a claim
one device (CEL sees neither name). Pools, each of one physical device of 8 counter units partitioned into
`whole` (8) and `half-0`/`half-1` (4 each), the counters in a slice of their own from 1.35 and in the devices'
slice before:

  full        `whole` allocated: no counter left; nothing more fits
  part        `half-0` allocated: 4 left; `half-1` fits, `whole` does not
  incomplete  two plain devices, resourceSliceCount 2 with one slice published: skipped by the 1.35+ allocator,
              still allocated from by 1.33's
  plain       two plain devices, one allocated
  ruled       two plain devices under a NoSchedule DeviceTaintRule selecting the pool (where the release serves
              the rule by default, gate_catalog.device_taint_rule_support: 1.37)

The module's report is taken first; then per pool one more claim pinned to it, and for each the scheduler's
answer: the claim allocated, or its pod's PodScheduled condition false with reason Unschedulable. With
DRA_IT_RECORD=<dir> what the module read is saved for the unit tests (tests/unit/fixtures/capacity/)."""
import json
import os
import sys

import pytest

from cluster_harness import record
from conftest import own_cluster
from dra_objects import pod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

gate_catalog = clusterlib.collection_module("releases.catalog")
capacity_rules = clusterlib.collection_module("claims.capacity")
VERSIONS = clusterlib.supported_k8s_versions()
MODULE = "dra.admin.dra_capacity_info"
DRIVER = "part.example.com"
GATE = "DRAPartitionableDevices"
PARTITIONS = {"whole": 8, "half-0": 4, "half-1": 4}
HELD = {"full": "whole", "part": "half-0", "plain": "d0"}  # the device each pool's first claim pins


def gates_for(version):
    info = gate_catalog.gate_info(version, GATE)
    return "" if info["default"] else "%s=true" % GATE


@pytest.fixture(scope="module", params=VERSIONS)
def part_cluster(request):
    with own_cluster("it-parts", request.param, 1, 600, gates_for(request.param)) as cluster:
        yield cluster


def attributes(pool, name):
    return {"pool": {"string": pool}, "dev": {"string": name}}


def device(v, pool, name, consumes=None):
    fields = {"attributes": attributes(pool, name)}
    if consumes is not None:
        fields["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"mem": {"value": str(consumes)}}}]
    return {"name": name, "basic": fields} if v == "v1beta1" else dict({"name": name}, **fields)


def resource_slice(v, name, pool, devices=(), count=1, counters=False):
    spec = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            "allNodes": True}
    if devices:
        spec["devices"] = list(devices)
    if counters:
        spec["sharedCounters"] = [{"name": "gpu-0", "counters": {"mem": {"value": "8"}}}]
    return {"apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def partitioned_pool(v, pool, per_pool):
    devices = [device(v, pool, name, need) for name, need in PARTITIONS.items()]
    if per_pool:  # 1.35+: a slice carries devices or counters, not both; the pool's slices share the sets
        return [resource_slice(v, f"{pool}-counters", pool, count=2, counters=True),
                resource_slice(v, f"{pool}-devices", pool, devices, count=2)]
    return [resource_slice(v, pool, pool, devices, counters=True)]


def slices(v, per_pool, ruled):
    half_published = [device(v, "incomplete", f"d{i}") for i in range(2)]
    out = (partitioned_pool(v, "full", per_pool) + partitioned_pool(v, "part", per_pool)
           + [resource_slice(v, "incomplete-0", "incomplete", half_published, count=2),
              resource_slice(v, "plain", "plain", [device(v, "plain", f"d{i}") for i in range(2)])])
    if ruled:
        out.append(resource_slice(v, "ruled", "ruled", [device(v, "ruled", f"d{i}") for i in range(2)]))
    return out


def taint_rule(api_version, pool):
    return {"apiVersion": f"resource.k8s.io/{api_version}", "kind": "DeviceTaintRule",
            "metadata": {"name": f"capacity-{pool}"},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": pool},
                     "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}


def pool_class(v, pool):
    cel = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].pool == "{pool}"'
    return {"apiVersion": f"resource.k8s.io/{v}", "kind": "DeviceClass", "metadata": {"name": f"{DRIVER}-{pool}"},
            "spec": {"selectors": [{"cel": {"expression": cel}}]}}


def pinned_claim(v, namespace, name, pool, dev=None):
    body = {"deviceClassName": f"{DRIVER}-{pool}", "allocationMode": "ExactCount", "count": 1}
    if dev:
        body["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].dev == "{dev}"'}}]
    request = dict(name="dev", **body) if v == "v1beta1" else {"name": "dev", "exactly": body}
    return {"apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"devices": {"requests": [request]}}}


def claim_pod(namespace, name, claim_name):
    item = pod(namespace, name, claim_name=claim_name, grace=0)
    item["spec"]["resourceClaims"][0]["name"] = "dev"
    item["spec"]["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
    return item


def scheduler_answer(cluster, namespace, claim_name, pod_name):
    """'allocated', 'unschedulable' (the pod's PodScheduled is False, reason Unschedulable), or None yet."""
    found = cluster.get_json("resourceclaim", claim_name, "-n", namespace)
    if (found.get("status") or {}).get("allocation"):
        return "allocated"
    item = cluster.get_json("pod", pod_name, "-n", namespace)
    for cond in (item.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == ("PodScheduled", "False", "Unschedulable"):
            return "unschedulable"
    return None


def capacity_paths(cluster):
    """The API paths gather_capacity reads: record saves the server's answers keyed by them (partitionable-<version>),
    as test_claims_doctor's ReplayApi wants."""
    v = cluster.resource_version
    paths = ["/version", "/apis/resource.k8s.io"]
    for version in [e["version"] for e in json.loads(cluster.kubectl("get", "--raw", paths[1]).stdout)["versions"]]:
        paths.append(f"/apis/resource.k8s.io/{version}")
        served = json.loads(cluster.kubectl("get", "--raw", paths[-1]).stdout)["resources"]
        if any(r["name"] == "devicetaintrules" for r in served):
            paths.append(f"/apis/resource.k8s.io/{version}/devicetaintrules")
    return paths + [f"/apis/resource.k8s.io/{v}/{plural}"
                    for plural in ("resourceslices", "resourceclaims", "deviceclasses")]


@pytest.mark.per_release("claims.capacity:POOL_WIDE_COUNTERS_FROM")
def test_free_devices_are_what_the_scheduler_allocates(part_cluster):
    cluster = part_cluster
    v = cluster.resource_version
    rules = capacity_rules.allocator_rules(cluster.version)
    namespace = "parts"
    cluster.kubectl("create", "namespace", namespace)
    cluster.wait_for_default_service_account(namespace)
    support = gate_catalog.device_taint_rule_support(cluster.version)
    ruled = support["default_on"]
    pools = ["full", "part", "incomplete", "plain"] + (["ruled"] if ruled else [])
    cluster.apply(slices(v, rules["counters_per_pool"], ruled) + [pool_class(v, p) for p in pools]
                  + ([taint_rule(support["api_version"], "ruled")] if ruled else []))
    first = []
    for pool, dev in HELD.items():
        name = f"held-{pool}"
        first += [pinned_claim(v, namespace, name, pool, dev), claim_pod(namespace, name, name)]
    cluster.apply(first)
    answers = {}

    def held_allocated():
        answers.update((p, scheduler_answer(cluster, namespace, f"held-{p}", f"held-{p}")) for p in HELD)
        return all(answers.values())
    cluster.wait_until(held_allocated, 120, "the scheduler's answer for the first claims")
    assert set(answers.values()) == {"allocated"}, answers

    out = cluster.run_module(MODULE, {"driver": DRIVER})
    record(cluster, "partitionable", paths=capacity_paths)
    by_pool = dict((p, out["by_pool"][f"{DRIVER}/{p}"]) for p in pools)
    assert out["allocator"]["release"] == gate_catalog.parse_minor(cluster.version)
    # What the rules say for these pools (the scheduler is asked below).
    assert by_pool["full"]["free"] == 0 and by_pool["full"]["unavailable"] == 2
    assert by_pool["part"]["free"] == 1 and by_pool["part"]["unavailable"] == 1
    assert by_pool["plain"]["free"] == 1 and by_pool["plain"]["counters"] == {}
    assert by_pool["incomplete"]["complete"] is False
    assert by_pool["incomplete"]["free"] == (0 if rules["counters_per_pool"] else 2)
    if ruled:
        assert out["device_taint_rules"] == "read"
        assert (by_pool["ruled"]["free"], by_pool["ruled"]["tainted"]) == (0, 2)
    sets = "gpu-0" if rules["counters_per_pool"] else "full/gpu-0"
    assert by_pool["full"]["counters"] == {sets: {"mem": {"capacity": 8, "consumed": 8, "left": 0}}}
    for pool in pools:
        entry = by_pool[pool]
        assert 0 <= entry["free"] <= entry["total"]

    probes = []
    for pool in pools:
        name = f"probe-{pool}"
        probes += [pinned_claim(v, namespace, name, pool), claim_pod(namespace, name, name)]
    cluster.apply(probes)
    answers = {}

    def probes_answered():
        answers.update((p, scheduler_answer(cluster, namespace, f"probe-{p}", f"probe-{p}")) for p in pools)
        return all(answers.values())
    cluster.wait_until(probes_answered, 120, "the scheduler's answer for one more claim per pool")
    said = dict((p, "allocated" if by_pool[p]["free"] > 0 else "unschedulable") for p in pools)
    assert answers == said, (answers, dict((p, by_pool[p]) for p in pools))
