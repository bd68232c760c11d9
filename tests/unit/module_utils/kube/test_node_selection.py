"""The one NodeSelector matcher and exclusion-label check, as claims, slices, the driver and the drain use it."""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.drivers import checks
from ansible_collections.dra.admin.plugins.module_utils.drivers import nodes as driver_nodes
from ansible_collections.dra.admin.plugins.module_utils.kube import selection as ns
from conftest import FIXTURES, ROOT

EXCL = ns.DEFAULT_EXCLUSION_LABEL
REC = os.path.join(FIXTURES, "recorded")


def recorded_driver_daemonset():
    with open(os.path.join(REC, "driver-daemonsets.json")) as fh:
        return json.load(fh)["items"][0]


@pytest.mark.parametrize("expression,labels,expected", [
    ({"key": "k", "operator": "In", "values": ["1", "2"]}, {"k": "2"}, True),
    ({"key": "k", "operator": "In", "values": ["1"]}, {}, False),
    ({"key": "k", "operator": "NotIn", "values": ["1"]}, {}, True),
    ({"key": "k", "operator": "NotIn", "values": ["1"]}, {"k": "1"}, False),
    ({"key": "k", "operator": "Exists"}, {"k": ""}, True),
    ({"key": "k", "operator": "DoesNotExist"}, {"k": ""}, False),
    ({"key": "k", "operator": "Gt", "values": ["3"]}, {"k": "4"}, True),
    ({"key": "k", "operator": "Lt", "values": ["3"]}, {"k": "4"}, False),
    ({"key": "k", "operator": "Gt", "values": ["3"]}, {"k": "x"}, False),
    ({"key": "k", "operator": "Gt", "values": ["3"]}, {}, False),
    ({"key": "k", "operator": "Unknown", "values": ["3"]}, {"k": "3"}, False),
])
def test_term_operators(expression, labels, expected):
    assert ns.term_matches({"matchExpressions": [expression]}, "n", labels) is expected


def test_match_fields_on_name_and_empty_term():
    assert ns.term_matches({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, "n1", {})
    assert not ns.term_matches({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]},
                               "n1", {})
    assert not ns.term_matches({"matchFields": [{"key": "spec.other", "operator": "In", "values": ["n1"]}]},
                               "n1", {})
    assert not ns.term_matches({}, "n1", {})


def test_selector_terms_are_ored_and_pinned_nodes_read_only_from_match_fields():
    selector = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]}
    nodes = {"a": {"zone": "z1"}, "b": {"zone": "z2"}, "c": {"zone": "z3"}}
    assert ns.matching_nodes(selector, nodes) == ["a", "b"]
    assert ns.pinned_nodes(selector) is None
    pinned = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b", "a"]}]}]}
    assert ns.pinned_nodes(pinned) == ["a", "b"] and ns.matching_nodes(pinned, nodes) == ["a", "b"]


def test_the_driver_selection_uses_the_same_matcher_as_claims():
    term = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["b"]}]}
    nodes = [{"metadata": {"name": n, "labels": {"gpu": "yes"}}, "spec": {}} for n in ("a", "b")]
    selected, excluded = driver_nodes.select_nodes(nodes, terms=[term])
    assert selected == ["a"] and list(excluded) == ["b"]
    assert ns.matching_nodes({"nodeSelectorTerms": [term]}, {"a": {"gpu": "yes"}, "b": {"gpu": "yes"}}) == ["a"]


@pytest.mark.parametrize("expression,excludes", [
    ({"key": EXCL, "operator": "DoesNotExist"}, True),
    ({"key": EXCL, "operator": "NotIn", "values": ["true"]}, True),
    ({"key": EXCL, "operator": "NotIn", "values": ["false"]}, False),
    ({"key": EXCL, "operator": "In", "values": ["false"]}, False),
    ({"key": "other/label", "operator": "DoesNotExist"}, False),
])
def test_what_excludes_the_label(expression, excludes):
    assert ns.expression_excludes(expression, EXCL) is excludes


def test_with_exclusion_keeps_a_term_that_excludes_by_notin():
    terms = [{"matchExpressions": [{"key": EXCL, "operator": "NotIn", "values": ["true"]}]},
             {"matchExpressions": [{"key": EXCL, "operator": "NotIn", "values": ["false"]}]}]
    result = ns.with_exclusion(terms, EXCL)
    assert result[0] == terms[0], "NotIn [true] already excludes: nothing added"
    assert result[1]["matchExpressions"][-1] == {"key": EXCL, "operator": "DoesNotExist"}
    assert ns.terms_exclude(result, EXCL)


