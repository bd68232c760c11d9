"""The per-release DRA gate table and the validation built on it."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog


def test_dynamic_resource_allocation_follows_its_release_history():
    stages = dict((minor, catalog.gate_info("1.%d" % minor, "DynamicResourceAllocation"))
                  for minor in catalog.SUPPORTED_MINORS)
    assert [stages[m]["stage"] for m in (30, 31, 32, 33, 34, 35, 36, 37)] == [
        "alpha", "alpha", "beta", "beta", "GA", "GA", "GA", "GA"]
    assert [stages[m]["default"] for m in (30, 32, 33, 34)] == [False, False, False, True]
    assert not stages[34]["locked"] and stages[35]["locked"] and stages[37]["locked"]
    assert stages[33]["components"] == list(catalog.COMPONENTS)


@pytest.mark.parametrize("version,gate,stage,default,locked", [
    ("1.32", "DRAAdminAccess", "alpha", False, False),
    ("1.34", "DRAAdminAccess", "beta", True, False),
    ("1.36", "DRAAdminAccess", "GA", True, True),
    ("1.33", "DRAResourceClaimDeviceStatus", "beta", True, False),
    ("1.36", "DRAPrioritizedList", "GA", True, False),
    ("1.37", "DRAPrioritizedList", "GA", True, True),
    ("1.36", "DRADeviceTaintRules", "beta", False, False),
    ("1.36", "DRAResourceClaimGranularStatusAuthorization", "beta", True, False),
    ("1.34", "DRASchedulerFilterTimeout", "beta", True, False),
    ("1.36", "KubeletPodResourcesDynamicResources", "GA", True, True),
])
def test_gate_states(version, gate, stage, default, locked):
    info = catalog.gate_info(version, gate)
    assert (info["stage"], info["default"], info["locked"]) == (stage, default, locked)


def test_gates_appear_and_disappear_with_releases():
    assert "DRAControlPlaneController" not in catalog.gate_catalog("1.30")
    assert "DRAControlPlaneController" in catalog.gate_catalog("1.31")
    assert "DRAControlPlaneController" not in catalog.gate_catalog("1.32")
    assert catalog.removed_gates("1.32") == {"DRAControlPlaneController": "1.32"}
    assert "DynamicResourceAllocation" in catalog.gate_catalog("1.37")
    assert catalog.gate_info("1.33", "DRAConsumableCapacity") is None
    assert sorted(catalog.gate_catalog("1.30")) == ["DynamicResourceAllocation", "KubeletPodResourcesDynamicResources"]


def test_scheduler_only_gate_names_its_component():
    assert catalog.gate_info("1.35", "DRASchedulerFilterTimeout")["components"] == ["kube-scheduler"]


def test_valid_request_has_no_errors():
    assert catalog.validate_gates("v1.33.13", {"DynamicResourceAllocation": True, "DRAAdminAccess": "true"}) == []
    assert catalog.validate_gates("v1.36.3", {"DRADeviceTaintRules": True}) == []
    assert catalog.validate_gates("v1.36.3", {"DynamicResourceAllocation": "True"}) == []


def test_unknown_gate_is_refused_with_known_names():
    errors = catalog.validate_gates("1.36", {"DRAAdminAcess": True})
    assert len(errors) == 1
    assert "DRAAdminAcess is unknown" in errors[0] and "DRAAdminAccess" in errors[0]


def test_removed_gate_is_refused_naming_the_release():
    errors = catalog.validate_gates("1.33", {"DRAControlPlaneController": True})
    assert errors == [errors[0]] and "removed in Kubernetes 1.32" in errors[0]
    assert "remove it" in errors[0]


def test_gate_from_a_newer_release_is_refused():
    errors = catalog.validate_gates("1.33", {"DynamicResourceAllocation": True, "DRAConsumableCapacity": True})
    assert len(errors) == 1 and "does not exist before Kubernetes 1.34" in errors[0]


def test_locked_gate_set_to_the_other_value_is_refused():
    errors = catalog.validate_gates("1.35", {"DynamicResourceAllocation": False})
    assert len(errors) == 1
    assert "DynamicResourceAllocation is locked to true on Kubernetes 1.35" in errors[0]
    assert "set it to true" in errors[0]
    # same value as the lock is fine; before the lock any value is
    assert catalog.validate_gates("1.35", {"DynamicResourceAllocation": True}) == []
    assert catalog.validate_gates("1.34", {"DynamicResourceAllocation": False}) == []


def test_dependency_that_stays_off_is_refused():
    errors = catalog.validate_gates("1.35", {"DRADeviceTaintRules": True})
    assert len(errors) == 1 and "needs DRADeviceTaints enabled" in errors[0]
    assert "DRADeviceTaints=true" in errors[0]
    assert catalog.validate_gates("1.35", {"DRADeviceTaintRules": True, "DRADeviceTaints": True}) == []
    errors = catalog.validate_gates("1.33", {"DRAAdminAccess": True})
    assert len(errors) == 1 and "needs DynamicResourceAllocation" in errors[0]


def test_bad_values_and_versions():
    errors = catalog.validate_gates("1.36", {"DRADeviceTaints": "yes"})
    assert len(errors) == 1 and "'yes' is not a feature gate value" in errors[0]
    assert "not supported" in catalog.validate_gates("1.29", {})[0]
    assert "unknown component" in catalog.validate_gates("1.36", {}, component="kube-proxy")[0]


def test_runtime_config_validation():
    assert catalog.validate_runtime_config("1.33", {"resource.k8s.io/v1beta2": "true", "api/all": "true"}) == []
    errors = catalog.validate_runtime_config("1.36", {"resource.k8s.io/v1alpha2": "true"})
    assert len(errors) == 1 and "has no resource.k8s.io/v1alpha2" in errors[0]
    assert "must be true or false" in catalog.validate_runtime_config("1.36", {"resource.k8s.io/v1": "on"})[0]


def test_gates_that_need_an_api_version_add_it():
    assert catalog.runtime_config_for_gates("1.36", {"DRADeviceTaintRules": True}) == {
        "resource.k8s.io/v1beta2": "true"}
    assert catalog.runtime_config_for_gates("1.36", {"DRADeviceTaintRules": False}) == {}
    assert catalog.runtime_config_for_gates("1.37", {"DRADeviceTaintRules": True}) == {}


def test_dra_settings_per_release():
    old = catalog.dra_settings("v1.33.13")
    assert old == {"gates": {"DynamicResourceAllocation": True},
                   "runtime_config": {"resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"},
                   "errors": [], "provisional": False}
    new = catalog.dra_settings("v1.36.3")
    assert new["gates"] == {} and new["runtime_config"] == {} and new["errors"] == []
    asked = catalog.dra_settings("v1.36.3", {"DRADeviceTaintRules": True, "DRAResourcePoolStatus": True})
    assert asked["gates"] == {"DRADeviceTaintRules": True, "DRAResourcePoolStatus": True}
    assert asked["runtime_config"] == {"resource.k8s.io/v1beta2": "true", "resource.k8s.io/v1alpha3": "true"}
    assert catalog.dra_settings("1.37")["provisional"] is False  # checked against the released v1.37.2


@pytest.mark.parametrize("version, asked", [("v1.33.13", {}), ("v1.33.13", {"DRADeviceTaints": True}),
                                            ("v1.36.3", {}), ("v1.36.3", {"DRADeviceTaintRules": True})])
def test_dra_additions_per_component_agree_with_dra_settings(version, asked):
    gates, runtime_config = catalog.dra_additions(version, catalog.KUBE_APISERVER, asked)
    assert gates == catalog.gates_for_dra(version)
    assert runtime_config == catalog.dra_settings(version, asked)["runtime_config"]
    for component in (catalog.KUBE_CONTROLLER_MANAGER, catalog.KUBE_SCHEDULER, catalog.KUBELET):
        assert catalog.dra_additions(version, component, asked) == (gates, {})


def test_dra_additions_of_kube_apiserver():
    assert catalog.dra_additions("v1.33.13", catalog.KUBE_APISERVER) == (
        {"DynamicResourceAllocation": True}, {"resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"})
    assert catalog.dra_additions("v1.36.3", catalog.KUBE_APISERVER, {"DRADeviceTaintRules": True}) == (
        {}, {"resource.k8s.io/v1beta2": "true"})


def test_dra_settings_refuse_switching_dra_off_or_bad_gates():
    off = catalog.dra_settings("v1.33.13", {"DynamicResourceAllocation": False})
    assert off["gates"] == {} and "switches DRA off" in off["errors"][0]
    bad = catalog.dra_settings("v1.36.3", {"DRAControlPlaneController": True})
    assert bad["gates"] == {} and "removed in Kubernetes 1.32" in bad["errors"][0]


def test_every_history_is_ordered_and_every_dependency_is_catalogued():
    for name, (components, history, removed_in, depends_on) in catalog._GATES.items():
        minors = [entry[0] for entry in history]
        assert minors == sorted(minors), name
        assert set(components) <= set(catalog.COMPONENTS), name
        for dep in depends_on:
            assert dep in catalog._GATES or dep in catalog._OUTSIDE_GATES, (name, dep)
        for entry in history:
            assert not entry[3] or entry[2] is True or entry[1] != "GA", name


@pytest.mark.parametrize("version", ["1.%d" % minor for minor in catalog.SUPPORTED_MINORS])
def test_every_release_accepts_its_own_defaults(version):
    # No gate that is on by default depends on one that is off by default: the components start
    # without any --feature-gates, so the catalog must not refuse an empty request.
    assert catalog.validate_gates(version, {}) == []


@pytest.mark.parametrize("version,gate,dependents", [
    ("v1.36.3", "DRAResourceClaimDeviceStatus",
     ["DRADeviceBindingConditions", "DRAResourceClaimGranularStatusAuthorization"]),
    ("v1.36.3", "ResourceHealthStatus", ["ResourceHealthStatusMessage"]),
    ("v1.37.2", "DRADeviceTaints", ["DRADeviceTaintRules"]),
    ("v1.37.2", "DRAConsumableCapacity", []),
])
def test_switching_off_what_a_default_on_gate_depends_on_is_refused(version, gate, dependents):
    # kube-apiserver v1.36.3 refuses DRAResourceClaimDeviceStatus=false: "DRADeviceBindingConditions is
    # enabled, but depends on features that are disabled: [DRAResourceClaimDeviceStatus]".
    errors = catalog.validate_gates(version, {gate: False})
    if not dependents:
        assert errors == []
        return
    assert len(errors) == 1, errors
    message = errors[0]
    assert message.startswith("feature gate %s=false: " % gate)
    for name in dependents:
        assert name in message and "%s=false" % name in message
    assert "on by default on Kubernetes 1.%s" % version.split(".")[1] in message
    assert "remove %s=false, or also set" % gate in message
    # The fix the message gives is accepted.
    assert catalog.validate_gates(version, dict([(gate, False)] + [(n, False) for n in dependents])) == []


def test_default_on_dependents_are_not_judged_before_the_components_enforce_them():
    # 1.34's components do not check dependencies: DRA off leaves DRAAdminAccess (on) doing nothing.
    assert catalog.validate_gates("1.34", {"DynamicResourceAllocation": False}) == []
    # A gate asked for explicitly still needs its dependencies on every release (it would do nothing).
    assert "needs DynamicResourceAllocation" in catalog.validate_gates(
        "1.34", {"DynamicResourceAllocation": False, "DRAAdminAccess": True})[0]


def test_locked_gate_is_judged_at_its_locked_value_for_dependencies():
    errors = catalog.validate_gates("1.36", {"DynamicResourceAllocation": False})
    assert len(errors) == 1 and "locked to true" in errors[0]


@pytest.mark.parametrize("gate", ["DRAPrioritizedList", "DRAAdminAccess", "DRADeviceTaints", "ResourceHealthStatus"])
def test_dra_settings_on_1_33_judge_the_gates_with_what_dra_needs(gate):
    # The role writes DynamicResourceAllocation=true itself on 1.33: a gate that needs it is fine.
    settings = catalog.dra_settings("v1.33.13", {gate: True})
    assert settings["errors"] == []
    assert settings["gates"] == {"DynamicResourceAllocation": True, gate: True}
    assert catalog.validate_dra_gates("v1.33.13", {gate: True}) == []


def test_dra_gates_merge_what_dra_needs_with_the_request():
    assert catalog.dra_gates("1.33", {"DRAAdminAccess": "true", "DRADeviceTaints": None}) == {
        "DynamicResourceAllocation": True, "DRAAdminAccess": True}
    assert catalog.dra_gates("1.36", {"DRADeviceTaintRules": True}) == {"DRADeviceTaintRules": True}
    assert catalog.dra_runtime_config("1.33", {"DynamicResourceAllocation": True, "DRADeviceTaints": True}) == {
        "resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true", "resource.k8s.io/v1alpha3": "true"}


def test_validate_dra_gates_refuses_switching_dra_off_once():
    errors = catalog.validate_dra_gates("v1.33.13", {"DynamicResourceAllocation": "false"})
    assert len(errors) == 1 and "switches DRA off" in errors[0]
    assert "'maybe' is not a feature gate value" in catalog.validate_dra_gates(
        "1.33", {"DynamicResourceAllocation": "maybe"})[0]


def test_1_37_rows_follow_the_released_v1_37_2():
    fractional = catalog.gate_info("1.37", "DRAFractionalCapacityRange")
    assert (fractional["stage"], fractional["default"], fractional["depends_on"]) == (
        "beta", False, ["DRAConsumableCapacity"])
    assert catalog.gate_info("1.37", "DRAPartitionableDevicesType")["depends_on"] == [
        "DynamicResourceAllocation", "DRAPartitionableDevices", "DRAResourcePoolStatus"]
    assert catalog.gate_info("1.37", "DRADeviceCompatibilityGroups")["depends_on"] == [
        "DynamicResourceAllocation", "DRAPartitionableDevices"]
    assert catalog.gate_info("1.37", "KubeletPodResourcesDynamicResources")["locked"] is True
    # DRAOptionalNodeOperations needs NodeDeclaredFeatures, which is locked on in 1.37 (not a DRA gate).
    assert catalog.validate_gates("1.37", {"DRAOptionalNodeOperations": True}) == []
    assert "not a DRA gate" in catalog.validate_gates("1.37", {"NodeDeclaredFeatures": True})[0]
    assert "NodeDeclaredFeatures" not in catalog.gate_catalog("1.37")


def test_a_locked_dependent_leaves_only_keeping_the_gate(monkeypatch):
    # No release has a locked gate depending on an unlocked one yet; the message must not offer
    # switching a locked gate off when one does.
    gates = dict(catalog._GATES)
    components, history, removed_in, depends_on = gates["ResourceHealthStatusMessage"]
    gates["ResourceHealthStatusMessage"] = (components, ((36, "GA", True, True),), removed_in, depends_on)
    monkeypatch.setattr(catalog, "_GATES", gates)
    errors = catalog.validate_gates("1.36", {"ResourceHealthStatus": False})
    assert len(errors) == 1
    assert errors[0].endswith("remove ResourceHealthStatus=false (ResourceHealthStatusMessage cannot be switched "
                              "off: locked)")
