"""Whether a driver is present on a node: some current slice of it covers the node.

The general form is tested with generated inputs (Hypothesis): slices at slice level (nodeName, allNodes,
nodeSelector) or with perDeviceNodeSelection (each device's nodeName, allNodes or nodeSelector, in the v1 and
the v1beta1 ``basic`` form), several pools and generations, nodes with generated labels. Each generated
requirement is kept twice, as the API's JSON and as a plain model the oracle below evaluates on its own, so
the oracle shares no code with slice_rules or kube.selection. Then the claim doctor: it never plans a finalizer
removal, nor reports a pod stuck terminating (whose advice is a force delete), for a claim whose driver is
present on its node; and it does plan the removal when the driver is gone.

The objects recorded from the real cluster (tests/unit/fixtures/recorded/scenario-*.json: a network-attached
claim on an allNodes pool, a claim on a perDeviceNodeSelection pool) show the same on real objects.
"""
import copy
import json
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.dra.admin.plugins.module_utils.claims import claims as claim_rules
from ansible_collections.dra.admin.plugins.module_utils.claims import doctor
from ansible_collections.dra.admin.plugins.module_utils.kube import slices as slice_rules
from conftest import FIXTURES, recorded_by_kind

REC = os.path.join(FIXTURES, "recorded")
NODE_NAMES = ["node-a", "node-b", "node-c"]
KEYS = ["zone", "rack", "gpu"]
VALUES = ["1", "2", "5"]
DRIVERS = ["gpu.example.com", "net.example.com", "part.example.com"]
POOLS = ["p0", "p1"]
NOW = 2000000000


# --- generated nodes and selectors, each with its own model -------------------------------------------------

labels_strategy = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
nodes_strategy = st.fixed_dictionaries(dict((name, labels_strategy) for name in NODE_NAMES))


@st.composite
def requirement(draw):
    """(JSON requirement, model): the model is (kind, key, operator, values) the oracle evaluates."""
    if draw(st.booleans()) and draw(st.booleans()):
        operator = draw(st.sampled_from(["In", "NotIn"]))
        values = draw(st.lists(st.sampled_from(NODE_NAMES + ["gone"]), min_size=1, max_size=2, unique=True))
        return ("field", {"key": "metadata.name", "operator": operator, "values": values},
                ("field", "metadata.name", operator, values))
    key = draw(st.sampled_from(KEYS))
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    expression = {"key": key, "operator": operator}
    values = []
    if operator in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True))
    elif operator in ("Gt", "Lt"):
        values = [draw(st.sampled_from(VALUES))]
    if values:
        expression["values"] = values
    return ("label", expression, ("label", key, operator, values))


@st.composite
def node_selector(draw):
    """(nodeSelector JSON, [[requirement model]]): terms are ORed, requirements in a term ANDed."""
    terms, model = [], []
    for dummy in range(draw(st.integers(1, 2))):
        reqs = draw(st.lists(requirement(), min_size=1, max_size=2))
        term = {}
        for kind, req, dummy2 in reqs:
            term.setdefault("matchFields" if kind == "field" else "matchExpressions", []).append(req)
        terms.append(term)
        model.append([m for dummy3, dummy4, m in reqs])
    return {"nodeSelectorTerms": terms}, model


def model_requirement_holds(model, name, labels):
    kind, key, operator, values = model
    if kind == "field":
        return (name in values) == (operator == "In")
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if key not in labels:
        return operator == "NotIn"
    if operator == "In":
        return labels[key] in values
    if operator == "NotIn":
        return labels[key] not in values
    return int(labels[key]) > int(values[0]) if operator == "Gt" else int(labels[key]) < int(values[0])


def model_selects(model, name, labels):
    return any(all(model_requirement_holds(r, name, labels) for r in term) for term in model)


