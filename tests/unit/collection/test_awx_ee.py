"""Execution environment, AWX configuration, health playbook and example inventory."""
import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from conftest import ROOT

ROOT = Path(ROOT)
BIN = Path(sys.executable).parent
COLLECTIONS = ROOT / ".tmp" / "collections"
# awx.awx (requirements-awx.yml), which the `ansible` package no longer carries: on the collections path
# `make` exports (hack/install-awx-collection puts it there).
AWX_PATHS = [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep)
             if p and (Path(p) / "ansible_collections" / "awx" / "awx").is_dir()]


def ansible_env(**extra):
    env = dict(os.environ)
    env.pop("ANSIBLE_COLLECTIONS_PATHS", None)
    env.update({"ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(COLLECTIONS)] + AWX_PATHS), "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
                "ANSIBLE_NOCOLOR": "1", "PATH": "%s%s%s" % (BIN, os.pathsep, env.get("PATH", ""))})
    env.update(extra)
    return env


def test_awx_collection_is_the_pinned_one():
    assert AWX_PATHS, "awx.awx is not on ANSIBLE_COLLECTIONS_PATH: run the tests through make (requirements-awx.yml)"
    import json
    manifest = json.loads((Path(AWX_PATHS[0]) / "ansible_collections" / "awx" / "awx" / "MANIFEST.json").read_text())
    pinned = yaml.safe_load((ROOT / "requirements-awx.yml").read_text())["collections"][0]["version"]
    assert manifest["collection_info"]["version"] == pinned


def run(cmd, cwd=ROOT, env=None, check=True):
    proc = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env or ansible_env(),
                          capture_output=True, text=True, check=False)
    if check:
        output = "%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:])
        assert proc.returncode == 0, "%s failed (%d):\n%s" % (cmd, proc.returncode, output)
    return proc


def load(path):
    return yaml.safe_load((ROOT / path).read_text())


def role_options(role):
    return load("roles/%s/meta/argument_specs.yml" % role)["argument_specs"]["main"]["options"]


# --- execution environment ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def context(tmp_path_factory):
    out = tmp_path_factory.mktemp("ee") / "context"
    run([BIN / "ansible-builder", "create", "-f", ROOT / "execution-environment.yml", "-c", out,
         "--output-filename", "Containerfile"])
    return out


