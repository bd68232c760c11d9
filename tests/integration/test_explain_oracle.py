"""The allocation explainer against k8s.io/dynamic-resource-allocation's own allocator and CEL, per pinned release:
generated cluster states by the thousand, no cluster (the oracle: hack/oracle, built by hack/cluster/build).

For each generated state (nodes, ResourceSlices of one or two drivers, DeviceClasses, the claims of one pod,
devices already allocated) every node is asked twice: the oracle runs the release's structured allocator
(``NewAllocator`` + ``Allocate``, the features kube-scheduler sets from the release's default gates) and the
explainer runs ``allocation.search.node_verdict``. A certain answer of the explainer must be the allocator's:
``fits`` where it allocates, ``does_not_fit`` where it finds nothing, ``error`` where it fails; ``cannot_tell`` is
allowed and counted. The first disagreement fails the test with the state, shrunk by Hypothesis.

Where the generator is still narrow, it says so (GENERATED); what it leaves out is not claimed to agree.
The number of cases per release is the tier's (tests/integration/tiers.py): 400 in tier full, 100 in tier ci, where
more short runs follow while a kind of state the release can draw (KINDS, state_kinds) is still missing, up to 400.
DRA_ORACLE_CASES sets an exact count instead; the seed is DRA_ORACLE_SEED (default: a new one each run, printed
with the counts; run n of tier ci uses the seed plus n).
"""
import collections
import os
import random
import sys

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import tiers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position
from oracle import allocator_features  # noqa: E402  pylint: disable=wrong-import-position

clusterlib.collection_on_path()
from ansible_collections.dra.admin.plugins.module_utils.kube import cel  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.allocation import model, search  # noqa: E402
from ansible_collections.dra.admin.plugins.module_utils.claims.capacity import (  # noqa: E402
    POOL_WIDE_COUNTERS_FROM, allocator_rules,
)

CATALOG = clusterlib.catalog()
FULL_CASES = 400
CASES = int(os.environ.get("DRA_ORACLE_CASES") or tiers.sized(100, FULL_CASES))
MAX_CASES = CASES if os.environ.get("DRA_ORACLE_CASES") else FULL_CASES  # tier ci's top-up stops there
# Tier ci draws the same states every run (CI_SEED), so that what gates a submission does not change by chance; tier
# full draws new ones each run (a failure prints its seed: DRA_ORACLE_SEED replays it).
CI_SEED = 2
SEED = int(os.environ.get("DRA_ORACLE_SEED")
           or (random.SystemRandom().randrange(2 ** 32) if tiers.TIER == "full" else CI_SEED))
# What the generator covers so far (the rest of issue "the explainer must agree with the real allocator").
GENERATED = ("node-local pools in one or two slices, incomplete pools, an older generation, a device name twice in "
             "a pool, a pool offered to all nodes, a pool with per-device node selection (by name, all nodes, a "
             "selector), shared counters and devices consuming them (in their own slice from 1.35), ExactCount and "
             "All, counts past the 32 devices of a claim, class and request selectors (some failing with an error), "
             "matchAttribute and distinctAttribute constraints (on all or named requests), firstAvailable, admin "
             "access, device taints (NoSchedule, NoExecute, None) and tolerations, binding conditions, multiple "
             "allocations and capacity requests (the explainer answers cannot_tell), devices already allocated; per "
             "state the release's default gates or, in one of three, some of its DRA gates that are off by default "
             "turned on, in one of four some that are on turned off (which also selects the allocator's "
             "implementation); slices in any order")
NOT_GENERATED = "DeviceTaintRules (kube.taint_rules has its own tests), a ResourceQuota, two pods sharing one claim"

