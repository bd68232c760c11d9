"""Extended resources backed by DRA: the claim kube-scheduler makes for a pod's extended resource requests, and the
explainer's answer for such a pod on the recorded v1.37.2 cluster (test_explain_recorded.py's fixture)."""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import cel
from ansible_collections.dra.admin.plugins.module_utils.allocation import explain, explain_service, extended, search

from conftest import FIXTURES
from test_explain_recorded import recorded_cluster

GPU = "example.com/gpu"
CLASS = "gpu.example.com"


def container(name, asks, restart=None):
    out = {"name": name, "image": "pause", "resources": {"requests": dict(asks), "limits": dict(asks)}}
    if restart:
        out["restartPolicy"] = restart
    return out


def counts(spec):
    return dict((r["name"], r["exactly"]["count"]) for r in spec["devices"]["requests"])


def test_each_long_lived_container_gets_a_request_and_init_containers_only_their_largest_extra():
    mapping = {GPU: CLASS}
    one = {"containers": [container("main", {GPU: "2", "cpu": "1"})]}
    assert counts(extended.claim_spec(one, [GPU], mapping)) == {"container-0-request-1": 2}, "cpu sorts first"
    # An init container runs before the containers: it reuses their devices and asks for the rest.
    more = {"initContainers": [container("init", {GPU: "3"})], "containers": [container("main", {GPU: "2"})]}
    assert counts(extended.claim_spec(more, [GPU], mapping)) == {"container-0-request-0": 1, "container-1-request-0": 2}
    less = {"initContainers": [container("init", {GPU: "1"})], "containers": [container("main", {GPU: "2"})]}
    assert counts(extended.claim_spec(less, [GPU], mapping)) == {"container-1-request-0": 2}
    two = {"initContainers": [container("a", {GPU: "3"}), container("b", {GPU: "5"})],
           "containers": [container("main", {GPU: "2"})]}
    assert counts(extended.claim_spec(two, [GPU], mapping)) == {"container-1-request-0": 3, "container-2-request-0": 2}
    # A sidecar (an init container that restarts) is long-lived; an init container after it cannot reuse it.
    sidecar = {"initContainers": [container("side", {GPU: "1"}, "Always"), container("init", {GPU: "2"})],
               "containers": [container("main", {GPU: "1"})]}
    assert counts(extended.claim_spec(sidecar, [GPU], mapping)) == {
        "container-0-request-0": 1, "container-1-request-0": 1, "container-2-request-0": 1}
    request = extended.claim_spec(one, [GPU], mapping)["devices"]["requests"][0]["exactly"]
    assert request == {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2}


def test_class_mapping_implicit_names_and_the_newest_explicit_class():
    def cls(name, created, resource=None):
        return {"metadata": {"name": name, "creationTimestamp": created},
                "spec": {"extendedResourceName": resource} if resource else {}}
    mapping = extended.class_mapping([cls("old", "2026-01-01T00:00:00Z", GPU), cls("new", "2026-02-01T00:00:00Z", GPU),
                                      cls("b", "2026-03-01T00:00:00Z", "example.com/fpga"),
                                      cls("a", "2026-03-01T00:00:00Z", "example.com/fpga")])
    assert mapping[GPU] == "new" and mapping["example.com/fpga"] == "a"
    assert mapping["deviceclass.resource.kubernetes.io/old"] == "old"


def recorded_class(name, created, resource=None):
    """A DeviceClass as the v1.37.2 cluster records it (the fixture's class naming an extended resource), renamed."""
    with open(os.path.join(FIXTURES, "recorded", "extended-resource-v1.37.2.json")) as handle:
        items = json.load(handle)["items"]
    source = [i for i in items if i["kind"] == "DeviceClass" and i["spec"].get("extendedResourceName")][0]
    out = copy.deepcopy(source)
    out["metadata"].update(name=name, creationTimestamp=created)
    out["metadata"].pop("annotations", None)
    if resource:
        out["spec"]["extendedResourceName"] = resource
    else:
        del out["spec"]["extendedResourceName"]
    return out


def test_before_1_38_an_explicit_name_and_a_losing_class_implicit_name_are_unsure():
    older = recorded_class("older", "2026-01-01T00:00:00Z", GPU)
    newer = recorded_class("newer", "2026-02-01T00:00:00Z", GPU)
    plain = recorded_class("plain", "2026-01-01T00:00:00Z")
    # The newer class deleted: only the older one is left, which the 1.37 scheduler may no longer map.
    unsure = extended.unsure_mappings([older, plain], 37)
    assert sorted(unsure) == [GPU], unsure
    assert "forgets extended resource %s when any DeviceClass naming it is deleted" % GPU in unsure[GPU]
    # Both there: the name, and the implicit name of the class that loses it (not mapped if added after the winner).
    both = extended.unsure_mappings([older, newer, plain], 37)
    assert sorted(both) == [extended.IMPLICIT_PREFIX + "older", GPU], both
    assert "after newer, which wins %s" % GPU in both[extended.IMPLICIT_PREFIX + "older"]
    # From 1.38 the scheduler maps from the classes that exist: the current objects decide.
    assert extended.unsure_mappings([older, newer, plain], 38) == {}
    assert extended.unsure_mappings([older], None) == {}
    assert extended.class_mapping([older, plain])[GPU] == "older"


