"""Every module fails through one path, common/errors.fails_on_error: no module calls fail_json itself, and
what the path passes to fail_json keeps the error's details and the module's extras."""
import ast
import glob
import os

import pytest

from ansible_collections.dra.admin.plugins.module_utils.common.errors import (
    DraAdminError, InputError, fails_on_error, raise_input_errors,
)

from conftest import ROOT

MODULES = sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
PATH = "fails_on_error"


def tree(path):
    with open(path) as handle:
        return ast.parse(handle.read(), path)


def fail_json_calls(node):
    return [n.lineno for n in ast.walk(node) if isinstance(n, ast.Call) and
            getattr(n.func, "attr", getattr(n.func, "id", None)) == "fail_json"]


def main_takes_the_path(module_tree):
    mains = [n for n in module_tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    return bool(mains) and any(
        isinstance(n, ast.With) and any(isinstance(i.context_expr, ast.Call) and
                                        getattr(i.context_expr.func, "id", None) == PATH for i in n.items)
        for n in ast.walk(mains[0]))


@pytest.mark.parametrize("path", MODULES, ids=[os.path.basename(p) for p in MODULES])
def test_no_module_calls_fail_json_but_through_the_one_path(path):
    module_tree = tree(path)
    assert fail_json_calls(module_tree) == [], "%s calls fail_json itself (lines above); raise a DraAdminError " \
        "(InputError for bad input) inside `with fails_on_error(module)` instead" % path
    assert main_takes_the_path(module_tree), "%s: main() does not run in `with fails_on_error(module)`" % path
    names = set(n.id for n in ast.walk(module_tree) if isinstance(n, ast.Name))
    assert "fail_result" not in names, "%s builds fail_json's arguments itself" % path


def test_the_check_sees_a_direct_call_and_a_main_off_the_path():
    direct = ast.parse("def main():\n    module.fail_json(msg='x')\n")
    assert fail_json_calls(direct) == [2] and not main_takes_the_path(direct)
    on_path = ast.parse("def main():\n    with fails_on_error(module) as failure:\n        run()\n")
    assert fail_json_calls(on_path) == [] and main_takes_the_path(on_path)
    assert len(MODULES) >= 26


class Module(object):
    """What the path needs of an AnsibleModule: fail_json, which never returns."""

    def __init__(self):
        self.failed = None

    def fail_json(self, **kwargs):
        self.failed = kwargs
        raise SystemExit(1)


def fail(body, **options):
    module = Module()
    with pytest.raises(SystemExit):
        with fails_on_error(module, **options) as failure:
            body(failure)
    return module.failed


class Api(object):
    requests = 0


def test_an_error_with_details_keeps_them_and_the_extras():
    api = Api()

    def body(failure):
        failure.keep(api_requests=lambda: api.requests, diff={"before": "a", "after": "b"})
        api.requests = 7  # read when the failure comes, not when kept
        raise DraAdminError("the rule is not in force: wait longer", {"pods": ["ns/p"], "changed": True})

    assert fail(body, changed=False) == {
        "msg": "the rule is not in force: wait longer", "pods": ["ns/p"], "changed": True, "api_requests": 7,
        "diff": {"before": "a", "after": "b"}}


def test_a_kept_result_is_read_when_the_failure_comes():
    result = {"changed": False}

    def body(failure):
        failure.keep(result)
        result.update(changed=True, backup_file="/b/x")
        raise DraAdminError("stopped")

    assert fail(body) == {"msg": "stopped", "changed": True, "backup_file": "/b/x"}


def test_details_under_a_key_and_an_error_that_knows_what_it_changed():
    class Partial(DraAdminError):
        changed = True

    def body(failure):
        raise Partial("blocked", {"pods": ["a"]})

    assert fail(body, details_key="details", changed=False) == {
        "msg": "blocked", "details": {"pods": ["a"]}, "changed": True}


def test_bad_input_is_refused_with_every_problem_and_nothing_changed():
    def body(failure):
        raise_input_errors(["wait_timeout must be a finite number", None, "driver 'X' must be a DNS subdomain"])

    assert fail(body, refused_suffix="; nothing was changed") == {
        "msg": "wait_timeout must be a finite number; driver 'X' must be a DNS subdomain; nothing was changed",
        "changed": False}
    raise_input_errors([None, ""])  # nothing to refuse
    assert issubclass(InputError, ValueError)


def test_a_host_write_error_fails_only_where_the_module_names_it():
    def body(failure):
        failure.keep(path="/etc/kubernetes/manifests/kube-scheduler.yaml")
        raise OSError(28, "No space left on device")

    failed = fail(body, host_error="writing the manifest failed: {error}")
    assert failed["msg"] == "writing the manifest failed: [Errno 28] No space left on device"
    assert failed["path"] == "/etc/kubernetes/manifests/kube-scheduler.yaml"
    with pytest.raises(OSError):
        fail(body)


def test_a_run_without_error_does_not_fail():
    module = Module()
    with fails_on_error(module):
        pass
    assert module.failed is None
