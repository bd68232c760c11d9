"""A pod's claims are the same whichever field names them; a claim's consumers include objects that are not pods.

Generated inputs (Hypothesis): a pod that uses a set of claims, each named by one of the fields the API has for it
(``spec.resourceClaims[].resourceClaimName``; a template's claim in ``status.resourceClaimStatuses``; the claim the
scheduler made for extended resources, in ``status.extendedResourceClaimStatus``; or only the claim's
``status.reservedFor``). Every user of the rule - the drain's plan, device health's users of a device, the taint
dry run's pods, the claim views and the doctor's orphans - must see the same claims and the same pod.
The objects' shapes are those recorded from the 1.37 cluster (tests/unit/fixtures/recorded/*-v1.37.2.json,
checked in test_claim_sources_recorded.py).
"""
import datetime

from hypothesis import given, settings, strategies as st

from ansible_collections.dra.admin.plugins.module_utils.claims import claims as claim_rules
from ansible_collections.dra.admin.plugins.module_utils.kube import pod_claims
from ansible_collections.dra.admin.plugins.module_utils.devices import health
from ansible_collections.dra.admin.plugins.module_utils.devices import taints
from ansible_collections.dra.admin.plugins.module_utils.nodes import drain

SETTINGS = settings(max_examples=200, deadline=None)
NAMESPACE = "team"
NODE = "node-1"
SPEC, TEMPLATE, EXTENDED, RESERVED_ONLY = "spec", "template", "extended", "reserved-only"
NOW = datetime.datetime(2026, 11, 23, 10, 0, tzinfo=datetime.timezone.utc)
CLAIM_NAMES = ("gpu", "nic", "fpga", "pod-extended-resources-x7k2p", "shared")


