"""dra_canary's bad input: refused before any request (no cluster is reachable here), each message naming the option."""
import pytest

from ansible_collections.dra.admin.plugins.modules import dra_canary

import module_harness


def run(capsys, args, check_mode=False):
    # Not a bare binding of the shared run_module: every run here points at a kubeconfig that does not exist,
    # so that a request made before the input is refused fails the test.
    return module_harness.run_module(dra_canary, capsys, dict(args, kubeconfig="/nonexistent/kubeconfig"), check_mode)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
@pytest.mark.parametrize("args,named", [
    ({"prepare_timeout": 0}, "prepare_timeout must be a finite number of seconds above 0"),
    ({"wait_sleep": -1}, "wait_sleep must be a finite number of seconds above 0"),
    ({"drivers": ["Bad_Driver"]}, "drivers"),
    ({"namespace": "Not A Namespace"}, "namespace"),
    ({"image": " "}, "image is empty"),
    ({"expect_env": {"GPU_{gpu}": ""}}, "expect_env: {gpu} in 'GPU_{gpu}' is not a placeholder"),
    ({"expect_paths": ["/dev/{claim_uid}"]}, "expect_paths: {claim_uid} is not known when the pod is made"),
])
def test_bad_input_fails_before_any_request_naming_the_option(capsys, args, named, check_mode):
    failed = run(capsys, args, check_mode)
    assert failed["failed"] is True and named in failed["msg"], failed["msg"]
    assert failed["msg"].endswith("; nothing was created")
    assert "api_requests" not in failed


def test_the_defaults_are_valid_and_name_the_example_drivers_variable():
    params = dict((name, option.get("default")) for name, option in dra_canary.argument_spec().items())
    assert dra_canary.input_errors(params) == []
    assert params["expect_env"] == {"GPU_DEVICE_{device_env}_RESOURCE_CLAIM": "{claim_uid}"}
    options = dra_canary.options(params)
    assert options["timeouts"] == {"allocation": 60, "prepare": 180, "unprepare": 120} and options["sleep"] == 0.5
