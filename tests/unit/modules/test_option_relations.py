"""Option relations are declared in the modules' argument specs (required_if, required_by, ...), so Ansible
refuses a missing option before main() reads anything, naming the option and what it needs; no module
matches an error's text to drop a requirement."""
import json

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.testing import patch_module_args

from ansible_collections.dra.admin.plugins.modules import (
    dra_allocation_explain_info, dra_claims_info, dra_device_taint, dra_node_drain,
)

NO_CLUSTER = {"kubeconfig": "/nonexistent/kubeconfig"}


def run(module, capsys, args):
    with patch_module_args(dict(args, **NO_CLUSTER)):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def taint_errors(args):
    validator = ArgumentSpecValidator(dra_device_taint.argument_spec(), required_if=dra_device_taint.REQUIRED_IF,
                                      required_by=dra_device_taint.REQUIRED_BY)
    return [str(e) for e in validator.validate(args).errors]


@pytest.mark.parametrize("module,args,words", [
    (dra_device_taint, {}, ["state is tainted", "driver"]),
    (dra_device_taint, {"state": "dry_run"}, ["state is dry_run", "driver"]),
    (dra_device_taint, {"state": "absent"}, ["state is absent", "any of", "name, driver"]),
    (dra_device_taint, {"driver": "gpu.example.com", "device": "gpu-3"}, ["required by 'device'", "pool"]),
    (dra_node_drain, {"node": "n1", "device": "gpu-0"}, ["required by 'device'", "device_driver"]),
    (dra_claims_info, {"fail_if_any_on_node": True}, ["fail_if_any_on_node is True", "node"]),
    (dra_allocation_explain_info, {"pod": "trainer-0"}, ["required by 'pod'", "namespace"]),
    (dra_allocation_explain_info, {"name": "claim-0"}, ["required by 'name'", "namespace"]),
], ids=lambda v: v.__name__.rsplit(".", 1)[-1] if hasattr(v, "__name__") else None)
def test_a_missing_option_is_refused_by_ansible_naming_it(capsys, module, args, words):
    failed = run(module, capsys, args)
    assert failed["failed"] is True and failed.get("api_requests", 0) == 0
    for word in words:
        assert word in failed["msg"], failed["msg"]


def test_a_rule_to_delete_is_found_by_its_name_without_a_driver():
    assert taint_errors({"state": "absent", "name": "dra-admin-gpu"}) == []
    assert taint_errors({"state": "absent", "driver": "gpu.example.com"}) == []
    assert taint_errors({"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-3"}) == []


def test_claim_keys_without_claims_is_refused_before_any_request(capsys):
    failed = run(dra_claims_info, capsys, {"claim_keys": ["state"], "include_claims": False})
    assert failed["failed"] is True and "api_requests" not in failed
    assert "claim_keys (state)" in failed["msg"] and "include_claims: true" in failed["msg"]
    failed = run(dra_claims_info, capsys, {"claim_keys": ["stat"]})
    assert failed["failed"] is True and "claim_keys" in failed["msg"] and "stat" in failed["msg"]


def test_parameter_errors_never_drop_a_message_by_its_text():
    params = dict((name, option.get("default")) for name, option in dra_device_taint.argument_spec().items())
    params.update(state="absent", name="dra-admin-gpu")
    assert dra_device_taint.parameter_errors(params) == []
    params.update(state="tainted", name=None, driver="Not_A_Driver")
    assert [e.split(" must")[0] for e in dra_device_taint.parameter_errors(params)] == ["driver 'Not_A_Driver'"]
