"""A remediation limited to a driver that publishes nothing is refused (a misspelt name in a schedule)."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.devices import remediation as r


def device(driver, published=True):
    return {"driver": driver, "pool": "node-1", "device": "gpu-0", "published": published}


def own_rule(driver):
    return {"metadata": {"name": r.rule_name(driver, "node-1", "gpu-0"),
                         "labels": {r.MANAGED_BY_LABEL: r.MANAGED_BY, r.PURPOSE_LABEL: r.PURPOSE}},
            "spec": {"taint": {"key": r.KEY, "effect": "NoSchedule"},
                     "deviceSelector": {"driver": driver, "pool": "node-1", "device": "gpu-0"}}}


@pytest.mark.parametrize("devices, rules", [
    ([device("gpu.example.com")], []),
    ([device("gpu.example.com", published=False)], [own_rule("gpu.example.com")]),  # its rules to lift
])
def test_a_driver_that_publishes_or_owns_a_rule_is_not_absent(devices, rules):
    assert not r.driver_absent("gpu.example.com", devices, rules)


def test_no_driver_asked_is_every_driver():
    assert not r.driver_absent(None, [], []) and not r.driver_absent("", [], [])


def test_a_driver_that_publishes_nothing_is_absent_whatever_else_publishes_or_owns_rules():
    devices = [device("gpu.example.com"), device("gpu.exampel.com", published=False)]
    assert r.driver_absent("gpu.exampel.com", devices, [own_rule("other.example.com")])


def test_the_refusal_names_the_option_and_who_publishes():
    error = r.absent_driver_error("gpu.exampel.com", ["nic.example.com", "gpu.example.com", "gpu.example.com", None])
    assert isinstance(error, r.RemediationInputError) and isinstance(error, ValueError)
    text = str(error)
    assert text.startswith("driver 'gpu.exampel.com' publishes no device in this cluster")
    assert "(drivers publishing: gpu.example.com, nic.example.com)" in text
    assert "allow_absent_driver: true" in text and "dra_device_maintenance_remediate_allow_absent_driver" in text
    assert "(drivers publishing: none)" in str(r.absent_driver_error("x.example.com", []))
