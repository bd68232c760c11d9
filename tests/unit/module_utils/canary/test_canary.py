"""The canary's pure logic on objects recorded from the real kind clusters (fixtures/canary/kind-<release>.json:
Kubernetes v1.37.2 with resource.k8s.io/v1 and v1.33.13 with v1beta2, two workers with 8 devices each of the
example driver, a user's pod holding one device on the first worker; `progress`: a canary probe's pod and claim
recorded at each change while it ran on the second worker, through deletion; `events`: the namespace's events).
"""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.canary import canary
from ansible_collections.dra.admin.plugins.module_utils.kube.prometheus_text import parse_text
from conftest import FIXTURES

RELEASES = ["v1.37.2", "v1.33.13"]
DRIVER = "gpu.example.com"
TIMEOUTS = {"allocation": 60, "prepare": 180, "unprepare": 120}
EXPECT = {"env": dict(canary.DEFAULT_EXPECT_ENV), "paths": ["/dev/null"]}


def recorded(release):
    with open(os.path.join(FIXTURES, "canary", "kind-%s.json" % release)) as handle:
        return json.load(handle)


def nodes_of(data):
    return dict((n["metadata"]["name"], n) for n in data["nodes"])


def plan(data, slices=None, claims=None, device_classes=None, nodes=None, **kwargs):
    return canary.plan_probes(data["slices"] if slices is None else slices,
                              data["claims"] if claims is None else claims,
                              data["deviceclasses"] if device_classes is None else device_classes,
                              nodes_of(data) if nodes is None else nodes, data["version"], **kwargs)


def workers(data):
    return sorted(n for n in nodes_of(data) if "worker" in n)


def user_device(data):
    (result,) = data["claims"][0]["status"]["allocation"]["devices"]["results"]
    return result["pool"], result["device"]


@pytest.mark.parametrize("release", RELEASES)
def test_each_worker_pool_gets_one_free_device_pinned_to_its_node(release):
    data = recorded(release)
    out = plan(data)
    assert out["skipped"] == []
    assert [p["pool"] for p in out["probes"]] == workers(data)
    pool, taken = user_device(data)
    for probe in out["probes"]:
        assert probe["node"] == probe["pool"] and probe["device_class"] == DRIVER and probe["unique"] is True
        # The user's pod holds one device of its pool: that one is neither counted free nor chosen.
        assert probe["free"] == (7 if probe["pool"] == pool else 8) and probe["total"] == 8
        assert probe["device"] != taken or probe["pool"] != pool
        # `index` is the first attribute (by name) no other device on the node has; versions are not compared.
        index = int(probe["device"].split("-")[1])
        assert probe["selector"] == 'device.driver == "%s" && device.attributes["%s"].index == %d' % (
            DRIVER, DRIVER, index)
    assert out["probes"][0]["device"] == "gpu-1" and out["probes"][1]["device"] == "gpu-0"