def requirement_lines(text):
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def test_definition_is_builder_v3_with_a_base_image_build_argument(context):
    definition = load("execution-environment.yml")
    assert definition["version"] == 3
    base = definition["images"]["base_image"]["name"]
    containerfile = (context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="%s"' % base in containerfile
    assert "FROM $EE_BASE_IMAGE AS base" in containerfile


def test_context_has_kubernetes_core_as_galaxy_yml_declares_it(context):
    galaxy = load("galaxy.yml")
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    by_name = {c["name"]: c for c in requirements["collections"]}
    assert by_name["kubernetes.core"]["version"] == galaxy["dependencies"]["kubernetes.core"]
    assert by_name["dra_admin"]["type"] == "dir"
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile


def test_context_has_the_python_requirements_and_bindep(context):
    built_pip = (context / "_build" / "requirements.txt").read_text()
    assert requirement_lines(built_pip) == requirement_lines((ROOT / "requirements.txt").read_text())
    assert any(line.startswith("kubernetes>=") for line in requirement_lines(built_pip))
    built_bindep = (context / "_build" / "bindep.txt").read_text()
    assert requirement_lines(built_bindep) == requirement_lines((ROOT / "bindep.txt").read_text())
    assert "openssh-clients [platform:rpm]" in requirement_lines(built_bindep)
    containerfile = (context / "Containerfile").read_text()
    assert "--user-pip=requirements.txt --user-bindep=bindep.txt" in containerfile


def test_jmespath_is_neither_used_nor_shipped(context):
    """docs/decisions.md: nothing calls json_query, so neither jmespath nor community.general is a dependency of
    the collection (cel-python, the explainer's CEL library, brings jmespath along; nothing here uses it)."""
    users = []
    for top in ("plugins", "roles", "playbooks"):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and re.search(r"json_query|\bjmespath\b", path.read_text(errors="replace")):
                users.append(str(path.relative_to(ROOT)))
    assert users == []
    pip = [re.split(r"[<>=!~ \[;]", line)[0].lower()
           for line in requirement_lines((context / "_build" / "requirements.txt").read_text())]
    assert "jmespath" not in pip and pip == ["kubernetes", "pyyaml", "jsonpatch", "cel-python"]
    galaxy = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert sorted(c["name"] for c in galaxy["collections"]) == ["dra_admin", "kubernetes.core"]
    assert "**`jmespath` is not used and not required either" in (ROOT / "docs" / "decisions.md").read_text()


def test_context_carries_the_collection_itself(context):
    copy = context / "_build" / "dra_admin"
    assert (copy / "galaxy.yml").read_text() == (ROOT / "galaxy.yml").read_text()
    assert (copy / "meta" / "execution-environment.yml").exists()
    for module in (ROOT / "plugins" / "modules").glob("*.py"):
        assert (copy / "plugins" / "modules" / module.name).exists(), module.name
    for role in (ROOT / "roles").iterdir():
        assert (copy / "roles" / role.name).is_dir(), role.name
    for playbook in ("site.yml", "maintenance.yml", "health.yml"):
        assert (copy / "playbooks" / playbook).exists()
    # Nothing from outside the collection (and no link back into the checkout).
    assert not (copy / ".tmp").exists() and not (copy / "hack").exists() and not (copy / "tests").exists()


def test_collection_installs_from_the_context_and_declares_its_dependencies(context, tmp_path):
    """Install dra.admin as the galaxy stage would, then run the builder's own introspection on it."""
    build = context / "_build"
    only_dra = tmp_path / "requirements.yml"
    only_dra.write_text(yaml.safe_dump({"collections": [{"name": str(build / "dra_admin"), "type": "dir"}]}))
    installed = tmp_path / "collections"
    env = ansible_env(ANSIBLE_COLLECTIONS_PATH=str(installed), HOME=str(tmp_path))
    env.pop("ANSIBLE_CONFIG")
    run([BIN / "ansible-galaxy", "collection", "install", "--offline", "--no-deps", "--force",
         "-r", only_dra, "-p", installed], cwd=build, env=env)
    collection = installed / "ansible_collections" / "dra" / "admin"
    assert (collection / "plugins" / "modules" / "dra_claims_info.py").exists()
    assert not list(collection.rglob("__pycache__"))

    pip_out, bindep_out = tmp_path / "pip.txt", tmp_path / "bindep.txt"
    run([sys.executable, build / "scripts" / "introspect.py", "introspect", installed,
         "--write-pip", pip_out, "--write-bindep", bindep_out])
    pip = pip_out.read_text().splitlines()
    bindep = bindep_out.read_text().splitlines()
    for requirement in requirement_lines((ROOT / "requirements.txt").read_text()):
        if requirement.lower().startswith("pyyaml"):
            continue  # the builder always installs PyYAML and drops it from collections' lists
        assert "%s  # from collection dra.admin" % requirement in pip, pip
    for package in requirement_lines((ROOT / "bindep.txt").read_text()):
        assert "%s  # from collection dra.admin" % package in bindep, bindep


# --- playbooks ----------------------------------------------------------------------------------

@pytest.mark.parametrize("playbook", ["playbooks/awx_configure.yml", "playbooks/health.yml", "playbooks/canary.yml",
                                      "playbooks/kubespray_upgrade_before.yml"])
def test_syntax_check(playbook):
    run([BIN / "ansible-playbook", "--syntax-check", "-i", ROOT / "inventory" / "example.yml", ROOT / playbook])


def awx_play():
    return load("playbooks/awx_configure.yml")[0]


def job_templates():
    task = next(t for t in awx_play()["tasks"] if "awx.awx.job_template" in t)
    return {t["name"]: t for t in task["vars"]["dra_awx_job_templates"]}


def maintenance_survey():
    assert job_templates()["maintenance"]["survey"] == "{{ dra_awx_maintenance_survey }}"
    return rendered_var("dra_awx_maintenance_survey")


def rendered_var(name):
    """A play variable as AWX receives it (its few templated values rendered with the play's vars)."""
    play_vars = awx_play()["vars"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)

    def render(value):
        if isinstance(value, str) and "{{" in value:
            text = env.from_string(value).render(**play_vars)
            return int(text) if text.isdigit() else text
        if isinstance(value, dict):
            return {k: render(v) for k, v in value.items()}
        if isinstance(value, list):
            return [render(v) for v in value]
        return value

    return render(play_vars[name])


# Playbooks meant to be imported into a playbook of the user's, never run alone: kubespray_upgrade_before runs in
# one run with kubespray's upgrade_cluster.yml (its facts and post_upgrade_hooks are for that run).
IMPORTED_ONLY = ("awx_configure", "kubespray_upgrade_before")


def test_every_playbook_has_a_job_template():
    templates = job_templates()
    playbooks = sorted(p.stem for p in (ROOT / "playbooks").glob("*.yml") if p.stem not in IMPORTED_ONLY)
    assert sorted(templates) == playbooks == ["canary", "device_maintenance", "device_remediation", "driver_upgrade",
                                              "health", "maintenance", "node_doctor", "site", "upgrade",
                                              "upgrade_check"]
    for name, template in templates.items():
        assert template["playbook"] == "playbooks/%s.yml" % name
    # A survey where a run must be told something no inventory holds (the node, the device, the target release).
    surveyed = sorted(n for n, t in templates.items() if "survey" in t)
    assert surveyed == ["device_maintenance", "maintenance", "upgrade", "upgrade_check"]


def schedules():
    task = next(t for t in awx_play()["tasks"] if "awx.awx.schedule" in t)
    play_vars = awx_play()["vars"]
    return {s["template"]: jinja2.Environment().from_string(s["rrule"]).render(**play_vars)
            for s in task["vars"]["dra_awx_schedules"]}


def test_health_remediation_and_canary_run_on_a_schedule():
    rules = schedules()
    assert sorted(rules) == ["canary", "device_remediation", "health"]
    assert set(rules) <= set(job_templates())
    for rule in rules.values():
        assert re.match(r"^DTSTART:\d{8}T\d{6}Z RRULE:FREQ=(MINUTELY|HOURLY|DAILY);INTERVAL=\d+$", rule), rule


def test_project_and_execution_environment_are_pinned_to_the_collection_version():
    play = awx_play()
    version = load("galaxy.yml")["version"]
    assert play["vars"]["dra_awx_project_scm_branch"] == "{{ dra_awx_collection_version }}"
    project = next(t for t in play["tasks"] if "awx.awx.project" in t)["awx.awx.project"]
    assert project["scm_update_on_launch"] is False
    assert load("execution-environment.yml")["options"]["tags"] == ["dra-admin-ee:%s" % version]

    def configure(image):
        return run([BIN / "ansible-playbook", ROOT / "playbooks" / "awx_configure.yml", "-e",
                    "dra_awx_project_scm_url=https://git.example.com/dra-admin.git", "-e",
                    "dra_awx_kubernetes_credential=k8s", "-e", "dra_awx_reader_credential=r", "-e",
                    "dra_awx_canary_credential=c", "-e", "dra_awx_devices_credential=d", "-e",
                    "dra_awx_maintenance_credential=m", "-e", "dra_awx_ee_image=%s" % image],
                   env=ansible_env(CONTROLLER_HOST="https://127.0.0.1:9"), check=False)

    digest = "@sha256:" + "0123456789abcdef" * 4
    for image in ("registry.example.com/dra-admin-ee:latest", "registry.example.com/dra-admin-ee:latest" + digest,
                  "registry.example.com/dra-admin-ee" + digest, "registry.example.com/dra-admin-ee:%s@sha256:abc" % version):
        proc = configure(image)
        assert proc.returncode != 0, image
        assert "must be tagged with the collection version %s" % version in proc.stdout, proc.stdout[-2000:]
        assert "Check each Kubernetes credential" not in proc.stdout
    for image in ("registry.example.com/dra-admin-ee:%s" % version,
                  "registry.example.com:5000/dra-admin-ee:%s%s" % (version, digest)):
        proc = configure(image)
        assert "Check the execution environment carries the collection version" in proc.stdout, proc.stdout[-2000:]
        assert "must be tagged with the collection version" not in proc.stdout, (image, proc.stdout[-2000:])


def test_awx_configuration_names_every_missing_identity_credential():
    proc = run([BIN / "ansible-playbook", ROOT / "playbooks" / "awx_configure.yml", "-e",
                "dra_awx_project_scm_url=https://git.example.com/dra-admin.git", "-e", "dra_awx_kubernetes_credential=k8s",
                "-e", "dra_awx_reader_credential=r", "-e", "dra_awx_ee_image=registry.example.com/dra-admin-ee:latest"],
               env=ansible_env(CONTROLLER_HOST="https://127.0.0.1:9"), check=False)
    assert proc.returncode != 0
    message = " ".join(proc.stdout.split())
    assert ("Set dra_awx_canary_credential, dra_awx_devices_credential, dra_awx_maintenance_credential:" in message
            and "dra_rbac_jobs_namespace" in message), proc.stdout[-2000:]
    assert "Check each Kubernetes credential" not in proc.stdout


@pytest.mark.parametrize("template,role,entry", [
    ("upgrade_check", None, None), ("device_maintenance", "device_maintenance", "main")])
def test_every_survey_variable_is_a_variable_of_its_playbook_or_role(template, role, entry):
    survey_var = job_templates()[template]["survey"].strip("{} ")
    questions = rendered_var(survey_var)["spec"]
    playbook = (ROOT / "playbooks" / ("%s.yml" % template)).read_text()
    options = load("roles/%s/meta/argument_specs.yml" % role)["argument_specs"][entry]["options"] if role else {}
    for question in questions:
        assert {"question_name", "variable", "type", "required"} <= set(question)
        variable = question["variable"]
        if variable in options:
            spec = options[variable]
            if "choices" in spec:
                assert question["choices"] == spec["choices"] and question["default"] == spec["default"], variable
            # What the role requires, the survey asks for; a choice with a default may be required too.
            assert question["required"] or not spec.get("required", False), variable
        else:
            assert re.search(r"\b%s\b" % variable, playbook.split("\n- name:", 1)[1]), variable
    by_name = {q["variable"]: q for q in questions}
    if template == "upgrade_check":
        assert by_name["dra_upgrade_target"]["required"] is True
        assert by_name["dra_upgrade_fail_on"]["choices"] == ["breaking", "warning", "info"]


def test_awx_configuration_holds_no_secret():
    text = (ROOT / "playbooks" / "awx_configure.yml").read_text()
    for key in ("controller_host:", "controller_username:", "controller_password:", "controller_oauthtoken:",
                "inputs:", "api_key:", "bearer_token:", "password:"):
        assert key not in text, key
    play = awx_play()
    # Credentials are attached by name only, from variables the user sets.
    assert all(v.count("dra_awx_") == 1 for v in play["vars"]["dra_awx_identity_credentials"].values())
    assert all(v.count("dra_awx_") <= 1 for v in play["vars"]["dra_awx_machine_credentials"].values())
    assert play["vars"]["dra_awx_kubernetes_credential_type"] == "kubernetes_bearer_token"


def test_every_maintenance_survey_variable_is_a_real_variable_with_a_matching_type():
    survey = maintenance_survey()
    drain = role_options("drain")
    maintenance = (ROOT / "playbooks" / "maintenance.yml").read_text()
    awx_types = {"int": "integer", "float": "float", "str": "text"}
    questions = survey["spec"]
    assert {q["variable"] for q in questions} >= {"dra_maintenance_hosts", "dra_drain_timeout", "dra_drain_force"}
    for question in questions:
        variable = question["variable"]
        assert {"question_name", "variable", "type", "required"} <= set(question), variable
        if variable.startswith("dra_maintenance_"):
            # A variable of the maintenance playbook itself (it selects the play's hosts).
            assert re.search(r"\b%s\b" % variable, maintenance.split("\n- name:")[1]), variable
            assert question["type"] == "text"
            continue
        assert variable in drain, "%s is not a variable of roles/drain" % variable
        spec = drain[variable]
        if spec["type"] == "bool":
            assert question["type"] == "multiplechoice" and sorted(question["choices"]) == ["false", "true"]
            assert question["default"] == str(spec["default"]).lower()
        elif "choices" in spec:
            assert question["type"] == "multiplechoice" and question["choices"] == spec["choices"]
            assert question["default"] == spec["default"]
        else:
            assert question["type"] == awx_types[spec["type"]], variable
            assert question["default"] == spec["default"]
            assert question["min"] <= question["default"] <= question["max"]
        # The answer passes the role's own argument spec validation.
        for answer in question.get("choices") or [question["default"]]:
            result = ArgumentSpecValidator({variable: spec}).validate({variable: answer})
            assert not result.error_messages, (variable, answer, result.error_messages)


def test_awx_configuration_refuses_to_start_without_its_required_settings():
    proc = run([BIN / "ansible-playbook", ROOT / "playbooks" / "awx_configure.yml"],
               env=ansible_env(CONTROLLER_HOST="https://127.0.0.1:9"), check=False)
    assert proc.returncode != 0
    assert "Set dra_awx_project_scm_url" in proc.stdout + proc.stderr
    assert "Check each Kubernetes credential" not in proc.stdout


# --- example inventory --------------------------------------------------------------------------

def inventory():
    proc = run([BIN / "ansible-inventory", "-i", ROOT / "inventory" / "example.yml", "--list", "--export"])
    return yaml.safe_load(proc.stdout)


def test_example_inventory_has_the_groups_the_playbooks_use():
    data = inventory()
    assert data["k8s_api"]["hosts"] == ["localhost"]
    assert data["control_plane"]["hosts"] and data["dra_nodes"]["hosts"]


def test_every_example_inventory_variable_is_declared_and_valid():
    variables = inventory()["all"]["vars"]
    specs = {}
    for spec_file in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        for entry_point in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            specs.update(entry_point["options"])
    playbook_text = "".join((ROOT / "playbooks" / name).read_text()
                            for name in ("site.yml", "maintenance.yml", "health.yml", "upgrade_check.yml",
                                         "device_maintenance.yml", "device_remediation.yml", "driver_upgrade.yml",
                                         "canary.yml", "upgrade.yml"))
    undeclared = []
    for name, value in variables.items():
        assert name.startswith("dra_"), name
        if name in specs:
            result = ArgumentSpecValidator({name: specs[name]}).validate({name: value})
            assert not result.error_messages, (name, result.error_messages)
        elif not re.search(r"\b%s\b" % name, playbook_text):
            undeclared.append(name)
    assert not undeclared, "not a variable of any role or playbook: %s" % undeclared


def test_example_inventory_holds_no_credentials():
    variables = inventory()["all"]["vars"]
    assert variables["dra_kubeconfig"] == "" and variables["dra_context"] == ""
    text = (ROOT / "inventory" / "example.yml").read_text()
    assert not re.search(r"^\s*(ansible_password|ansible_become_password|api_key|token)\s*:", text, re.M)
