"""The small rules several modules share: API times, toleration matching, a device's own fields."""
from ansible_collections.dra.admin.plugins.module_utils.kube.slices import device_fields, device_location
from ansible_collections.dra.admin.plugins.module_utils.common.times import epoch_seconds, format_time, parse_time
from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import tolerates


def test_api_times_round_trip_and_epoch():
    assert parse_time("") is None and format_time(None) is None and epoch_seconds(None) is None
    assert format_time(parse_time("2026-11-23T17:06:50Z")) == "2026-11-23T17:06:50Z"
    assert format_time(parse_time("2026-11-23T19:06:50.5+02:00")) == "2026-11-23T17:06:50Z"
    assert epoch_seconds("1970-01-01T00:01:00Z") == 60


def test_toleration_rules_for_node_and_device_taints():
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    assert tolerates({"operator": "Exists"}, taint)
    assert tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not tolerates({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert tolerates({"key": "k", "value": "v"}, taint)
    assert not tolerates({"key": "k", "value": "w"}, taint)
    assert not tolerates({"key": "other", "operator": "Exists"}, taint)


def test_v1beta1_devices_keep_their_fields_and_node_under_basic():
    v1beta1 = {"name": "gpu-0", "basic": {"nodeName": "n1", "taints": [{"key": "k", "effect": "NoSchedule"}]}}
    v1 = {"name": "gpu-0", "nodeName": "n1", "taints": [{"key": "k", "effect": "NoSchedule"}]}
    assert device_fields(v1beta1)["taints"] == device_fields(v1)["taints"]
    per_device = {"spec": {"perDeviceNodeSelection": True}}
    assert device_location(per_device, v1beta1) == device_location(per_device, v1) == "n1"


def test_wait_parameters_must_be_above_zero():
    from ansible_collections.dra.admin.plugins.module_utils.common.waits import wait_parameter_errors
    params = {"wait_timeout": 0, "wait_sleep": -1.0, "pool_status_timeout": 30}
    assert wait_parameter_errors(params) == [
        "wait_timeout must be a finite number of seconds above 0, got 0: give for example wait_timeout: 300",
        "wait_sleep must be a finite number of seconds above 0, got -1.0: give for example wait_sleep: 2"]
    assert wait_parameter_errors(params, timeouts=("pool_status_timeout",), intervals=()) == []
