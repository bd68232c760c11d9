"""The allocator's rules the oracle found (tests/integration/test_explain_oracle.py, test_cel_oracle.py compare them
with k8s.io/dynamic-resource-allocation itself on generated input); here each rule on a case of its own, with the
answer k8s.io/dynamic-resource-allocation gave for that case (v0.38.0-beta.0, v0.37.2, v0.33.13)."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import cel
from ansible_collections.dra.admin.plugins.module_utils.allocation import model, search

GPU = "gpu.example.com"
CLASSES = {GPU: {"metadata": {"name": GPU}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}}


def slice_(name, pool, devices, generation=1, count=1, **where):
    spec = dict({"driver": GPU, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                 "devices": [{"name": d, "attributes": {"index": {"int": i}}} for i, d in enumerate(devices)]},
                **(where or {"nodeName": "node-0"}))
    return {"metadata": {"name": name}, "spec": spec}


def claim(*requests, constraints=None):
    """A claim as the API server stores it (allocationMode defaulted to ExactCount)."""
    spec = {"devices": {"requests": [{"name": f"r{i}", "exactly": dict({"deviceClassName": GPU,
                                                                        "allocationMode": "ExactCount"}, **r)}
                                     for i, r in enumerate(requests)]}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return search.Claim("default/c", spec)


def verdict(slices, claims, release, allocated=None, node="node-0"):
    rules = model.pool_rules(release)
    ctx = search.Context(cel.Environment(release), CLASSES, model.gather_pools(slices, set(), rules),
                         dict(allocated or {}), [], set(), rules)
    return search.node_verdict(ctx, claims, node, {"kubernetes.io/hostname": node})[:2]


def test_a_newer_generation_elsewhere_makes_the_nodes_slices_obsolete_from_1_36():
    slices = [slice_("a", "p", ["d0"], generation=1, count=2), slice_("b", "p", ["d1"], generation=1, count=2,
                                                                      nodeName="node-1"),
              slice_("c", "p", ["d2"], generation=2, count=1, nodeName="node-1")]
    assert verdict(slices, [claim({"count": 1})], 37)[0] == search.DOES_NOT_FIT  # pool left out on node-0
    assert verdict(slices, [claim({"count": 1})], 33)[0] == search.FITS  # 1.33: incomplete, allocated from


def test_a_pool_complete_only_over_all_its_nodes_is_complete_from_1_36():
    slices = [slice_("a", "p", ["d0"], count=2), slice_("b", "p", ["d1"], count=2, nodeName="node-1")]
    assert verdict(slices, [claim({"allocationMode": "All"})], 37)[0] == search.FITS
    kind, detail = verdict(slices, [claim({"allocationMode": "All"})], 33)
    assert kind == search.ERROR and "being updated" in detail


def test_an_invalid_pool_is_skipped_from_1_35_and_stops_the_search_before():
    slices = [slice_("a", "p", ["d0", "d1"], count=2), slice_("b", "p", ["d1"], count=2)]
    kind, detail = verdict(slices, [claim({"count": 1})], 37)
    assert kind == search.DOES_NOT_FIT and "invalid" in detail and "unschedulable" in detail
    kind, detail = verdict(slices, [claim({"count": 1})], 33)
    assert kind == search.ERROR and "duplicate device name d1" in detail


def test_all_devices_with_a_pool_being_updated_is_an_error_before_1_38_and_the_node_only_from_1_38():
    slices = [slice_("a", "p", ["d0", "d1"], count=2)]
    kind, detail = verdict(slices, [claim({"allocationMode": "All"})], 37)
    assert kind == search.ERROR and "being updated" in detail
    kind, detail = verdict(slices, [claim({"allocationMode": "All"})], 38)
    assert kind == search.DOES_NOT_FIT and "asks for all devices, but pool gpu.example.com/p is being updated" in detail


@pytest.mark.parametrize("failing_pool, kind", [("a", search.ERROR), ("c", search.DOES_NOT_FIT)])
def test_a_request_for_all_devices_on_1_38_stops_at_the_first_pool_it_meets_that_fails(failing_pool, kind):
    """1.38 goes through the node's pools in order: a selector failing on a device of a pool before the one being
    updated fails the attempt; a pool being updated before the failing device rules out the node only."""
    slices = [slice_("a", "a", ["d0"]), slice_("b", "b", ["d1"], count=2), slice_("c", "c", ["d2"])]
    for one in slices:  # the failing pool's device has no attribute "model": the selector fails on it
        if one["spec"]["pool"]["name"] != failing_pool:
            one["spec"]["devices"][0]["attributes"]["model"] = {"string": "h100"}
    model_is = [{"cel": {"expression": f'device.attributes["{GPU}"].model == "h100"'}}]
    found, detail = verdict(slices, [claim({"allocationMode": "All", "selectors": model_is})], 38)
    assert found == kind and ("being updated" in detail) == (kind == search.DOES_NOT_FIT)


@pytest.mark.parametrize("problem", ["being updated", "invalid"])
def test_a_pool_being_updated_or_invalid_keeps_its_name_order_though_its_devices_have_binding_conditions(problem):
    """The allocator keeps such a pool as its name only: its devices' binding conditions do not send it last, so a
    request for all devices meets it before a later pool's failing selector (1.38: the node only)."""
    slices = [slice_("a", "a", ["d0"], count=2) if problem == "being updated" else slice_("a", "a", ["d0", "d0"]),
              slice_("b", "b", ["d1"])]
    slices[0]["spec"]["devices"][0].update(bindingConditions=["ready"], bindingFailureConditions=["failed"])
    model_is = [{"cel": {"expression": f'device.attributes["{GPU}"].model == "h100"'}}]
    found, detail = verdict(slices, [claim({"allocationMode": "All", "selectors": model_is})], 38)
    assert found == search.DOES_NOT_FIT and "pool gpu.example.com/a is " + problem in detail


