"""kube.taint_rules: the one answer to "does this DeviceTaintRule select this device", per reader, checked against
what kube-scheduler's tracker (k8s.io/dynamic-resource-allocation/resourceslice/tracker) and kube-controller-manager's
device-taint-eviction controller (ruleMatchesDevice, 1.35+) do: see the module's docstring for the sources."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube import taint_rules as tr

DEVICE = ("gpu.example.com", "node-a", "gpu-0")


def rule(selector="absent", effect="NoSchedule"):
    spec = {"taint": {"key": "k", "effect": effect}}
    if selector != "absent":
        spec["deviceSelector"] = selector
    return {"spec": spec}


@pytest.mark.parametrize("selector, allocator, eviction", [
    ("absent", True, False),                              # no selector: every device / no device
    ({}, True, True),                                     # an empty selector: every device for both
    ({"driver": "gpu.example.com"}, True, True),
    ({"driver": "other.example.com"}, False, False),
    ({"pool": "node-a", "device": "gpu-0"}, True, True),
    ({"pool": "node-b"}, False, False),
    ({"device": "gpu-1"}, False, False),
])
def test_each_reader_reads_the_selector_as_its_component_does(selector, allocator, eviction):
    assert tr.rule_selects(rule(selector), *DEVICE) is allocator
    assert tr.rule_selects(rule(selector), *DEVICE, reader=tr.EVICTION) is eviction


def test_the_eviction_controller_read_the_tracker_before_1_35():
    assert tr.eviction_reader(34) == tr.ALLOCATOR
    assert tr.eviction_reader(35) == tr.EVICTION
    assert tr.rule_selects(rule(), *DEVICE, reader=tr.eviction_reader(33)) is True


def test_cel_and_class_selectors_are_evaluated_only_by_the_caller():
    classes = {"gpus": {"spec": {"selectors": [{"cel": {"expression": "class-expr"}}]}}}
    sel = {"driver": "gpu.example.com", "deviceClassName": "gpus", "selectors": [{"cel": {"expression": "own"}}]}
    assert tr.rule_selects(rule(sel), *DEVICE, classes=classes) is None  # cannot tell without CEL
    seen = []
    assert tr.rule_selects(rule(sel), *DEVICE, classes=classes, evaluate=lambda e: seen.append(e) or False) is False
    assert seen == [["class-expr", "own"]]
    # the fields decide first: another driver is not selected, whatever CEL would say
    assert tr.rule_selects(rule(dict(sel, driver="x")), *DEVICE, evaluate=lambda e: True) is False


def test_only_noschedule_and_noexecute_keep_allocations_off():
    assert [e for e in tr.EFFECTS if tr.keeps_allocations_off(rule({}, e))] == ["NoSchedule", "NoExecute"]
    assert not tr.keeps_allocations_off(rule({}, "PreferNoSchedule"))
