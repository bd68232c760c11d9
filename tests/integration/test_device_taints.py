"""Device-level maintenance with DeviceTaintRules (dra.admin.dra_device_taint) on the real control plane.

The real kube-controller-manager's device-taint-eviction controller evicts and reports, the real
kube-scheduler keeps tainted devices from new claims. The rule's API is off by default on the pinned
releases, so:

- on every pinned release, the shared `cluster` (defaults) gets the quick check of what the defaults give:
  where the rule's API is off (1.33, 1.36) the module fails naming the version and what switches the API on,
  and writes nothing, whatever the state; where it is on by default (1.37) a dry run answers and writes
  nothing;
- on releases where dra.admin can use the rule (catalog: device_taint_rule_support()["usable"], 1.35+),
  one more cluster is brought up with the catalog's gates for it (`hack/cluster/up --feature-gates`,
  the same settings role dra.admin.feature_gates writes with dra_feature_gates_device_taints: true), and
  one test walks one set of objects through dry run, NoSchedule, NoExecute (with a claim tolerating it
  for a while), a second run and lifting the rule (a dry run over each rule leaves it as it is), and one
  has a maintenance rule and the drain's device mode on the same device lift in turn.

The made-up driver maint.example.com has no kubelet plugin: the scheduler allocates from its published
slice and a KWOK node "runs" any pod, which is all these checks need.

With DRA_IT_RECORD=<dir> the objects are saved for the unit tests (tests/unit/fixtures/recorded/).
"""
import datetime
import json
import os
import re
import sys
import time

import pytest

from cluster_harness import recap, record, results
from conftest import own_cluster
from dra_objects import claim, device_class, pod, resource_slice

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402  pylint: disable=wrong-import-position

MODULE = "dra.admin.dra_device_taint"
VERSIONS = clusterlib.supported_k8s_versions()
CATALOG = clusterlib.catalog()
USABLE = [v for v in VERSIONS if CATALOG.device_taint_rule_support(v)["usable"]]
DRIVER = "maint.example.com"
POOL = "tray"
KEY = "dra.admin/maintenance"
TOLERATION_SECONDS = 20


def taint_objects(namespace):
    """What record saves of a scenario (device-taints-<name>): the claims and pods of the namespace, the slices
    and the rules."""
    return ("resourceclaims,pods", "-n", namespace), "resourceslices", "devicetaintrules.resource.k8s.io"


@pytest.mark.per_release("device_taint_rule_support", key="default_on")
def test_device_taint_rules_as_served_by_default(cluster):
    """With the defaults: where the rule's API is off (1.33: only an alpha without effect None or status;
    1.36: needs DRADeviceTaintRules and resource.k8s.io/v1beta2) every state fails clearly and writes nothing;
    where it is on (1.37, resource.k8s.io/v1) a dry run of the example driver's devices answers, reads only."""
    support = CATALOG.device_taint_rule_support(cluster.version)
    served = cluster.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    if support["default_on"]:
        assert any(name.startswith("devicetaintrules") for name in served), served
        before = rules(cluster)
        dry = cluster.run_module(MODULE, {"state": "dry_run", "driver": "gpu.example.com"})
        assert dry["changed"] is False and dry["api_version"] == support["api_version"], dry
        assert dry["rule"] == {} and len(dry["devices"]) >= 8 and dry["other_rules_in_force"] == []
        assert rules(cluster) == before == []
        return
    for args in ({"state": "tainted", "effect": "NoExecute", "driver": "gpu.example.com"},
                 {"state": "dry_run", "driver": "gpu.example.com"}):
        failed = cluster.run_module(MODULE, args, expect_failure=True)
        assert failed["changed"] is False
        assert f"not available on Kubernetes {cluster.version}" in failed["msg"], failed["msg"]
        assert CATALOG.device_taint_rules_unavailable(cluster.version) in failed["msg"]
        if support["usable"]:
            for gate in support["gates"]:
                assert f"{gate}=true" in failed["msg"]
            for entry in support["runtime_config"]:
                assert entry in failed["msg"]
            assert "dra_feature_gates_device_taints" in failed["msg"]
        else:
            assert "upgrade to 1.35 or later" in failed["msg"]
    # The remediation says the same, before reading anything else.
    remedy = cluster.run_module("dra.admin.dra_device_remediation", {"effect": "NoExecute"}, expect_failure=True)
    assert remedy["changed"] is False and remedy["api_requests"] <= 3  # version and discovery only
    assert CATALOG.device_taint_rules_unavailable(cluster.version) in remedy["msg"], remedy["msg"]
    assert not any(name.startswith("devicetaintrules") for name in served), served


@pytest.fixture(scope="module", params=USABLE)
def taint_cluster(request):
    """A one-node cluster with the catalog's gates for DeviceTaintRule (hack/cluster/up --feature-gates)."""
    version = request.param
    support = CATALOG.device_taint_rule_support(version)
    gates = ",".join(f"{gate}=true" for gate in sorted(support["gates"]))
    with own_cluster("it-taints", version, 1, 300, gates) as cluster:
        yield cluster


def tolerating_claim(api, namespace, name, seconds, device_class=DRIVER):
    obj = claim(api, namespace, name, device_class=device_class)
    request = obj["spec"]["devices"]["requests"][0]
    body = request.get("exactly", request)
    body["tolerations"] = [{"key": KEY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}]
    return obj


def first_node_and_namespace(cluster, namespace):
    """The cluster's first node, with `namespace` made and ready for pods (its default ServiceAccount)."""
    cluster.kubectl("create", "namespace", namespace)
    cluster.wait_for_default_service_account(namespace)
    return cluster.get_json("nodes")["items"][0]["metadata"]["name"]


def pod_phase(cluster, namespace, name):
    res = cluster.kubectl("get", "pod", "-n", namespace, name, "-o", "json", check=False)
    if res.returncode != 0:
        return None
    obj = json.loads(res.stdout)
    return "Terminating" if obj["metadata"].get("deletionTimestamp") else obj["status"].get("phase")


def unschedulable(cluster, namespace, name):
    conditions = cluster.get_json("pod", "-n", namespace, name)["status"].get("conditions") or []
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in conditions)


def eviction_times(cluster, namespace):
    """{pod: when the device-taint-eviction controller marked it for deletion} from the namespace's events."""
    out = {}
    for event in cluster.get_json("events", "-n", namespace)["items"]:
        if event.get("reason") == "DeviceTaintManagerEviction":
            when = event.get("eventTime") or event.get("firstTimestamp")
            out[event["involvedObject"]["name"]] = datetime.datetime.strptime(when[:19], "%Y-%m-%dT%H:%M:%S")
    return out