@pytest.mark.parametrize("release", RELEASES)
def test_a_pool_with_no_free_device_is_skipped_never_forced(release):
    data = recorded(release)
    pool, _taken = user_device(data)
    claims = []
    for index in range(8):
        claim = copy.deepcopy(data["claims"][0])
        claim["metadata"]["name"] += "-%d" % index
        claim["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-%d" % index
        claims.append(claim)
    out = plan(data, claims=claims)
    assert [p["pool"] for p in out["probes"]] == [w for w in workers(data) if w != pool]
    (skipped,) = out["skipped"]
    assert skipped["pool"] == pool and skipped["free"] == 0 and skipped["total"] == 8
    assert skipped["reason"].startswith("no free device (8 devices, 0 tainted")


@pytest.mark.parametrize("release", RELEASES)
def test_tainted_devices_are_not_chosen_and_a_claim_tolerates_none(release):
    data = recorded(release)
    slices = copy.deepcopy(data["slices"])
    for item in slices:
        for device in item["spec"]["devices"][:3]:
            canary.device_fields(device)["taints"] = [{"key": "example.com/broken", "effect": "NoSchedule"}]
    out = plan(data, slices=slices)
    assert [p["device"] for p in out["probes"]] == ["gpu-3", "gpu-3"]
    assert all(p["tainted"] == 3 for p in out["probes"])
    template = canary.claim_template(data["resource_api_version"], "t", "ns", "run", out["probes"][0])
    assert "tolerations" not in json.dumps(template)


@pytest.mark.parametrize("version", ["v1.37.0", "v1.37.2"])
def test_a_device_taint_rule_without_selector_keeps_every_device_off_up_to_1_37_0_and_none_from_1_37_1(version):
    """kube-scheduler's tracker reads a rule without deviceSelector as selecting every device up to 1.37.0 and
    none from 1.37.1 (kube.taint_rules.allocator_reader); the canary probes what the scheduler would allocate."""
    data = dict(recorded("v1.37.2"), version=version)
    rules = [{"metadata": {"name": "all"}, "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}},
             {"metadata": {"name": "first"}, "spec": {"deviceSelector": {"device": "gpu-0"},
                                                      "taint": {"key": "k", "effect": "NoSchedule"}}}]
    out = plan(data, taint_rules=rules)
    if version == "v1.37.0":
        assert out["probes"] == [] and [s["pool"] for s in out["skipped"]] == workers(data)
        assert all(s["reason"].startswith("no free device (8 devices, 8 tainted") for s in out["skipped"])
        return
    assert out["skipped"] == [] and [p["pool"] for p in out["probes"]] == workers(data)
    assert all(p["tainted"] == 1 and p["device"] != "gpu-0" for p in out["probes"])


@pytest.mark.parametrize("release", RELEASES)
def test_a_cordoned_node_or_a_driver_without_a_device_class_is_skipped(release):
    data = recorded(release)
    nodes = copy.deepcopy(nodes_of(data))
    first = workers(data)[0]
    nodes[first]["spec"]["unschedulable"] = True
    out = plan(data, nodes=nodes)
    assert [(s["pool"], s["reason"]) for s in out["skipped"]] == [(first, "its node %s is cordoned" % first)]
    out = plan(data, device_classes=[])
    assert len(out["skipped"]) == 2 and not out["probes"]
    assert 'no DeviceClass selects only device.driver == "%s"' % DRIVER in out["skipped"][0]["reason"]
    out = plan(data, device_classes=[], classes={DRIVER: "mine"})
    assert [p["device_class"] for p in out["probes"]] == ["mine", "mine"]


@pytest.mark.parametrize("release", RELEASES)
def test_the_pools_of_named_nodes_are_probed_even_cordoned_and_their_pod_tolerates_the_cordon(release):
    data = recorded(release)
    nodes = copy.deepcopy(nodes_of(data))
    first, second = workers(data)
    nodes[first]["spec"]["unschedulable"] = True
    out = plan(data, nodes=nodes, on_nodes=[first])
    assert [(p["pool"], p["node"], p["cordoned"]) for p in out["probes"]] == [(first, first, True)]
    assert out["skipped"] == []  # the other node's pools are not asked for
    pod = canary.canary_pod("p", "ns", "r", out["probes"][0], "img", tolerations=[{"key": "k", "operator": "Exists"}])
    assert pod["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}, canary.CORDON_TOLERATION]
    # A node not named keeps its cordon respected; a probe of an uncordoned node tolerates nothing more.
    out = plan(data, nodes=nodes, on_nodes=[second])
    assert [(p["pool"], p["cordoned"]) for p in out["probes"]] == [(second, False)]
    assert "tolerations" not in canary.canary_pod("p", "ns", "r", out["probes"][0], "img")["spec"]
    out = plan(data, nodes=nodes)
    assert [(s["pool"], s["reason"]) for s in out["skipped"]] == [(first, "its node %s is cordoned" % first)]


@pytest.mark.parametrize("release", RELEASES)
def test_drivers_and_pools_narrow_the_probes_and_unknown_names_are_input_errors(release):
    data = recorded(release)
    second = workers(data)[1]
    out = plan(data, pools=[second])
    assert [p["pool"] for p in out["probes"]] == [second]
    published = canary.published_pools(data["slices"])
    assert canary.wanted_pools(published, [DRIVER], [second]) == []
    out = plan(data, drivers=["net.example.com"])
    assert out == {"probes": [], "skipped": []}
    errors = canary.wanted_pools(published, ["net.example.com"], ["nowhere"])
    assert errors[0].startswith("drivers: net.example.com publishes no ResourceSlice pool")
    assert errors[1].startswith("pools: no pool nowhere of net.example.com (no pool is published)")
    # An unknown pool of a driver that publishes: the pool is named wrong, not the driver.
    (error,) = canary.wanted_pools(published, [DRIVER], ["nowhere"])
    assert error.startswith("pools: no pool nowhere of %s (its pools: " % DRIVER) and second in error
    assert "publishes no ResourceSlice pool" not in error


@pytest.mark.parametrize("release", RELEASES)
def test_a_device_class_asked_for_must_exist(release):
    data = recorded(release)
    existing = data["deviceclasses"][0]["metadata"]["name"]
    assert canary.device_class_errors(data["deviceclasses"], {DRIVER: existing}) == []
    assert canary.device_class_errors(data["deviceclasses"], None) == []
    (error,) = canary.device_class_errors(data["deviceclasses"], {DRIVER: "gpu-typo"})
    assert error.startswith("device_classes: DeviceClass gpu-typo (for driver %s) does not exist" % DRIVER)
    assert existing in error


def test_the_selector_falls_back_to_every_attribute_and_says_when_it_is_not_unique():
    same = {"model": {"string": "A"}, "index": {"int": 0}, "ok": {"bool": True}, "v": {"version": "1.0.0"}}
    selector, unique = canary.device_selector(DRIVER, same, [dict(same), {"model": {"string": "B"}}])
    assert unique is False
    assert selector == ('device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].index == 0 && '
                        'device.attributes["gpu.example.com"].model == "A" && '
                        'device.attributes["gpu.example.com"].ok == true')
    selector, unique = canary.device_selector(DRIVER, {"resource.kubernetes.io/pcieRoot": {"string": 'p"1'}}, [{}])
    assert unique is True and selector.endswith('device.attributes["resource.kubernetes.io"].pcieRoot == "p\\"1"')


@pytest.mark.parametrize("release", RELEASES)
def test_a_pool_not_bound_to_one_node_needs_an_attribute_only_its_device_has(release):
    data = recorded(release)
    slices = _all_nodes(data)
    for item in slices:
        for device in item["spec"]["devices"]:
            canary.device_fields(device)["attributes"].pop("uuid")
    out = plan(data, slices=slices)
    # Both pools have devices with the same index and model: nothing tells them apart, so neither is probed.
    assert out["probes"] == [] and len(out["skipped"]) == 2
    assert "no attribute tells device" in out["skipped"][0]["reason"]
    out = plan(data, slices=_all_nodes(data))
    assert [p["node"] for p in out["probes"]] == [None, None]
    assert all(".uuid == " in p["selector"] for p in out["probes"])
    assert "affinity" not in canary.canary_pod("p", "ns", "r", dict(out["probes"][0], pod="p"), "busybox")["spec"]


def _all_nodes(data):
    slices = copy.deepcopy(data["slices"])
    for item in slices:
        item["spec"].pop("nodeName")
        item["spec"]["allNodes"] = True
    return slices


@pytest.mark.parametrize("release", RELEASES)
def test_template_and_pod_as_the_served_version_wants_them(release):
    data = recorded(release)
    probe = dict(plan(data)["probes"][0], pod="dra-canary-abc-0")
    template = canary.claim_template(data["resource_api_version"], "dra-canary-abc-0", "ns", "abc", probe)
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["selectors"] == [{"cel": {"expression": probe["selector"]}}]
    assert request["exactly"]["deviceClassName"] == DRIVER and request["exactly"]["count"] == 1
    assert template["spec"]["metadata"]["labels"][canary.RUN_LABEL] == "abc"
    old = canary.claim_template("v1beta1", "t", "ns", "abc", probe)["spec"]["spec"]["devices"]["requests"][0]
    assert old["deviceClassName"] == DRIVER and "exactly" not in old
    pod = canary.canary_pod("dra-canary-abc-0", "ns", "abc", probe, "busybox", ["/dev/{device_env}"])
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]
    assert term == {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [probe["node"]]}]}
    assert "nodeName" not in pod["spec"] and pod["spec"]["restartPolicy"] == "Never"
    assert "'/dev/GPU_1'" in pod["spec"]["containers"][0]["command"][2]
    assert pod["spec"]["resourceClaims"] == [{"name": "device", "resourceClaimTemplateName": "dra-canary-abc-0"}]


