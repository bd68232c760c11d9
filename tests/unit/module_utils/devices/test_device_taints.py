"""Device taints: the catalog's rows, the pure logic, and the module's flow against a scripted API.

tests/unit/fixtures/recorded/device-taints-*-v1.36.3.json were written by
tests/integration/test_device_taints.py with DRA_IT_RECORD=<dir> (Kubernetes v1.36.3 with
DRADeviceTaintRules=true and resource.k8s.io/v1beta2): the namespace's claims and pods, the cluster's
slices and the DeviceTaintRules, at three moments:
dry-run             the rule with effect None and the controller's NoEffect report; pods a1 and a2 share
                    claim "shared", pod t's claim "tolerant" tolerates the taint for 20 s, pod o uses a
                    GPU of the example driver on the same node
noexecute-pending   NoExecute: a1 and a2 evicted, t still running (PodsPendingEviction)
noexecute-done      t evicted too (Completed)
"""
import copy
import re
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.devices import taints as dt
from ansible_collections.dra.admin.plugins.module_utils.kube import taint_rules
from ansible_collections.dra.admin.plugins.module_utils.releases import catalog
from ansible_collections.dra.admin.plugins.module_utils.access.api import DraApi, DraApiError
from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import (
    DRAIN_VALUE, DRAINED_NODE_ANNOTATION, DeviceTaint, DeviceTaintFailure, drain_devices, rule_path,
)
from conftest import FIXTURES, ROOT, recorded_by_kind

REC = os.path.join(FIXTURES, "recorded")
NS = "device-maintenance"
DRIVER = "maint.example.com"
POOL = "tray"


def recorded(moment):
    return recorded_by_kind("device-taints-%s-v1.36.3.json" % moment)


# ---- the catalog ------------------------------------------------------------------------------

def test_catalog_rows_for_device_taint_rules():
    # Checked against kube_features.go and storage_resource.go of k8s.io/kubernetes v1.33.13-v1.37.2 and the
    # --help of kube-apiserver v1.33.13 (DRADeviceTaints ALPHA false), v1.35.4 (both ALPHA false) and
    # v1.36.3 (DRADeviceTaintRules BETA false, DRADeviceTaints BETA true).
    rows = dict((minor, catalog.device_taint_rule_support("1.%d" % minor)) for minor in catalog.SUPPORTED_MINORS)
    assert [m for m, r in rows.items() if r["api_version"] is None] == [30, 31, 32]
    assert rows[33]["api_version"] == rows[34]["api_version"] == rows[35]["api_version"] == "v1alpha3"
    assert rows[33]["gates"] == {"DRADeviceTaints": True}  # DynamicResourceAllocation comes with DRA itself
    assert rows[35]["gates"] == {"DRADeviceTaints": True, "DRADeviceTaintRules": True}
    assert rows[36] == dict(rows[36], api_version="v1beta2", gates={"DRADeviceTaintRules": True},
                            runtime_config={"resource.k8s.io/v1beta2": "true"}, usable=True, default_on=False)
    assert rows[37] == dict(rows[37], api_version="v1", gates={}, runtime_config={}, default_on=True, usable=True)
    # v1.38.0-beta.0: both gates GA and locked on, the rule served in v1.
    assert rows[38] == dict(rows[38], api_version="v1", gates={}, runtime_config={}, default_on=True, usable=True)
    assert [m for m, r in rows.items() if r["usable"]] == [35, 36, 37, 38]
    assert rows[34]["selector_fields"] == ["deviceClassName", "driver", "pool", "device", "selectors"]
    assert rows[36]["selector_fields"] == ["driver", "pool", "device"]


