"""Who a DeviceTaintRule affects: every claim allocated a device its selector names, whether a current slice still
publishes that device or not (kube-controller-manager's device-taint-eviction controller matches a rule against
the claims' allocation results by driver, pool and device name, without the slices).

The recorded objects are tests/unit/fixtures/recorded/device-taints-dry-run-v1.36.3.json (see
test_device_taints.py); the generated ones cover every combination of selector fields, published and withdrawn
devices."""
import copy
import json
import os

from hypothesis import given, settings, strategies as st

from ansible_collections.dra.admin.plugins.module_utils.devices import taints as dt
from ansible_collections.dra.admin.plugins.module_utils.kube import taint_rules
from conftest import FIXTURES

REC = os.path.join(FIXTURES, "recorded")
DRIVER = "maint.example.com"
POOL = "tray"


def recorded():
    with open(os.path.join(REC, "device-taints-dry-run-v1.36.3.json")) as handle:
        items = json.load(handle)["items"]
    out = {}
    for item in items:
        out.setdefault(item["kind"], []).append(item)
    return out


def test_a_claim_on_a_withdrawn_device_is_affected():
    objs = recorded()
    sel = dt.selector(DRIVER, POOL)
    taint = {"key": dt.DEFAULT_KEY, "effect": dt.NO_EXECUTE}
    published = dt.selected_devices(objs["ResourceSlice"], sel)
    before = dt.affected_claims(objs["ResourceClaim"], published, taint, sel=sel)
    assert [c["name"] for c in before] == ["shared", "tolerant"]
    # The driver withdraws the pool's devices (a new generation without them): the claims still hold them.
    slices = copy.deepcopy(objs["ResourceSlice"])
    for item in slices:
        if item["spec"]["driver"] == DRIVER:
            item["spec"]["devices"] = []
    assert dt.selected_devices(slices, sel) == []
    after = dt.affected_claims(objs["ResourceClaim"], dt.selected_devices(slices, sel), taint, sel=sel)
    assert after == before
    # Without the selector only published devices count (what the callers passed before).
    assert dt.affected_claims(objs["ResourceClaim"], [], taint) == []


NAMES = st.sampled_from(["a", "b"])
DEVICE = st.tuples(st.sampled_from(["d1.example.com", "d2.example.com"]), NAMES, NAMES)


@settings(max_examples=200, deadline=None)
@given(st.lists(DEVICE, max_size=6), st.sets(DEVICE), DEVICE, st.booleans(), st.booleans())
def test_affected_iff_the_selector_names_an_allocated_device(allocated, published, target, by_pool, by_device):
    sel = dt.selector(target[0], target[1] if by_pool else None, target[2] if by_device else None)
    claims = [{"metadata": {"namespace": "ns", "name": "c%d" % i},
               "status": {"allocation": {"devices": {"results": [
                   {"driver": d, "pool": p, "device": n, "request": "r"}]}}}}
              for i, (d, p, n) in enumerate(allocated)]
    devices = [{"driver": d, "pool": p, "device": n} for (d, p, n) in sorted(published)
               if taint_rules.selector_selects(sel, d, p, n, reader=taint_rules.EVICTION)]
    names = set(c["name"] for c in dt.affected_claims(claims, devices, {}, sel=sel))
    for i, (d, p, n) in enumerate(allocated):
        named = (d == sel["driver"] and (not by_pool or p == sel.get("pool"))
                 and (not by_device or n == sel.get("device")))
        assert (("c%d" % i) in names) == named, (sel, (d, p, n))