def replay(data, start=0.0, probe=None, timeouts=None, expect=None):
    """Feed the recorded looks at the probe to `advance` in order; the pod counts as deleted (as the service
    deletes it) at the first look after the state asks for it."""
    probe = dict(probe or data["probe"])
    timeouts, expect = timeouts or TIMEOUTS, expect or EXPECT
    state = canary.new_state(start)
    for snap in data["progress"]:
        now = start + snap["t"]
        canary.advance(state, probe, snap["pod"], snap["claim"], now, timeouts, expect)
        if state["delete"] and state["deleted_at"] is None:
            state["deleted_at"] = state["since"] = now
    return state


@pytest.mark.parametrize("release", RELEASES)
def test_the_recorded_probe_passes_every_phase(release):
    data = recorded(release)
    state = replay(data)
    assert state["done"] is True
    result = canary.probe_result(data["probe"], state)
    assert result["ok"] is True and result["failed_phase"] is None
    assert list(result["phases"]) == list(canary.PHASES)
    assert all(p["ok"] and p["seconds"] >= 0 for p in result["phases"].values())
    assert result["allocated"] == {"driver": DRIVER, "pool": data["probe"]["pool"], "device": "gpu-0"}
    assert result["claim"].startswith("dra-canary-rec-0-device-")
    assert canary.failed_pools([result]) == []


