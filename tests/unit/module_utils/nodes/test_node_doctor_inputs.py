"""The node doctor refuses what it cannot read right: a kubelet root or CDI directory that cannot be one, a node
the cluster does not know, a state gathered with errors; and it names the label that keeps a driver off a node.
Objects recorded from the real v1.37.2 kind cluster (tests/unit/fixtures/node-state/v1.37.2/ckpt.json)."""
import copy
import json
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.common.errors import InputError
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_check_service as service
from ansible_collections.dra.admin.plugins.module_utils.nodes import node_state_service as reader
from ansible_collections.dra.admin.plugins.module_utils.kube.selection import DEFAULT_EXCLUSION_LABEL
from conftest import FIXTURES

LABEL = DEFAULT_EXCLUSION_LABEL


def recorded():
    with open(os.path.join(FIXTURES, "node-state", "v1.37.2", "ckpt.json")) as handle:
        return json.load(handle)


def params(root, cdi):
    return {"kubelet_root_dir": str(root), "cdi_spec_dirs": [str(d) for d in cdi], "node_name": "n",
            "containers": False, "runtime_endpoint": None}


def test_a_kubelet_root_that_is_not_a_directory_is_refused_before_reading(tmp_path):
    missing = tmp_path / "no-kubelet"
    errors = reader.path_errors(params(missing, []))
    assert errors == ["kubelet_root_dir %s does not exist: give the kubelet's --root-dir (default /var/lib/kubelet)"
                      % missing]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is not a directory" in reader.path_errors(params(a_file, []))[0]
    with pytest.raises(reader.NodeStateInputError) as caught:
        reader.gather(params(missing, []), run=None, crictl=None)
    assert "kubelet_root_dir" in str(caught.value)


def test_a_cdi_directory_that_is_a_file_is_refused_and_a_missing_one_is_read_as_empty(tmp_path):
    root = tmp_path / "kubelet"
    root.mkdir()
    a_file = tmp_path / "cdi"
    a_file.write_text("x")
    assert reader.path_errors(params(root, [a_file])) == [
        "cdi_spec_dirs: %s is not a directory: give the container runtime's CDI spec directories (default "
        "/etc/cdi and /var/run/cdi)" % a_file]
    assert reader.path_errors(params(root, [tmp_path / "absent"])) == []
    state = reader.gather(params(root, [tmp_path / "absent"]), run=None, crictl=None)
    assert state["cdi_specs"] == [] and state["errors"] == []


def test_a_node_the_cluster_does_not_know_is_refused():
    objs = recorded()
    states = [dict(s, node="not-a-node") for s in objs["node_states"]][:1]
    problem = service.unknown_nodes_error(states, [n["metadata"]["name"] for n in objs["nodes"]])
    assert isinstance(problem, InputError) and "not-a-node" in str(problem) and "node_name" in str(problem)
    assert service.unknown_nodes_error(objs["node_states"], [n["metadata"]["name"] for n in objs["nodes"]]) is None


def test_a_state_gathered_with_errors_is_refused():
    objs = recorded()
    states = copy.deepcopy(objs["node_states"])
    states[0]["errors"] = ["/var/lib/kubelet/plugins_registry: Permission denied"]
    problem = service.state_errors(states)
    assert isinstance(problem, InputError) and "Permission denied" in str(problem)
    assert service.state_errors(objs["node_states"]) is None


def test_the_driver_gone_step_names_the_label_that_keeps_it_off_the_node():
    objs = recorded()
    node = copy.deepcopy([n for n in objs["nodes"] if n["metadata"]["name"] == "nsx-worker2"][0])
    node["metadata"].setdefault("labels", {})[LABEL] = "true"
    step = node_check.bring_back_step("gpu.example.com", node, objs["daemonsets"])
    assert "it carries the label %s=true" % LABEL in step and "kubectl label node nsx-worker2 %s-" % LABEL in step
