"""dra_claims_info and dra_slices_info against claims made by the real scheduler."""
import os
import signal

import pytest

from dra_objects import DRIVER, claim, claim_template, pod


def _running(cluster, namespace, name):
    def probe():
        p = cluster.get_json("pod", "-n", namespace, name)
        return p if p["status"].get("phase") == "Running" else None
    return cluster.wait_until(probe, 90, f"pod {namespace}/{name} Running")


def _claims_by_name(result):
    return {c["name"]: c for c in result["claims"]}


def _controller_manager_pid(cluster):
    pid_file = os.path.join(cluster.state_dir, "kwok", "clusters", cluster.name, "pids",
                            "kube-controller-manager.pid")
    with open(pid_file) as fh:
        return int(fh.read().strip())


def test_states_nodes_consumers_on_real_allocations(cluster, namespace):
    api = cluster.resource_version
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   claim(api, namespace, "shared"),
                   claim(api, namespace, "impossible", selector='device.driver == "nothing.example.com"'),
                   claim(api, namespace, "doomed")])
    shared_node = cluster.get_json("nodes")["items"][0]["metadata"]["name"]
    cluster.apply([pod(namespace, "tmpl", template="one-gpu"),
                   pod(namespace, "share-a", claim_name="shared", node=shared_node),
                   pod(namespace, "share-b", claim_name="shared", node=shared_node),
                   pod(namespace, "waits", claim_name="impossible"),
                   pod(namespace, "holds-doomed", claim_name="doomed")])
    tmpl = _running(cluster, namespace, "tmpl")
    a = _running(cluster, namespace, "share-a")
    b = _running(cluster, namespace, "share-b")
    _running(cluster, namespace, "holds-doomed")
    cluster.kubectl("delete", f"resourceclaims.{api}.resource.k8s.io", "-n", namespace, "doomed", "--wait=false")

    result = cluster.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]})
    assert result["resource_api_version"] == api
    claims = _claims_by_name(result)
    generated = tmpl["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert set(claims) == {generated, "shared", "impossible", "doomed"}

    assert claims[generated]["state"] == "reserved"
    assert claims[generated]["node_scope"] == "node" and claims[generated]["nodes"] == [tmpl["spec"]["nodeName"]]
    assert [c["name"] for c in claims[generated]["consumers"]] == ["tmpl"]
    assert claims[generated]["devices"][0]["driver"] == DRIVER and not claims[generated]["problems"]

    shared = claims["shared"]
    assert shared["state"] == "reserved" and shared["nodes"] == [shared_node]
    assert sorted((c["name"], c["uid"], c["exists"]) for c in shared["consumers"]) == sorted(
        [("share-a", a["metadata"]["uid"], True), ("share-b", b["metadata"]["uid"], True)])
    assert not shared["orphaned"]

    assert claims["impossible"]["state"] == "pending" and claims["impossible"]["nodes"] == []
    assert claims["doomed"]["state"] == "deallocating" and claims["doomed"]["deletion_requested"]

    assert result["totals"] == {"pending": 1, "allocated": 0, "reserved": 2, "deallocating": 1,
                                "orphaned": 0, "total": 4}
    assert result["summary"]["<unallocated>"]["pending"] == 1
    assert result["summary"][shared_node]["reserved"] >= 1

    # claim_keys: each claim with only its identity and the asked keys, the counts unchanged.
    kept = cluster.run_module("dra.admin.dra_claims_info",
                              {"namespaces": [namespace], "claim_keys": ["orphaned", "nodes", "state"]})
    assert kept["claims"] == [dict((k, c[k]) for k in ("namespace", "name", "state", "nodes", "orphaned"))
                              for c in result["claims"]]
    assert (kept["totals"], kept["summary"]) == (result["totals"], result["summary"])


def test_gate_mode_fails_while_claims_are_held_then_passes(cluster, namespace):
    api = cluster.resource_version
    node = cluster.get_json("nodes")["items"][-1]["metadata"]["name"]
    cluster.apply([claim_template(api, namespace, "one-gpu"),
                   pod(namespace, "gated", template="one-gpu", node=node)])
    _running(cluster, namespace, "gated")
    failed = cluster.run_module("dra.admin.dra_claims_info",
                                {"node": node, "namespaces": [namespace], "fail_if_any_on_node": True},
                                expect_failure=True)
    assert f"on node {node}" in failed["msg"] and "pods/gated" in failed["msg"]
    assert len(failed["blocking"]) == 1

    cluster.kubectl("delete", "pod", "-n", namespace, "gated", "--wait=true", "--timeout=60s")

    def released():
        r = cluster.run_module("dra.admin.dra_claims_info", {"node": node, "namespaces": [namespace]})
        return r if not r["blocking"] else None

    cluster.wait_until(released, 60, "claims released")
    ok = cluster.run_module("dra.admin.dra_claims_info",
                            {"node": node, "namespaces": [namespace], "fail_if_any_on_node": True})
    assert ok["blocking"] == [] and not ok.get("failed")


def test_orphan_reported_while_controller_manager_is_stopped(cluster, namespace):
    api = cluster.resource_version
    cluster.apply([claim(api, namespace, "lonely"), pod(namespace, "consumer", claim_name="lonely")])
    consumer = _running(cluster, namespace, "consumer")
    pid = _controller_manager_pid(cluster)
    os.kill(pid, signal.SIGSTOP)
    try:
        cluster.kubectl("delete", "pod", "-n", namespace, "consumer", "--wait=true", "--timeout=60s")
        result = cluster.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]})
        lonely = _claims_by_name(result)["lonely"]
        assert lonely["orphaned"] is True
        assert lonely["state"] == "reserved"
        assert [(c["name"], c["uid"]) for c in lonely["missing_consumers"]] == [
            ("consumer", consumer["metadata"]["uid"])]
        assert result["totals"]["orphaned"] == 1
    finally:
        os.kill(pid, signal.SIGCONT)

    def cleared():
        r = cluster.run_module("dra.admin.dra_claims_info", {"namespaces": [namespace]})
        c = _claims_by_name(r).get("lonely")
        return r if c and not c["orphaned"] and c["state"] == "pending" else None

    cluster.wait_until(cleared, 90, "controller-manager to release the orphaned claim", interval=2)