@pytest.mark.parametrize("release", RELEASES)
def test_the_device_check_compares_the_claims_uid_and_the_paths(release):
    data = recorded(release)
    snap = [s for s in data["progress"] if (canary.container_state(s["pod"]) or {}).get("terminated")][0]
    message = canary.container_state(snap["pod"])["terminated"]["message"]
    values = dict(data["probe"], claim_uid=snap["claim"]["metadata"]["uid"], device_env="GPU_0")
    assert canary.device_check(message, values, canary.DEFAULT_EXPECT_ENV, ["/dev/null"]) == (True, [])
    ok, missing = canary.device_check(message, dict(values, claim_uid="other"), canary.DEFAULT_EXPECT_ENV, [])
    assert not ok and missing == ["GPU_DEVICE_GPU_0_RESOURCE_CLAIM=%s in the container, expected other"
                                  % snap["claim"]["metadata"]["uid"]]
    ok, missing = canary.device_check(message, values, {"NVIDIA_VISIBLE_DEVICES": ""}, ["/dev/nvidia{device}"])
    assert missing == ["no NVIDIA_VISIBLE_DEVICES in the container's environment", "no /dev/nvidiagpu-0 in the container"]
    state = replay(data, expect={"env": {"GPU_DEVICE_{device_env}": "{device}"}, "paths": ["/dev/kfd"]})
    result = canary.probe_result(data["probe"], state)
    assert result["failed_phase"] == "device" and result["phases"]["unprepare"]["ok"] is True
    assert result["phases"]["device"]["detail"] == "no GPU_DEVICE_GPU_0 in the container's environment; no /dev/kfd in " \
                                                   "the container"