GPU, NIC = "gpu.example.com", "nic.example.com"
MODELS = ("a100", "h100")
TAINTS = (
    {"key": "maintenance", "value": "planned", "effect": "NoSchedule"},
    {"key": "maintenance", "value": "now", "effect": "NoExecute"},
    {"key": "degraded", "effect": "NoSchedule"},
    {"key": "degraded", "effect": "None"},
)
TOLERATIONS = (
    {"key": "maintenance", "operator": "Exists"},
    {"key": "maintenance", "operator": "Equal", "value": "planned", "effect": "NoSchedule"},
    {"key": "degraded", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
)
SELECTORS = (
    'device.attributes["gpu.example.com"].model == "h100"',
    'device.attributes["gpu.example.com"].index >= 2',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0',
    '"model" in device.attributes["gpu.example.com"]',
    'device.attributes["gpu.example.com"].model.startsWith("a")',
    'device.attributes["nic.example.com"].speed > 100',
)


def gates_on(version):
    values = CATALOG.effective_gates(version, {})
    return set(n for n, on in values.items() if on) | set(CATALOG.graduated_removed_gates(version))


# ---- the generator (resource.k8s.io/v1 shapes; v1beta1 for 1.33 by to_release) ----------------------------

def device(driver, index, draw, extras=frozenset()):
    """One device; with `extras` (the fields the gates on serve) sometimes taints, binding conditions or multiple
    allocations besides."""
    attributes = {"index": {"int": index}}
    capacity = {}
    if driver == GPU:
        attributes["model"] = {"string": draw(st.sampled_from(MODELS))}
        capacity["memory"] = {"value": draw(st.sampled_from(("40Gi", "80Gi")))}
    else:
        attributes["speed"] = {"int": draw(st.sampled_from((100, 400)))}
    out = {"name": f"dev-{index}", "attributes": attributes, "capacity": capacity}
    if "taints" in extras and draw(st.integers(0, 3)) == 0:
        taints = TAINTS if "taint_none" in extras else [t for t in TAINTS if t["effect"] != "None"]
        out["taints"] = draw(st.lists(st.sampled_from(taints), min_size=1, max_size=2))
    # Rare (Hypothesis draws 0 and the bounds often): the explainer cannot tell past these.
    if "consumable" in extras and draw(st.integers(0, 29)) == 13:
        out["allowMultipleAllocations"] = True
    if "binding" in extras and draw(st.integers(0, 5)) == 0:
        out["bindingConditions"] = ["dra.example.com/ready"]
        out["bindingFailureConditions"] = ["dra.example.com/failed"]
        if draw(st.booleans()):
            out["bindsToNode"] = True
    return out


def resource_slice(driver, pool, name, devices, where, generation=1, count=1):
    spec = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices}
    spec.update(where)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


COUNTER_SET = "gpu-counters"


def counter_sets(draw):
    return [{"name": COUNTER_SET, "counters": {
        "memory": {"value": draw(st.sampled_from(("80Gi", "120Gi", "160Gi")))},
        "slots": {"value": str(draw(st.integers(1, 4)))}}}]


def consumption(draw):
    return [{"counterSet": COUNTER_SET, "counters": {
        "memory": {"value": draw(st.sampled_from(("40Gi", "80Gi")))},
        "slots": {"value": str(draw(st.integers(1, 2)))}}}]


def node_of_device(draw, nodes):
    """Where one device of a slice with perDeviceNodeSelection is offered."""
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return {"nodeName": draw(st.sampled_from(nodes))}
    if kind == 1:
        return {"allNodes": True}
    return {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "zone", "operator": "In", "values": [draw(st.sampled_from(("a", "b")))]}]}]}}


@st.composite
def pool_slices(draw, driver, pool, where, extras=frozenset(), minor=37, nodes=()):
    """The slices of one pool: its devices split over one or two slices, sometimes a wrong count (incomplete),
    sometimes an older generation besides, sometimes one device name in two slices (an invalid pool). With the
    partitionable-devices feature (in `extras`): sometimes shared counters the devices consume (from 1.35 in a
    slice of their own, before in the devices' slice), and where `where` is perDeviceNodeSelection, each device
    its own node selection."""
    size = draw(st.integers(0, 4))
    devices = [device(driver, i, draw, extras) for i in range(size)]
    per_device = bool(where.get("perDeviceNodeSelection"))
    for entry in devices if per_device else ():
        entry.update(node_of_device(draw, nodes))
    counters = "counters" in extras and draw(st.integers(0, 2)) == 0
    sets = counter_sets(draw) if counters else None
    for entry in devices if counters else ():
        if draw(st.integers(0, 4)):
            entry["consumesCounters"] = consumption(draw)
    parts = draw(st.integers(1, 2)) if size > 1 else 1
    split = draw(st.integers(1, size - 1)) if parts == 2 else size
    chunks = [devices[:split], devices[split:]] if parts == 2 else [devices]
    own_counter_slice = counters and minor >= POOL_WIDE_COUNTERS_FROM
    count = parts + (1 if own_counter_slice else 0) + (1 if draw(st.integers(0, 9)) == 0 else 0)
    generation = draw(st.sampled_from((1, 2)))
    out = [resource_slice(driver, pool, f"{driver}-{pool}-{i}", chunk, where, generation, count)
           for i, chunk in enumerate(chunks)]
    if own_counter_slice:
        counter_where = {"allNodes": True} if per_device else where
        out.append(resource_slice(driver, pool, f"{driver}-{pool}-counters", [], counter_where, generation, count))
        out[-1]["spec"].pop("devices")
        out[-1]["spec"]["sharedCounters"] = sets
    elif counters:
        for item in out:
            item["spec"]["sharedCounters"] = sets
    if parts == 2 and draw(st.integers(0, 9)) == 0 and chunks[0]:
        out[1]["spec"]["devices"].append(dict(chunks[0][0]))  # the same name in two slices of the pool
    if generation == 2 and draw(st.booleans()):
        old = [device(driver, i, draw, extras) for i in range(draw(st.integers(1, 3)))]
        for entry in old if per_device else ():
            entry.update(node_of_device(draw, nodes))
        out.append(resource_slice(driver, pool, f"{driver}-{pool}-old", old, where, 1, 1))
    return out