def test_unknown_node_is_a_clear_error(cluster):
    failed = cluster.run_module("dra.admin.dra_claims_info", {"node": "no-such-node"}, expect_failure=True)
    assert "node 'no-such-node' does not exist" in failed["msg"]


def test_slices_info_pools_and_nodes_without_slices(cluster):
    nodes = sorted(n["metadata"]["name"] for n in cluster.get_json("nodes")["items"])
    result = cluster.run_module("dra.admin.dra_slices_info", {"driver": DRIVER, "fail_on_problems": True})
    assert sorted(result["nodes"]) == nodes
    for node in nodes:
        entry = result["nodes"][node][DRIVER]
        assert entry["devices"] == 8 and entry["complete"] is True and entry["slices"] >= 1
    assert result["incomplete_pools"] == [] and result["nodes_without_slices"] == []

    other = cluster.run_module("dra.admin.dra_slices_info", {"driver": "absent.example.com"})
    assert other["nodes_without_slices"] == nodes and other["pools"] == []
    failed = cluster.run_module("dra.admin.dra_slices_info",
                                {"driver": "absent.example.com", "fail_on_problems": True}, expect_failure=True)
    assert "nodes publishing no slice of absent.example.com" in failed["msg"]


@pytest.mark.parametrize("module", ["dra.admin.dra_claims_info", "dra.admin.dra_slices_info",
                                    "dra.admin.dra_cluster_info"])
def test_info_modules_change_nothing_in_check_mode(cluster, module):
    result = cluster.run_module(module, {}, check=True)
    assert result["changed"] is False