@pytest.mark.parametrize("release", RELEASES)
def test_a_pod_stuck_in_container_creating_fails_prepare_naming_why(release):
    data = recorded(release)
    waiting = [s for s in data["progress"] if canary.container_state(s["pod"]).get("waiting")][0]
    probe = dict(data["probe"], pod="dra-canary-rec-0")
    state = canary.new_state(0.0)
    for now in (0.5, 5.0, 13.0):
        canary.advance(state, probe, waiting["pod"], waiting["claim"], now, dict(TIMEOUTS, prepare=12), EXPECT)
    assert state["delete"] is True and state["phase"] == "prepare"
    assert state["phases"]["prepare"] == {"ok": False, "seconds": 12.5,
                                          "detail": "the container did not start within 12s: ContainerCreating"}
    # Deleted; the pod stays while the kubelet cannot unprepare, then goes.
    state["deleted_at"] = state["since"] = 13.0
    canary.advance(state, probe, waiting["pod"], waiting["claim"], 20.0, TIMEOUTS, EXPECT)
    assert not state["done"]
    canary.advance(state, probe, None, None, 61.0, TIMEOUTS, EXPECT)
    result = canary.probe_result(probe, state)
    assert result["failed_phase"] == "prepare" and list(result["phases"]) == ["allocation", "prepare", "unprepare"]
    assert result["phases"]["unprepare"] == {"ok": True, "seconds": 48.0, "detail": ""}
    assert canary.failed_pools([result]) == ["%s/%s: prepare" % (DRIVER, probe["pool"])]


@pytest.mark.parametrize("release", RELEASES)
def test_no_allocation_and_a_claim_that_stays_fail_their_phases(release):
    data = recorded(release)
    probe = dict(data["probe"], pod="dra-canary-rec-0")
    pending = copy.deepcopy(data["progress"][0]["pod"])
    pending["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 1 cannot allocate all claims."}]}
    state = canary.new_state(0.0)
    canary.advance(state, probe, pending, None, 61.0, TIMEOUTS, EXPECT)
    assert state["phases"]["allocation"]["detail"] == (
        "no device allocated after 60s: not scheduled: 0/3 nodes are available: 1 cannot allocate all claims.")
    claim = copy.deepcopy(data["progress"][0]["claim"])
    claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state["deleted_at"] = state["since"] = 61.0
    canary.advance(state, probe, None, claim, 182.0, TIMEOUTS, EXPECT)
    assert state["done"] and state["phases"]["unprepare"]["ok"] is False
    assert state["phases"]["unprepare"]["detail"] == "still there 120s after the pod was deleted: claim %s (allocated, " \
                                                     "reserved for 1, being deleted)" % claim["metadata"]["name"]


@pytest.mark.parametrize("release", RELEASES)
def test_a_device_from_another_pool_fails_allocation(release):
    data = recorded(release)
    probe = dict(data["probe"], pool="elsewhere")
    state = canary.new_state(0.0)
    snap = data["progress"][0]
    canary.advance(state, probe, snap["pod"], snap["claim"], 1.0, TIMEOUTS, EXPECT)
    assert state["delete"] and state["phases"]["allocation"]["detail"] == (
        "the claim got device %s/%s/gpu-0, not one of pool elsewhere" % (DRIVER, data["probe"]["pool"]))