@pytest.mark.parametrize("minor", [m for m in catalog.SUPPORTED_MINORS if m >= 33])
def test_device_taints_knob_writes_only_gates_the_release_knows_and_accepts(minor):
    version = "1.%d" % minor
    gates = catalog.device_taints_gates(version)
    assert all(catalog.gate_info(version, name) is not None for name in gates)
    assert catalog.validate_dra_gates(version, gates) == []
    settings = catalog.dra_settings(version, gates)
    support = catalog.device_taint_rule_support(version)
    for entry, value in support["runtime_config"].items():
        assert settings["runtime_config"][entry] == value


def test_device_taints_knob_refuses_releases_without_the_rule():
    with pytest.raises(catalog.VersionError) as err:
        catalog.device_taints_gates("v1.32.4")
    assert "first exists in 1.33" in str(err.value) and "dra_feature_gates_device_taints: false" in str(err.value)


def test_not_available_messages_name_version_and_switch():
    text = catalog.device_taint_rules_unavailable("v1.36.3")
    assert "Kubernetes v1.36.3" in text and "DRADeviceTaintRules=true" in text
    assert "--runtime-config=resource.k8s.io/v1beta2=true" in text and "dra_feature_gates_device_taints: true" in text
    text = catalog.device_taint_rules_unavailable("v1.33.13")
    assert "v1alpha3" in text and "without effect None" in text and "upgrade to 1.35" in text
    assert "runtime-config" in catalog.device_taint_rules_unavailable("1.37")


# ---- input --------------------------------------------------------------------------------------

def params(**kw):
    base = {"name": None, "driver": DRIVER, "pool": POOL, "device": None, "key": dt.DEFAULT_KEY, "value": "",
            "effect": dt.NO_EXECUTE, "labels": {}, "annotations": {}}
    base.update(kw)
    return base


@pytest.mark.parametrize("bad, words", [
    ({"driver": "Not_A_Driver"}, ["driver 'Not_A_Driver' must be a DNS subdomain"]),
    ({"driver": ""}, ["driver '' must be a DNS subdomain"]),
    ({"key": "bad key"}, ["key 'bad key'"]),
    ({"key": "-x/ok"}, ["prefix before '/'"]),
    ({"value": "v" * 64}, ["value", "at most 63"]),
    ({"effect": "Evict"}, ["effect 'Evict'", "None, NoSchedule, NoExecute"]),
    ({"name": "Bad_Name"}, ["name 'Bad_Name'"]),
    ({"labels": {dt.MANAGED_BY_LABEL: "me"}}, ["leave it out"]),
    ({"annotations": {"no spaces/please ": "x"}}, ["annotations key"]),
])
def test_bad_input_names_the_field(bad, words):
    errors = dt.input_errors(params(**bad))
    assert len(errors) == 1, errors
    for word in words:
        assert word in errors[0], errors[0]


def test_good_input_passes():
    assert dt.input_errors(params(device="dev-0", value="faulty", labels={"example.com/why": "ecc"})) == []


def test_which_options_a_state_requires_is_the_argument_spec_s():
    """driver with states tainted and dry_run, and pool with device: dra_device_taint's required_if and
    required_by (tests/unit/modules/test_option_relations.py), not this check."""
    assert dt.input_errors(params(driver=None, pool=None, device="gpu-3")) == []


def test_default_names_are_stable_and_valid():
    assert dt.default_rule_name(dt.selector("gpu.example.com", "node-1", "gpu-3")) == \
        "dra-admin-gpu.example.com-node-1-gpu-3"
    long_name = dt.default_rule_name(dt.selector("gpu.example.com", "P" * 300))
    assert len(long_name) <= 253 and dt.input_errors(params(name=long_name)) == []
    assert long_name == dt.default_rule_name(dt.selector("gpu.example.com", "P" * 300))
    assert long_name != dt.default_rule_name(dt.selector("gpu.example.com", "P" * 299 + "Q"))


# ---- the rule -----------------------------------------------------------------------------------

