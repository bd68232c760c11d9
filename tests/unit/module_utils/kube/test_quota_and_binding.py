"""Reasons outside the allocator: ResourceQuota on ResourceClaims (kube.quota) as kube-apiserver's quota admission
charges a claim (kubernetes pkg/quota/v1/evaluator/core/resource_claims.go at v1.37.2), the allocation explainer's
wait for a template claim a quota refuses, and the binding conditions that hold a pod in PreBind."""
from ansible_collections.dra.admin.plugins.module_utils.allocation import explain
from ansible_collections.dra.admin.plugins.module_utils.kube import quota

GPU = "gpu.example.com"
DEVICES = GPU + ".deviceclass.resource.k8s.io/devices"


def exactly(name, count=None, mode=None, cls=GPU):
    spec = {"deviceClassName": cls}
    if count is not None:
        spec["count"] = count
    if mode:
        spec["allocationMode"] = mode
    return {"name": name, "exactly": spec}


def resource_quota(hard, used=None, namespace="ml", name="gpus", **spec):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": dict(spec, hard=hard),
            "status": {"hard": hard, "used": used or {}}}


def test_a_claim_is_charged_as_admission_charges_it():
    spec = {"devices": {"requests": [
        exactly("a", 2), exactly("b"), exactly("all", mode="All"),
        {"name": "either", "firstAvailable": [
            {"name": "big", "deviceClassName": GPU, "count": 4},
            {"name": "small", "deviceClassName": GPU, "count": 1},
            {"name": "other", "deviceClassName": "fpga.example.com", "count": 3}]},
        # v1beta1 keeps the request's fields on the request itself
        {"name": "old", "deviceClassName": GPU, "count": 5}]}}
    assert quota.claim_charge(spec) == {quota.CLAIM_COUNT: 1, DEVICES: 2 + 1 + 32 + 4 + 5,
                                        "fpga.example.com.deviceclass.resource.k8s.io/devices": 3}
    assert quota.claim_charge({"devices": {"requests": [exactly("x", mode="Future")]}}) == {
        quota.CLAIM_COUNT: 1, DEVICES: 0}


def test_a_charge_past_a_hard_limit_is_refused_and_one_within_is_not():
    charge = quota.claim_charge({"devices": {"requests": [exactly("a", 2)]}})
    quotas = [resource_quota({DEVICES: "4"}, {DEVICES: "3"}),
              resource_quota({DEVICES: "1"}, {}, namespace="other"),
              resource_quota({quota.CLAIM_COUNT: "10"}, {quota.CLAIM_COUNT: "2"}, name="claims")]
    assert quota.quota_refusals(quotas, "ml", charge) == [
        {"quota": "gpus", "resource": DEVICES, "used": "3", "hard": "4", "asked": 2}]
    assert quota.quota_refusals([resource_quota({DEVICES: "5"}, {DEVICES: "3"})], "ml", charge) == []


def test_a_quota_with_scopes_never_counts_for_a_claim():
    scoped = resource_quota({DEVICES: "0"}, scopes=["BestEffort"])
    selected = resource_quota({DEVICES: "0"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]})
    charge = quota.claim_charge({"devices": {"requests": [exactly("a")]}})
    assert quota.quota_refusals([scoped, selected], "ml", charge) == []


def pod_with_templates(*names):
    return {"metadata": {"namespace": "ml", "name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "c"}],
                     "resourceClaims": [{"name": n, "resourceClaimTemplateName": "t-" + n} for n in names]}}


def template(name, count):
    return {"metadata": {"namespace": "ml", "name": "t-" + name},
            "spec": {"spec": {"devices": {"requests": [exactly("r", count)]}}}}


def test_the_explainer_waits_for_a_template_claim_a_quota_refuses():
    templates = dict(("ml/t-" + n, template(n, 1)) for n in ("a", "b"))
    # Room for one more device: the pod's first claim is made, its second is refused.
    quotas = [resource_quota({DEVICES: "4"}, {DEVICES: "3"})]
    allocated, to_allocate, problems, waits = explain.pod_claims(pod_with_templates("a", "b"), {}, templates, quotas)
    assert [c.label for c in to_allocate] == ["ml/<a>"]
    assert waits == ["the claim of b from template ml/t-b is refused by ResourceQuota gpus (%s: 4 used, 1 asked, "
                     "hard 4): the pod waits (event FailedResourceClaimCreation)" % DEVICES]
    assert waits[0] in problems
    # Without the quota both are simply not made yet.
    dummy, to_allocate, problems, waits = explain.pod_claims(pod_with_templates("a", "b"), {}, templates)
    assert [c.label for c in to_allocate] == ["ml/<a>", "ml/<b>"] and waits == []


def bound_claim(conditions, failure=()):
    result = {"request": "r", "driver": GPU, "pool": "p", "device": "d0", "bindingConditions": ["Attached", "Ready"],
              "bindingFailureConditions": list(failure)}
    return {"metadata": {"namespace": "ml", "name": "c"},
            "status": {"allocation": {"devices": {"results": [result]}},
                       "devices": [{"driver": GPU, "pool": "p", "device": "d0",
                                    "conditions": [{"type": t, "status": s} for t, s in conditions]}]}}


def test_devices_with_binding_conditions_not_true_hold_the_pod_in_prebind():
    """kube-scheduler's isClaimReadyForBinding (v1.37.2): every binding condition True, no failure condition True."""
    from ansible_collections.dra.admin.plugins.module_utils.kube.pod_claims import binding_waits
    assert binding_waits(bound_claim([("Attached", "True"), ("Ready", "True")])) == []
    assert binding_waits(bound_claim([("Attached", "True"), ("Ready", "False")])) == [
        {"device": GPU + "/p/d0", "waiting": ["Ready"], "failed": []}]
    failed = bound_claim([("Attached", "True"), ("Broken", "True")], failure=["Broken"])
    assert binding_waits(failed)[0]["failed"] == ["Broken"]
    assert explain.binding_problems("ml/c", bound_claim([])) == [
        "claim ml/c: device %s/p/d0 waits for its binding conditions (Attached, Ready): the scheduler holds the pod "
        "in PreBind until the driver sets them, or the binding timeout sends it back" % GPU]
    assert "failed binding (Broken)" in explain.binding_problems("ml/c", failed)[0]
