"""Every module declares its attributes (check_mode, diff_mode, and action_group where meta/runtime.yml puts it
in a group), through the collection's attributes doc fragment as community.general's modules do."""
import importlib
import os

import pytest
import yaml

from ansible_collections.dra.admin.plugins.doc_fragments.attributes import ModuleDocFragment
from conftest import ROOT

MODULES = sorted(n[:-3] for n in os.listdir(os.path.join(ROOT, "plugins", "modules")) if n.endswith(".py"))
FRAGMENT = "dra.admin.attributes"


def attributes(module):
    """The module's attributes as ansible-doc shows them: its fragments' first, then its own over them."""
    doc = yaml.safe_load(importlib.import_module("ansible_collections.dra.admin.plugins.modules." + module).DOCUMENTATION)
    merged = {}
    for fragment in doc.get("extends_documentation_fragment") or []:
        if fragment == FRAGMENT or fragment.startswith(FRAGMENT + "."):
            part = fragment[len(FRAGMENT) + 1:].upper() or "DOCUMENTATION"
            for name, spec in (yaml.safe_load(getattr(ModuleDocFragment, part)).get("attributes") or {}).items():
                merged.setdefault(name, {}).update(spec)
    for name, spec in (doc.get("attributes") or {}).items():
        merged.setdefault(name, {}).update(spec)
    return merged


def k8s_group():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as fh:
        group = yaml.safe_load(fh)["action_groups"]["k8s"]
    return set(m for m in group if isinstance(m, str))


@pytest.mark.parametrize("module", MODULES)
def test_check_and_diff_mode_are_declared_with_a_description(module):
    found = attributes(module)
    for name in ("check_mode", "diff_mode"):
        assert found[name]["support"] in ("full", "partial", "none", "N/A") and found[name]["description"]


@pytest.mark.parametrize("module", MODULES)
def test_action_group_membership_is_the_one_meta_runtime_gives(module):
    found = attributes(module)
    if module in k8s_group():
        assert found["action_group"]["membership"] == ["dra.admin.k8s"] and found["action_group"]["support"] == "full"
    else:
        assert "action_group" not in found