def run_tasks(cluster, tmp_path, *tasks, module=MODULE):
    """Several runs of the module in one playbook (one ansible start-up); each task's result, failed or not.

    tasks: (args, check) pairs."""
    book = [{"hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "run %d" % i, module: args, "check_mode": check, "ignore_errors": True}
                       for i, (args, check) in enumerate(tasks)]}]
    path = tmp_path / ("tasks-%d.yml" % len(list(tmp_path.iterdir())))
    path.write_text(json.dumps(book))
    res = cluster.run_playbook(str(path), env={"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"})
    return results(res, "the playbook")


def rules(cluster):
    return cluster.get_json("devicetaintrules.resource.k8s.io")["items"]


def rule_versions(cluster):
    return dict((r["metadata"]["name"], r["metadata"]["resourceVersion"]) for r in rules(cluster))


def assert_dry_runs_leave_the_rule(cluster, tmp_path, base, name, effect):
    """dra_device_taint state=dry_run (as a task and in check mode) and role device_maintenance without a state
    over an existing rule: it keeps its resourceVersion and effect, and each run reports it as it is."""
    versions = rule_versions(cluster)
    dry, checked = run_tasks(cluster, tmp_path, (dict(base, state="dry_run"), False),
                             (dict(base, state="dry_run"), True))
    for result in (dry, checked):
        assert not result.get("failed") and result["changed"] is False, result
        assert result["name"] == name and result["rule"]["taint"]["effect"] == effect, result["rule"]
    role = cluster.run_role("dra.admin.device_maintenance", tmp_path, {"dra_device_maintenance_driver": base["driver"],
                                                                       "dra_device_maintenance_pool": base["pool"]})
    assert role.returncode == 0 and recap(role)["changed"] == 0, role.stdout[-4000:]
    assert rule_versions(cluster) == versions
    assert cluster.get_json("devicetaintrules.resource.k8s.io", name)["spec"]["taint"]["effect"] == effect