@st.composite
def placement(draw):
    """(the JSON fields saying where devices are, a predicate over (name, labels) for the oracle)."""
    kind = draw(st.sampled_from(["nodeName", "allNodes", "nodeSelector"]))
    if kind == "nodeName":
        node = draw(st.sampled_from(NODE_NAMES + ["gone"]))
        return {"nodeName": node}, (lambda name, labels, node=node: name == node)
    if kind == "allNodes":
        return {"allNodes": True}, (lambda name, labels: True)
    selector, model = draw(node_selector())
    return {"nodeSelector": selector}, (lambda name, labels, model=model: model_selects(model, name, labels))


def any_covers(tests):
    """The oracle of a per-device slice: one of its devices covers the node."""
    def covers(name, labels):
        return any(t(name, labels) for t in tests)
    return covers


@st.composite
def resource_slice(draw):
    """(slice, oracle entry {driver, pool, generation, covers(name, labels)})."""
    driver, pool = draw(st.sampled_from(DRIVERS)), draw(st.sampled_from(POOLS))
    generation = draw(st.integers(1, 3))
    spec = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1}}
    if draw(st.booleans()):
        fields, covers = draw(placement())
        spec.update(fields)
        spec["devices"] = [{"name": "dev-%d" % i} for i in range(draw(st.integers(0, 2)))]
    else:
        spec["perDeviceNodeSelection"] = True
        beta_basic = draw(st.booleans())  # v1beta1 keeps a device's fields under "basic"
        spec["devices"], tests = [], []
        for i in range(draw(st.integers(0, 3))):
            fields, test = draw(placement())
            spec["devices"].append({"name": "dev-%d" % i, "basic": fields} if beta_basic
                                   else dict(fields, name="dev-%d" % i))
            tests.append(test)
        covers = any_covers(tests)
    item = {"metadata": {"name": "%s-%s-%d" % (driver, pool, draw(st.integers(0, 10 ** 6)))}, "spec": spec}
    return item, {"driver": driver, "pool": pool, "generation": generation, "covers": covers}


world_strategy = st.tuples(nodes_strategy, st.lists(resource_slice(), max_size=7))


def oracle_present(entries, driver, name, labels):
    """Present iff some slice of the driver, of its pool's newest generation, covers the node."""
    newest = {}
    for e in entries:
        newest[(e["driver"], e["pool"])] = max(newest.get((e["driver"], e["pool"]), 0), e["generation"])
    return any(e["driver"] == driver and e["generation"] == newest[(e["driver"], e["pool"])]
               and e["covers"](name, labels) for e in entries)


# --- the rule of presence ------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(world_strategy, st.randoms(use_true_random=False))
def test_a_driver_is_present_on_a_node_iff_some_current_slice_of_it_covers_the_node(world, rng):
    nodes, generated = world
    slices = [s for s, dummy in generated]
    entries = [e for dummy, e in generated]
    publishers = slice_rules.node_publishers(slices)
    by_node = slice_rules.drivers_by_node(slices, nodes)
    shuffled = list(slices)
    rng.shuffle(shuffled)
    for name, labels in nodes.items():
        expected = set(d for d in DRIVERS if oracle_present(entries, d, name, labels))
        assert slice_rules.drivers_for_node(publishers, name, labels) == expected
        assert by_node[name] == expected
        assert slice_rules.drivers_for_node(slice_rules.node_publishers(shuffled), name, labels) == expected
        for driver in DRIVERS:
            assert slice_rules.driver_publishes_for_node(slices, driver, name, labels) == (driver in expected)
        # The allocator's per-node view of one slice (the explainer's): the same rule; shared counters always.
        for item, entry in generated:
            assert slice_rules.slice_offered_to(item, name, labels) == entry["covers"](name, labels)
            counters = copy.deepcopy(item)
            counters["spec"]["sharedCounters"] = [{"name": "memory", "counters": {"gb": {"value": "8"}}}]
            assert slice_rules.slice_offered_to(counters, name, labels)
    assert slice_rules.nodes_without_slices(nodes, publishers) == sorted(n for n in nodes if not by_node[n])
    # A driver publishing for some node is among those publishing anywhere.
    assert set().union(*by_node.values()) <= slice_rules.publishing_drivers(publishers)


