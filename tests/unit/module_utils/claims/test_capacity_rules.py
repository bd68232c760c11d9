"""Free devices as the scheduler's allocator decides them, on generated pools (Hypothesis): partitionable devices
(shared counters, devices consuming them, the counters in another slice of the pool from 1.35 or in the device's
own slice before), incomplete pools, taints, allocations of published and withdrawn devices, every resource.k8s.io
layout (v1beta1 keeps a device's fields under `basic`). tests/integration/test_capacity.py checks the same rules
against the real kube-scheduler.

Invariants: free never exceeds total; a device whose counters are used up is never free; an incomplete pool has
no free device from 1.35 (and the same free devices as a complete one before); the layout changes nothing;
counters left are capacity minus what the allocated published devices consume."""
import copy

import pytest
from hypothesis import assume, given, settings, strategies as st

from ansible_collections.dra.admin.plugins.module_utils.claims import capacity as capacity_rules
from ansible_collections.dra.admin.plugins.module_utils.claims.claims_service import gather_capacity
from ansible_collections.dra.admin.plugins.module_utils.kube.taint_rules import ALLOCATOR, ALLOCATOR_NO_SELECTOR_NONE

from test_claims_doctor import ReplayApi

DRIVER = "part.example.com"
NEW, OLD = "v1.37.2", "v1.33.13"


def device(name, consumes=None, tainted=False, layout="v1", set_name="gpu-0"):
    fields = {}
    if consumes is not None:
        fields["consumesCounters"] = [{"counterSet": set_name, "counters": dict(
            (c, {"value": str(v)}) for c, v in consumes.items())}]
    if tainted:
        fields["taints"] = [{"key": "example.com/broken", "effect": "NoSchedule"}]
    return dict({"name": name, "basic": fields} if layout == "v1beta1" else dict({"name": name}, **fields))


def resource_slice(name, pool, devices=(), counters=None, count=1, generation=1, set_name="gpu-0"):
    spec = {"driver": DRIVER, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "nodeName": "node-000000", "devices": list(devices)}
    if counters is not None:
        spec["sharedCounters"] = [{"name": set_name, "counters": dict(
            (c, {"value": str(v)}) for c, v in counters.items())}]
    return {"metadata": {"name": name}, "spec": spec}