def test_the_drain_and_the_driver_check_agree_on_the_recorded_daemonset():
    ds = recorded_driver_daemonset()
    assert ns.daemonset_excludes(ds, EXCL)
    assert not any("DoesNotExist" in p for p in checks.check_daemonset(ds, EXCL))
    weak = copy.deepcopy(ds)
    terms = weak["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    for term in terms:
        for expression in term["matchExpressions"]:
            if expression["key"] == EXCL:
                expression.update(operator="NotIn", values=["false"])
    assert not ns.daemonset_excludes(weak, EXCL)
    assert any("DoesNotExist" in p for p in checks.check_daemonset(weak, EXCL))
    for expression in terms[0]["matchExpressions"]:
        if expression["key"] == EXCL:
            expression["values"] = ["true"]
    assert ns.daemonset_excludes(weak, EXCL) == (len(terms) == 1)
    assert (not checks.check_daemonset(weak, EXCL)) == (len(terms) == 1)


def _yaml(*parts):
    import yaml
    root = ROOT
    with open(os.path.join(root, *parts)) as fh:
        return yaml.safe_load(fh)


@pytest.mark.parametrize("where,read", [
    (("roles", "driver", "defaults", "main.yml"), lambda d: d["dra_driver_exclusion_label"]),
    (("roles", "drain", "defaults", "main.yml"), lambda d: d["dra_drain_exclusion_label"]),
    (("roles", "driver", "meta", "argument_specs.yml"),
     lambda d: d["argument_specs"]["main"]["options"]["dra_driver_exclusion_label"]["default"]),
    (("roles", "drain", "meta", "argument_specs.yml"),
     lambda d: d["argument_specs"]["main"]["options"]["dra_drain_exclusion_label"]["default"]),
    (("inventory", "example.yml"), lambda d: d["all"]["vars"]["dra_drain_exclusion_label"]),
    (("inventory", "example.yml"), lambda d: d["all"]["vars"]["dra_driver_exclusion_label"]),
])
def test_yaml_defaults_of_the_exclusion_label_equal_the_constant(where, read):
    """YAML cannot import the constant: these copies must stay equal to it."""
    assert read(_yaml(*where)) == EXCL


@pytest.mark.parametrize("module", ["dra_node_drain", "dra_driver_status_info", "dra_driver_plan_info"])
def test_module_docs_default_of_the_exclusion_label_equals_the_constant(module):
    import importlib
    import yaml
    mod = importlib.import_module("ansible_collections.dra.admin.plugins.modules." + module)
    options = yaml.safe_load(mod.DOCUMENTATION)["options"]
    assert options["exclusion_label"]["default"] == EXCL
    assert mod.argument_spec()["exclusion_label"]["default"] == EXCL


def test_python_code_spells_the_exclusion_label_only_in_the_constant():
    """Module DOCUMENTATION (YAML, checked above) may repeat it; code imports DEFAULT_EXCLUSION_LABEL."""
    import ast
    root = ROOT
    home = os.path.join(root, "plugins", "module_utils", "kube", "selection.py")
    spelled = []
    for top in ("plugins", "tests", "bench", "hack"):
        for directory, dummy, files in os.walk(os.path.join(root, top)):
            for name in files:
                path = os.path.join(directory, name)
                if not name.endswith(".py") or path == home:
                    continue
                with open(path) as fh:
                    tree = ast.parse(fh.read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DOCUMENTATION"]:
                        node.value.value = ""  # the module's docs: checked by the tests above
                    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and EXCL in node.value:
                        spelled.append("%s:%d" % (os.path.relpath(path, root), node.lineno))
    assert spelled == []


def recorded_node(name="node-000000"):
    with open(os.path.join(REC, "nodes.json")) as fh:
        return copy.deepcopy([n for n in json.load(fh)["items"] if n["metadata"]["name"] == name][0])


def test_pod_refusal_checks_each_node_filter_in_the_schedulers_order():
    node = recorded_node()
    assert ns.pod_refusal(node, {}) is None
    assert ns.pod_refusal(node, {"nodeName": "node-000001"}) == "the pod names node node-000001"
    assert ns.pod_refusal(node, {"nodeSelector": {"type": "kwok", "gpu": "yes"}}) == "nodeSelector gpu=yes does not match"
    away = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-000002"]}]}]}}}
    assert ns.pod_refusal(node, {"affinity": away}) == ns.AFFINITY_REFUSAL
    node["spec"]["taints"] = [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"},
                              {"key": "soft", "effect": "PreferNoSchedule"}]
    assert ns.pod_refusal(node, {}) == "node taint kwok.x-k8s.io/node=fake:NoSchedule not tolerated"
    kwok = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
    assert ns.pod_refusal(node, {"tolerations": kwok}) is None, "PreferNoSchedule only steers"
    node["spec"]["unschedulable"] = True
    assert ns.pod_refusal(node, {"tolerations": kwok}) == "the node is cordoned (unschedulable)"
    assert ns.pod_refusal(node, {}, added_tolerations=[
        {"operator": "Exists"}]) is None, "a controller's own tolerations count (the DaemonSet's unschedulable one)"


def test_daemonset_selection_is_pod_refusal_with_the_controllers_tolerations():
    """The driver's node selection and the explainer's node filter give the same verdict, the DaemonSet controller's
    tolerations aside: a cordoned node keeps its DaemonSet pods, not other pods."""
    daemonset = recorded_driver_daemonset()
    spec = daemonset["spec"]["template"]["spec"]
    nodes = [recorded_node(n) for n in ("node-000000", "node-000001", "node-000002")]
    nodes[1]["spec"]["unschedulable"] = True
    nodes[2]["metadata"]["labels"][EXCL] = "true"
    selected, excluded = driver_nodes.select_nodes_for_daemonset(nodes, daemonset)
    assert selected == ["node-000000", "node-000001"]
    assert excluded["node-000002"].startswith(ns.AFFINITY_REFUSAL)
    assert [ns.pod_refusal(n, spec) for n in nodes] == [
        None, "the node is cordoned (unschedulable)", ns.AFFINITY_REFUSAL]


@pytest.mark.parametrize("text,number", [("10", 10), ("+7", 7), ("-3", -3), ("1_000", None), (" 5", None),
                                         ("5 ", None), ("0x10", None), ("9223372036854775808", None), ("", None)])
def test_gt_and_lt_read_numbers_as_gos_parse_int(text, number):
    assert ns.go_parse_int(text) == number


def test_a_label_python_reads_as_a_number_and_go_does_not_matches_no_gt():
    requirement = {"key": "gpus", "operator": "Gt", "values": ["4"]}
    assert ns.requirement_matches(requirement, True, "8") is True
    assert ns.requirement_matches(requirement, True, "1_000") is False
