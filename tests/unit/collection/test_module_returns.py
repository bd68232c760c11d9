"""No module returns a top-level key that Ansible reserves for itself.

Ansible reads some keys of a module's result as its own: a truthy `skipped` shows the task as skipped and
keeps `failed_when` / `changed_when` from being applied, `failed` fails it, `changed` is the task's change,
`invocation`, `warnings`, `deprecations` and `exception` are Ansible's reporting, `_ansible_*` its internals,
and `ansible_facts` becomes host facts. A module documents each top-level key of its result in RETURN, so the
RETURN blocks of every module are checked here.
"""
import ast
import glob
import os

import pytest
import yaml

from conftest import ROOT

RESERVED = {"skipped", "failed", "invocation", "warnings", "deprecations", "exception", "ansible_facts"}
MODULES = sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))


def module_docs(path):
    docs = {}
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("DOCUMENTATION", "RETURN"):
            docs[node.targets[0].id] = yaml.safe_load(node.value.value) or {}
    return docs


def is_facts_module(documentation):
    return "dra.admin.attributes.facts_module" in (documentation.get("extends_documentation_fragment") or [])


@pytest.mark.parametrize("path", MODULES, ids=[os.path.basename(p) for p in MODULES])
def test_no_top_level_return_key_is_one_ansible_reserves(path):
    docs = module_docs(path)
    returns = docs.get("RETURN")
    assert isinstance(returns, dict) and returns, "%s has no RETURN" % path
    reserved = sorted(k for k in returns if k in RESERVED or k.startswith("_ansible"))
    if is_facts_module(docs["DOCUMENTATION"]):
        reserved = [k for k in reserved if k != "ansible_facts"]
    assert reserved == []
    # `changed` only as Ansible means it: whether something changed.
    if "changed" in returns:
        assert returns["changed"].get("type") == "bool", "%s documents changed as a %s" % (
            path, returns["changed"].get("type"))


def test_the_check_reads_every_module_and_knows_a_reserved_key():
    assert len(MODULES) >= 26
    assert any(is_facts_module(module_docs(p)["DOCUMENTATION"]) for p in MODULES)
    assert "skipped" in RESERVED and "failed" in RESERVED