def claim(name, *devices):
    return {"metadata": {"namespace": "ns", "name": name},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": DRIVER, "pool": pool, "device": dev} for pool, dev in devices]}}}}


def partitioned_pool(pool, capacity, needs, layout, per_pool, missing_slices=0, tainted=()):
    """One pool: counter set gpu-0 (counter `mem` = capacity) and one device per need consuming it; from 1.35
    in a slice of its own, before in the devices' slice."""
    devices = [device("p%d" % i, {"mem": need}, i in tainted, layout) for i, need in enumerate(needs)]
    if per_pool:
        return [resource_slice(pool + "-counters", pool, counters={"mem": capacity}, count=2 + missing_slices),
                resource_slice(pool + "-devices", pool, devices, count=2 + missing_slices)]
    return [resource_slice(pool + "-all", pool, devices, counters={"mem": capacity}, count=1 + missing_slices)]


def expected_free(capacity, needs, allocated, tainted):
    """What the allocator can still give: unallocated, untainted devices whose need fits what is left."""
    left = capacity - sum(needs[i] for i in allocated)
    return sum(1 for i, need in enumerate(needs) if i not in allocated and i not in tainted and need <= left)


POOL = st.tuples(st.integers(0, 16), st.lists(st.integers(0, 8), min_size=1, max_size=6))


@settings(max_examples=300, deadline=None)
@given(POOL, st.data(), st.sampled_from(["v1", "v1beta1"]), st.sampled_from([NEW, OLD]), st.booleans())
def test_free_devices_of_a_partitioned_pool(pool, data, layout, release, incomplete):
    capacity, needs = pool
    allocated = data.draw(st.sets(st.integers(0, len(needs) - 1)))
    tainted = data.draw(st.sets(st.integers(0, len(needs) - 1)))
    per_pool = release == NEW
    slices = partitioned_pool("gpu", capacity, needs, layout, per_pool, int(incomplete), tainted)
    claims = [claim("c%d" % i, ("gpu", "p%d" % i)) for i in sorted(allocated)]
    out = capacity_rules.capacity_report(slices, claims, server_version=release)
    entry = out["by_pool"]["%s/gpu" % DRIVER]
    want = 0 if incomplete and per_pool else expected_free(capacity, needs, allocated, tainted)
    assert entry["free"] == want
    assert entry["total"] == len(needs) and 0 <= entry["free"] <= entry["total"]
    assert entry["allocated"] == len(allocated) and entry["tainted"] == len(tainted)
    assert entry["free"] + entry["unavailable"] + len(allocated | tainted) == entry["total"]
    assert entry["complete"] is (not incomplete)
    set_key = "gpu-0" if per_pool else "gpu-all/gpu-0"
    used = sum(needs[i] for i in allocated)
    assert entry["counters"] == {set_key: {"mem": {"capacity": capacity, "consumed": used, "left": capacity - used}}}
    assert out["totals"]["free"] == entry["free"]


@settings(max_examples=200, deadline=None)
@given(POOL, st.data())
def test_a_device_consuming_an_exhausted_counter_is_never_free(pool, data):
    capacity, needs = pool
    allocated = data.draw(st.sets(st.integers(0, len(needs) - 1), min_size=1))
    left = capacity - sum(needs[i] for i in allocated)
    assume(any(i not in allocated and needs[i] > left for i in range(len(needs))))
    for release in (NEW, OLD):
        slices = partitioned_pool("gpu", capacity, needs, "v1", release == NEW)
        rules = capacity_rules.allocator_rules(release)
        devices = capacity_rules.published_devices(slices, rules)
        used = dict(((DRIVER, "gpu", "p%d" % i), {}) for i in allocated)
        pools = capacity_rules.pool_states(slices, devices, rules)
        consumed = capacity_rules.counters_consumed(devices, used)
        remaining = capacity_rules.counters_left(pools[(DRIVER, "gpu")]["counter_sets"], consumed.get((DRIVER, "gpu"), {}))
        for i, need in enumerate(needs):
            key = (DRIVER, "gpu", "p%d" % i)
            free = capacity_rules.device_free(devices[key], used.get(key), pools[(DRIVER, "gpu")], remaining,
                                              rules["counters_per_pool"])
            if need > left:
                assert not free, (release, i, need, left)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.integers(1, 3))
def test_an_incomplete_pool_has_no_free_device_from_1_35(devices, missing):
    slices = [resource_slice("plain", "p", [device("d%d" % i) for i in range(len(devices))], count=1 + missing)]
    new = capacity_rules.capacity_report(slices, [], server_version=NEW)["by_pool"]["%s/p" % DRIVER]
    old = capacity_rules.capacity_report(slices, [], server_version=OLD)["by_pool"]["%s/p" % DRIVER]
    assert new["free"] == 0 and new["unavailable"] == len(devices) and new["complete"] is False
    assert new["problem"] == "incomplete: 1 of %d slices published" % (1 + missing)
    assert old["free"] == len(devices)  # up to 1.34 the allocator still takes devices from it


@settings(max_examples=100, deadline=None)
@given(POOL, st.data())
def test_the_layout_changes_nothing(pool, data):
    capacity, needs = pool
    allocated = data.draw(st.sets(st.integers(0, len(needs) - 1)))
    claims = [claim("c%d" % i, ("gpu", "p%d" % i)) for i in sorted(allocated)]
    for release in (NEW, OLD):
        reports = [capacity_rules.capacity_report(partitioned_pool("gpu", capacity, needs, layout, release == NEW),
                                                  claims, server_version=release) for layout in ("v1", "v1beta1")]
        assert reports[0] == reports[1]


