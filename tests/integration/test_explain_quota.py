"""The allocation explainer's ResourceQuota rule against the real API server: kube-apiserver's quota admission
refuses the claim a pod's template asks for, the ResourceClaim controller reports FailedResourceClaimCreation, and
dra_allocation_explain_info says the pod waits for that quota - and, with room in the quota, it does not."""
from dra_objects import DEVICE_CLASS, claim_template, pod

DEVICES = DEVICE_CLASS + ".deviceclass.resource.k8s.io/devices"


def quota(namespace, hard):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": namespace},
            "spec": {"hard": {DEVICES: str(hard)}}}


def creation_refused(cluster, namespace, name):
    events = cluster.get_json("events", "-n", namespace, "--field-selector", "involvedObject.name=%s" % name)
    return [e for e in events["items"] if e.get("reason") == "FailedResourceClaimCreation"]


def test_a_template_claim_a_quota_refuses_keeps_the_pod_waiting(cluster, namespace):
    api = cluster.resource_version
    cluster.apply([quota(namespace, 0)])
    cluster.wait_until(lambda: cluster.get_json("resourcequota", "-n", namespace, "gpus").get("status", {}).get("hard"),
                       60, "the quota's status.hard")
    cluster.apply([claim_template(api, namespace, "one-gpu"), pod(namespace, "held", template="one-gpu")])
    # The API server's own answer first: the claim is refused.
    events = cluster.wait_until(lambda: creation_refused(cluster, namespace, "held"), 90,
                                "FailedResourceClaimCreation for pod held")
    assert "exceeded quota" in events[0]["message"], events[0]["message"]
    result = cluster.run_module("dra.admin.dra_allocation_explain_info", {"namespace": namespace, "pod": "held"})
    (explained,) = result["explanations"]
    assert result["resource_quotas"] == "read"
    assert explained["verdict"] == "does_not_fit" and explained["fits_on"] == []
    assert any("refused by ResourceQuota gpus (%s: 0 used, 1 asked, hard 0)" % DEVICES in p
               for p in explained["problems"]), explained["problems"]

    # Room for the device: the claim is made, and the explainer no longer blames the quota.
    cluster.kubectl("patch", "resourcequota", "-n", namespace, "gpus", "--type=merge",
                    "-p", '{"spec": {"hard": {"%s": "1"}}}' % DEVICES)
    cluster.wait_until(lambda: cluster.get_json("pod", "-n", namespace, "held")["status"].get(
        "resourceClaimStatuses"), 120, "the claim of pod held made")
    again = cluster.run_module("dra.admin.dra_allocation_explain_info", {"namespace": namespace})
    assert not [p for e in again["explanations"] for p in e["problems"] if "ResourceQuota" in p]