@pytest.mark.per_release("_DEVICE_TAINT_RULE_API")
def test_device_maintenance_dry_run_taint_evict_and_lift(taint_cluster, tmp_path):
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "device-maintenance"
    node = first_node_and_namespace(cluster, ns)
    cluster.apply([device_class(api, DRIVER),
                   resource_slice(api, DRIVER, POOL, ["dev-0", "dev-1", "dev-2"], nodeName=node)])
    # Two pods share one claim, one claim tolerates the taint for a while; a pod of the example driver's
    # GPUs on the same node is not selected.
    cluster.apply([claim(api, ns, "shared", device_class=DRIVER),
                   pod(ns, "a1", claim_name="shared", node=node, grace=1),
                   pod(ns, "a2", claim_name="shared", node=node, grace=1),
                   tolerating_claim(api, ns, "tolerant", TOLERATION_SECONDS),
                   pod(ns, "t", claim_name="tolerant", node=node, grace=1),
                   claim(api, ns, "other"), pod(ns, "o", claim_name="other", node=node, grace=1)])
    for name in ("a1", "a2", "t", "o"):
        cluster.wait_until(lambda n=name: pod_phase(cluster, ns, n) == "Running", 90, f"pod {name} Running")
    other_uid = cluster.get_json("pod", "-n", ns, "o")["metadata"]["uid"]
    base = {"driver": DRIVER, "pool": POOL, "poll_interval": 0.5, "wait_timeout": 120}

    # Bad selectors: a clear failure naming what exists, and no rule. Check mode: the answer, and no rule.
    no_driver, no_device, checked = run_tasks(
        cluster, tmp_path, ({"state": "dry_run", "driver": "nosuch.example.com"}, False),
        (dict(base, state="tainted", effect="NoExecute", device="dev-9"), False), (dict(base, state="dry_run"), True))
    assert no_driver["failed"] and no_device["failed"] and not checked.get("failed"), (no_driver, no_device, checked)
    assert "driver nosuch.example.com publishes no ResourceSlice" in no_driver["msg"] and DRIVER in no_driver["msg"]
    assert f"no device dev-9 in pool {POOL} of driver {DRIVER}" in no_device["msg"] and "dev-0" in no_device["msg"]
    assert no_driver["changed"] is False and no_device["changed"] is False
    assert checked["changed"] is False and checked["would_evict"] == [f"{ns}/a1", f"{ns}/a2", f"{ns}/t"]
    assert rules(cluster) == []

    # Dry run: exactly the pods on the selected devices; the tolerating one with its seconds; no rule written.
    dry, dry_again = run_tasks(cluster, tmp_path, (dict(base, state="dry_run"), False),
                               (dict(base, state="dry_run"), False))
    assert dry["changed"] is False and dry_again["changed"] is False
    assert dry["rule"] == {} and dry["other_rules_in_force"] == [] and rules(cluster) == []
    assert dry["pods"] == [f"{ns}/a1", f"{ns}/a2", f"{ns}/t"]
    assert dry["would_evict"] == [f"{ns}/a1", f"{ns}/a2", f"{ns}/t"]
    assert dry["claims"] == [f"{ns}/shared", f"{ns}/tolerant"]
    assert dry["tolerating"] == [{"pod": f"{ns}/t", "claim": f"{ns}/tolerant",
                                  "toleration_seconds": TOLERATION_SECONDS, "until": None}]
    assert sorted(d["device"] for d in dry["devices"]) == ["dev-0", "dev-1", "dev-2"]
    assert all(pod_phase(cluster, ns, n) == "Running" for n in ("a1", "a2", "t", "o"))
    record(cluster, "device-taints-dry-run", *taint_objects(ns))

    # NoSchedule: running pods stay, a new claim on the pool cannot be allocated.
    tainted = cluster.run_module(MODULE, dict(base, state="tainted", effect="NoSchedule"))
    assert tainted["changed"] is True and tainted["name"] == dry["name"]
    assert tainted["rule"]["labels"] == {"app.kubernetes.io/managed-by": "dra.admin", "dra.admin/purpose": "maintenance"}
    cluster.apply([claim(api, ns, "late", device_class=DRIVER), pod(ns, "newcomer", claim_name="late", node=node, grace=1)])
    cluster.wait_until(lambda: unschedulable(cluster, ns, "newcomer"), 60, "pod newcomer unschedulable while the pool is tainted")
    assert all(pod_phase(cluster, ns, n) == "Running" for n in ("a1", "a2", "t", "o"))
    # A dry run over the NoSchedule rule, and the role's default run (a dry run), leave it as it is.
    assert_dry_runs_leave_the_rule(cluster, tmp_path, base, tainted["name"], "NoSchedule")

    # NoExecute without waiting: the tolerating pod is reported with its deadline.
    started = cluster.run_module(MODULE, dict(base, state="tainted", effect="NoExecute", wait=False))
    assert started["changed"] is True
    added = datetime.datetime.strptime(started["rule"]["taint"]["timeAdded"], "%Y-%m-%dT%H:%M:%SZ")
    until = (added + datetime.timedelta(seconds=TOLERATION_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert started["tolerating"] == [{"pod": f"{ns}/t", "claim": f"{ns}/tolerant",
                                      "toleration_seconds": TOLERATION_SECONDS, "until": until}]
    cluster.wait_until(lambda: pod_phase(cluster, ns, "a1") is None and pod_phase(cluster, ns, "a2") is None,
                       60, "a1 and a2 evicted")
    record(cluster, "device-taints-noexecute-pending", *taint_objects(ns))

    # The same request again, waiting: nothing to change; it returns once the tolerating pod is gone too.
    done, again = run_tasks(cluster, tmp_path, (dict(base, state="tainted", effect="NoExecute"), False),
                            (dict(base, state="tainted", effect="NoExecute"), False))
    assert done["changed"] is False and again["changed"] is False, (done, again)
    # (t is in `evicted` when it was still there as the run started: on a loaded machine it may be gone.)
    assert done["evicted"] in ([f"{ns}/t"], []) and done["still_holding"] == [] and done["pods"] == []
    assert pod_phase(cluster, ns, "t") is None
    assert done["rule"]["condition"]["current"] and not done["rule"]["condition"]["eviction_in_progress"]
    assert again["evicted"] == [] and again["would_evict"] == []
    record(cluster, "device-taints-noexecute-done", *taint_objects(ns))
    evictions = eviction_times(cluster, ns)
    assert sorted(evictions) == ["a1", "a2", "t"], evictions
    assert evictions["t"] >= added + datetime.timedelta(seconds=TOLERATION_SECONDS), (evictions, added)
    assert max(evictions["a1"], evictions["a2"]) < added + datetime.timedelta(seconds=TOLERATION_SECONDS)
    other = cluster.get_json("pod", "-n", ns, "o")
    assert other["metadata"]["uid"] == other_uid and pod_phase(cluster, ns, "o") == "Running"
    assert unschedulable(cluster, ns, "newcomer")
    # A dry run over the NoExecute rule, and the role's default run (a dry run), leave it as it is.
    assert_dry_runs_leave_the_rule(cluster, tmp_path, base, done["name"], "NoExecute")

    # Lifting the rule lets a new pod have a device of the pool. (A pod left pending under the taint is
    # retried only at kube-scheduler's next DRA event or unschedulable timeout, up to 5 minutes: deleting
    # a DeviceTaintRule is no scheduler event on 1.36/1.37. So the waiting pod goes first.)
    cluster.kubectl("delete", "pod", "-n", ns, "newcomer", "--wait=true", "--timeout=60s")
    # ... through role dra.admin.device_maintenance (the module, then its read-back check), twice.
    role_vars = {"dra_device_maintenance_driver": DRIVER, "dra_device_maintenance_pool": POOL,
                 "dra_device_maintenance_state": "absent"}
    lifted = cluster.run_role("dra.admin.device_maintenance", tmp_path, role_vars)
    assert lifted.returncode == 0 and recap(lifted)["changed"] == 1, lifted.stdout[-4000:]
    assert rules(cluster) == []
    again = cluster.run_role("dra.admin.device_maintenance", tmp_path, role_vars)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-4000:]
    cluster.apply([claim(api, ns, "back", device_class=DRIVER), pod(ns, "returned", claim_name="back", node=node)])
    cluster.wait_until(lambda: pod_phase(cluster, ns, "returned") == "Running", 90,
                       "a new pod Running on the pool once the rule is gone")
    back = cluster.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", ns, "back")
    assert back["status"]["allocation"]["devices"]["results"][0]["pool"] == POOL


def test_drain_device_mode_evicts_one_device_and_releases_its_claim(taint_cluster, tmp_path):
    """dra_node_drain with device_driver: one GPU of the node through a NoExecute rule, its claim released;
    a pod on another GPU of the node stays; in_service lifts the rule."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "device-drain"
    node = first_node_and_namespace(cluster, ns)
    index = 'device.attributes["gpu.example.com"].index == %d'
    cluster.apply([claim(api, ns, "gpu5", selector=index % 5), pod(ns, "on5", claim_name="gpu5", node=node, grace=1),
                   claim(api, ns, "gpu6", selector=index % 6), pod(ns, "on6", claim_name="gpu6", node=node, grace=1)])
    for name in ("on5", "on6"):
        cluster.wait_until(lambda n=name: pod_phase(cluster, ns, n) == "Running", 90, f"pod {name} Running")
    args = {"node": node, "device_driver": "gpu.example.com", "device": "gpu-5", "timeout": 120, "poll_interval": 0.5}
    (drained,) = run_tasks(cluster, tmp_path, (args, False), module="dra.admin.dra_node_drain")
    assert not drained.get("failed"), drained
    assert drained["changed"] and drained["evicted"] == [f"{ns}/on5"] and drained["claims_released"] is True
    assert drained["rule"]["taint"]["effect"] == "NoExecute"
    assert drained["rule"]["annotations"] == {"dra.admin/drained-node": node}
    claim5 = cluster.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", ns, "gpu5")
    assert not claim5.get("status", {}).get("allocation")
    assert pod_phase(cluster, ns, "on5") is None and pod_phase(cluster, ns, "on6") == "Running"
    # Back through role dra.admin.drain, which passes its device-mode variables to the module.
    role_vars = {"dra_drain_node": node, "dra_drain_state": "in_service", "dra_drain_device_driver": "gpu.example.com",
                 "dra_drain_device": "gpu-5", "dra_drain_timeout": 120}
    lifted = cluster.run_role("dra.admin.drain", tmp_path, role_vars)
    assert lifted.returncode == 0 and recap(lifted)["changed"] == 1, lifted.stdout[-4000:]
    assert f"{node} in_service, DeviceTaintRule {drained['name']}:" in lifted.stdout and "lifted True" in lifted.stdout
    assert rules(cluster) == []


def test_maintenance_rule_and_device_drain_on_the_same_device_coexist(taint_cluster, tmp_path):
    """An admin's maintenance rule (dra_device_taint, NoSchedule) and the drain's device mode (NoExecute) on the
    same GPU: two rules; each lift deletes only its own, leaves the other's resourceVersion as it was and names it
    in other_rules_in_force; the device stays out of service while either is there; neither operation takes the
    other's rule by name."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "device-coexist"
    node = first_node_and_namespace(cluster, ns)
    gpu = {"driver": "gpu.example.com", "pool": node, "device": "gpu-7"}
    drain_args = {"node": node, "device_driver": "gpu.example.com", "device": "gpu-7", "timeout": 120,
                  "poll_interval": 0.5}
    (maintenance,) = run_tasks(cluster, tmp_path, (dict(gpu, state="tainted", effect="NoSchedule",
                                                        annotations={"example.com/ticket": "4711"}), False))
    (drained,) = run_tasks(cluster, tmp_path, (drain_args, False), module="dra.admin.dra_node_drain")
    assert not maintenance.get("failed") and not drained.get("failed"), (maintenance, drained)
    ours, theirs = maintenance["name"], drained["name"]
    assert ours == f"dra-admin-gpu.example.com-{node}-gpu-7" and theirs == f"dra-admin-drain-gpu.example.com-{node}-gpu-7"
    assert [(r["name"], r["operation"], r["effect"]) for r in drained["other_rules_in_force"]] == [
        (ours, "maintenance", "NoSchedule")]
    versions = rule_versions(cluster)
    assert sorted(versions) == sorted([ours, theirs])
    assert cluster.get_json("devicetaintrules.resource.k8s.io", theirs)["metadata"]["labels"]["dra.admin/purpose"] == \
        "device-drain"

    # Neither takes the other's rule by name; a dry run naming either reads it only.
    grab, lift_theirs, look = run_tasks(cluster, tmp_path, (dict(gpu, state="tainted", name=theirs), False),
                                        (dict(gpu, state="absent", name=theirs), False),
                                        (dict(gpu, state="dry_run", name=theirs), False))
    for refused in (grab, lift_theirs):
        assert refused["failed"] and refused["changed"] is False, refused
        assert "belongs to another dra.admin operation (label dra.admin/purpose=device-drain" in refused["msg"]
    assert look["changed"] is False and look["rule"]["operation"] == "device-drain"
    assert rule_versions(cluster) == versions

    # The drain's lift (role drain, device mode): its own rule only; the maintenance rule is named and stays, and
    # the device stays out of service: a new claim for it is not allocated.
    role_vars = {"dra_drain_node": node, "dra_drain_state": "in_service", "dra_drain_device_driver": "gpu.example.com",
                 "dra_drain_device": "gpu-7", "dra_drain_timeout": 120}
    back = cluster.run_role("dra.admin.drain", tmp_path, role_vars)
    assert back.returncode == 0 and recap(back)["changed"] == 1, back.stdout[-4000:]
    assert f"lifted True, other rules keeping the devices out of service: {ours}" in back.stdout, back.stdout[-4000:]
    assert rule_versions(cluster) == {ours: versions[ours]}
    index = 'device.attributes["gpu.example.com"].index == 7'
    cluster.apply([claim(api, ns, "gpu7", selector=index), pod(ns, "wants7", claim_name="gpu7", node=node, grace=1)])
    cluster.wait_until(lambda: unschedulable(cluster, ns, "wants7"), 60,
                       "pod wants7 unschedulable while the maintenance rule still taints gpu-7")
    cluster.kubectl("delete", "pod", "-n", ns, "wants7", "--wait=true", "--timeout=60s")

    # The other way round: the drain again, then the maintenance lift leaves the drain's rule and names it.
    (again,) = run_tasks(cluster, tmp_path, (drain_args, False), module="dra.admin.dra_node_drain")
    assert again["changed"] and again["name"] == theirs, again
    drain_version = rule_versions(cluster)[theirs]
    (lifted,) = run_tasks(cluster, tmp_path, (dict(gpu, state="absent"), False))
    assert lifted["changed"] and lifted["lifted"] and lifted["name"] == ours, lifted
    assert [(r["name"], r["operation"], r["effect"]) for r in lifted["other_rules_in_force"]] == [
        (theirs, "device-drain", "NoExecute")]
    assert rule_versions(cluster) == {theirs: drain_version}
    (last,) = run_tasks(cluster, tmp_path, (dict(drain_args, state="in_service"), False), module="dra.admin.dra_node_drain")
    assert last["changed"] and last["lifted"] and last["other_rules_in_force"] == [], last
    assert rules(cluster) == []
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


REMEDY_DRIVER = "remedy.example.com"
REMEDY_POOL = "rack"
REMEDY_RULE = "dra-admin-unhealthy-remedy.example.com-rack-dev-0"
HEALTHY_FOR = 15


def remedy_slice(api, node, tainted, driver=REMEDY_DRIVER):
    """The slice a driver publishes for its pool; with `tainted` it taints dev-0 as unhealthy (the health
    source exercised: the taints drivers publish in their ResourceSlices)."""
    obj = resource_slice(api, driver, REMEDY_POOL, ["dev-0", "dev-1"], nodeName=node)
    for index, device in enumerate(obj["spec"]["devices"]):
        device["attributes"] = {"index": {"int": index}}
    if tainted:
        obj["spec"]["devices"][0]["taints"] = [{"key": f"{driver}/unhealthy", "value": "ecc",
                                                "effect": "NoSchedule"}]
    return obj


# What record saves of a remediation scenario (device-remediation-<name>): what the remediation reads, slices,
# claims, pods and DeviceTaintRules.
REMEDIATION_OBJECTS = ("resourceslices", ("resourceclaims,pods", "-n", "device-remediation"),
                       "devicetaintrules.resource.k8s.io")


def test_remediation_taints_an_unhealthy_device_and_lifts_its_own_taint_after_the_period(taint_cluster, tmp_path):
    """Role device_maintenance, entry point remediate (playbooks/device_remediation.yml): a driver taints dev-0
    in its ResourceSlice -> the remediation's NoSchedule rule; the driver clears it -> healthy-since on the rule;
    after HEALTHY_FOR seconds -> lifted. A maintenance rule and another tool's rule on dev-1 are never touched."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "device-remediation"
    node = first_node_and_namespace(cluster, ns)
    # A pod holds dev-0 before its driver reports it unhealthy.
    cluster.apply([device_class(api, REMEDY_DRIVER), remedy_slice(api, node, tainted=False),
                   claim(api, ns, "on-dev-0", device_class=REMEDY_DRIVER,
                         selector=f'device.attributes["{REMEDY_DRIVER}"].index == 0'),
                   pod(ns, "user", claim_name="on-dev-0", node=node, grace=1)])
    cluster.wait_until(lambda: pod_phase(cluster, ns, "user") == "Running", 90, "pod user Running")
    cluster.apply([remedy_slice(api, node, tainted=True)])
    args = {"healthy_for": HEALTHY_FOR, "poll_interval": 0.5}
    # Check mode: the device it would taint, and nothing written.
    check_only = run_tasks(cluster, tmp_path, (args, True), module="dra.admin.dra_device_remediation")[0]
    assert not check_only.get("failed") and check_only["changed"] is True, check_only
    assert check_only["tainted"] == [f"{REMEDY_DRIVER}/{REMEDY_POOL}/dev-0"] and check_only["lifted"] == []
    assert check_only["sources"]["slice_taints"]["available"] is True
    assert REMEDY_RULE not in [r["metadata"]["name"] for r in rules(cluster)]
    # Rules on dev-1 that are not the remediation's: a maintenance rule of dra.admin, another tool's.
    foreign = {"apiVersion": "resource.k8s.io/" + check_only["api_version"], "kind": "DeviceTaintRule",
               "metadata": {"name": "foreign-dev-1"},
               "spec": {"deviceSelector": {"driver": REMEDY_DRIVER, "pool": REMEDY_POOL, "device": "dev-1"},
                        "taint": {"key": "example.com/foreign", "effect": "None"}}}
    cluster.apply([foreign])
    maint = cluster.run_module(MODULE, {"driver": REMEDY_DRIVER, "pool": REMEDY_POOL, "device": "dev-1",
                                        "effect": "NoSchedule"})
    assert maint["changed"], maint
    others = dict((r["metadata"]["name"], r["metadata"]["resourceVersion"]) for r in rules(cluster))

    book = "playbooks/device_remediation.yml"
    extra = ["-e", json.dumps({"dra_device_maintenance_remediate_healthy_for": HEALTHY_FOR,
                               "dra_device_maintenance_poll_interval": 0.5})]
    first = cluster.run_playbook(book, *extra)
    assert first.returncode == 0 and recap(first)["changed"] == 1, first.stdout[-4000:]
    assert f"tainted: {REMEDY_DRIVER}/{REMEDY_POOL}/dev-0" in first.stdout
    again = cluster.run_playbook(book, *extra)
    assert again.returncode == 0 and recap(again)["changed"] == 0, again.stdout[-4000:]
    rule = cluster.get_json("devicetaintrules.resource.k8s.io", REMEDY_RULE)
    assert rule["spec"]["deviceSelector"] == {"driver": REMEDY_DRIVER, "pool": REMEDY_POOL, "device": "dev-0"}
    assert rule["spec"]["taint"]["key"] == "dra.admin/unhealthy" and rule["spec"]["taint"]["effect"] == "NoSchedule"
    assert rule["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "dra.admin",
                                          "dra.admin/purpose": "device-health-remediation"}
    assert "remedy.example.com/unhealthy=ecc:NoSchedule" in rule["metadata"]["annotations"]["dra.admin/reason"]
    assert pod_phase(cluster, ns, "user") == "Running"  # NoSchedule leaves the pod using the device alone
    record(cluster, "device-remediation-tainted", *REMEDIATION_OBJECTS)

    # The driver clears its taint: the first run marks the rule, the next one (a second later) waits.
    cluster.apply([remedy_slice(api, node, tainted=False)])
    marked, waiting = run_tasks(cluster, tmp_path, (args, False), (args, False),
                                module="dra.admin.dra_device_remediation")
    assert marked["changed"] and marked["marked_healthy"] == [f"{REMEDY_DRIVER}/{REMEDY_POOL}/dev-0"], marked
    assert waiting["changed"] is False and waiting["waiting"] == marked["marked_healthy"], waiting
    since = cluster.get_json("devicetaintrules.resource.k8s.io", REMEDY_RULE)["metadata"]["annotations"][
        "dra.admin/healthy-since"]
    assert since == marked["now"]
    record(cluster, "device-remediation-marked", *REMEDIATION_OBJECTS)

    # Once the rule's own healthy-since is HEALTHY_FOR seconds old (the API server's clock is the host's):
    # lifted, and only it.
    lift_at = datetime.datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc) + \
        datetime.timedelta(seconds=HEALTHY_FOR)
    cluster.wait_until(lambda: datetime.datetime.now(datetime.timezone.utc) >= lift_at, HEALTHY_FOR + 30,
                       "the healthy period written on the rule to pass")
    lifted, after = run_tasks(cluster, tmp_path, (args, False), (args, False),
                              module="dra.admin.dra_device_remediation")
    assert lifted["changed"] and lifted["lifted"] == [f"{REMEDY_DRIVER}/{REMEDY_POOL}/dev-0"], lifted
    assert lifted["diff"]["before"][REMEDY_RULE]["taint"]["key"] == "dra.admin/unhealthy"
    assert after["changed"] is False and after["actions"] == [], after
    left = dict((r["metadata"]["name"], r["metadata"]["resourceVersion"]) for r in rules(cluster))
    assert left == others, (left, others)
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    cluster.kubectl("delete", f"deviceclasses.{api}.resource.k8s.io", REMEDY_DRIVER)
    cluster.kubectl("delete", "devicetaintrules.resource.k8s.io", "foreign-dev-1", maint["name"])
    cluster.kubectl("delete", f"resourceslices.{api}.resource.k8s.io", f"{REMEDY_DRIVER}-{REMEDY_POOL}".replace(".", "-"))


GONE_DRIVER = "gone.example.com"
GONE_NS = "gone-driver"
GONE_EXCLUDED = "it.example.com/no-gone-driver"


def gone_driver_daemonset():
    """The driver's DaemonSet as role dra.admin.driver labels it (dra.admin/driver), kept off nodes labelled
    GONE_EXCLUDED; a KWOK node "runs" its pod (and reports it Ready)."""
    labels = {"app": "gone-driver"}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "gone-driver", "namespace": GONE_NS, "labels": {"dra.admin/driver": GONE_DRIVER}},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": GONE_EXCLUDED, "operator": "DoesNotExist"}]}]}}},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "plugin", "image": "registry.invalid/driver:none"}]}}}}


def gone_driver_pods(cluster, node):
    """The driver's pods on the node that are Ready and not being deleted."""
    pods = cluster.get_json("pods", "-n", GONE_NS, "--field-selector", f"spec.nodeName={node}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]


def test_remediation_keeps_new_allocations_off_a_gone_drivers_devices_until_it_is_back(taint_cluster, tmp_path):
    """kubernetes#141912: a driver's slices outlive its kubelet plugin (here: its DaemonSet's pod leaves the node,
    and no kubelet wipes the slices). Only with dead_drivers, the remediation names the driver gone from the node
    and takes its devices out of service NoSchedule (a pod that wants one stays Unschedulable); once the pod is back
    and Ready the rules are lifted (healthy_for 0) and the waiting pod gets its device."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "dead-driver"
    node = first_node_and_namespace(cluster, ns)
    cluster.kubectl("create", "namespace", GONE_NS)
    cluster.apply([gone_driver_daemonset(), device_class(api, GONE_DRIVER),
                   remedy_slice(api, node, tainted=False, driver=GONE_DRIVER)])
    cluster.wait_until(lambda: gone_driver_pods(cluster, node), 90, f"the driver's pod Ready on {node}")
    ids = [f"{GONE_DRIVER}/{REMEDY_POOL}/dev-{i}" for i in (0, 1)]
    args = {"healthy_for": 0, "driver": GONE_DRIVER, "dead_drivers": True, "effect": "NoExecute"}
    (present,) = run_tasks(cluster, tmp_path, (args, True), module="dra.admin.dra_device_remediation")
    assert present["drivers_gone"] == [] and present["tainted"] == [], present
    assert present["sources"]["driver_pods"]["available"] is True

    cluster.kubectl("label", "node", node, f"{GONE_EXCLUDED}=true")
    try:
        cluster.wait_until(lambda: not cluster.get_json("pods", "-n", GONE_NS)["items"], 90,
                           f"the driver's pod gone from {node}")
        assert cluster.get_json(f"resourceslices.{api}.resource.k8s.io", "--field-selector",
                                f"spec.driver={GONE_DRIVER}")["items"], "the slice went with the pod"
        plain, checked = run_tasks(cluster, tmp_path, (dict(args, dead_drivers=False), True), (args, True),
                                   module="dra.admin.dra_device_remediation")
        assert plain["tainted"] == [] and "drivers_gone" not in plain, plain  # opt-in
        assert checked["tainted"] == ids and checked["changed"] is True, checked
        (entry,) = checked["drivers_gone"]
        assert (entry["driver"], entry["node"], entry["daemonsets"]) == (GONE_DRIVER, node, [f"{GONE_NS}/gone-driver"])
        assert not [r for r in rules(cluster) if GONE_DRIVER in json.dumps(r["spec"])], "check mode wrote a rule"

        first, again = run_tasks(cluster, tmp_path, (args, False), (args, False),
                                 module="dra.admin.dra_device_remediation")
        assert first["changed"] and first["tainted"] == ids, first
        assert again["changed"] is False and again["kept"] == ids, again
        ours = [r for r in rules(cluster) if r["spec"]["deviceSelector"].get("driver") == GONE_DRIVER]
        assert sorted(r["spec"]["deviceSelector"]["device"] for r in ours) == ["dev-0", "dev-1"]
        for rule in ours:  # NoSchedule whatever effect is asked for unhealthy devices
            assert rule["spec"]["taint"] == dict(rule["spec"]["taint"], key="dra.admin/unhealthy", effect="NoSchedule")
            assert "no pod of its DaemonSet %s/gone-driver runs there" % GONE_NS in \
                rule["metadata"]["annotations"]["dra.admin/reason"]
        cluster.apply([claim(api, ns, "wants", device_class=GONE_DRIVER),
                       pod(ns, "user", claim_name="wants", node=node, grace=1)])
        cluster.wait_until(lambda: unschedulable(cluster, ns, "user"), 90, "pod user Unschedulable")
    finally:
        cluster.kubectl("label", "node", node, f"{GONE_EXCLUDED}-")
    cluster.wait_until(lambda: gone_driver_pods(cluster, node), 90, f"the driver's pod Ready on {node} again")
    (back,) = run_tasks(cluster, tmp_path, (args, False), module="dra.admin.dra_device_remediation")
    assert back["drivers_gone"] == [] and back["lifted"] == ids and back["changed"], back
    assert not [r for r in rules(cluster) if r["spec"]["deviceSelector"].get("driver") == GONE_DRIVER]
    cluster.wait_until(lambda: pod_phase(cluster, ns, "user") == "Running", 90, "pod user Running on its device")
    cluster.kubectl("delete", "namespace", ns, GONE_NS, "--wait=false")
    cluster.kubectl("delete", f"deviceclasses.{api}.resource.k8s.io", GONE_DRIVER)
    cluster.kubectl("delete", f"resourceslices.{api}.resource.k8s.io", f"{GONE_DRIVER}-{REMEDY_POOL}".replace(".", "-"))


# ---- the role's waits, phase by phase -----------------------------------------------------------

PROGRESS_DRIVER = "progress.example.com"
PROGRESS_POOL = "shelf"
PROGRESS_TOLERATION = 6
# What Ansible adds to a registered result.
TASK_FIELDS = ("invocation", "attempts", "failed", "msg", "changed_when_result", "failed_when_result")


def role_results(cluster, tmp_path, tasks_from, role_vars, keep, verbose=False):
    """Role device_maintenance (entry point tasks_from) in a playbook that keeps the registered results named in
    `keep` ({key: variable}); (the run, {key: result})."""
    out = tmp_path / f"out-{time.monotonic_ns()}.json"
    kept = ", ".join(f"'{k}': {v} | default(none)" for k, v in keep.items())
    playbook = tmp_path / f"role-{time.monotonic_ns()}.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: The role\n      ansible.builtin.include_role:\n        name: dra.admin.device_maintenance\n"
        f"        tasks_from: {tasks_from}\n"
        "    - name: Keep the registered results\n      ansible.builtin.copy:\n"
        f"        content: \"{{{{ {{{kept}}} | to_json }}}}\"\n"
        f"        dest: {out}\n")
    vars_file = tmp_path / f"vars-{time.monotonic_ns()}.json"
    vars_file.write_text(json.dumps(role_vars))
    run = cluster.run_playbook(str(playbook), "-e", f"@{vars_file}", *(["-vvv"] if verbose else []),
                               env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    return run, json.loads(out.read_text())


def retry_rounds(run, task_name):
    """Each round's result of an until-loop, from -vvv: "FAILED - RETRYING: [host]: name (N retries left).Result
    was: {..}"."""
    chunks = [chunk for chunk in run.stdout.split("FAILED - RETRYING: ")[1:] if task_name in chunk.split("\n", 1)[0]]
    return [json.JSONDecoder().raw_decode(chunk.split("Result was: ", 1)[1])[0] for chunk in chunks]


def same_outcome(result):
    """What one call and the role's phases must agree on (times, uids and the request count aside)."""
    rule = result["rule"]
    out = dict((k, v) for k, v in result.items()
               if k not in ("rule", "affected_claims", "claims", "api_requests", "diff") + TASK_FIELDS)
    out["rule"] = dict((k, rule[k]) for k in ("name", "labels", "annotations", "device_selector", "operation",
                                              "managed", "generation"))
    out["rule"]["effect"] = rule["taint"]["effect"]
    out["rule"]["done"] = rule["condition"]["current"] and not rule["condition"]["eviction_in_progress"]
    return out


def test_role_waits_for_the_eviction_naming_the_pods_still_to_go(taint_cluster, tmp_path):
    """Role device_maintenance, state tainted, NoExecute: once in one module call (dra_device_maintenance_progress
    false), once phase by phase (the default): the write, then an until-loop whose rounds name the pods still to
    be evicted and the seconds so far; the role's result is the one call's. A second run changes nothing."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "device-progress"
    node = first_node_and_namespace(cluster, ns)
    cluster.apply([device_class(api, PROGRESS_DRIVER),
                   resource_slice(api, PROGRESS_DRIVER, PROGRESS_POOL, ["dev-0", "dev-1"], nodeName=node)])
    pods = [f"{ns}/p1", f"{ns}/p2", f"{ns}/t"]
    role_vars = {"dra_device_maintenance_driver": PROGRESS_DRIVER, "dra_device_maintenance_pool": PROGRESS_POOL,
                 "dra_device_maintenance_state": "tainted", "dra_device_maintenance_effect": "NoExecute",
                 "dra_device_maintenance_wait_timeout": 120, "dra_device_maintenance_poll_interval": 0.5}
    keep = {"result": "dra_device_maintenance_result", "step": "dra_device_maintenance_step",
            "wait": "dra_device_maintenance_wait"}

    def workload():
        """Two pods share a claim; one claim tolerates the taint for PROGRESS_TOLERATION seconds."""
        cluster.apply([claim(api, ns, "held", device_class=PROGRESS_DRIVER),
                       pod(ns, "p1", claim_name="held", node=node, grace=1),
                       pod(ns, "p2", claim_name="held", node=node, grace=1),
                       tolerating_claim(api, ns, "slow", PROGRESS_TOLERATION, PROGRESS_DRIVER),
                       pod(ns, "t", claim_name="slow", node=node, grace=1)])
        for name in ("p1", "p2", "t"):
            cluster.wait_until(lambda n=name: pod_phase(cluster, ns, n) == "Running", 90, f"pod {name} Running")

    # One call.
    workload()
    run, single = role_results(cluster, tmp_path, "main", dict(role_vars, dra_device_maintenance_progress=False), keep)
    one = single["result"]
    assert one["changed"] is True and one["evicted"] == pods and one["still_holding"] == [], one
    assert single["step"].get("skipped") and single["wait"].get("skipped")
    lifted = cluster.run_role("dra.admin.device_maintenance", tmp_path,
                              dict(role_vars, dra_device_maintenance_state="absent"))
    assert lifted.returncode == 0 and recap(lifted)["changed"] == 1, lifted.stdout[-4000:]
    cluster.kubectl("delete", f"resourceclaims.{api}.resource.k8s.io", "-n", ns, "held", "slow", "--wait=true")

    # Phase by phase, the same workload again.
    workload()
    run, got = role_results(cluster, tmp_path, "main", role_vars, keep, verbose=True)
    step, waited, result = got["step"], got["wait"], got["result"]
    assert step["changed"] is True and step["waiting_for"] == "eviction_done" and step["pending"] == pods, step
    assert step["elapsed"] >= 0 and step["started"] > 0
    rounds = retry_rounds(run, "Wait until the pods using the devices are evicted")
    assert rounds, run.stdout[-6000:]
    assert all(r["waiting_for"] == "eviction_done" and r["pending"] for r in rounds)
    assert f"{ns}/t" in rounds[0]["pending"] and set(rounds[0]["pending"]) <= set(pods) | {
        f"DeviceTaintRule/{step['name']}"}
    assert "waiting for the pods using the devices to be evicted" in rounds[0]["progress"]
    assert [r["elapsed"] for r in rounds] == sorted(r["elapsed"] for r in rounds)
    assert rounds[-1]["elapsed"] >= PROGRESS_TOLERATION - 1  # t tolerates the taint that long
    assert waited["waiting_for"] is None and waited["pending"] == [] and waited["attempts"] == len(rounds) + 1
    assert waited["changed"] is False
    # The role's result is the one call's.
    assert result["evicted"] == pods and result["still_holding"] == [] and result["changed"] is True
    assert same_outcome(result) == same_outcome(one)
    assert set(result) - set(TASK_FIELDS) == set(one) - set(TASK_FIELDS)
    assert all(pod_phase(cluster, ns, n) is None for n in ("p1", "p2", "t"))

    # Again: nothing to change, nothing to wait for (only the test's own copy task changes something).
    again, second = role_results(cluster, tmp_path, "main", role_vars, keep)
    assert second["result"]["changed"] is False and second["result"]["evicted"] == []
    assert second["step"]["waiting_for"] is None and second["wait"].get("skipped"), second
    assert re.search(r"localhost\s+: ok=\d+\s+changed=1\s", again.stdout), again.stdout[-2000:]
    # Check mode: nothing written, nothing waited for.
    checked = cluster.run_role("dra.admin.device_maintenance", tmp_path, role_vars, check=True)
    assert checked.returncode == 0 and recap(checked)["changed"] == 0, checked.stdout[-4000:]
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    cluster.run_role("dra.admin.device_maintenance", tmp_path, dict(role_vars, dra_device_maintenance_state="absent"))
    cluster.kubectl("delete", f"deviceclasses.{api}.resource.k8s.io", PROGRESS_DRIVER)
    cluster.kubectl("delete", f"resourceslices.{api}.resource.k8s.io",
                    f"{PROGRESS_DRIVER}-{PROGRESS_POOL}".replace(".", "-"))


REMEDY_EXEC_DRIVER = "remedy-exec.example.com"


def test_remediation_role_waits_for_the_noexecute_eviction_naming_the_pod(taint_cluster, tmp_path):
    """Role device_maintenance, entry point remediate, effect NoExecute: once in one module call, once phase by
    phase (the default): the rules written, then an until-loop whose rounds name the pod still using the unhealthy
    device and the seconds so far; the role's result is the one call's. A second run changes nothing."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "remediation-progress"
    node = first_node_and_namespace(cluster, ns)
    device = f"{REMEDY_EXEC_DRIVER}/{REMEDY_POOL}/dev-0"
    rule_name = "dra-admin-unhealthy-remedy-exec.example.com-rack-dev-0"
    user = f"{ns}/user"

    def workload():
        """A pod on dev-0 whose claim tolerates the remediation's taint for PROGRESS_TOLERATION seconds; then
        the driver reports dev-0 unhealthy."""
        cluster.apply([remedy_slice(api, node, False, REMEDY_EXEC_DRIVER)])
        obj = claim(api, ns, "on-dev-0", device_class=REMEDY_EXEC_DRIVER,
                    selector=f'device.attributes["{REMEDY_EXEC_DRIVER}"].index == 0')
        request = obj["spec"]["devices"]["requests"][0]
        request.get("exactly", request)["tolerations"] = [
            {"key": "dra.admin/unhealthy", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": PROGRESS_TOLERATION}]
        cluster.apply([obj, pod(ns, "user", claim_name="on-dev-0", node=node, grace=1)])
        cluster.wait_until(lambda: pod_phase(cluster, ns, "user") == "Running", 90, "pod user Running")
        cluster.apply([remedy_slice(api, node, True, REMEDY_EXEC_DRIVER)])

    cluster.apply([device_class(api, REMEDY_EXEC_DRIVER)])
    role_vars = {"dra_device_maintenance_remediate_effect": "NoExecute",
                 "dra_device_maintenance_remediate_driver": REMEDY_EXEC_DRIVER,
                 "dra_device_maintenance_remediate_healthy_for": 600,
                 "dra_device_maintenance_wait_timeout": 120, "dra_device_maintenance_poll_interval": 0.5}
    keep = {"result": "dra_device_maintenance_remediation", "step": "dra_device_maintenance_remediation_step",
            "wait": "dra_device_maintenance_remediation_wait"}

    # One call.
    workload()
    run, single = role_results(cluster, tmp_path, "remediate",
                               dict(role_vars, dra_device_maintenance_progress=False), keep)
    one = single["result"]
    assert one["changed"] is True and one["tainted"] == [device], one
    assert one["actions"][0]["evicted"] == [user] and one["actions"][0]["still_holding"] == [], one["actions"]
    assert single["step"].get("skipped") and single["wait"].get("skipped")
    cluster.kubectl("delete", "devicetaintrules.resource.k8s.io", rule_name, "--wait=true")
    cluster.kubectl("delete", f"resourceclaims.{api}.resource.k8s.io", "-n", ns, "on-dev-0", "--wait=true")

    # Phase by phase, the same again.
    workload()
    run, got = role_results(cluster, tmp_path, "remediate", role_vars, keep, verbose=True)
    step, waited, result = got["step"], got["wait"], got["result"]
    assert step["changed"] is True and step["waiting_for"] == "eviction_done" and step["pending"] == [user], step
    assert step["holding"] == {device: [user]}
    rounds = retry_rounds(run, "Wait until the pods using the tainted devices are evicted")
    assert rounds, run.stdout[-6000:]
    assert all(r["waiting_for"] == "eviction_done" and r["pending"] for r in rounds)
    assert rounds[0]["pending"] in ([user], [f"DeviceTaintRule/{rule_name}"])
    assert user in rounds[0]["progress"] and rounds[0]["elapsed"] >= 0
    assert [r["elapsed"] for r in rounds] == sorted(r["elapsed"] for r in rounds)
    assert waited["waiting_for"] is None and waited["holding"] == {device: []}
    assert waited["attempts"] == len(rounds) + 1 and waited["changed"] is False
    # The role's result is the one call's (its time and the health report's counts aside).
    assert result["actions"] == one["actions"], (result["actions"], one["actions"])
    volatile = ("now", "health_summary", "api_requests", "diff") + TASK_FIELDS
    assert dict((k, v) for k, v in result.items() if k not in volatile) == \
        dict((k, v) for k, v in one.items() if k not in volatile)
    assert pod_phase(cluster, ns, "user") is None

    # Again: nothing to change, nothing to wait for (only the test's own copy task changes something).
    again, second = role_results(cluster, tmp_path, "remediate", role_vars, keep)
    assert second["result"]["changed"] is False and second["result"]["kept"] == [device]
    assert second["step"]["waiting_for"] is None and second["wait"].get("skipped"), second
    assert re.search(r"localhost\s+: ok=\d+\s+changed=1\s", again.stdout), again.stdout[-2000:]
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    cluster.kubectl("delete", "devicetaintrules.resource.k8s.io", rule_name)
    cluster.kubectl("delete", f"deviceclasses.{api}.resource.k8s.io", REMEDY_EXEC_DRIVER)
    cluster.kubectl("delete", f"resourceslices.{api}.resource.k8s.io",
                    f"{REMEDY_EXEC_DRIVER}-{REMEDY_POOL}".replace(".", "-"))


PREVIEW_DRIVER = "preview.example.com"


def claim_deployment(api, namespace, name, count, selector=None):
    """A Deployment of one pod whose claim template asks for `count` devices of the test's own driver."""
    body = {"deviceClassName": PREVIEW_DRIVER, "allocationMode": "ExactCount", "count": count}
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    request = dict(name="gpu", **body) if api == "v1beta1" else {"name": "gpu", "exactly": body}
    template = {"apiVersion": f"resource.k8s.io/{api}", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [request]}}}}
    spec = pod(namespace, name, template=name, grace=1)["spec"]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}
    return [template, deployment]