def test_counters_are_the_pools_from_1_35_and_the_slices_before():
    """A device consuming a counter set that another slice of its pool defines: allocatable from 1.35; before,
    a device consumes only its own slice's sets, so it is not."""
    slices = [resource_slice("counters", "gpu", counters={"mem": 8}, count=2),
              resource_slice("devices", "gpu", [device("p0", {"mem": 4})], count=2)]
    assert capacity_rules.capacity_report(slices, [], server_version=NEW)["by_pool"][DRIVER + "/gpu"]["free"] == 1
    old = capacity_rules.capacity_report(slices, [], server_version=OLD)["by_pool"][DRIVER + "/gpu"]
    assert old["free"] == 0 and old["unavailable"] == 1
    assert sorted(old["counters"]) == ["counters/gpu-0"]


def test_a_withdrawn_allocated_device_consumes_no_counter():
    slices = partitioned_pool("gpu", 8, [8, 8], "v1", True)
    gone = claim("gone", ("gpu", "p9"))
    out = capacity_rules.capacity_report(slices, [gone], server_version=NEW)
    entry = out["by_pool"][DRIVER + "/gpu"]
    assert entry["free"] == 2 and entry["counters"]["gpu-0"]["mem"]["left"] == 8
    assert out["unpublished_allocations"] == [DRIVER + "/gpu/p9"]


def test_an_overdrawn_counter_blocks_every_consuming_device_from_1_35():
    """The driver lowered a counter below what allocated devices consume: the allocator refuses every device
    consuming counters of the pool, even one that consumes another counter."""
    devices = [device("p0", {"mem": 6}), device("p1", {"cores": 1}), device("plain")]
    slices = [resource_slice("counters", "gpu", counters={"mem": 4, "cores": 4}, count=2),
              resource_slice("devices", "gpu", devices, count=2)]
    entry = capacity_rules.capacity_report(slices, [claim("c", ("gpu", "p0"))], server_version=NEW)["by_pool"][
        DRIVER + "/gpu"]
    assert entry["counters"]["gpu-0"]["mem"] == {"capacity": 4, "consumed": 6, "left": -2}
    assert (entry["free"], entry["unavailable"]) == (1, 1)  # only `plain`, which consumes no counter


def test_invalid_pools_have_no_free_device():
    twice = [resource_slice("a", "p", [device("d0")], count=2), resource_slice("b", "p", [device("d0")], count=2)]
    unknown = [resource_slice("a", "q", [device("d0", {"mem": 1}, set_name="nope")], count=2),
               resource_slice("b", "q", counters={"mem": 1}, count=2)]
    out = capacity_rules.capacity_report(twice + unknown, [], server_version=NEW)["by_pool"]
    assert out[DRIVER + "/p"]["free"] == 0 and "device name d0 appears twice" in out[DRIVER + "/p"]["problem"]
    assert out[DRIVER + "/q"]["free"] == 0 and "consumes nope" in out[DRIVER + "/q"]["problem"]


