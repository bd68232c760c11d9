"""Pod tolerations checked as the API server checks them (core/v1), before a module writes an object."""
import pytest

from ansible_collections.dra.admin.plugins.module_utils.kube.tolerations import toleration_errors


@pytest.mark.parametrize("toleration", [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 30},
    {"operator": "Exists"},
    {"key": "k", "operator": "Equal", "value": ""},
])
def test_valid_tolerations_pass(toleration):
    assert toleration_errors("tolerations", [toleration]) == []


@pytest.mark.parametrize("toleration, words", [
    ({"key": "k", "operator": "In"}, "tolerations[0]: operator 'In': use Equal or Exists"),
    ({"value": "x"}, "tolerations[0]: an empty key (every taint) needs operator Exists"),
    ({"key": "k", "operator": "Exists", "value": "x"}, "value 'x' must be empty with operator Exists"),
    ({"key": "k", "effect": "NoRun"}, "effect 'NoRun': use NoSchedule, PreferNoSchedule or NoExecute"),
    ({"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}, "tolerationSeconds needs effect NoExecute"),
    ({"key": "bad key"}, "tolerations[0] key 'bad key'"),
    ({"key": "k", "value": "not a value"}, "tolerations[0] value 'not a value'"),
    ({"key": "k", "tolerationsSeconds": 5}, "unknown field(s) tolerationsSeconds"),
    ("NoSchedule", "tolerations[0] must be a dict"),
])
def test_each_refusal_names_the_entry_and_the_fix(toleration, words):
    errors = toleration_errors("tolerations", [{"operator": "Exists"}, toleration])
    assert errors and all(e.startswith("tolerations[1]") for e in errors), errors
    assert any(words.replace("tolerations[0]", "tolerations[1]") in e for e in errors), errors