def claim_object(name, consumers, device):
    """An allocated claim reserved for `consumers` (reservedFor entries), holding one device on NODE."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": "uid-claim-" + name},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "gpu.example.com", "pool": NODE, "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
                "reservedFor": consumers}}


def pod_ref_entry(pod):
    return {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}


def group_ref_entry(group):
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": group, "uid": "uid-group-" + group}


def build(sources, group=None):
    """The pod and its claims, each claim named by its source; with `group`, the claims named in the pod's spec
    are the PodGroup's (reserved for the group, not the pod)."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "trainer-0", "namespace": NAMESPACE, "uid": "uid-pod-trainer-0",
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer",
                                             "uid": "uid-rs", "controller": True}]},
           "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "registry.invalid/x"}]},
           "status": {"phase": "Running"}}
    spec, status = pod["spec"], pod["status"]
    claims = []
    for index, (name, source) in enumerate(sorted(sources.items())):
        in_spec = source in (SPEC, TEMPLATE)
        consumer = group_ref_entry(group) if group and in_spec else pod_ref_entry(pod)
        claims.append(claim_object(name, [consumer], "gpu-%d" % index))
        if source == SPEC:
            spec.setdefault("resourceClaims", []).append({"name": "c%d" % index, "resourceClaimName": name})
        elif source == TEMPLATE:
            spec.setdefault("resourceClaims", []).append({"name": "c%d" % index, "resourceClaimTemplateName": "t"})
            status.setdefault("resourceClaimStatuses", []).append({"name": "c%d" % index, "resourceClaimName": name})
        elif source == EXTENDED:
            status["extendedResourceClaimStatus"] = {"resourceClaimName": name, "requestMappings": [
                {"containerName": "main", "requestName": "container-0-request-0", "resourceName": "example.com/gpu"}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return pod, claims


@st.composite
def claim_sources(draw):
    """{claim name: source}: at most one claim for extended resources (the pod has one such claim)."""
    names = draw(st.lists(st.sampled_from(CLAIM_NAMES), unique=True, max_size=len(CLAIM_NAMES)))
    sources, extended = {}, False
    for name in names:
        choices = [SPEC, TEMPLATE, RESERVED_ONLY] + ([] if extended else [EXTENDED])
        sources[name] = draw(st.sampled_from(choices))
        extended = extended or sources[name] == EXTENDED
    return sources


def pods_index(pods):
    return dict((p["metadata"]["uid"], claim_rules.pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                for p in pods)


@SETTINGS
@given(claim_sources())
def test_a_pods_claims_are_the_same_whichever_field_names_them(sources):
    pod, claims = build(sources)
    assert pod_claims.pod_claims(pod, claims) == sorted(sources)
    named_by_pod = sorted(n for n, s in sources.items() if s != RESERVED_ONLY)
    assert pod_claims.pod_claims(pod) == named_by_pod
    assert pod_claims.names_claims(pod) == bool(named_by_pod)
    assert pod_claims.claims_used_by([pod], claims) == set((NAMESPACE, n) for n in sources)


@SETTINGS
@given(claim_sources())
def test_the_drain_evicts_a_pod_first_whichever_field_names_its_claim(sources):
    pod, claims = build(sources)
    plan = drain.plan_drain([pod])
    named_by_pod = any(s != RESERVED_ONLY for s in sources.values())
    assert plan["claim_pods" if named_by_pod else "other_pods"] == [pod]


def node_slice(claims):
    """The node's ResourceSlice publishing every device the claims hold."""
    names = [r["device"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": NODE + "-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": NODE,
                     "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": n} for n in names]}}


@SETTINGS
@given(claim_sources(), st.booleans())
def test_device_health_lists_the_pod_on_every_device_of_its_claims(sources, as_group):
    pod, claims = build(sources, group="gang" if as_group else None)
    report = health.device_health([node_slice(claims)], claims, [pod], NOW)
    assert [d["device"] for d in report["devices"]] == sorted("gpu-%d" % i for i in range(len(sources)))
    for device in report["devices"]:
        assert device["pods"] == [{"namespace": NAMESPACE, "name": "trainer-0", "node": NODE}]
        assert device["in_use"]


@SETTINGS
@given(claim_sources())
def test_the_taint_dry_run_names_the_pod_whichever_field_names_its_claim(sources):
    pod, claims = build(sources)
    devices = [{"driver": r["driver"], "pool": r["pool"], "device": r["device"]}
               for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
    affected = taints.affected_claims(claims, devices, {"key": "k", "effect": "NoExecute"}, pods_index([pod]))
    assert sorted(a["name"] for a in affected) == sorted(sources)
    assert taints.pod_names(affected) == (["%s/trainer-0" % NAMESPACE] if sources else [])


@SETTINGS
@given(claim_sources(), st.sampled_from(("exists", "gone", "unknown")), st.booleans())
def test_a_pod_group_consumer_keeps_its_claim_until_the_group_is_gone(sources, group_state, pod_alive):
    pod, claims = build(sources, group="gang")
    pods = pods_index([pod] if pod_alive else [])
    others = {"exists": {("scheduling.k8s.io", "podgroups"): {"uid-group-gang"}},
              "gone": {("scheduling.k8s.io", "podgroups"): set()}, "unknown": {}}[group_state]
    for claim in claims:
        view = claim_rules.claim_view(claim, {NODE: {}}, pods, ({}, set()), others)
        (consumer,) = view["consumers"]
        by_group = consumer["kind"] == pod_claims.CONSUMER_POD_GROUP
        assert by_group == (sources[claim["metadata"]["name"]] in (SPEC, TEMPLATE))
        if by_group:
            # The group's pods come and go; the group is what keeps the claim.
            assert view["orphaned"] == (group_state == "gone")
            assert view["non_pod_consumers"] == ([] if group_state == "gone" else [consumer])
            assert claim_rules.consumer_label(consumer) == "podgroups.scheduling.k8s.io/gang"
        else:
            assert view["orphaned"] == (not pod_alive)
            assert claim_rules.consumer_label(consumer) == "pods/trainer-0"


@SETTINGS
@given(claim_sources(), st.booleans(), st.sampled_from(("used", "unused", "unknown")))
def test_a_claim_held_only_for_a_pod_group_blocks_the_node_only_while_a_pod_there_uses_it(sources, pod_on_node, use):
    pod, claims = build(sources, group="gang")
    pods = pods_index([pod] if pod_on_node else [])
    others = {("scheduling.k8s.io", "podgroups"): {"uid-group-gang"}}
    used = {"used": pod_claims.claims_used_by([pod]), "unused": set(), "unknown": None}[use]
    for claim in claims:
        view = claim_rules.claim_view(claim, {NODE: {}}, pods, ({}, set()), others)
        assert view["nodes"] == [NODE]
        if claim_rules.held_for_non_pods_only(view):
            assert claim_rules.blocks_node(view, NODE, used) == (use != "unused")
            assert (view in claim_rules.non_pod_claims([view], NODE, used)) == (use == "unused")
        else:
            # A claim reserved for the pod blocks while the pod exists (or, deallocating, until released).
            assert claim_rules.blocks_node(view, NODE, used)
            assert claim_rules.non_pod_claims([view], NODE, used) == []


def test_the_non_pod_message_names_the_consumer_and_what_to_do():
    pod, claims = build({"gpu": SPEC}, group="gang")
    view = claim_rules.claim_view(claims[0], {NODE: {}}, {}, ({}, set()), {})
    text = claim_rules.non_pod_message(view)
    assert "team/gpu [reserved] reserved for podgroups.scheduling.k8s.io/gang" in text
    assert "delete the PodGroup (or its workload)" in text
    message = claim_rules.blocking_message(NODE, [view])
    assert "podgroups.scheduling.k8s.io/gang (a workload's PodGroup, not a pod)" in message


def pod_group_object(name, claim_names):
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": "uid-group-" + name},
            "spec": {"schedulingPolicy": {"basic": {}},
                     "resourceClaims": [{"name": "c%d" % i, "resourceClaimName": n}
                                        for i, n in enumerate(claim_names)]}}


@SETTINGS
@given(claim_sources(), st.booleans(), st.sampled_from(("used", "unused")))
def test_a_pod_group_listing_a_claim_is_its_consumer_also_after_the_scheduler_drops_its_reservation(
        sources, group_exists, use):
    """While none of a group's pods can be placed, the scheduler removes the group from the claim's reservedFor
    and keeps the allocation: the group, which lists the claim, is still what holds it."""
    pod, claims = build(sources, group="gang")
    group_claims = sorted(n for n, s in sources.items() if s in (SPEC, TEMPLATE))
    for claim in claims:
        claim["status"].pop("reservedFor")
    groups = [pod_group_object("gang", group_claims)] if group_exists else []
    listed = claim_rules.claims_listed_by_groups(groups)
    others = {("scheduling.k8s.io", "podgroups"): set(g["metadata"]["uid"] for g in groups)}
    used = pod_claims.claims_used_by([pod]) if use == "used" else set()
    for claim in claims:
        view = claim_rules.claim_view(claim, {NODE: {}}, pods_index([pod]), ({}, set()), others, listed)
        assert view["state"] == "allocated"
        held_by_group = group_exists and claim["metadata"]["name"] in group_claims
        assert [(c["kind"], c["reserved"], c["exists"]) for c in view["consumers"]] == (
            [("pod_group", False, True)] if held_by_group else [])
        assert view["orphaned"] is not held_by_group
        assert claim_rules.blocks_node(view, NODE, used) is (not held_by_group or use == "used")
