"""Running one module of the collection in a unit test and reading the JSON it exits with.

run_module: the module's main() in this process, its arguments set as AnsibleModule reads them;
run_module_process: the module's file as Ansible runs it, a process given a JSON file of its arguments.
Both return the module's result; with expect_failure True or False they also assert whether it failed.
"""
import json
import os
import subprocess
import sys

import pytest
from ansible.module_utils.testing import patch_module_args


def module_args(args, check_mode=False, diff=False):
    """The module's arguments with Ansible's check and diff switches."""
    return dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)


def checked(result, expect_failure):
    """The result; with expect_failure True or False, asserted to have failed or not (None: either)."""
    if expect_failure is not None:
        assert bool(result.get("failed")) == expect_failure, result
    return result


def run_module(module, capsys, args, check_mode=False, diff=False, expect_failure=None):
    """module.main() with args (exit_json and fail_json both end it with SystemExit); its result."""
    with patch_module_args(module_args(args, check_mode, diff)):
        with pytest.raises(SystemExit):
            module.main()
    return checked(json.loads(capsys.readouterr().out), expect_failure)


def run_module_process(path, args, tmp_path, env=None, check_mode=False, diff=False, expect_failure=None):
    """The module file at path run by this Python with its arguments in tmp_path/args.json, in env (default: this
    process's environment); its result. A traceback, or output that is not JSON, fails the test."""
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args(args, check_mode, diff)}))
    res = subprocess.run([sys.executable, path, str(args_file)], env=os.environ if env is None else env,
                         capture_output=True, text=True, check=False)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    try:
        result = json.loads(res.stdout)
    except ValueError:
        raise AssertionError("module printed no JSON: rc=%s\n%s\n%s" % (res.returncode, res.stdout, res.stderr))
    return checked(result, expect_failure)