def preview_devices(api, node):
    """The test's own 8 devices on the node (index 0-7), so that other tests' claims do not matter."""
    devices = [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(8)]
    if api == "v1beta1":
        devices = [{"name": d.pop("name"), "basic": d} for d in devices]
    return [{"apiVersion": f"resource.k8s.io/{api}", "kind": "ResourceSlice", "metadata": {"name": "taint-preview"},
             "spec": {"driver": PREVIEW_DRIVER, "nodeName": node, "devices": devices,
                      "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}},
            device_class(api, PREVIEW_DRIVER)]


def test_dry_run_preview_says_whether_the_evicted_workloads_find_devices_again(taint_cluster, tmp_path):
    """8 devices of the test's own driver on the node: `pinned` holds gpu-3 (its selector wants index 3), `six` holds
    six others, one is free. Tainting gpu-3 would leave `pinned` without a device; tainting one of `six`'s would not
    (its six come back, less the tainted one, plus the free one). The dry run writes nothing either way."""
    cluster = taint_cluster
    api = cluster.resource_version
    ns = "taint-preview"
    node = first_node_and_namespace(cluster, ns)
    cluster.apply(preview_devices(api, node))
    try:
        cluster.apply(claim_deployment(api, ns, "pinned", 1, f'device.attributes["{PREVIEW_DRIVER}"].index == 3')
                      + claim_deployment(api, ns, "six", 6))

        def allocated():
            claims = cluster.get_json(f"resourceclaims.{api}.resource.k8s.io", "-n", ns)["items"]
            held = {}
            for c in claims:
                for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
                    held.setdefault(c["metadata"]["name"].split("-")[0], []).append(r)
            return held if len(held.get("pinned", [])) == 1 and len(held.get("six", [])) == 6 else None
        held = cluster.wait_until(allocated, 180, "both workloads allocated")
        base = {"state": "dry_run", "driver": PREVIEW_DRIVER, "pool": node, "preview": True}
        pinned, six = run_tasks(cluster, tmp_path, (dict(base, device="gpu-3"), False),
                                (dict(base, device=held["six"][0]["device"]), False))
        for result in (pinned, six):
            assert not result.get("failed") and result["changed"] is False, result
        (workload,) = pinned["preview"]["workloads"]
        assert workload["pod"].startswith(f"{ns}/pinned-") and workload["verdict"] == "does_not_fit", workload
        assert pinned["preview"]["would_stay_pending"] == [workload["pod"]]
        assert workload["requests"][0]["excluded"].get("tainted") == 1, workload["requests"]
        (workload,) = six["preview"]["workloads"]
        assert workload["pod"].startswith(f"{ns}/six-") and workload["verdict"] == "fits", workload
        assert six["preview"]["would_stay_pending"] == []
        assert rules(cluster) == []
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False)
        cluster.kubectl("delete", f"resourceslices.{api}.resource.k8s.io", "taint-preview", "--ignore-not-found",
                        check=False)
        cluster.kubectl("delete", f"deviceclasses.{api}.resource.k8s.io", PREVIEW_DRIVER, "--ignore-not-found",
                        check=False)
