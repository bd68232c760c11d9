import pytest

from ansible_collections.dra.admin.plugins.module_utils.releases.catalog import VersionError
from ansible_collections.dra.admin.plugins.modules.dra_version_info import version_info


def test_1_33_needs_the_gate_and_both_beta_apis():
    info = version_info("v1.33.4", {})
    assert info["feature_gates"] == {"DynamicResourceAllocation": True}
    assert info["runtime_config"] == {"resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"}
    assert info["served_by_default"] == [] and info["errors"] == []


def test_1_36_needs_nothing_and_serves_v1():
    info = version_info("1.36", {})
    assert info["feature_gates"] == {} and info["runtime_config"] == {}
    assert info["served_by_default"] == ["v1"] and info["resource_api_versions"][0] == "v1"


def test_removed_gate_is_an_error_naming_it():
    info = version_info("v1.33.0", {"DRAControlPlaneController": True})
    assert any("DRAControlPlaneController" in e for e in info["errors"])


def test_unsupported_version_raises():
    with pytest.raises(VersionError, match="1.30 to 1.38"):
        version_info("v1.29.0", {})


def test_1_33_gate_that_needs_dra_is_accepted_with_dra():
    # Enabling DRA is what the module's answer is for: DRAPrioritizedList on 1.33 comes with DRA itself.
    info = version_info("v1.33.13", {"DRAPrioritizedList": True})
    assert info["errors"] == []
    assert info["feature_gates"] == {"DynamicResourceAllocation": True, "DRAPrioritizedList": True}


def test_1_36_switching_off_a_dependency_of_a_default_on_gate_is_an_error():
    info = version_info("v1.36.3", {"ResourceHealthStatus": False})
    assert len(info["errors"]) == 1
    assert "ResourceHealthStatusMessage" in info["errors"][0] and "ResourceHealthStatus=false" in info["errors"][0]