def test_match_attribute_ignores_version_build_metadata_from_1_38():
    slices = [slice_("a", "p", ["d0", "d1"])]
    for build, device in zip("ab", slices[0]["spec"]["devices"]):
        device["attributes"]["v"] = {"version": "1.0.0+" + build}
    match = [{"matchAttribute": f"{GPU}/v"}]
    assert verdict(slices, [claim({"count": 2}, constraints=match)], 37)[0] == search.DOES_NOT_FIT
    assert verdict(slices, [claim({"count": 2}, constraints=match)], 38)[0] == search.FITS
    distinct = [{"distinctAttribute": f"{GPU}/v"}]
    assert verdict(slices, [claim({"count": 2}, constraints=distinct)], 38)[0] == search.DOES_NOT_FIT


def test_1_38_runs_stable_with_its_default_gates_and_incubating_for_an_alpha_gate():
    defaults = {model.BINDING_CONDITIONS, model.RESOURCE_CLAIM_DEVICE_STATUS, model.CONSUMABLE_CAPACITY,
                "DRAFractionalCapacityRange"}
    assert model.allocator_implementation(37, defaults) == "incubating"
    assert model.allocator_implementation(38, defaults) == "stable"
    assert model.allocator_implementation(38, defaults | {"DRAListTypeAttributes"}) == "incubating"
    assert model.allocator_implementation(37, defaults | {"DRAListTypeAttributes"}) == "experimental"
    # 1.38's stable goes through the pools in order and searches binding-condition pools last, as 1.37's incubating.
    assert model.pools_in_order(38, defaults) and model.binding_pools_last(38, defaults)
    assert not model.counter_slices_everywhere(38, set())


def test_a_claim_over_32_devices_is_an_error_after_its_last_request_before_1_37_and_after_each_from_1_37():
    slices = [slice_("a", "p", ["d%d" % i for i in range(40)])]
    kind, detail = verdict(slices, [claim({"count": 20}, {"count": 13})], 36)
    assert kind == search.ERROR and "at least 33 devices, more than the 32" in detail
    kind, detail = verdict(slices, [claim({"count": 20}, {"count": 13})], 37)
    assert kind == search.ERROR and "request r1: adding 13 devices exceeds the 32" in detail and "20 already" in detail