def test_only_backed_extended_resources_with_a_request_count():
    mapping = {GPU: CLASS, "cpu": "x", "example.com/zero": CLASS}
    spec = {"containers": [container("c", {GPU: "1", "cpu": "2", "example.com/other": "1", "example.com/zero": "0"})]}
    assert extended.pod_backed_resources(spec, mapping) == [GPU]
    node = {"status": {"allocatable": {GPU: "4", "example.com/fpga": "0"}}}
    assert extended.served_by_device_plugin(node, [GPU, "example.com/fpga"]) == [GPU]


def explain_pod(asks, features_off=(), allocatable=None, extra_claims=(), resource=None, version=None):
    cluster, features, dummy, dummy2 = recorded_cluster()
    cluster = copy.deepcopy(cluster)
    if version:
        cluster["server_version"] = version
    if resource:  # the recorded class names it (spec.extendedResourceName)
        cluster["classes"][CLASS]["spec"]["extendedResourceName"] = resource
    cluster["claims"] = cluster["claims"] + list(extra_claims)
    features = set(features) - set(features_off)
    pod = {"metadata": {"namespace": "rec", "name": "ext", "uid": "u-ext"},
           "spec": {"containers": [container("main", {resource or extended.IMPLICIT_PREFIX + CLASS: str(asks)})],
                    "tolerations": [{"operator": "Exists"}]}, "status": {}}
    cluster["pods"] = [pod]
    if allocatable:
        first = min(cluster["nodes"], key=lambda n: n["metadata"]["name"])
        first.setdefault("status", {}).setdefault("allocatable", {}).update(allocatable)
    mapping = explain_service.extended_mapping(cluster, features)
    found = [f for f in explain_service.subjects(cluster, "rec", mapping=mapping) if f[1] is not None]
    if not found:
        return None
    ctx = explain.context(cel.Environment(37), cluster, features)
    claims = dict(("%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]), c) for c in cluster["claims"])
    (subject, pod_obj, label), = found
    return explain_service.explain_subject(ctx, subject, pod_obj, label, claims, {}, cluster, explain.DETAIL_NODES,
                                           mapping=mapping)


def free_devices_per_node():
    """What the recorded cluster has free per node for one plain request (the explainer's own count of a claim)."""
    free = {}
    for asks in range(1, 10):
        answer = explain_pod(asks)
        for name in answer["fits_on"]:
            free[name] = asks
    return free


def test_a_pod_asking_for_extended_resources_is_explained_with_the_schedulers_claim():
    free = free_devices_per_node()
    most = max(free.values())
    assert most >= 1
    fits = explain_pod(most)
    assert fits["verdict"] == search.FITS and fits["claims"] == ["rec/" + extended.CLAIM_NAME]
    assert fits["fits_on"] == sorted(n for n, f in free.items() if f == most)
    too_many = explain_pod(most + 1)
    assert too_many["verdict"] == search.DOES_NOT_FIT
    assert "needs %d device(s) of class %s" % (most + 1, CLASS) in too_many["message"]
    assert too_many["requests"][0]["request"] == "container-0-request-0"


def test_a_device_plugin_node_cannot_be_told_and_the_feature_off_leaves_the_pod_alone():
    cluster, dummy, dummy2, dummy3 = recorded_cluster()
    first = sorted(n["metadata"]["name"] for n in cluster["nodes"])[0]
    answer = explain_pod(1, allocatable={extended.IMPLICIT_PREFIX + CLASS: "2"})
    node = [o for o in answer["nodes"] if o["name"] == first][0]
    assert node["verdict"] == search.CANNOT_TELL and "device plugin" in node["reason"]
    assert explain_pod(1, features_off=["DRAExtendedResource"]) is None


def test_a_claim_left_from_an_earlier_attempt_is_named_only_for_its_own_pod():
    def left(uid, annotated=True):
        meta = {"namespace": "rec", "name": "ext-extended-resources-%s" % uid,
                "ownerReferences": [{"kind": "Pod", "name": "ext", "uid": uid, "controller": True}]}
        if annotated:
            meta["annotations"] = {extended.CLAIM_ANNOTATION: "true"}
        return {"metadata": meta, "spec": {}}
    answer = explain_pod(1, extra_claims=[left("u-ext"), left("u-other"), left("u-ext", annotated=False)])
    assert answer["problems"] == ["claim rec/ext-extended-resources-u-ext for its extended resources is left from an "
                                  "earlier attempt: the scheduler deletes it and tries anew"]
    assert explain_pod(1)["problems"] == []


@pytest.mark.parametrize("quantity,expected", [("2", 2), ("+3", 3), ("0", 0), ("500m", None), ("1k", None)])
def test_whole_quantities(quantity, expected):
    assert extended.whole_quantity(quantity) == expected


def test_an_explicit_name_is_no_certain_fits_before_1_38_and_is_from_1_38():
    free = free_devices_per_node()
    resource = GPU
    on_37 = explain_pod(1, resource=resource)
    assert on_37["verdict"] == search.CANNOT_TELL and on_37["fits_on"], on_37
    assert on_37["message"].startswith("the devices and the node filters checked fit on"), on_37["message"]
    assert any("forgets extended resource %s" % resource in p for p in on_37["problems"]), on_37["problems"]
    on_38 = explain_pod(1, resource=resource, version="v1.38.0-beta.0")
    assert on_38["verdict"] == search.FITS and on_38["fits_on"] == on_37["fits_on"], on_38
    # The implicit name of a class no other class contests stays certain on 1.37.
    assert explain_pod(max(free.values()))["verdict"] == search.FITS