@pytest.mark.parametrize("release", RELEASES)
def test_metrics_text_per_driver_pool_and_phase(release):
    data = recorded(release)
    passed = canary.probe_result(data["probe"], replay(data))
    failed = dict(passed, pool="other", ok=False, failed_phase="prepare",
                  phases={"allocation": {"ok": True, "seconds": 0.5, "detail": ""},
                          "prepare": {"ok": False, "seconds": 12.0, "detail": "x"},
                          "unprepare": {"ok": True, "seconds": 40.0, "detail": ""}})
    skipped = [{"driver": DRIVER, "pool": "full", "reason": "no free device"}]
    text = canary.metrics_text([passed, failed], skipped, 1700000000.4)
    found = dict(((s.name, tuple(sorted(s.labels.items()))), s.value) for s in parse_text(text).samples)

    def value(name, **labels):
        return found.get((name, tuple(sorted(labels.items()))))
    pool = data["probe"]["pool"]
    for phase in canary.PHASES:
        assert value(canary.METRIC_SUCCESS, driver=DRIVER, pool=pool, phase=phase) == 1
        assert value(canary.METRIC_PHASE_SECONDS, driver=DRIVER, pool=pool, phase=phase) == \
            passed["phases"][phase]["seconds"]
    assert value(canary.METRIC_SUCCESS, driver=DRIVER, pool="other", phase="prepare") == 0
    assert value(canary.METRIC_SUCCESS, driver=DRIVER, pool="other", phase="device") is None
    assert value(canary.METRIC_SKIPPED, driver=DRIVER, pool="full") == 1
    assert value(canary.METRIC_LAST_RUN) == 1700000000
    assert "# TYPE %s gauge" % canary.METRIC_PHASE_SECONDS in text
    lines = canary.summary_lines([passed, failed], skipped)
    assert lines[1].startswith("%s/other (device gpu-0 on %s): FAILED - allocation 0.5s, prepare 12.0s FAILED" % (
        DRIVER, data["probe"]["node"]))
    assert lines[2] == "%s/full: skipped, no free device" % DRIVER


def test_templates_name_only_known_placeholders():
    assert canary.template_errors("expect_env", ["GPU_{device_env}", "{claim_uid}"]) == []
    (error,) = canary.template_errors("expect_paths", ["/dev/{gpu}"])
    assert error.startswith("expect_paths: {gpu} in '/dev/{gpu}' is not a placeholder; use {driver}")
    assert canary.device_env("gpu-0.a") == "GPU_0_A"
    assert canary.latest_warning([{"type": "Normal", "reason": "Scheduled", "message": "m"}]) == ""
    assert canary.latest_warning([
        {"type": "Warning", "reason": "A", "message": "old", "lastTimestamp": "2026-01-01T00:00:00Z"},
        {"type": "Warning", "reason": "FailedPrepareDynamicResources", "message": "new",
         "lastTimestamp": "2026-01-01T00:00:05Z"}]) == "FailedPrepareDynamicResources: new"


@pytest.mark.parametrize("release", RELEASES)
def test_the_selector_matches_exactly_the_chosen_device_as_dra_cel_evaluates_it(release):
    """Each probe's selector, evaluated by the allocation explainer's CEL environment on every published device
    of the driver, selects the chosen device and, among the devices of its node, no other."""
    from ansible_collections.dra.admin.plugins.module_utils.kube.cel import Environment
    data = recorded(release)
    env = Environment(int(data["version"].split(".")[1]))
    for probe in plan(data)["probes"]:
        matched = []
        for item in data["slices"]:
            for device in item["spec"]["devices"]:
                activation = env.device_activation(DRIVER, canary.device_fields(device))
                if env.matches(probe["selector"], activation):
                    matched.append((item["spec"]["nodeName"], device["name"]))
        assert [name for node, name in matched if node == probe["node"]] == [probe["device"]]


# --- pools a user's pod waits for ----------------------------------------------------------------