def request_body(draw, classes, extras, sub=False):
    """A request's fields (a subrequest's: `sub`, which has no adminAccess)."""
    cls = draw(st.sampled_from(sorted(classes)))
    body = {"deviceClassName": cls}
    if draw(st.integers(0, 4)) == 0:
        body["allocationMode"] = "All"
    else:
        body["allocationMode"] = "ExactCount"
        # Sometimes past the 32 devices one claim may hold (alone, or two requests together).
        body["count"] = draw(st.integers(1, 3)) if draw(st.integers(0, 19)) else draw(st.sampled_from((17, 33)))
    if draw(st.booleans()):
        body["selectors"] = [{"cel": {"expression": draw(st.sampled_from(SELECTORS))}}]
    if "admin" in extras and not sub and draw(st.integers(0, 4)) == 0:
        body["adminAccess"] = True
    if "taints" in extras and draw(st.integers(0, 2)) == 0:
        body["tolerations"] = [draw(st.sampled_from(TOLERATIONS))]
    if "consumable" in extras and draw(st.integers(0, 19)) == 13:
        body["capacity"] = {"requests": {"memory": draw(st.sampled_from(("10Gi", "40Gi")))}}
    return body


@st.composite
def claim_spec(draw, classes, extras):
    requests = []
    for index in range(draw(st.integers(1, 2))):
        name = f"r{index}"
        if "prioritized" in extras and draw(st.integers(0, 3)) == 0:
            subs = [dict(request_body(draw, classes, extras, sub=True), name=f"s{i}") for i in range(draw(st.integers(1, 2)))]
            requests.append({"name": name, "firstAvailable": subs})
        else:
            requests.append({"name": name, "exactly": request_body(draw, classes, extras)})
    spec = {"devices": {"requests": requests}}
    if draw(st.integers(0, 2)) == 0:
        kind = "distinctAttribute" if "distinct" in extras and draw(st.booleans()) else "matchAttribute"
        names = [r["name"] for r in requests] if len(requests) > 1 or draw(st.booleans()) else []
        spec["devices"]["constraints"] = [dict({kind: draw(st.sampled_from(
            (f"{GPU}/model", f"{GPU}/index", f"{NIC}/speed")))}, **({"requests": names} if names else {}))]
    return spec


TAINT_EFFECT_NONE_FROM = 35  # the device taint effect None (k8s.io/api resource/v1 DeviceTaintEffectNone)
# Which generated fields each allocator gate serves (the API server drops a field whose gate is off).
EXTRAS_OF_GATES = {
    "DRAPrioritizedList": ("prioritized",),
    "DRAConsumableCapacity": ("distinct", "consumable"),  # also the gate of distinctAttribute
    "DRAAdminAccess": ("admin",),
    "DRADeviceTaints": ("taints",),
    "DRAPartitionableDevices": ("counters", "per_device"),
    "DRADeviceBindingConditions": ("binding",),
    "DRAResourceClaimDeviceStatus": (),  # binding conditions need it too
    "DRAFractionalCapacityRange": (),  # these three change which allocator implementation runs
    "DRAListTypeAttributes": (),
    "DRADeviceCompatibilityGroups": (),
}


def release_gates(version):
    """(on by default and not locked, off by default) of the gates of EXTRAS_OF_GATES the release knows."""
    infos = dict((g, CATALOG.gate_info(version, g)) for g in EXTRAS_OF_GATES)
    return (set(g for g, i in infos.items() if i and i["default"] and not i["locked"]),
            set(g for g, i in infos.items() if i and not i["default"]))