def test_built_rule_matches_what_the_server_keeps():
    server = recorded("dry-run")["DeviceTaintRule"][0]
    built = dt.build_rule("v1beta2", server["metadata"]["name"], dt.selector(DRIVER, POOL), dt.DEFAULT_KEY, "",
                          taint_rules.EFFECT_NONE)
    # timeAdded, status and the server's metadata are not ours; the rule was written before operations were
    # labelled: it is maintenance's, and the label is all a patch adds.
    assert dt.rule_patch(server, built) == {"metadata": {"labels": {dt.OPERATION_LABEL: dt.MAINTENANCE}}}
    assert dt.is_managed(server) and dt.rule_operation(server) == dt.MAINTENANCE
    labelled = copy.deepcopy(server)
    labelled["metadata"]["labels"][dt.OPERATION_LABEL] = dt.MAINTENANCE
    assert dt.rule_patch(labelled, built) is None


def test_patch_changes_effect_and_clears_removed_selector_fields():
    server = recorded("noexecute-done")["DeviceTaintRule"][0]
    wider = dt.build_rule("v1beta2", "x", dt.selector(DRIVER), dt.DEFAULT_KEY, "", taint_rules.NO_SCHEDULE)
    patch = dt.rule_patch(server, wider)
    assert patch["spec"]["deviceSelector"] == {"driver": DRIVER, "pool": None, "device": None}
    assert patch["spec"]["taint"] == {"key": dt.DEFAULT_KEY, "value": None, "effect": taint_rules.NO_SCHEDULE}
    labelled = dt.build_rule("v1beta2", "x", dt.selector(DRIVER, POOL), dt.DEFAULT_KEY, "", dt.NO_EXECUTE,
                             labels={"example.com/why": "ecc"})
    wanted = {"example.com/why": "ecc", dt.OPERATION_LABEL: dt.MAINTENANCE}
    assert dt.rule_patch(server, labelled) == {"metadata": {"labels": wanted}}


def test_conditions_read_from_recorded_rules():
    dry = dt.rule_condition(recorded("dry-run")["DeviceTaintRule"][0])
    assert dry["reason"] == "NoEffect" and dry["current"] and not dry["eviction_in_progress"]
    assert "3 pods would be evicted" in dry["message"]
    pending_rule = recorded("noexecute-pending")["DeviceTaintRule"][0]
    pending = dt.rule_condition(pending_rule)
    assert pending["eviction_in_progress"] and pending["reason"] == "PodsPendingEviction"
    assert not dt.eviction_done(pending_rule)
    done_rule = recorded("noexecute-done")["DeviceTaintRule"][0]
    assert dt.eviction_done(done_rule) and dt.rule_condition(done_rule)["reason"] == "Completed"
    stale = copy.deepcopy(done_rule)
    stale["metadata"]["generation"] += 1  # the spec changed after the controller's report
    assert not dt.eviction_done(stale)
    assert dt.rule_condition({"metadata": {"generation": 1}}) is None


# ---- selection ----------------------------------------------------------------------------------

def test_selection_on_recorded_slices():
    slices = recorded("dry-run")["ResourceSlice"]
    pool = dt.selected_devices(slices, dt.selector(DRIVER, POOL))
    assert [d["device"] for d in pool] == ["dev-0", "dev-1", "dev-2"]
    node = pool[0]["node"]
    assert all(d["node"] == node for d in pool)
    one = dt.selected_devices(slices, dt.selector("gpu.example.com", node, "gpu-3"))
    assert one == [{"driver": "gpu.example.com", "pool": node, "device": "gpu-3", "node": node}]
    assert len(dt.selected_devices(slices, dt.selector("gpu.example.com"))) == 8
    assert dt.selection_error(slices, dt.selector(DRIVER, POOL, "dev-1")) is None