def waiting_pod(name, claim_ref, node=None, phase="Pending", template=False):
    ref = {"name": "gpu"}
    status = {"phase": phase}
    if template:
        ref["resourceClaimTemplateName"] = "tmpl"
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim_ref}]
    else:
        ref["resourceClaimName"] = claim_ref
    spec = {"resourceClaims": [ref], "containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"namespace": "team", "name": name}, "spec": spec, "status": status}


def pending_claim(name, device_class, allocated=False):
    claim = {"metadata": {"namespace": "team", "name": name},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}
    if allocated:
        claim["status"] = {"allocation": {"devices": {"results": []}}}
    return claim


@pytest.mark.parametrize("release", RELEASES)
def test_a_pool_a_pending_pod_waits_for_is_skipped_naming_the_pod(release):
    data = recorded(release)
    claims = [pending_claim("wants-gpu", DRIVER), pending_claim("other", "no-such-class"),
              pending_claim("done", DRIVER, allocated=True)]
    pods = [waiting_pod("waits", "wants-gpu", template=True),
            waiting_pod("bound", "wants-gpu", node="somewhere"),     # on a node: not waiting for allocation
            waiting_pod("running", "wants-gpu", phase="Running"),
            waiting_pod("allocated", "done")]
    waiting = canary.waiting_pods(pods, claims, data["deviceclasses"])
    assert waiting == {DRIVER: ["team/waits"]}
    free = plan(data)
    assert free["probes"], "the recording has pools with a free device"
    out = plan(data, waiting=waiting)
    assert out["probes"] == []
    skipped = [s for s in out["skipped"] if s.get("waiting_pods")]
    assert sorted(s["pool"] for s in skipped) == sorted(p["pool"] for p in free["probes"])
    assert all(s["waiting_pods"] == ["team/waits"] and "team/waits" in s["reason"] for s in skipped)
    assert "skip_waited_pools: false" in skipped[0]["reason"]


def test_a_claim_whose_driver_cannot_be_told_may_wait_for_any_pool():
    selector = {"cel": {"expression": "device.attributes['x'].y == 1"}}
    classes = [{"metadata": {"name": "any-gpu"}, "spec": {"selectors": [selector]}}]
    for class_name in ("any-gpu", "missing-class"):
        waiting = canary.waiting_pods([waiting_pod("p", "c")], [pending_claim("c", class_name)], classes)
        assert waiting == {canary.ANY_DRIVER: ["team/p"]}
        assert canary.waited_for(waiting, "nic.example.com") == ["team/p"]
    assert canary.waited_for(None, DRIVER) == [] and canary.waited_for({"x.example.com": ["a/b"]}, DRIVER) == []


def test_every_way_a_pod_asks_for_devices_makes_it_wait():
    """A claim made from a template, a claim by name, an extended resource a DeviceClass backs (before the
    scheduler made its claim) and the claim made for it: all wait while not allocated."""
    gpu_class = {"metadata": {"name": DRIVER, "creationTimestamp": "2026-01-01T00:00:00Z"},
                 "spec": {"extendedResourceName": "example.com/gpu",
                          "selectors": [{"cel": {"expression": 'device.driver == "%s"' % DRIVER}}]}}
    extended = {"metadata": {"namespace": "team", "name": "ext"}, "status": {"phase": "Pending"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}}
    implicit = {"metadata": {"namespace": "team", "name": "implicit"}, "status": {"phase": "Pending"},
                "spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"deviceclass.resource.kubernetes.io/%s" % DRIVER: "2"}}}]}}
    zero = {"metadata": {"namespace": "team", "name": "zero"}, "status": {"phase": "Pending"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "0"}}}]}}
    claimed = {"metadata": {"namespace": "team", "name": "claimed"}, "spec": extended["spec"],
               "status": {"phase": "Pending", "extendedResourceClaimStatus": {"resourceClaimName": "made"}}}
    pods = [waiting_pod("tmpl", "from-template", template=True), waiting_pod("named", "by-name"), extended,
            implicit, zero, claimed]
    claims = [pending_claim("from-template", DRIVER), pending_claim("by-name", DRIVER),
              pending_claim("made", DRIVER, allocated=True)]
    waiting = canary.waiting_pods(pods, claims, [gpu_class])
    assert waiting == {DRIVER: ["team/ext", "team/implicit", "team/named", "team/tmpl"]}
