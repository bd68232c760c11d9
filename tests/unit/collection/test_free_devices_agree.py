"""Three readers of "which devices are free" agree on generated slices, taints, DeviceTaintRules and allocations:
the capacity report (claims.capacity.judged_devices), the canary's choice of a device per pool
(canary.plan_probes) and the allocation explainer (allocation.search.node_verdict, asked for each device alone
through a CEL selector on an attribute only that device has). All three read DeviceTaintRules through
kube.taint_rules; the explainer's own rules (the allocator's, checked against k8s.io/dynamic-resource-allocation by
tests/integration/test_explain_oracle.py) are the reference. The releases include 1.37.0 and 1.37.2, on either side
of the change in how kube-scheduler reads a rule without deviceSelector (kube.taint_rules.allocator_reader)."""
from hypothesis import given, settings, strategies as st

from ansible_collections.dra.admin.plugins.module_utils.allocation import model, search
from ansible_collections.dra.admin.plugins.module_utils.canary import canary
from ansible_collections.dra.admin.plugins.module_utils.claims import capacity
from ansible_collections.dra.admin.plugins.module_utils.kube import cel

GPU = "gpu.example.com"
NODE = "node-0"
CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % GPU}}]}}
RELEASES = ("v1.33.13", "v1.37.0", "v1.37.2")
EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", "None"])
POOLS = ("p0", "p1")
DEVICES = ("d0", "d1", "d2")


@st.composite
def clusters(draw):
    """(slices, taint rules, allocated device keys): up to two pools of up to three devices on one node, each
    device maybe tainted in its slice; rules selecting by driver, pool and device (or with no selector)."""
    slices = []
    for pool in draw(st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True)):
        devices = []
        for name in draw(st.lists(st.sampled_from(DEVICES), min_size=1, max_size=3, unique=True)):
            device = {"name": name, "attributes": {"id": {"string": "%s/%s" % (pool, name)}}}
            if draw(st.booleans()) and draw(st.booleans()):
                device["taints"] = [{"key": "k", "effect": draw(EFFECTS)}]
            devices.append(device)
        slices.append({"metadata": {"name": "%s-%s" % (NODE, pool)},
                       "spec": {"driver": GPU, "nodeName": NODE, "devices": devices,
                                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}}})
    keys = [(GPU, s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"]["devices"]]
    rules = []
    for i in range(draw(st.integers(0, 2))):
        spec = {"taint": {"key": "r%d" % i, "effect": draw(EFFECTS)}}
        if draw(st.integers(0, 4)):
            target = draw(st.sampled_from(keys))
            spec["deviceSelector"] = dict((field, value) for field, value in zip(("driver", "pool", "device"), target)
                                          if draw(st.booleans()))
        rules.append({"metadata": {"name": "rule-%d" % i}, "spec": spec})
    allocated = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    return slices, rules, allocated


def claim_objects(allocated):
    return [{"metadata": {"namespace": "default", "name": "c%d" % i, "uid": "u%d" % i},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "r", "driver": driver, "pool": pool, "device": device}]}}}}
            for i, (driver, pool, device) in enumerate(allocated)]


def explainer_free(slices, rules, allocated, version):
    """{key: whether the explainer fits a claim for exactly that device on the node}."""
    allocator = capacity.allocator_rules(version)
    minor = allocator["release"]
    pool_rules = model.pool_rules(minor, allocator["taint_reader"])
    features = {model.DEVICE_TAINTS}
    out = {}
    for item in slices:
        pool = item["spec"]["pool"]["name"]
        for device in item["spec"]["devices"]:
            ctx = search.Context(cel.Environment(minor), {"gpu": CLASS},
                                 model.gather_pools(slices, features, pool_rules),
                                 dict((key, "default/held") for key in allocated), rules, features, pool_rules)
            selector = 'device.attributes["%s"].id == "%s/%s"' % (GPU, pool, device["name"])
            request = {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
                                                "selectors": [{"cel": {"expression": selector}}]}}
            claim = search.Claim("default/probe", {"devices": {"requests": [request]}})
            verdict = search.node_verdict(ctx, [claim], NODE, {"kubernetes.io/hostname": NODE})[0]
            assert verdict in (search.FITS, search.DOES_NOT_FIT), verdict
            out[(GPU, pool, device["name"])] = verdict == search.FITS
    return out


@settings(max_examples=150, deadline=None)
@given(clusters(), st.sampled_from(RELEASES))
def test_the_capacity_report_the_canary_and_the_explainer_agree_on_free_devices(cluster, version):
    slices, rules, allocated = cluster
    claims = claim_objects(allocated)
    expected = explainer_free(slices, rules, allocated, version)
    judged = capacity.judged_devices(slices, claims, capacity.allocator_rules(version), rules)
    assert dict((key, device["free"]) for key, device in judged["devices"].items()) == expected
    plan = canary.plan_probes(slices, claims, [CLASS], {NODE: {"metadata": {"name": NODE}}},
                              server_version=version, taint_rules=rules)
    probed = dict(((p["driver"], p["pool"]), p["device"]) for p in plan["probes"])
    for pool in set(key[:2] for key in expected):
        free_here = sorted(key[2] for key in expected if key[:2] == pool and expected[key])
        assert probed.get(pool) == (free_here[0] if free_here else None), (pool, plan)