@settings(max_examples=150, deadline=None)
@given(world_strategy, st.sampled_from(DRIVERS), st.sampled_from(POOLS))
def test_a_newer_generation_replaces_what_its_pool_published(world, driver, pool):
    """A pool's new generation that covers nothing takes the pool's presence away everywhere; an older
    generation added afterwards changes nothing."""
    nodes, generated = world
    slices = [s for s, dummy in generated]
    newest = max([slice_rules.pool_generation(s) for s in slices if slice_rules.pool_key(s) == (driver, pool)] or [0])
    empty = {"metadata": {"name": "withdrawn"},
             "spec": {"driver": driver, "pool": {"name": pool, "generation": newest + 1, "resourceSliceCount": 1},
                      "perDeviceNodeSelection": True, "devices": []}}
    stale = copy.deepcopy(empty)
    stale["spec"].update(allNodes=True, perDeviceNodeSelection=None)
    stale["spec"]["pool"]["generation"] = newest
    for name, labels in nodes.items():
        pools = slice_rules.pools_for_node(slice_rules.node_publishers(slices + [empty]), name, labels)
        assert (driver, pool) not in pools
        assert slice_rules.pools_for_node(slice_rules.node_publishers(slices + [empty, stale]), name, labels) == pools


def test_each_kind_of_placement_on_a_recorded_node():
    with open(os.path.join(REC, "nodes.json")) as fh:
        node = json.load(fh)["items"][0]
    name, labels = node["metadata"]["name"], node["metadata"]["labels"]
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]}]}
    other = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "type", "operator": "In", "values": ["metal"]}]}]}
    cases = [({"nodeName": name}, True), ({"nodeName": "elsewhere"}, False), ({"allNodes": True}, True),
             ({"nodeSelector": zone}, True), ({"nodeSelector": other}, False)]
    for fields, expected in cases:
        at_slice = {"spec": dict(fields, driver="d", pool={"name": "p", "generation": 1}, devices=[])}
        per_device = {"spec": {"driver": "d", "pool": {"name": "p", "generation": 1}, "perDeviceNodeSelection": True,
                               "devices": [dict(fields, name="x")]}}
        beta = {"spec": dict(per_device["spec"], devices=[{"name": "x", "basic": fields}])}
        for item in (at_slice, per_device, beta):
            assert slice_rules.driver_publishes_for_node([item], "d", name, labels) is expected, (fields, item)
    # A per-device slice without devices publishes for no node.
    empty = {"spec": {"driver": "d", "pool": {"name": "p", "generation": 1}, "perDeviceNodeSelection": True}}
    assert not slice_rules.driver_publishes_for_node([empty], "d", name, labels)


# --- the doctor never calls a present driver gone -------------------------------------------------------------

