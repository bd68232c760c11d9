"""The one deep merge (common.merge.deep_merge): component config files and Helm chart values."""
from ansible_collections.dra.admin.plugins.module_utils.common.merge import deep_merge


def test_mappings_merge_recursively_and_other_values_replace():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 2}
    assert deep_merge(base, {"a": {"y": [3], "z": {"n": 1}}, "c": 3}) == {
        "a": {"x": 1, "y": [3], "z": {"n": 1}}, "b": 2, "c": 3}


def test_a_none_update_removes_the_key_at_any_depth():
    base = {"a": {"x": 1, "y": 2}, "b": 2}
    assert deep_merge(base, {"a": {"x": None}, "b": None, "missing": None}) == {"a": {"y": 2}}


def test_a_mapping_replaces_a_value_that_is_not_one():
    assert deep_merge({"a": [1]}, {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert deep_merge({"a": {"x": 1}}, {"a": "text"}) == {"a": "text"}


def test_inputs_are_not_changed_and_the_result_shares_nothing_with_them():
    base, updates = {"a": {"x": [1]}}, {"b": {"y": [2]}}
    result = deep_merge(base, updates)
    result["a"]["x"].append(9)
    result["b"]["y"].append(9)
    assert base == {"a": {"x": [1]}} and updates == {"b": {"y": [2]}}


def test_a_base_that_is_not_a_mapping_counts_as_empty():
    assert deep_merge(None, {"a": 1}) == {"a": 1}
    assert deep_merge([1], {"a": 1}) == {"a": 1}
    assert deep_merge({"a": 1}, None) == {"a": 1}
