"""Every variable a playbook reads has a default or a "required" error naming it, and the example
inventory lists it (set, or in a comment with its default).

A playbook's own variables are the `dra_*` names its Jinja reads that neither a role's argument
spec declares (those are checked against the roles' specs by test_awx_ee.py) nor the playbook
defines itself (play or task `vars:`, `register:`). Read on ansible-core 2.19, an undefined
variable fails the task that templates it even where its value would not matter (a `fail_msg`).
"""
import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

ROOT = Path(ROOT)
PLAYBOOKS = sorted(p.name for p in (ROOT / "playbooks").glob("*.yml") if p.name != "awx_configure.yml")
GROUPS = {"dra_nodes"}
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def role_options():
    options = set()
    for spec_file in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        for entry_point in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            options.update(entry_point["options"])
    return options


def role_facts():
    """The dra_* facts the roles' tasks set (set_fact): a role's results for the playbook, not its inputs."""
    facts = set()
    for tasks_file in (ROOT / "roles").glob("*/tasks/*.yml"):
        for task in yaml.safe_load(tasks_file.read_text()) or []:
            for block in [task] + task.get("block", []) + task.get("rescue", []) + task.get("always", []):
                facts.update(name for name in block.get("ansible.builtin.set_fact") or {} if name.startswith("dra_"))
    return facts


def without_comments(text):
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def jinja_of(body):
    """The Jinja expressions of a playbook ({{ }} blocks and the bare expressions of when/that/until),
    their string literals blanked (a message naming a variable does not read it)."""
    return [re.sub(r"'[^'\n]*'", "''", expression) for expression in raw_jinja_of(body)]


def raw_jinja_of(body):
    expressions = JINJA.findall(body)
    for match in re.finditer(r"^(\s*)(?:when|that|until|failed_when|changed_when):\s*(.*)$", body, re.M):
        indent, first = match.groups()
        lines = [first]
        for line in body[match.end():].splitlines()[1:]:
            if line.strip() and len(line) - len(line.lstrip()) <= len(indent):
                break
            lines.append(line)
        expressions.append("\n".join(lines))
    return expressions


def own_variables(playbook):
    body = without_comments((ROOT / "playbooks" / playbook).read_text())
    defined = set(re.findall(r"^\s+(dra_\w+):", body, re.M)) | set(re.findall(r"register:\s*(dra_\w+)", body))
    read = set()
    for expression in jinja_of(body):
        read.update(re.findall(r"(?<![.\w])(dra_\w+)", expression))
    return body, sorted(read - defined - role_options() - role_facts() - GROUPS)


def required_names(body):
    return set(re.findall(r"(dra_\w+) is required", body))


def tasks_of(body):
    """The playbook's text cut at each `- name:` (a play or a task, with its when)."""
    return re.split(r"^\s*- name:", body, flags=re.M)


def guarded(name, task):
    """A task whose `when` reads the variable with a default runs only when it is set."""
    return any(re.search(r"%s\s*\|\s*default\(" % name, expression)
               for expression in jinja_of(task) if not expression.startswith("{"))


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_variable_a_playbook_reads_has_a_default_or_is_required(playbook):
    body, names = own_variables(playbook)
    required = required_names(body)
    missing = []
    for name in names:
        if name in required:
            continue
        for task in tasks_of(body):
            if guarded(name, task):
                continue
            for expression in jinja_of(task):
                if re.search(r"(?<![.\w])%s\b(?!\s*\|\s*default\()" % name, expression):
                    missing.append("%s: %s" % (name, expression.strip()[:100]))
    assert missing == []


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_the_example_inventory_lists_every_variable_a_playbook_reads(playbook):
    inventory = (ROOT / "inventory" / "example.yml").read_text()
    names = own_variables(playbook)[1]
    assert [name for name in names if not re.search(r"\b%s\b" % name, inventory)] == []


def test_the_checks_see_the_variables_they_are_about():
    """The parsing above finds the variables of the failures it guards against (not an empty list)."""
    upgrade = own_variables("upgrade_check.yml")[1]
    assert {"dra_upgrade_target", "dra_upgrade_fail_on", "dra_upgrade_schedulers"} <= set(upgrade)
    health = own_variables("health.yml")[1]
    assert "dra_health_device_state_file" in health and "dra_health_scrape" in health
    site = own_variables("site.yml")[1]
    assert "dra_site_manage_tuning" in site
    assert "dra_feature_gates_changes" in role_facts() and "dra_feature_gates_changes" not in site
    assert "dra_upgrade_target" in required_names(without_comments((ROOT / "playbooks" / "upgrade_check.yml").read_text()))