@st.composite
def doctor_world(draw):
    """Nodes, slices, and deleted claims with finalizers, each allocated one device of a generated pool,
    pinned to a node or without node selector, reserved by a pod (terminating or not) or by nothing."""
    nodes, generated = draw(world_strategy)
    slices = [s for s, dummy in generated]
    claims, pods, infos = [], {}, {}
    for i in range(draw(st.integers(1, 4))):
        driver, pool = draw(st.sampled_from(DRIVERS)), draw(st.sampled_from(POOLS))
        allocation = {"devices": {"results": [{"request": "r", "driver": driver, "pool": pool, "device": "dev-0"}]}}
        node = draw(st.sampled_from(NODE_NAMES))
        if draw(st.booleans()):
            allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        claim = {"metadata": {"namespace": "ns", "name": "claim-%d" % i, "uid": "claim-uid-%d" % i,
                              "deletionTimestamp": "2033-05-18T03:33:20Z",
                              "finalizers": ["resource.kubernetes.io/delete-protection"]},
                 "status": {"allocation": allocation}}
        consumer = draw(st.sampled_from(["none", "pod", "terminating pod"]))
        if consumer != "none":
            uid = "pod-uid-%d" % i
            claim["status"]["reservedFor"] = [{"resource": "pods", "name": "pod-%d" % i, "uid": uid}]
            pods[uid] = claim_rules.pod_ref(node, [])
            infos[uid] = {"namespace": "ns", "name": "pod-%d" % i, "node": node,
                          "deletion_timestamp": NOW - 60 if consumer == "terminating pod" else None}
        claims.append(claim)
    return nodes, slices, claims, pods, infos


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doctor_world())
def test_the_doctor_never_forces_a_claim_whose_driver_is_present_on_its_node(world):
    nodes, slices, claims, pods, infos = world
    slice_index = slice_rules.device_index(slices)
    views = [claim_rules.claim_view(c, nodes, pods, slice_index) for c in claims]
    metas = dict(("ns/%s" % c["metadata"]["name"], c["metadata"]) for c in claims)
    findings = doctor.diagnose(views, metas, infos, slices, nodes, NOW, force=True)
    publishers = slice_rules.node_publishers(slices)
    anywhere = slice_rules.publishing_drivers(publishers)

    def present(driver, node):
        return driver in slice_rules.drivers_for_node(publishers, node, nodes.get(node) or {})

    by_claim = dict(("ns/%s" % v["name"], v) for v in views)
    planned = doctor.plan(findings, ["stuck_deletion"])
    for view in views:
        key = "ns/%s" % view["name"]
        (driver,) = view["drivers"]
        served = (all(present(driver, n) for n in view["nodes"]) if view["nodes"] else driver in anywhere)
        stuck = [f for f in findings if f["kind"] == "stuck_deletion" and f["claim"] == key]
        if served:
            assert not stuck and key not in [f["claim"] for f in planned]
        else:
            # The converse, so that the test can fail: a gone driver is found, and forced only without a pod.
            assert stuck
            assert (key in [f["claim"] for f in planned]) == (not view["consumers"])
    for finding in findings:
        if finding["kind"] == "pod_stuck_terminating":
            assert all(not present(d, finding["node"]) for d in finding["drivers"])
            assert all(not all(present(d, finding["node"]) for d in by_claim[c]["drivers"])
                       for c in finding["claims"])
    for uid, info in infos.items():
        if info["deletion_timestamp"] is not None:
            (view,) = [v for v in views if v["consumers"] and v["consumers"][0]["uid"] == uid]
            reported = [f for f in findings if f["kind"] == "pod_stuck_terminating" and f["name"] == info["name"]]
            assert bool(reported) == (not present(view["drivers"][0], info["node"]))


# --- the same on objects recorded from the real cluster -------------------------------------------------------

def recorded(name):
    return recorded_by_kind("scenario-%s.json" % name)


def deleted_while_in_use(kinds):
    """The scenario's claim deleted (with its finalizer) and its pod being deleted: what a user deleting a
    workload leaves while the kubelet unprepares."""
    (claim,) = copy.deepcopy(kinds["ResourceClaim"])
    (pod,) = copy.deepcopy(kinds["Pod"])
    claim["metadata"].update(deletionTimestamp="2033-05-18T03:33:20Z",
                             finalizers=["resource.kubernetes.io/delete-protection"])
    pods = {pod["metadata"]["uid"]: claim_rules.pod_ref(pod["spec"]["nodeName"], [])}
    infos = {pod["metadata"]["uid"]: {"namespace": pod["metadata"]["namespace"], "name": pod["metadata"]["name"],
                                      "node": pod["spec"]["nodeName"], "deletion_timestamp": NOW - 60}}
    return claim, pods, infos


