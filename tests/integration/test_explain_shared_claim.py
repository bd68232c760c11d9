"""Two pods sharing one ResourceClaim, pinned to different nodes whose devices are their own: whichever the
scheduler takes first gets the claim allocated on its node, and the other can then never run. The explainer says
so while both wait (for each pod, naming the other; cannot_tell, not a plain fits: only the one the scheduler takes
first will run), and after the real scheduler placed the first one it answers does_not_fit for the second, as
kube-scheduler does (the second stays Unschedulable).

A made-up driver without a kubelet plugin: the scheduler allocates from any published slice and a KWOK node
"runs" any pod, which is all this needs.
"""
from dra_objects import claim, device_class, pod, resource_slice
from test_allocation_explain import pods_state, ungate

DRIVER = "pinned.example.com"
MODULE = "dra.admin.dra_allocation_explain_info"


def gated(namespace, name, node):
    out = pod(namespace, name, claim_name="shared", node=node)
    out["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    return out


def explained(cluster, namespace, name):
    (found,) = cluster.run_module(MODULE, {"namespace": namespace, "pod": name})["explanations"]
    return found


def test_two_pods_pinned_apart_sharing_a_claim(cluster, cluster_objects, namespace):
    api = cluster.resource_version
    first, second = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])[:2]
    cluster_objects([device_class(api, DRIVER)] + [
        resource_slice(api, DRIVER, node, ["dev-0"], nodeName=node) for node in (first, second)])
    cluster.apply([claim(api, namespace, "shared", device_class=DRIVER),
                   gated(namespace, "on-first", first), gated(namespace, "on-second", second)])

    # Both wait (held by their gates): each fits alone, and each is told about the other; neither is a plain fits.
    for name, node, other in (("on-first", first, "on-second"), ("on-second", second, "on-first")):
        found = explained(cluster, namespace, name)
        assert found["verdict"] == "cannot_tell" and found["fits_on"] == [node], found
        shared = [p for p in found["problems"] if p.startswith("claim %s/shared is shared with pod %s/%s"
                                                               % (namespace, namespace, other))]
        assert shared and "no node admits both pods" in shared[0], found["problems"]
        assert found["message"].startswith("the devices and the node filters checked fit on 1 node(s) (%s); claim "
                                           "%s/shared is shared" % (node, namespace)), found["message"]

    # The scheduler takes the first one: the claim is allocated on its node, and the second can never run.
    ungate(cluster, namespace, ["on-first"])
    cluster.wait_until(lambda: pods_state(cluster, namespace)["on-first"][0], 120, "pod on-first bound")
    ungate(cluster, namespace, ["on-second"])

    def second_unschedulable():
        found = pods_state(cluster, namespace)
        return found if found["on-second"][1] else None

    state = cluster.wait_until(second_unschedulable, 120, "pod on-second Unschedulable")
    assert not state["on-second"][0], state
    found = explained(cluster, namespace, "on-second")
    assert found["verdict"] == "does_not_fit" and found["fits_on"] == [], found
    assert any("claim %s/shared is allocated to devices another node uses" % namespace in reason
               for reason in found["nodes_excluded"]), found["nodes_excluded"]
    # Allocated now: no longer a claim to allocate, so the warning about sharing it is gone.
    assert not [p for p in found["problems"] if "is shared with pod" in p], found["problems"]