def test_a_shared_device_in_use_is_free_while_a_claim_without_a_request_fits():
    big = {"name": "big", "allowMultipleAllocations": True,
           "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi"}}}}
    whole = copy.deepcopy(big)
    whole["name"] = "whole"
    del whole["capacity"]["memory"]["requestPolicy"]
    slices = [resource_slice("s", "shared", [big, whole])]
    share = {"metadata": {"namespace": "ns", "name": "c"}, "status": {"allocation": {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "shared", "device": name, "consumedCapacity": {"memory": "75Gi"}}
        for name in ("big", "whole")]}}}}
    entry = capacity_rules.capacity_report(slices, [share], server_version=NEW)["by_pool"][DRIVER + "/shared"]
    assert (entry["allocated"], entry["free"], entry["unavailable"]) == (2, 0, 0)
    share["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] = "70Gi"
    entry = capacity_rules.capacity_report(slices, [share], server_version=NEW)["by_pool"][DRIVER + "/shared"]
    assert (entry["allocated"], entry["free"]) == (2, 1)  # big: 10Gi left takes its default; whole needs 80Gi


def test_allocator_rules_by_release():
    assert capacity_rules.allocator_rules("v1.33.13") == {"release": 33, "counters_per_pool": False,
                                                          "incomplete_pools_allocated": True, "taint_reader": ALLOCATOR}
    assert capacity_rules.allocator_rules("v1.35.0")["counters_per_pool"] is True
    assert capacity_rules.allocator_rules(None) == {"release": None, "counters_per_pool": True,
                                                    "incomplete_pools_allocated": False, "taint_reader": ALLOCATOR}
    # how a DeviceTaintRule without deviceSelector is read changed in a patch release (kube.taint_rules)
    assert capacity_rules.allocator_rules("v1.37.0")["taint_reader"] == ALLOCATOR
    assert capacity_rules.allocator_rules("v1.37.2")["taint_reader"] == ALLOCATOR_NO_SELECTOR_NONE
    assert capacity_rules.allocator_rules("v1.38.0-alpha.1")["taint_reader"] == ALLOCATOR_NO_SELECTOR_NONE
    assert capacity_rules.allocator_rules("not a version")["taint_reader"] == ALLOCATOR


# Recorded by tests/integration/test_capacity_allocatable.py (DRA_IT_RECORD) after the first claims were
# allocated there, before one more claim per pool was tried: the scheduler allocated that claim for the pools
# with a free device below and left it unschedulable for the others.
RECORDED = {"v1.37.2": {"full": (0, 2), "part": (1, 1), "incomplete": (0, 2), "plain": (1, 0), "ruled": (0, 0)},
            "v1.33.13": {"full": (0, 2), "part": (1, 1), "incomplete": (2, 0), "plain": (1, 0)}}


@pytest.mark.parametrize("release", sorted(RECORDED))
def test_recorded_pools_of_partitionable_devices(release):
    api = ReplayApi("../capacity/partitionable-%s.json" % release)
    out = gather_capacity(api, driver=DRIVER)
    got = dict((pool, (out["by_pool"]["%s/%s" % (DRIVER, pool)]["free"],
                       out["by_pool"]["%s/%s" % (DRIVER, pool)]["unavailable"])) for pool in RECORDED[release])
    assert got == RECORDED[release]
    assert out["allocator"]["release"] == int(release.split(".")[1])
    assert out["by_pool"][DRIVER + "/incomplete"]["problem"] == "incomplete: 1 of 2 slices published"
    if "ruled" in RECORDED[release]:  # a NoSchedule DeviceTaintRule selects the pool
        assert out["device_taint_rules"] == "read" and out["by_pool"][DRIVER + "/ruled"]["tainted"] == 2
    full = out["by_pool"][DRIVER + "/full"]["counters"]
    assert full == {"gpu-0" if out["allocator"]["counters_per_pool"] else "full/gpu-0": {
        "mem": {"capacity": 8, "consumed": 8, "left": 0}}}


def test_device_taint_rules_taint_what_they_select():
    slices = [resource_slice("a", "p", [device("d0"), device("d1")]), resource_slice("b", "q", [device("d0")])]

    def rule(effect, **sel):
        return {"spec": {"deviceSelector": sel, "taint": {"key": "k", "effect": effect}}}

    def free(*rules, **kwargs):
        out = capacity_rules.capacity_report(slices, [], server_version=kwargs.get("version", NEW),
                                             taint_rules=rules)["by_pool"]
        return out[DRIVER + "/p"]["free"], out[DRIVER + "/q"]["free"]
    assert free() == (2, 1)
    assert free(rule("NoSchedule", driver=DRIVER, pool="p")) == (0, 1)
    assert free(rule("NoExecute", device="d0")) == (1, 0)  # the device name alone matches in every pool
    assert free(rule("None", driver=DRIVER)) == (2, 1)  # a dry run keeps nothing off
    assert free(rule("NoSchedule")) == (0, 0)  # the empty selector matches every device
    # no selector: kube-scheduler's tracker keeps every device off up to 1.37.0 (the eviction controller evicts
    # nobody for it), and keeps none off from 1.37.1
    no_selector = {"spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}
    assert free(no_selector, version="v1.37.0") == (0, 0)
    assert free(no_selector, version=OLD) == (0, 0)
    assert free(no_selector, version="v1.37.2") == (2, 1)
    assert free(no_selector, rule("NoSchedule", pool="q"), version="v1.37.2") == (2, 0)
    # 1.33's alpha rules with a DeviceClass or CEL selectors are not evaluated (left out, not guessed)
    assert free(rule("NoSchedule", driver=DRIVER, deviceClassName="gpu")) == (2, 1)
