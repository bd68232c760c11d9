"""What a drain would leave without devices, on the recorded v1.37.2 cluster (fixtures/allocation): `rec/holder`
holds 6 devices of node-000000; node-000001's pool is tainted NoSchedule by a DeviceTaintRule; node-000002 has its
8 devices free. The holder is a bare pod there; here it is given a controller, as a Deployment's pod would have."""
import copy

import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import cel
from ansible_collections.dra.admin.plugins.module_utils.allocation import explain, search, whatif

from test_explain_recorded import recorded_cluster


@pytest.fixture
def recorded():
    cluster, features, pods, dummy = recorded_cluster()
    ctx = explain.context(cel.Environment(37), cluster, features)
    holder = next(p for p in pods if p["metadata"]["name"] == "holder")
    return ctx, cluster["claims"], cluster["nodes"], holder


def with_controller(pod, pinned=False):
    """The holder as a Deployment's pod; it was pinned to node-000000 by a nodeSelector, kept only if `pinned`."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "holder-5d9f", "controller": True}]
    if not pinned:
        pod["spec"].pop("nodeSelector")
    return pod


def test_a_workload_pinned_to_the_drained_node_would_stay_pending(recorded):
    ctx, claims, nodes, holder = recorded
    found = whatif.preview(ctx, claims, nodes, [with_controller(holder, pinned=True)], removed_nodes=["node-000000"])
    (workload,) = found["workloads"]
    assert workload["verdict"] == search.DOES_NOT_FIT
    assert "nodeSelector kubernetes.io/hostname=node-000000 does not match" in workload["message"]


def test_a_workload_with_room_elsewhere_fits_there(recorded):
    ctx, claims, nodes, holder = recorded
    found = whatif.preview(ctx, claims, nodes, [with_controller(holder)], removed_nodes=["node-000000"])
    (workload,) = found["workloads"]
    assert workload["verdict"] == search.FITS and workload["fits_on"] == ["node-000002"], workload
    assert workload["controller"] == "ReplicaSet/holder-5d9f"
    assert found["would_stay_pending"] == []


def test_a_workload_without_room_would_stay_pending(recorded):
    ctx, claims, nodes, holder = recorded
    found = whatif.preview(ctx, claims, nodes, [with_controller(holder)],
                           removed_nodes=["node-000000", "node-000002"])
    (workload,) = found["workloads"]
    assert workload["verdict"] == search.DOES_NOT_FIT
    assert found["would_stay_pending"] == ["rec/holder"]
    assert "tainted" in workload["requests"][0]["excluded"], workload["requests"]


def test_its_own_devices_come_back_when_it_is_evicted(recorded):
    """The holder's 6 devices are released with it: on node-000000 itself (not removed) it fits again."""
    ctx, claims, nodes, holder = recorded
    found = whatif.preview(ctx, claims, [n for n in nodes if n["metadata"]["name"] == "node-000000"],
                           [with_controller(holder)])
    assert found["workloads"][0]["fits_on"] == ["node-000000"]


def test_two_workloads_do_not_count_the_same_free_device(recorded):
    ctx, claims, nodes, holder = recorded
    twin = with_controller(holder)
    twin["metadata"].update(name="twin", uid="twin-uid")
    found = whatif.preview(ctx, claims, nodes, [with_controller(holder), twin], removed_nodes=["node-000000"])
    verdicts = [w["verdict"] for w in found["workloads"]]
    assert verdicts == [search.FITS, search.DOES_NOT_FIT], found["workloads"]


def test_a_bare_pod_is_not_made_again(recorded):
    ctx, claims, nodes, holder = recorded
    found = whatif.preview(ctx, claims, nodes, [holder], removed_nodes=["node-000000"])
    assert found["workloads"][0]["verdict"] == whatif.NOT_RECREATED
    assert found["would_stay_pending"] == ["rec/holder"]