@pytest.mark.parametrize("sel, words", [
    (dt.selector("nosuch.example.com"), ["driver nosuch.example.com publishes no ResourceSlice",
                                         "gpu.example.com, maint.example.com", "no DeviceTaintRule was written"]),
    (dt.selector(DRIVER, "rack-9"), ["driver maint.example.com has no pool rack-9", "(its pools: tray)"]),
    (dt.selector(DRIVER, POOL, "dev-9"), ["no device dev-9 in pool tray", "dev-0, dev-1, dev-2"]),
])
def test_selection_errors_name_what_exists(sel, words):
    message = dt.selection_error(recorded("dry-run")["ResourceSlice"], sel)
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("sel, option", [
    (dt.selector("nosuch.example.com"), "device_driver: driver nosuch.example.com publishes no ResourceSlice"),
    (dt.selector(DRIVER, "rack-9"), "device_pool: driver maint.example.com has no pool rack-9"),
    (dt.selector(DRIVER, POOL, "dev-9"), "no device dev-9 in pool tray"),
])
def test_the_node_drains_device_mode_names_its_own_options(sel, option):
    from ansible_collections.dra.admin.plugins.module_utils.devices.taints_service import DRAIN_OPTION_NAMES
    message = dt.selection_error(recorded("dry-run")["ResourceSlice"], sel, DRAIN_OPTION_NAMES)
    assert message.startswith(option), message


# ---- who is affected ----------------------------------------------------------------------------

def test_tolerations_as_the_controller_reads_them():
    taint = {"key": "k", "value": "v", "effect": dt.NO_EXECUTE}
    assert dt.tolerates({"key": "k", "operator": "Exists", "effect": dt.NO_EXECUTE}, taint)
    assert dt.tolerates({"key": "k", "value": "v"}, taint)  # Equal by default
    assert not dt.tolerates({"key": "k", "value": "w"}, taint)
    assert dt.tolerates({"operator": "Exists"}, taint)  # empty key: every key
    assert not dt.tolerates({"key": "k", "operator": "Exists", "effect": taint_rules.NO_SCHEDULE}, taint)
    result = {"tolerations": [{"operator": "Exists", "effect": dt.NO_EXECUTE, "tolerationSeconds": 30},
                              {"operator": "Exists", "effect": dt.NO_EXECUTE, "tolerationSeconds": -5}]}
    assert dt.noexecute_toleration([result], taint) == ("seconds", 0)
    forever = {"tolerations": [{"operator": "Exists", "effect": dt.NO_EXECUTE, "tolerationSeconds": 30},
                               {"key": "k", "operator": "Exists", "effect": dt.NO_EXECUTE}]}
    assert dt.noexecute_toleration([forever], taint) == ("forever", None)
    assert dt.noexecute_toleration([forever, {}], taint) == ("none", None)
    # Only NoExecute tolerations keep a pod (an empty effect does not, in the 1.35-1.37 controller).
    assert dt.noexecute_toleration([{"tolerations": [{"operator": "Exists"}]}], taint) == ("none", None)


def test_affected_claims_and_report_from_recorded_objects():
    objs = recorded("dry-run")
    devices = dt.selected_devices(objs["ResourceSlice"], dt.selector(DRIVER, POOL))
    pods = dict((p["metadata"]["uid"], (p["spec"]["nodeName"], False)) for p in objs["Pod"])
    taint = {"key": dt.DEFAULT_KEY, "effect": dt.NO_EXECUTE, "timeAdded": "2026-11-23T10:00:00Z"}
    claims = dt.affected_claims(objs["ResourceClaim"], devices, taint, pods)
    assert [(c["name"], c["pods"], c["toleration"], c["toleration_seconds"], c["evict_at"]) for c in claims] == [
        ("shared", ["a1", "a2"], "none", None, None),
        ("tolerant", ["t"], "seconds", 20, "2026-11-23T10:00:20Z")]
    out = dt.report(claims, claims, taint_rules.EFFECT_NONE)
    assert out["would_evict"] == ["%s/a1" % NS, "%s/a2" % NS, "%s/t" % NS]
    assert out["claims"] == ["%s/shared" % NS, "%s/tolerant" % NS]
    assert out["tolerating"] == [{"pod": "%s/t" % NS, "claim": "%s/tolerant" % NS, "toleration_seconds": 20,
                                  "until": "2026-11-23T10:00:20Z"}]
    assert "evicted" not in out