def extras_of(gates, minor):
    out = set(e for g in gates for e in EXTRAS_OF_GATES.get(g, ()))
    if "taints" in out and minor >= TAINT_EFFECT_NONE_FROM:
        out.add("taint_none")
    if minor < 34:
        out.discard("binding")  # binding conditions are fields of the v1 API (1.34+)
    return frozenset(out)


# The kinds of generated states (GENERATED, item by item), each under the extra it needs (None: every release).
GATES_TURNED_ON, GATES_TURNED_OFF = "DRA gates off by default turned on", "DRA gates on by default turned off"
KINDS = {
    None: ("node-local pool", "pool in two slices", "incomplete pool", "older generation", "pool for all nodes",
           "device name twice in a pool", "slices of the second driver", "ExactCount", "All", "count past 32",
           "class selector", "request selector", "matchAttribute", "constraint on all requests",
           "constraint on named requests", "two requests", "two claims", "devices already allocated"),
    "per_device": ("device offered by node name", "device offered to all nodes", "device offered by selector"),
    "counters": ("shared counters", "devices consuming counters"),
    "prioritized": ("firstAvailable",),
    "admin": ("admin access",),
    "taints": ("device taint", "toleration"),
    "taint_none": ("device taint effect None",),
    "binding": ("binding conditions",),
    "consumable": ("multiple allocations", "capacity request"),
    "distinct": ("distinctAttribute",),
}


def possible_kinds(version):
    """The kinds of KINDS a state of the release can have: the extras of the gates some state has on."""
    on, off = release_gates(version)
    extras = extras_of(gates_on(version) | off, int(version.split(".")[1]))
    out = set(k for extra in (None,) + tuple(extras) for k in KINDS.get(extra, ()))
    return out | ({GATES_TURNED_ON} if off else set()) | ({GATES_TURNED_OFF} if on else set())


def holding(pairs):
    """The names of the (condition, name) pairs whose condition holds."""
    return set(name for condition, name in pairs if condition)


DEVICE_KINDS = (("nodeName", "device offered by node name"), ("allNodes", "device offered to all nodes"),
                ("nodeSelector", "device offered by selector"), ("taints", "device taint"),
                ("consumesCounters", "devices consuming counters"), ("bindingConditions", "binding conditions"),
                ("allowMultipleAllocations", "multiple allocations"))
REQUEST_KINDS = (("selectors", "request selector"), ("adminAccess", "admin access"), ("tolerations", "toleration"),
                 ("capacity", "capacity request"))


def pool_kinds(specs):
    """The kinds of one pool (the specs of its slices)."""
    newest = max(s["pool"]["generation"] for s in specs)
    current = [s for s in specs if s["pool"]["generation"] == newest]
    names = [d["name"] for s in current for d in s.get("devices", ())]
    with_devices = [s for s in current if "devices" in s]  # not the counters' own slice
    return holding(((len(current) != current[0]["pool"]["resourceSliceCount"], "incomplete pool"),
                    (len(current) < len(specs), "older generation"), (len(with_devices) > 1, "pool in two slices"),
                    (len(names) != len(set(names)), "device name twice in a pool"),
                    (any("sharedCounters" in s for s in current), "shared counters"),
                    (any("nodeName" in s for s in with_devices), "node-local pool"),
                    (any("allNodes" in s for s in with_devices), "pool for all nodes")))


def claim_kinds(spec):
    """The kinds of one claim's spec."""
    requests, constraints = spec["devices"]["requests"], spec["devices"].get("constraints", ())
    bodies = [b for r in requests for b in r.get("firstAvailable") or [r["exactly"]]]
    out = holding(((len(requests) > 1, "two requests"),
                   (any("firstAvailable" in r for r in requests), "firstAvailable"),
                   (any(b.get("count", 0) > 3 for b in bodies), "count past 32"),
                   (any(b["deviceClassName"] == "h100" for b in bodies), "class selector")))
    out |= set(b["allocationMode"] for b in bodies) | set(k for b in bodies for key, k in REQUEST_KINDS if key in b)
    for constraint in constraints:
        out.add("distinctAttribute" if "distinctAttribute" in constraint else "matchAttribute")
        out.add("constraint on named requests" if "requests" in constraint else "constraint on all requests")
    return out


