"""The drain's refusal of claims it cannot free (nodes.drain.claims_drain_cannot_free), on objects recorded from
the local v1.37.2 control plane (tests/unit/module_utils/devices/test_device_evictions.py's "three-waves": bare
pods s1, s2 share claim "shared", pinned to node-000000; Deployments "train" and "web" use template claims; budget
"web" allows 1 disruption)."""
import copy

from ansible_collections.dra.admin.plugins.module_utils.claims.claims import claim_view, pod_ref
from ansible_collections.dra.admin.plugins.module_utils.nodes import drain
from conftest import recorded_by_kind

NODE = "node-000000"


def recorded():
    return recorded_by_kind("device-eviction-three-waves-v1.37.2.json")


def views(objs, nodes=(NODE, "node-000001")):
    pods = dict((p["metadata"]["uid"], pod_ref(p["spec"].get("nodeName"), p["metadata"].get("ownerReferences")))
                for p in objs["Pod"])
    return [claim_view(c, dict((n, {}) for n in nodes), pods, ({}, set())) for c in objs["ResourceClaim"]]


def shared_under_replicaset(objs):
    for pod in objs["Pod"]:
        if pod["metadata"]["name"] in ("s1", "s2"):
            pod["metadata"]["labels"] = {"app": "shared"}
            pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                   "name": "shared-7d9", "uid": "rs", "controller": True}]


def budget_for_shared(objs, allowed):
    pdb = copy.deepcopy(objs["PodDisruptionBudget"][0])
    pdb["metadata"]["name"] = "shared"
    pdb["spec"]["selector"] = {"matchLabels": {"app": "shared"}}
    pdb["status"]["disruptionsAllowed"] = allowed
    return objs["PodDisruptionBudget"] + [pdb]


def test_bare_pods_and_template_claims_are_freed_by_the_drain():
    objs = recorded()
    assert drain.claims_only_for_node(objs["Pod"], views(objs), NODE) == {}
    assert drain.claims_drain_cannot_free(objs["Pod"], views(objs), objs["PodDisruptionBudget"], NODE) == []


def test_a_named_claim_of_a_controllers_pods_pinned_here_under_a_budget_too_small_is_refused():
    objs = recorded()
    ns = objs["Pod"][0]["metadata"]["namespace"]
    shared_under_replicaset(objs)
    out = drain.claims_drain_cannot_free(objs["Pod"], views(objs), budget_for_shared(objs, 1), NODE)
    assert out == [{"claim": "%s/shared" % ns, "pods": ["%s/s1" % ns, "%s/s2" % ns],
                    "controllers": ["ReplicaSet %s/shared-7d9" % ns],
                    "pod_disruption_budgets": [{"name": "%s/shared" % ns, "disruptions_allowed": 1}]}]
    message = drain.cannot_free_message(NODE, out)
    for part in ("%s/shared" % ns, "2 pod(s) of ReplicaSet %s/shared-7d9" % ns, "%s/shared allows 1" % ns,
                 "Nothing was changed", "scale the workload to zero", "relax the PodDisruptionBudget",
                 "resourceClaimTemplateName"):
        assert part in message, (part, message)


def test_a_budget_allowing_every_pod_of_the_claim_at_once_lets_the_drain_free_it():
    objs = recorded()
    shared_under_replicaset(objs)
    assert drain.claims_drain_cannot_free(objs["Pod"], views(objs), budget_for_shared(objs, 2), NODE) == []
    assert drain.claims_drain_cannot_free(objs["Pod"], views(objs), objs["PodDisruptionBudget"], NODE) == []


def test_a_claim_usable_on_other_nodes_follows_its_replacements_there():
    """Without a node selector (network-attached) the replacements run elsewhere and take the claim along."""
    objs = recorded()
    shared_under_replicaset(objs)
    for claim in objs["ResourceClaim"]:
        claim["status"]["allocation"].pop("nodeSelector", None)
    assert drain.claims_drain_cannot_free(objs["Pod"], views(objs), budget_for_shared(objs, 0), NODE) == []