def test_the_claim_limit_and_a_request_for_all_devices_on_a_pool_being_updated_count_in_request_order_on_1_38():
    """1.38: "adding 33 devices exceeds the claim limit" fails the attempt when that request comes first; a request
    for all devices on a pool being updated that comes first rules out the node only."""
    slices = [slice_("a", "p", ["d0"], count=2)]
    kind, detail = verdict(slices, [claim({"count": 33}, {"allocationMode": "All"})], 38)
    assert kind == search.ERROR and "request r0: adding 33 devices" in detail
    kind, detail = verdict(slices, [claim({"allocationMode": "All"}, {"count": 33})], 38)
    assert kind == search.DOES_NOT_FIT and "request r0: asks for all devices" in detail


@pytest.mark.parametrize("release", [33, 37, 38])
def test_a_subrequest_past_the_claim_limit_fails_before_its_selectors_are_evaluated(release):
    """firstAvailable [all devices of a class none matches, 33 devices]: the claim's fewest is 0, so the check before
    the search passes; the search stops the second subrequest at the limit before it looks at a device, so its
    failing selector is never evaluated: no fit, not an error."""
    slices = [slice_("a", "p", ["d0"])]
    spec = {"devices": {"requests": [{"name": "r0", "firstAvailable": [
        {"name": "s0", "deviceClassName": GPU, "allocationMode": "All",
         "selectors": [{"cel": {"expression": "device.attributes[\"%s\"].index == 7" % GPU}}]},
        {"name": "s1", "deviceClassName": GPU, "allocationMode": "ExactCount", "count": 33,
         "selectors": [{"cel": {"expression": 'device.attributes["%s"].model == "h100"' % GPU}}]}]}]}}
    assert verdict(slices, [search.Claim("default/c", spec)], release)[0] == search.DOES_NOT_FIT


def test_a_constraint_refusing_a_device_of_all_is_an_error_and_distinct_attribute_holds():
    slices = [slice_("a", "p", ["d0", "d1"])]
    match = [{"requests": ["r0"], "matchAttribute": f"{GPU}/index"}]
    kind, detail = verdict(slices, [claim({"allocationMode": "All"}, constraints=match)], 37)
    assert kind == search.ERROR and "claim constraint would not be satisfied" in detail
    distinct = [{"distinctAttribute": f"{GPU}/index"}]
    assert verdict(slices, [claim({"count": 2}, constraints=distinct)], 37)[0] == search.FITS
    same = [slice_("a", "p", ["d0", "d1"])]
    for device in same[0]["spec"]["devices"]:
        device["attributes"]["index"] = {"int": 7}
    assert verdict(same, [claim({"count": 2}, constraints=distinct)], 37)[0] == search.DOES_NOT_FIT


def test_a_failing_selector_is_an_error_only_where_the_search_meets_the_device():
    failing = {"selectors": [{"cel": {"expression": f'device.attributes["{GPU}"].model == "x"'}}], "count": 1}
    slices = [slice_("a", "p", ["d0"])]
    assert verdict(slices, [claim(failing)], 37)[0] == search.ERROR
    # The device is in use: the allocator skips it before evaluating its selector.
    assert verdict(slices, [claim(failing)], 37, allocated={(GPU, "p", "d0"): "default/other"})[0] == \
        search.DOES_NOT_FIT


@pytest.mark.parametrize("expression,minor,answer", [
    ('"abc".split("").size() == 3', 37, True),
    ('"abc".split("", 2) == ["a", "bc"]', 37, True),
    ('"abcabc".lastIndexOf("b", 3) == 1', 37, True),
    ('"abc".indexOf("", 9) == 9', 33, True),
    ('"abc".indexOf("", 9) == 3', 37, True),
    ('false && (0.0 / 0.0 < 1.0)', 37, False),
    ('true || "a".substring(5) == "x"', 37, True),
    ('1.0 / 0.0 > 1.0', 37, True),
    ('2.5 * 2.0 == 5.0', 37, True),
    # cel-go 0.33 (1.38): an ordering with a NaN on either side is false, not an error.
    ('0.0 / 0.0 < 1.0', 38, False),
    ('!(1.0 >= 0.0 / 0.0)', 38, True),
])
def test_cel_as_the_releases_cel_go(expression, minor, answer):
    env = cel.Environment(minor)
    assert env.matches(expression, env.device_activation(GPU, {"attributes": {}, "capacity": {}})) is answer