def state_kinds(state, version):
    """The kinds of KINDS and of the gates that one generated state (v1 shapes, before to_release) has."""
    gates, defaults = set(state["gates"]), gates_on(version)
    pools = collections.defaultdict(list)
    for item in state["slices"]:
        pools[item["spec"]["driver"], item["spec"]["pool"]["name"]].append(item["spec"])
    devices = [d for specs in pools.values() for s in specs for d in s.get("devices", ())]
    effects = set(t["effect"] for d in devices for t in d.get("taints", ()))
    out = holding(((gates - defaults, GATES_TURNED_ON), (defaults - gates, GATES_TURNED_OFF),
                   (any(driver == NIC for driver, dummy in pools), "slices of the second driver"),
                   (len(state["claims"]) > 1, "two claims"), (state["allocated"], "devices already allocated"),
                   ("None" in effects, "device taint effect None")))
    out |= set(k for d in devices for key, k in DEVICE_KINDS if key in d)
    for specs in pools.values():
        out |= pool_kinds(specs)
    for claim in state["claims"]:
        out |= claim_kinds(claim["spec"])
    return out


@st.composite
def cluster_state(draw, version):
    """A cluster: its gates (the release's defaults; in one state of three some of its DRA gates that are off by
    default turned on, in one of four some that are on turned off), nodes, slices in any order, classes, the claims
    of one pod, devices already allocated."""
    minor = int(version.split(".")[1])
    gates = gates_on(version)
    on, off = release_gates(version)
    if off and draw(st.integers(0, 2)) == 0:
        gates |= set(draw(st.lists(st.sampled_from(sorted(off)), unique=True, min_size=1)))
    if on and draw(st.integers(0, 3)) == 0:
        gates -= set(draw(st.lists(st.sampled_from(sorted(on)), unique=True, min_size=1)))
    extras = extras_of(gates, minor)
    node_names = [f"node-{i}" for i in range(draw(st.integers(1, 3)))]
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "zone": draw(st.sampled_from(("a", "b")))}}} for name in node_names]
    slices = []
    drivers = [GPU] + ([NIC] if draw(st.booleans()) else [])
    for driver in drivers:
        for name in node_names:
            if draw(st.integers(0, 4)):
                slices += draw(pool_slices(driver, name, {"nodeName": name}, extras, minor, node_names))
        if draw(st.integers(0, 3)) == 0:
            slices += draw(pool_slices(driver, "shared", {"allNodes": True}, extras, minor, node_names))
        if "per_device" in extras and draw(st.integers(0, 2)) == 0:
            slices += draw(pool_slices(driver, "per-device", {"perDeviceNodeSelection": True}, extras, minor,
                                       node_names))
    classes = dict((d, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": d},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]}})
                   for d in drivers)
    classes["h100"] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "h100"},
                       "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}},
                                              {"cel": {"expression": SELECTORS[0]}}]}}
    claims = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"uid-c{i}"},
               "spec": draw(claim_spec(classes, extras))} for i in range(draw(st.integers(1, 2)))]
    slices = draw(st.permutations(slices))  # the order kube-scheduler's informer lists them in is any
    ids = sorted(set("%s/%s/%s" % (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                     for s in slices for d in s["spec"].get("devices") or []))
    allocated = draw(st.lists(st.sampled_from(ids), unique=True, max_size=3)) if ids else []
    return {"gates": sorted(gates), "nodes": nodes, "slices": slices, "classes": list(classes.values()),
            "claims": claims, "allocated": allocated}


def to_release(state, version):
    """The state in the resource.k8s.io version the release's allocator reads: v1beta1 before 1.34 (device
    fields under basic, request fields on the request)."""
    if int(version.split(".")[1]) >= 34:
        return state
    slices = []
    for s in state["slices"]:
        spec = dict(s["spec"], devices=[{"name": d["name"], "basic": dict((k, v) for k, v in d.items() if k != "name")}
                                        for d in s["spec"]["devices"]])
        slices.append(dict(s, apiVersion="resource.k8s.io/v1beta1", spec=spec))
    claims = []
    for c in state["claims"]:
        requests = [r if "firstAvailable" in r else dict({"name": r["name"]}, **r["exactly"])
                    for r in c["spec"]["devices"]["requests"]]
        devices = dict(c["spec"]["devices"], requests=requests)
        claims.append(dict(c, apiVersion="resource.k8s.io/v1beta1", spec=dict(c["spec"], devices=devices)))
    classes = [dict(c, apiVersion="resource.k8s.io/v1beta1") for c in state["classes"]]
    return dict(state, slices=slices, claims=claims, classes=classes)


# ---- the comparison ---------------------------------------------------------------------------------------

def explainer_verdicts(state, version, env):
    features = set(state["gates"])
    rules = model.pool_rules(allocator_rules(version)["release"])
    pools = model.gather_pools(state["slices"], features, rules)
    allocated = dict((tuple(i.split("/", 2)), "default/other") for i in state["allocated"])
    ctx = search.Context(env, dict((c["metadata"]["name"], c) for c in state["classes"]), pools, allocated, [],
                         features, rules)
    claims = [search.Claim("default/" + c["metadata"]["name"], c["spec"]) for c in state["claims"]]
    out = {}
    for node in state["nodes"]:
        meta = node["metadata"]
        out[meta["name"]] = search.node_verdict(ctx, claims, meta["name"], meta["labels"])[:2]
    return out


def agrees(oracle_outcome, verdict):
    if verdict == search.CANNOT_TELL:
        return True
    if oracle_outcome["error"]:
        return verdict == search.ERROR
    return verdict == (search.FITS if oracle_outcome["fits"] else search.DOES_NOT_FIT)  # unschedulable: no fit


@pytest.mark.every_release("the allocator of the release's own k8s.io/dynamic-resource-allocation (hack/oracle)")
def test_the_explainer_agrees_with_the_allocator_on_generated_states(release_oracle, capsys):
    version = release_oracle.version
    env = cel.Environment(int(version.split(".")[1]))
    counts, reached = collections.Counter(), set()

    def run(cases, offset):
        @seed(SEED + offset)
        @settings(max_examples=cases, deadline=None, database=None, derandomize=False,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
        @given(cluster_state(version))
        def check(state):
            reached.update(state_kinds(state, version))
            state = to_release(state, version)
            features = allocator_features(version, set(state["gates"]))
            counts["states with gates other than the defaults"] += state["gates"] != sorted(gates_on(version))
            answers = release_oracle.allocate(features, state["slices"], state["classes"], state["claims"],
                                              state["allocated"], state["nodes"])
            verdicts = explainer_verdicts(state, version, env)
            counts["states"] += 1
            for node, (verdict, detail) in sorted(verdicts.items()):
                outcome = answers[node]
                counts["nodes"] += 1
                answer = "allocator " + ("error" if outcome["error"] else "fits" if outcome["fits"] else
                                         "unschedulable" if outcome["unschedulable"] else "no fit")
                counts[answer] += 1
                reached.add(answer)
                counts["explainer " + verdict] += 1
                counts["explainer cannot_tell: consumable capacity"] += search.CONSUMABLE_CAPACITY_UNMODELLED in str(
                    detail) and verdict == search.CANNOT_TELL
                assert agrees(outcome, verdict), (
                    f"{version} node {node}: the allocator says {outcome}, the explainer {verdict} ({detail}); "
                    f"seed {SEED} + {offset} (tier {tiers.TIER})")

        counts["runs"] += 1
        check()

    # Both answers are asserted below (a run of 100 states once had a single fit): tier ci goes on until each came.
    possible = possible_kinds(version) | {"allocator fits", "allocator no fit"}
    try:
        tiers.until_covered(run, CASES, MAX_CASES, lambda: possible - reached)
    finally:
        with capsys.disabled():  # the seed and the counts belong in the run's log, passed or not
            print(f"\n{version}: seed {SEED}, tier {tiers.TIER}, {counts['states']} states, {counts['nodes']} node "
                  f"answers compared ({dict(sorted(counts.items()))}); {len(possible & reached)} of the "
                  f"{len(possible)} kinds of state and answer the release can draw, not drawn: "
                  f"{sorted(possible - reached)}; "
                  f"generated: {GENERATED}; not generated: {NOT_GENERATED}")
    assert counts["states"] >= min(CASES, 50), counts
    assert counts["allocator fits"] and counts["allocator no fit"], counts  # both outcomes reached
    # The comparison keeps its power: "cannot tell" (always allowed) stays the exception (about 1-9% here) where the
    # explainer models the state; consumable capacity, which it does not model, is left out of the share (how many
    # states draw it depends on the seed: 29% of the answers for seed 1883160900 on 1.37).
    unmodelled = counts["explainer cannot_tell: consumable capacity"]
    assert (counts["explainer cannot_tell"] - unmodelled) * 4 <= counts["nodes"] - unmodelled, counts