def doctor_kinds(kinds, slices, force=True):
    claim, pods, infos = deleted_while_in_use(kinds)
    nodes = dict((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in kinds["Node"])
    view = claim_rules.claim_view(claim, nodes, pods, slice_rules.device_index(slices))
    meta = {"%s/%s" % (view["namespace"], view["name"]): claim["metadata"]}
    return [f["kind"] for f in doctor.diagnose([view], meta, infos, slices, nodes, NOW, force)]


def test_recorded_network_attached_claim_is_not_called_gone():
    """The claim of an allNodes pool (net.example.com) used by a pod on node-000000: the driver publishes for
    that node. Without its slice, it is gone."""
    kinds = recorded("network-attached")
    slices = kinds["ResourceSlice"]
    assert any(s["spec"].get("allNodes") for s in slices)
    assert doctor_kinds(kinds, slices) == []
    gone = [s for s in slices if s["spec"]["driver"] != "net.example.com"]
    assert sorted(doctor_kinds(kinds, gone)) == ["missing_devices", "pod_stuck_terminating", "stuck_deletion"]


def test_recorded_network_attached_pool_behind_a_node_selector():
    """The same pool published through a nodeSelector: present on the nodes it admits, gone elsewhere."""
    kinds = recorded("network-attached")
    slices = copy.deepcopy(kinds["ResourceSlice"])
    fabric = next(s for s in slices if s["spec"]["driver"] == "net.example.com")
    del fabric["spec"]["allNodes"]
    fabric["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-000000", "node-000001"]}]}]}
    assert doctor_kinds(kinds, slices) == []
    fabric["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["node-000002"]
    assert sorted(doctor_kinds(kinds, slices)) == ["pod_stuck_terminating", "stuck_deletion"]


def test_recorded_per_device_claim_is_not_called_gone():
    """A claim of a perDeviceNodeSelection pool (devices naming node-000000 and node-000001) used on
    node-000001: present there; once the device names another node only, gone."""
    kinds = recorded("per-device")
    slices = copy.deepcopy(kinds["ResourceSlice"])
    assert doctor_kinds(kinds, slices) == []
    part = next(s for s in slices if s["spec"].get("perDeviceNodeSelection"))
    for device in part["spec"]["devices"]:
        device["nodeName"] = "node-000002"
    assert sorted(doctor_kinds(kinds, slices)) == ["pod_stuck_terminating", "stuck_deletion"]


def test_a_node_is_ready_for_a_driver_when_every_pool_covering_it_is_complete():
    """dra_driver_status_info's wait: covered by the driver, and no covering pool short of resourceSliceCount."""
    nodes = {"node-a": {"zone": "1"}, "node-b": {"zone": "2"}, "node-c": {}}
    own = {"metadata": {"name": "own"},
           "spec": {"driver": "d", "nodeName": "node-a", "pool": {"name": "node-a", "generation": 1}}}
    zone = {"metadata": {"name": "zone-0"},
            "spec": {"driver": "d", "pool": {"name": "zone", "generation": 1, "resourceSliceCount": 2},
                     "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "zone", "operator": "Exists"}]}]}}}
    assert slice_rules.nodes_with_complete_slices([own, zone], "d", nodes) == []  # zone pool: 1 of 2 slices
    second = copy.deepcopy(zone)
    second["metadata"]["name"] = "zone-1"
    assert slice_rules.nodes_with_complete_slices([own, zone, second], "d", nodes) == ["node-a", "node-b"]
    everywhere = {"metadata": {"name": "fabric"},
                  "spec": {"driver": "d", "allNodes": True, "pool": {"name": "fabric", "generation": 1}}}
    assert slice_rules.nodes_with_complete_slices([everywhere], "d", nodes) == sorted(nodes)
    assert slice_rules.nodes_with_complete_slices([everywhere], "other", nodes) == []