def test_report_after_eviction_from_recorded_objects():
    before_objs, after_objs = recorded("dry-run"), recorded("noexecute-pending")
    devices = dt.selected_devices(before_objs["ResourceSlice"], dt.selector(DRIVER, POOL))
    rule = after_objs["DeviceTaintRule"][0]
    before = dt.affected_claims(before_objs["ResourceClaim"], devices, rule["spec"]["taint"])
    live = dict((p["metadata"]["uid"], (p["spec"].get("nodeName"), False)) for p in after_objs["Pod"])
    after = dt.affected_claims(after_objs["ResourceClaim"], devices, rule["spec"]["taint"], live)
    out = dt.report(before, after, dt.NO_EXECUTE)
    assert out["evicted"] == ["%s/a1" % NS, "%s/a2" % NS]
    assert out["still_holding"] == ["%s/t" % NS]
    assert out["tolerating"][0]["pod"] == "%s/t" % NS and out["tolerating"][0]["until"]


# ---- the module's flow against a scripted API ---------------------------------------------------

def label_selected(obj, label_selector):
    """Whether obj's labels match a label selector of k=v terms (the only form the collection sends)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    terms = [t.split("=", 1) for t in (label_selector or "").split(",") if t]
    return all(labels.get(k) == v for k, v in terms)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class ScriptedApi(DraApi):
    """Answers GET/LIST from recorded objects; keeps the rules it is given (LIST by label, GET, POST, merge PATCH,
    DELETE) and records every write."""

    def __init__(self, objs, served=("v1", "v1beta2"), taint_rules_in=("v1beta2",), version="v1.36.3"):
        super(ScriptedApi, self).__init__(api_client=object())
        self.objs = objs
        self.served = list(served)
        self.taint_rules_in = taint_rules_in
        self.version = version
        self.rules = {}
        self.writes = []

    def request(self, method, path, query=None, body=None, content_type=None, accept="application/json"):
        self.requests += 1
        if method != "GET":
            self.writes.append((method, path, body))
            name = path.rsplit("/", 1)[-1]
            if method == "POST":
                rule = copy.deepcopy(body)
                rule["metadata"]["generation"] = 1
                rule["spec"]["taint"]["timeAdded"] = "2026-11-23T10:00:00Z"
                rule["status"] = {"conditions": [{"type": dt.EVICTION_IN_PROGRESS, "status": "False",
                                                  "reason": "Completed", "observedGeneration": 1}]}
                self.rules[rule["metadata"]["name"]] = rule
                return rule
            if method == "DELETE":
                return self.rules.pop(name)
            if method == "PATCH":
                rule = merge_patch(self.rules[name], body)
                if "spec" in body:
                    rule["metadata"]["generation"] = rule["metadata"].get("generation", 1) + 1
                self.rules[name] = rule
                return rule
            raise AssertionError("unexpected %s %s" % (method, path))
        if path == "/version":
            return {"gitVersion": self.version}
        if path == "/apis/resource.k8s.io":
            return {"versions": [{"version": v} for v in self.served]}
        for version in self.served:
            if path == "/apis/resource.k8s.io/%s" % version:
                names = ["resourceclaims", "resourceslices"]
                names += [taint_rules.RESOURCE] if version in self.taint_rules_in else []
                return {"resources": [{"name": n} for n in names]}
        if path.endswith("/devicetaintrules"):
            selected = [r for r in self.rules.values() if label_selected(r, (query or {}).get("labelSelector"))]
            return {"items": copy.deepcopy(selected), "metadata": {}}
        if "/devicetaintrules/" in path:
            name = path.rsplit("/", 1)[-1]
            if name not in self.rules:
                raise DraApiError("not found", status=404)
            return self.rules[name]
        for kind, plural in (("ResourceSlice", "resourceslices"), ("ResourceClaim", "resourceclaims")):
            if path.endswith("/" + plural):
                return {"items": self.objs.get(kind, []), "metadata": {}}
        if path == "/api/v1/pods":
            return {"items": self.objs.get("Pod", []), "metadata": {}}
        for kind, pattern in (("Pod", r"^/api/v1/namespaces/([^/]+)/pods$"),
                              ("PodDisruptionBudget", r"^/apis/policy/v1/namespaces/([^/]+)/poddisruptionbudgets$")):
            match = re.match(pattern, path)
            if match:
                return {"items": [o for o in self.objs.get(kind, []) if o["metadata"]["namespace"] == match.group(1)],
                        "metadata": {}}
        raise AssertionError("unexpected GET %s" % path)


def run(api, check_mode=False, **kw):
    p = dict(params(), state="tainted", wait=True, wait_timeout=5, wait_sleep=0.01)
    p.update(kw)
    task = DeviceTaint(api, p, check_mode=check_mode, sleep=lambda s: None)
    return task, task.run()


def test_not_served_fails_with_the_switch_and_writes_nothing():
    api = ScriptedApi(recorded("dry-run"), served=("v1",), taint_rules_in=())
    with pytest.raises(dt.DeviceTaintError) as err:
        run(api)
    assert "not available on Kubernetes v1.36.3" in str(err.value) and "nothing was changed" in str(err.value)
    assert api.writes == []
    old = ScriptedApi(recorded("dry-run"), served=("v1beta2", "v1beta1", "v1alpha3"),
                      taint_rules_in=("v1alpha3",), version="v1.33.13")
    with pytest.raises(dt.DeviceTaintError) as err:
        run(old)
    assert "upgrade to 1.35 or later" in str(err.value) and old.writes == []


def test_bad_selector_writes_nothing():
    api = ScriptedApi(recorded("dry-run"))
    with pytest.raises(dt.DeviceTaintError) as err:
        run(api, device="dev-9")
    assert "no device dev-9" in str(err.value) and api.writes == []


def test_check_mode_then_taint_then_again_then_lift():
    api = ScriptedApi(recorded("dry-run"))
    task, result = run(api, check_mode=True)
    assert task.changed and api.writes == [] and result["would_evict"] == ["%s/a1" % NS, "%s/a2" % NS, "%s/t" % NS]
    assert task.diff["before"] == {} and task.diff["after"]["taint"]["effect"] == dt.NO_EXECUTE
    task, result = run(api)
    assert task.changed and [w[0] for w in api.writes] == ["POST"]
    assert api.writes[0][2]["metadata"]["labels"] == {dt.MANAGED_BY_LABEL: dt.MANAGED_BY,
                                                      dt.OPERATION_LABEL: dt.MAINTENANCE}
    assert api.writes[0][1] == rule_path("v1beta2")
    assert result["tolerating"][0]["until"] == "2026-11-23T10:00:20Z"
    task, result = run(api)
    assert not task.changed and len(api.writes) == 1
    task, result = run(api, state="absent")
    assert task.changed and result["lifted"] and api.writes[-1][0] == "DELETE"
    task, result = run(api, state="absent")
    assert not task.changed and not result["lifted"]


def test_rules_of_others_are_left_alone():
    api = ScriptedApi(recorded("dry-run"))
    name = dt.default_rule_name(dt.selector(DRIVER, POOL))
    api.rules[name] = {"metadata": {"name": name, "labels": {}}, "spec": {}}
    for state in ("tainted", "absent"):
        with pytest.raises(dt.DeviceTaintError) as err:
            run(api, state=state)
        assert "not created by dra.admin" in str(err.value)
    assert api.writes == []


# ---- the drain's device mode --------------------------------------------------------------------

class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(seconds, 1.0)


def tray_node(objs):
    return next(s["spec"]["nodeName"] for s in objs["ResourceSlice"] if s["spec"]["driver"] == DRIVER)


def test_drain_device_mode_taints_waits_for_released_claims_and_lifts():
    objs = recorded("noexecute-done")  # the pods gone, the claims released
    node = tray_node(objs)
    api = ScriptedApi(objs)
    result = drain_devices(api, node, "drained", DRIVER, POOL, timeout=5, poll_interval=0.01, sleep=lambda s: None)
    assert result["changed"] and result["claims_released"] is True
    posted = api.writes[0][2]
    assert posted["spec"]["taint"] == {"key": dt.DEFAULT_KEY, "value": DRAIN_VALUE, "effect": dt.NO_EXECUTE}
    assert posted["metadata"]["annotations"] == {DRAINED_NODE_ANNOTATION: node}
    back = drain_devices(api, node, "in_service", DRIVER, POOL)
    assert back["changed"] and back["lifted"] and api.writes[-1][0] == "DELETE"


def test_drain_device_mode_fails_naming_claims_still_allocated():
    objs = recorded("dry-run")  # claims still allocated the tray's devices
    clock = Clock()
    api = ScriptedApi(objs)
    with pytest.raises(DeviceTaintFailure) as err:
        drain_devices(api, tray_node(objs), "drained", DRIVER, POOL, timeout=3, poll_interval=1, clock=clock,
                      sleep=clock.sleep)
    assert "%s/shared" % NS in str(err.value) and "%s/tolerant" % NS in str(err.value)
    assert err.value.details["claims_released"] is False


def test_drain_device_mode_refuses_a_pool_of_another_node():
    objs = recorded("dry-run")
    api = ScriptedApi(objs)
    with pytest.raises(dt.DeviceTaintError) as err:
        drain_devices(api, "some-other-node", "drained", DRIVER, POOL)
    assert "not on this node" in str(err.value) and api.writes == []


def test_newest_served_version_of_the_rule_is_used():
    api = ScriptedApi(recorded("dry-run"), served=("v1", "v1beta2", "v1alpha3"), taint_rules_in=("v1beta2", "v1alpha3"))
    task, result = run(api)
    assert result["api_version"] == "v1beta2" and api.writes[0][1] == rule_path("v1beta2")
    only_alpha = ScriptedApi(recorded("dry-run"), served=("v1", "v1alpha3"), taint_rules_in=("v1alpha3",))
    task, result = run(only_alpha)
    assert result["api_version"] == "v1alpha3"


def test_drain_role_passes_its_device_mode_variables_to_the_module():
    """Role dra.admin.drain: dra_drain_device_driver / _device_pool / _device are declared, documented where they
    are defined, default to the node drain, and reach dra_node_drain's device options."""
    import yaml

    root = ROOT
    role = os.path.join(root, "roles", "drain")
    with open(os.path.join(role, "tasks", "main.yml")) as handle:
        block = yaml.safe_load(handle)[0]["block"]
    # The one call (device mode, the return to service); the node drain's phase-by-phase calls have no device.
    (task,) = [t for t in block if "device_driver" in t.get("dra.admin.dra_node_drain", {})]
    args = task["dra.admin.dra_node_drain"]
    with open(os.path.join(role, "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    with open(os.path.join(role, "defaults", "main.yml")) as handle:
        defaults_text = handle.read()
    defaults = yaml.safe_load(defaults_text)
    for option, variable in (("device_driver", "dra_drain_device_driver"), ("device_pool", "dra_drain_device_pool"),
                             ("device", "dra_drain_device")):
        assert args[option] == "{{ %s or omit }}" % variable
        assert defaults[variable] == "" and options[variable]["default"] == "" and options[variable]["type"] == "str"
        # Documented in a comment right above the definition.
        above = defaults_text.split("\n%s:" % variable)[0].rstrip().splitlines()[-1]
        assert above.startswith("#"), variable
