"""gather_claim_views (what dra_claims_info and the drain read) against a fake API: the claims are reduced to the
fields the views read and made into views page by page, counted without being kept for summaries; every way
gives the views of the whole objects."""
import copy

import pytest

from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi, DraApiError
from ansible_collections.dra.admin.plugins.module_utils.claims import claims
from ansible_collections.dra.admin.plugins.module_utils.claims import claims_service
from ansible_collections.dra.admin.plugins.module_utils.kube import slices

V1 = "/apis/resource.k8s.io/v1"
GROUPS = "/apis/scheduling.k8s.io"


def pod(name, node, uid, daemonset=False):
    owners = [{"kind": "DaemonSet", "name": "ds", "controller": True}] if daemonset else []
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": owners},
            "spec": {"nodeName": node}}


def claim(name, node=None, reserved=(), deleted=False, extended=False):
    meta = {"name": name, "namespace": "ns", "uid": "c-" + name, "labels": {"a": "b"},
            "managedFields": [{"manager": "x", "fieldsV1": {"f:spec": {}}}],
            "annotations": {"other": "x"}}
    if deleted:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    if extended:
        meta["annotations"]["resource.kubernetes.io/extended-resource-claim"] = "true"
    status = {}
    if node:
        status["allocation"] = {
            "devices": {"results": [{"request": "r", "driver": "d.example.com", "pool": node, "device": "dev-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
    if reserved:
        status["reservedFor"] = list(reserved)
    return {"metadata": meta, "spec": {"devices": {"requests": [{"name": "r"}]}}, "status": status}


def pod_consumer(name, uid):
    return {"resource": "pods", "name": name, "uid": uid}


def group_consumer(name, uid):
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": name, "uid": uid}


class FakeApi(DraApi):
    """Answers discovery and paginated LISTs (two items a page) from the objects given."""

    def __init__(self, objects, groups=None):
        super(FakeApi, self).__init__(api_client=object())
        self.objects = objects
        self.groups = groups
        self.asked = []

    def get(self, path, query=None, accept="application/json"):
        self.requests += 1
        self.asked.append(path)
        if path == "/apis/resource.k8s.io":
            return {"versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}
        if path == GROUPS:
            if self.groups is None:
                raise DraApiError("not found", status=404)
            return {"versions": [{"version": "v1alpha1"}], "preferredVersion": {"version": "v1alpha1"}}
        if path == GROUPS + "/v1alpha1":
            return {"resources": [{"name": "podgroups"}]}
        items = self.groups if path == GROUPS + "/v1alpha1/podgroups" else self.objects[path]
        start = int((query or {}).get("continue") or 0)
        more = start + 2 < len(items)
        return {"kind": "List", "metadata": {"continue": str(start + 2)} if more else {},
                "items": copy.deepcopy(items[start:start + 2])}


NODES = [{"metadata": {"name": n, "labels": {"zone": n}}} for n in ("n1", "n2", "n3")]
SLICES = [{"metadata": {"name": "s-" + n},
           "spec": {"driver": "d.example.com", "nodeName": n,
                    "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "dev-0"}]}} for n in ("n1", "n2")]
PODS = [pod("p1", "n1", "u1"), pod("p2", "n2", "u2"), pod("ds", "n1", "u3", daemonset=True)]
FOR_PODS = [claim("a", "n1", [pod_consumer("p1", "u1")]), claim("b", "n2", [pod_consumer("p2", "u2")]),
            claim("c"), claim("d", "n1", [pod_consumer("gone", "u9")], deleted=True),
            claim("e", "n3", [pod_consumer("p2", "u2")], extended=True), claim("f", "n1", [pod_consumer("ds", "u3")])]
GROUP = {"metadata": {"name": "g", "namespace": "ns", "uid": "g1"}, "spec": {"resourceClaims": [
    {"name": "x", "resourceClaimName": "c"}, {"name": "y", "resourceClaimName": "h"}]}}
NEEDING_INDEX = FOR_PODS + [claim("g", "n1", [group_consumer("g", "g1")]), claim("h", "n2")]


def fake(claim_list, groups=None):
    return FakeApi({"/api/v1/nodes": NODES, V1 + "/resourceslices": SLICES, "/api/v1/pods": PODS,
                    V1 + "/resourceclaims": claim_list}, groups)


def expected(claim_list, node=None, driver=None, groups=None):
    """The views made from the whole objects, as before claims were reduced and streamed."""
    nodes = dict((n["metadata"]["name"], n["metadata"]["labels"]) for n in NODES)
    pods = dict((p["metadata"]["uid"], claims.pod_ref(p["spec"]["nodeName"], p["metadata"]["ownerReferences"]))
                for p in PODS)
    others, listed = claims_service.non_pod_consumer_index(fake(claim_list, groups), claim_list)
    views = [claims.claim_view(c, nodes, pods, slices.device_index(SLICES), others, listed) for c in claim_list]
    views = [v for v in views if claims.claim_selected(v, node=node, driver=driver)]
    return sorted(views, key=lambda v: (v["namespace"], v["name"]))


@pytest.mark.parametrize("claim_list, groups", [(FOR_PODS, None), (NEEDING_INDEX, [GROUP])])
@pytest.mark.parametrize("node", [None, "n1"])
def test_the_views_are_those_of_the_whole_claims_however_they_are_read(claim_list, groups, node):
    want = expected(claim_list, node=node, groups=groups)
    for keep in (True, False):
        got = claims_service.gather_claim_views(fake(claim_list, groups), node=node, keep_views=keep)
        assert got["views"] == (want if keep or node else [])
        assert got["summary"] == claims.summarize_by_node(want)
        assert got["totals"] == claims.claim_totals(want)
    assert any(v["non_pod_consumers"] for v in expected(NEEDING_INDEX, groups=[GROUP]))


def test_claims_are_listed_once_unless_one_needs_the_consumer_index():
    api = fake(FOR_PODS)
    claims_service.gather_claim_views(api)
    assert api.asked.count(V1 + "/resourceclaims") == 3  # 6 claims, 2 a page
    assert GROUPS not in api.asked
    api = fake(NEEDING_INDEX, [GROUP])
    claims_service.gather_claim_views(api)
    assert api.asked.count(V1 + "/resourceclaims") == 4 + 4  # read until g, then again, kept, with the index
    assert GROUPS + "/v1alpha1/podgroups" in api.asked


def test_claim_fields_keep_what_the_views_read():
    for whole in NEEDING_INDEX:
        reduced = claims.claim_fields(whole)
        assert "managedFields" not in reduced["metadata"] and "spec" not in reduced
        assert claims.claim_view(reduced, {}, {}, ({}, set())) == claims.claim_view(whole, {}, {}, ({}, set()))


def test_an_unknown_node_is_an_error_before_the_claims_are_read():
    api = fake(FOR_PODS)
    with pytest.raises(claims_service.ClaimsError):
        claims_service.gather_claim_views(api, node="n9")
    assert V1 + "/resourceclaims" not in api.asked


def test_claim_view_makes_exactly_the_keys_claim_keys_chooses_from():
    others, listed = claims_service.non_pod_consumer_index(fake(NEEDING_INDEX, [GROUP]), NEEDING_INDEX)
    for whole in NEEDING_INDEX:
        view = claims.claim_view(whole, {}, {}, ({}, set()), others, listed)
        assert tuple(view) == claims.VIEW_KEYS


@pytest.mark.parametrize("claim_list, groups", [(FOR_PODS, None), (NEEDING_INDEX, [GROUP])])
@pytest.mark.parametrize("node", [None, "n1"])
def test_asked_keys_keep_each_claims_identity_and_change_no_count_or_gate(claim_list, groups, node):
    keys = ["orphaned", "state"]
    whole = claims_service.gather_claim_views(fake(claim_list, groups), node=node)
    got = claims_service.gather_claim_views(fake(claim_list, groups), node=node, keys=keys)
    assert got["views"] == [dict((k, v[k]) for k in ("namespace", "name", "state", "orphaned"))
                            for v in whole["views"]]
    assert [list(v) for v in got["views"]] == [["namespace", "name", "state", "orphaned"]] * len(whole["views"])
    for name in ("summary", "totals", "blocking", "daemonset_claims", "non_pod_claims"):
        assert got[name] == whole[name], name
    if node:
        assert got["blocking"] and "consumers" in got["blocking"][0]  # the gate still reads whole views


def test_no_asked_key_is_the_whole_view():
    view = claims.claim_view(FOR_PODS[0], {}, {}, ({}, set()))
    assert claims.view_keeping(view, []) is view
    assert claims.view_keeping(view, ["name"]) == {"namespace": "ns", "name": "a"}