@pytest.mark.parametrize("attributes", [
    {"model": {"string": "a"}, f"{GPU}/model": {"string": "b"}},
    {f"{GPU}/model": {"string": "b"}, "model": {"string": "a"}},
])
def test_the_qualified_name_wins_from_1_38(attributes):
    """A device with "model" and "gpu.example.com/model": 1.38 reads the qualified one whatever their order (the
    oracle of v0.38.0-beta.0 says true for both orders; v0.37.2's answer follows its map's order)."""
    env = cel.Environment(38)
    activation = env.device_activation(GPU, {"attributes": attributes, "capacity": {}})
    assert env.matches(f'device.attributes["{GPU}"].model == "b"', activation) is True


@pytest.mark.parametrize("expression,message", [
    ("0.0 / 0.0 < 1.0", "NaN values cannot be ordered"),
    ("1 == 1.0", "found no matching overload for '_==_' applied to '(int, double)'"),
    ("2.5 * 2 == 5.0", "found no matching overload for '_*_' applied to '(double, int)'"),
    ('"abc".lastIndexOf("c", -1) == -1', "index out of range: -1"),
    # A double times an int attribute: the type checker lets it through (attributes are dyn), cel-go has no such
    # overload at run time (kube-scheduler failed such a pod; both oracles say "no such overload").
    ('1.5 * device.attributes["gpu.example.com"].index != 0.0', "no matching overload"),
    ('device.attributes["gpu.example.com"].index - 0.5 > 0.0', "no matching overload"),
])
def test_cel_errors_as_the_releases_cel_go(expression, message):
    env = cel.Environment(37)
    with pytest.raises(cel.SelectorError) as caught:
        env.matches(expression, env.device_activation(GPU, {"attributes": {"index": {"int": 3}}, "capacity": {}}))
    assert message in str(caught.value)


