"""Drivers gone from the nodes they publish for (devices.health.drivers_gone) and the remediation's opt-in use of
them (devices.remediation.with_gone_drivers), on the objects recorded from the real v1.37.2 kind cluster of the node
doctor's tests (tests/unit/fixtures/node-state/v1.37.2/ckpt.json: the example driver's DaemonSet, made by role
dra.admin.driver, with a Ready pod and a ResourceSlice of 8 devices on each of nsx-worker and nsx-worker2)."""
import copy
import datetime
import json
import os

from ansible_collections.dra.admin.plugins.module_utils.devices import health, remediation
from conftest import FIXTURES

DRIVER = "gpu.example.com"
DAEMONSET = "dra-system/gpu-example-com-kubeletplugin"
NOW = datetime.datetime(2026, 11, 25, 3, 0, 0, tzinfo=datetime.timezone.utc)


def recorded():
    with open(os.path.join(FIXTURES, "node-state", "v1.37.2", "ckpt.json")) as handle:
        return json.load(handle)


def devices(objs):
    return health.device_health(objs["resourceslices"], objs["resourceclaims"], objs["pods"], NOW)["devices"]


def gone(objs, pods=None):
    return health.drivers_gone(devices(objs), objs["daemonsets"], objs["pods"] if pods is None else pods, NOW)


def without_pod_on(objs, node):
    return [p for p in objs["pods"] if p["spec"].get("nodeName") != node]


def with_ready(objs, node, status, seconds_ago, deleting=False):
    pods = copy.deepcopy(objs["pods"])
    for pod in pods:
        if pod["spec"].get("nodeName") == node:
            for cond in pod["status"]["conditions"]:
                if cond["type"] == "Ready":
                    cond["status"] = status
                    cond["lastTransitionTime"] = (NOW - datetime.timedelta(seconds=seconds_ago)).strftime(
                        "%Y-%m-%dT%H:%M:%SZ")
            if deleting:
                pod["metadata"]["deletionTimestamp"] = "2026-11-25T02:59:00Z"
    return pods


def test_a_driver_with_a_ready_pod_on_each_node_it_publishes_for_is_not_gone():
    assert gone(recorded()) == []


def test_no_driver_pod_on_a_node_its_slices_name_is_a_driver_gone_from_that_node_only():
    objs = recorded()
    (entry,) = gone(objs, without_pod_on(objs, "nsx-worker2"))
    assert (entry["driver"], entry["node"], entry["daemonsets"]) == (DRIVER, "nsx-worker2", [DAEMONSET])
    assert entry["reason"] == ("driver gpu.example.com publishes devices for node nsx-worker2 but no pod of its "
                               "DaemonSet %s runs there" % DAEMONSET)


def test_a_pod_not_ready_counts_once_it_has_been_so_for_the_grace_period():
    objs = recorded()
    assert gone(objs, with_ready(objs, "nsx-worker2", "False", health.DRIVER_NOT_READY_AFTER - 5)) == []
    (entry,) = gone(objs, with_ready(objs, "nsx-worker2", "False", health.DRIVER_NOT_READY_AFTER + 5))
    assert entry["node"] == "nsx-worker2" and "is not ready (since 2026-11-25T02:59:25Z)" in entry["reason"]
    # A pod being deleted is not ready, whatever its condition still says.
    (entry,) = gone(objs, with_ready(objs, "nsx-worker", "True", 3600, deleting=True))
    assert entry["node"] == "nsx-worker"


def test_a_driver_no_daemonset_runs_is_not_judged():
    objs = recorded()
    assert health.drivers_gone(devices(objs), [], without_pod_on(objs, "nsx-worker2"), NOW) == []


def test_the_remediation_takes_a_gone_drivers_devices_out_of_service_noschedule_whatever_the_effect():
    objs = recorded()
    report = devices(objs)
    found = gone(objs, without_pod_on(objs, "nsx-worker2"))
    marked = remediation.with_gone_drivers(report, found)
    assert [d for d in report if d["condition"] == "unhealthy"] == []  # the report itself is unchanged
    bad = [d for d in marked if d["condition"] == "unhealthy"]
    assert sorted(d["node"] for d in bad) == ["nsx-worker2"] * 8
    assert all(found[0]["reason"] in d["reasons"] for d in bad)
    actions = remediation.plan(marked, [], NOW, 600, effect="NoExecute")
    assert [a["action"] for a in actions] == ["taint"] * 8
    assert set(a["want_effect"] for a in actions) == {"NoSchedule"}
    assert all(a["id"].startswith(DRIVER + "/") for a in actions)
    # Once the plugin is back its devices are healthy again: the rules are marked, then lifted (healthy_for).
    labels = {remediation.PURPOSE_LABEL: remediation.PURPOSE, "app.kubernetes.io/managed-by": "dra.admin"}
    rules = [{"metadata": {"name": a["rule"], "labels": labels},
              "spec": {"deviceSelector": {"driver": a["driver"], "pool": a["pool"], "device": a["device"]},
                       "taint": {"key": remediation.KEY, "effect": "NoSchedule"}}} for a in actions]
    back = remediation.plan(remediation.with_gone_drivers(report, gone(objs)), rules, NOW, 600)
    assert [a["action"] for a in back] == ["mark-healthy"] * 8
    assert [a["action"] for a in remediation.plan(marked, rules, NOW, 600)] == ["keep"] * 8
