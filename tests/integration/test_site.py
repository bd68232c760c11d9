"""playbooks/site.yml end to end on the real cluster: converge, idempotence, check mode, report."""
import pytest

from cluster_harness import recap


def run_site(cluster, *extra):
    # Rule files, whatever CRDs other tests left behind on the shared cluster.
    res = cluster.run_playbook("playbooks/site.yml", "-e", "dra_monitoring_delivery=files", *extra)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    return res.stdout, recap(res)


def written_by_the_playbook(cluster):
    """{uid: what a write of the playbook would change} of the kinds it applies: a DaemonSet's generation, labels and
    annotations (its status is the DaemonSet controller's, which writes it whenever a pod's or a node's readiness
    changes: a cold run under load saw one between two reads), every other object's resourceVersion."""
    items = cluster.get_json("daemonsets,deviceclasses,clusterroles,rolebindings", "-A")["items"]
    return dict((o["metadata"]["uid"], (o["metadata"]["generation"], o["metadata"].get("labels"),
                                        o["metadata"].get("annotations")) if o["kind"] == "DaemonSet"
                 else o["metadata"]["resourceVersion"]) for o in items)


@pytest.mark.per_release("default_served_api_versions")
def test_site_converges_idempotent_and_check_mode_changes_nothing(cluster):
    out, first = run_site(cluster)
    assert first["failed"] == 0 and first["changed"] > 0
    assert f"Kubernetes {cluster.version}" in out
    assert f"using {cluster.resource_version}" in out
    assert "Driver gpu.example.com: 24 devices in 3 pools on 3 nodes" in out

    second = run_site(cluster)[1]
    assert second["changed"] == 0, "second run changed something"

    before = written_by_the_playbook(cluster)
    checked = run_site(cluster, "--check", "--diff")[1]
    assert checked["changed"] == 0 and checked["failed"] == 0
    assert written_by_the_playbook(cluster) == before
