import pytest

from ansible_collections.dra.admin.plugins.module_utils.releases import catalog


def test_minor_parsing_accepts_common_forms():
    assert catalog.parse_minor("v1.33.13") == 33
    assert catalog.parse_minor("1.36") == 36
    assert catalog.parse_minor("v1.34.0-rc.1") == 34


def test_unsupported_version_lists_supported_range():
    with pytest.raises(catalog.VersionError, match=r"1\.30 to 1\.38"):
        catalog.require_supported("v1.29.4")


def test_dra_needs_gate_and_beta_api_before_1_34_only():
    assert catalog.gates_for_dra("v1.33.1") == {"DynamicResourceAllocation": True}
    assert catalog.runtime_config_for_dra("v1.33.1") == {
        "resource.k8s.io/v1beta1": "true", "resource.k8s.io/v1beta2": "true"}
    assert catalog.gates_for_dra("v1.34.0") == {} and catalog.runtime_config_for_dra("v1.36.3") == {}


def test_preferred_api_version_is_newest_understood():
    assert catalog.preferred_api_version(["v1beta1", "v1beta2", "v1alpha3"]) == "v1beta2"
    assert catalog.preferred_api_version(["v1alpha2"]) is None