def nodes(*names):
    return [{"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}} for n in names]


def pinned_claim(node):
    return {"metadata": {"name": "held", "namespace": "default"}, "spec": {}, "status": {"allocation": {
        "devices": {"results": [{"request": "r0", "driver": GPU, "pool": "p", "device": "d0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}


def explained(pod, claims, release=37):
    from ansible_collections.dra.admin.plugins.module_utils.allocation import explain
    rules = model.pool_rules(release)
    ctx = search.Context(cel.Environment(release), CLASSES, model.gather_pools([], set(), rules), {}, [], set(), rules)
    by_label = dict(("default/%s" % c["metadata"]["name"], c) for c in claims)
    allocated, to_allocate, problems, waits = explain.pod_claims(pod, by_label, {})
    return explain.explain(ctx, {"pod": "default/p"}, to_allocate, allocated, problems, nodes("node-0", "node-1"),
                           pod["spec"], waits=waits)


def test_nothing_left_to_allocate_is_still_judged_on_the_nodes():
    """Issue rule 1: an allocated claim pins the pod to node-0, its own nodeSelector asks for node-1."""
    pod = {"metadata": {"namespace": "default", "name": "p"},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-1"}, "containers": [{"name": "c"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "held"}]}}
    result = explained(pod, [pinned_claim("node-0")])
    assert result["verdict"] == search.DOES_NOT_FIT and result["fits_on"] == []
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-0"}
    result = explained(pod, [pinned_claim("node-0")])
    assert result["verdict"] == search.FITS and result["fits_on"] == ["node-0"]


def test_a_claim_that_does_not_exist_keeps_the_pod_off_every_node():
    pod = {"metadata": {"namespace": "default", "name": "p"},
           "spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "gpu", "resourceClaimName": "gone"}]}}
    result = explained(pod, [])
    assert result["verdict"] == search.DOES_NOT_FIT and result["fits_on"] == []
    assert any("claim gone does not exist: the scheduler waits for it" in p for p in result["problems"])


def test_a_node_where_the_search_meets_what_cannot_be_evaluated_keeps_another_nodes_fit_uncertain():
    """The allocator may stop with an error on node-0 (its device allows multiple allocations: consumable
    capacity, not modelled), which would fail the whole attempt although node-1 fits."""
    from ansible_collections.dra.admin.plugins.module_utils.allocation import explain
    features = {model.CONSUMABLE_CAPACITY}
    shared = slice_("a", "p0", ["d0"])
    shared["spec"]["devices"][0]["allowMultipleAllocations"] = True
    slices = [shared, slice_("b", "p1", ["d0"], nodeName="node-1")]
    rules = model.pool_rules(37)
    ctx = search.Context(cel.Environment(37), CLASSES, model.gather_pools(slices, features, rules), {}, [], features,
                         rules)
    result = explain.explain(ctx, {"pod": "default/p"}, [claim({"count": 1})], [], [], nodes("node-0", "node-1"),
                             {"containers": [{"name": "c"}]}, detail=explain.DETAIL_NODES)
    by_node = dict((n["name"], n) for n in result["nodes"])
    assert by_node["node-0"]["verdict"] == search.CANNOT_TELL and by_node["node-0"].get("may_error") is True
    assert by_node["node-1"]["verdict"] == search.FITS
    assert result["verdict"] == search.CANNOT_TELL and result["fits_on"] == ["node-1"]


@pytest.mark.parametrize("version, fits", [("v1.37.0", False), ("v1.37.2", True), ("v1.36.6", False)])
def test_a_device_taint_rule_without_selector_taints_every_device_up_to_1_37_0_and_none_from_1_37_1(version, fits):
    """k8s.io/dynamic-resource-allocation's resourceslice/tracker: up to v0.37.0 a rule without deviceSelector
    applies to every device; from v0.37.1 it applies to none ("No selector matches no devices")."""
    from ansible_collections.dra.admin.plugins.module_utils.allocation import explain
    features = {model.DEVICE_TAINTS}
    rule = {"metadata": {"name": "all"}, "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}
    cluster = {"classes": CLASSES, "slices": [slice_("a", "p", ["d0", "d1"])], "claims": [], "rules": [rule],
               "server_version": version}
    ctx = explain.context(cel.Environment(37), cluster, features)
    kind, detail, found = search.node_verdict(ctx, [claim({"count": 1})], "node-0", {})
    assert kind == (search.FITS if fits else search.DOES_NOT_FIT), detail
    reasons = set(reason for reason, dummy in found.candidates[(0, 0, 0)].reasons.values())
    assert reasons == {search.AVAILABLE if fits else search.TAINTED}
    # a rule whose selector names the pool taints its devices on every release
    cluster["rules"] = [dict(rule, spec=dict(rule["spec"], deviceSelector={"pool": "p"}))]
    ctx = explain.context(cel.Environment(37), cluster, features)
    assert search.node_verdict(ctx, [claim({"count": 1})], "node-0", {})[0] == search.DOES_NOT_FIT


def test_an_error_on_a_node_a_filter_not_modelled_may_refuse_first_is_no_certain_refusal():
    """The allocator stops with an error on node-0 (all devices, a pool being updated: 1.37), which fails the whole
    attempt where the scheduler's DRA filter runs there; node-1 fits. A host port held on node-0 refuses it before
    that filter (seen on v1.33.13: the pod bound to the other node), so with a filter not modelled the erring node
    may never be searched by the scheduler: cannot_tell, not does_not_fit."""
    from ansible_collections.dra.admin.plugins.module_utils.allocation import explain
    slices = [slice_("a", "p0", ["d0", "d1"], count=2), slice_("b", "p1", ["d0"], nodeName="node-1")]
    rules = model.pool_rules(37)
    ctx = search.Context(cel.Environment(37), CLASSES, model.gather_pools(slices, set(), rules), {}, [], set(), rules)

    def answer(unchecked):
        return explain.explain(ctx, {"pod": "default/p"}, [claim({"allocationMode": "All"})], [], [],
                               nodes("node-0", "node-1"), {"containers": [{"name": "c"}]}, unchecked=unchecked,
                               detail=explain.DETAIL_NODES)

    result = answer(())
    assert [n["verdict"] for n in result["nodes"]] == [search.ERROR, search.FITS]
    assert result["verdict"] == search.DOES_NOT_FIT
    result = answer(["host ports"])
    assert result["verdict"] == search.CANNOT_TELL and result["fits_on"] == ["node-1"]
