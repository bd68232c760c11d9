"""The Ansible lines the collection supports are the ones it tests, and every file that states them agrees.

README.md's Install table and pip lines, meta/runtime.yml's requires_ansible, requirements-dev.txt (the
newest line: every test), tests/requirements-oldest.txt (the oldest line: sanity and unit tests),
execution-environment.yml and requirements-awx.yml (docs/decisions.md, "The Ansible lines tested").
"""
import os
import re
import subprocess
import sys

import yaml
from packaging.specifiers import SpecifierSet

from conftest import ROOT, load_script

# The `ansible` package's major version -> the ansible-core minor it carries (PyPI metadata).
CORE_OF_ANSIBLE = {12: "2.19", 13: "2.20", 14: "2.21"}


def read(rel):
    with open(os.path.join(ROOT, rel)) as handle:
        return handle.read()


def pinned_ansible(rel):
    match = re.search(r"^ansible==([0-9.]+)$", read(rel), re.M)
    assert match, "%s pins no `ansible==` version" % rel
    return match.group(1)


def readme_install():
    text = read("README.md")
    return text[text.index("## Install"):text.index("## Using it on your cluster")]


def requires_ansible_floor():
    spec = yaml.safe_load(read("meta/runtime.yml"))["requires_ansible"]
    match = re.fullmatch(r">=([0-9]+\.[0-9]+)\.0", spec)
    assert match, "requires_ansible %r is not a plain lower bound" % spec
    return match.group(1)


def test_the_oldest_line_tested_is_the_oldest_line_admitted():
    oldest = pinned_ansible("tests/requirements-oldest.txt")
    assert CORE_OF_ANSIBLE[int(oldest.split(".")[0])] == requires_ansible_floor()


def test_the_newest_line_is_the_default_and_newer_than_the_oldest():
    newest, oldest = pinned_ansible("requirements-dev.txt"), pinned_ansible("tests/requirements-oldest.txt")
    assert int(newest.split(".")[0]) > int(oldest.split(".")[0])


def test_readme_states_the_tested_versions_and_its_pip_lines_install_them():
    install = readme_install()
    newest, oldest = pinned_ansible("requirements-dev.txt"), pinned_ansible("tests/requirements-oldest.txt")
    assert "`ansible` %s package" % newest in install and "`ansible` %s" % oldest in install
    assert "`meta/runtime.yml`: `>=%s.0`" % requires_ansible_floor() in install
    (default_line,) = re.findall(r"pip install '(ansible[^']*)'", install)
    python311 = re.search(r"On Python 3\.11, `'(ansible[^']*)'` instead", install).group(1)
    assert newest in SpecifierSet(default_line[len("ansible"):])
    assert oldest in SpecifierSet(python311[len("ansible"):])
    # Neither line reaches a release nothing here has tested.
    assert not SpecifierSet(default_line[len("ansible"):]).contains("%d.0.0" % (int(newest.split(".")[0]) + 1))


def test_the_execution_environment_runs_the_newest_ansible_core_on_a_python_it_supports():
    ee = yaml.safe_load(read("execution-environment.yml"))
    core = CORE_OF_ANSIBLE[int(pinned_ansible("requirements-dev.txt").split(".")[0])]
    spec = SpecifierSet(ee["dependencies"]["ansible_core"]["package_pip"][len("ansible-core"):])
    assert core + ".0" in spec
    python = ee["dependencies"]["python_interpreter"]["package_system"]
    assert tuple(int(x) for x in python[len("python"):].split(".")) >= (3, 12)
    assert ee["dependencies"]["python_interpreter"]["python_path"] == "/usr/bin/" + python


def test_awx_collection_pin_is_the_one_the_tests_install():
    script = load_script("hack/install-awx-collection", "install_awx_collection")
    version = script.pinned_version(os.path.join(ROOT, "requirements-awx.yml"))
    assert version in script.ANSIBLE_PACKAGE_CARRYING
    requirements = yaml.safe_load(read("requirements-awx.yml"))["collections"]
    assert requirements == [{"name": "awx.awx", "version": version}]
    assert "requirements-awx.yml" in readme_install() and "requirements-awx.yml" in read("docs/awx.md")


def test_every_shipped_ignore_file_has_a_tested_line_or_one_between():
    """An ignore file per ansible-core line from the floor to the newest (ansible-test reads the one of the
    version it runs on; a missing one makes validate-modules fail there)."""
    floor = int(requires_ansible_floor().split(".")[1])
    newest = int(CORE_OF_ANSIBLE[int(pinned_ansible("requirements-dev.txt").split(".")[0])].split(".")[1])
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "tests", "sanity")) if f.startswith("ignore-"))
    assert files == ["ignore-2.%d.txt" % minor for minor in range(floor, newest + 1)]


def test_find_python_picks_a_version_in_range_and_names_what_it_missed():
    script = os.path.join(ROOT, "hack", "find-python")
    this = "%d.%d" % sys.version_info[:2]
    found = subprocess.run([script, this, this], capture_output=True, text=True, check=False)
    assert found.returncode == 0, found.stderr
    version = subprocess.run([found.stdout.strip(), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == this
    missing = subprocess.run([script, "3.29", "3.29"], capture_output=True, text=True, check=False)
    assert missing.returncode == 1 and "no Python 3.29 to 3.29" in missing.stderr and "PYTHON=" in missing.stderr


def test_the_demo_builds_only_what_one_kind_cluster_of_the_default_release_runs():
    build = load_script("hack/cluster/build", "hack_cluster_build")
    versions = build.load_versions()
    default = versions["K8S_VERSIONS"].split()[0]
    dry = subprocess.run(["make", "-n", "-C", ROOT, "build-kind-one"], capture_output=True, text=True, check=True)
    assert "hack/cluster/build --kind --kind-only --k8s-version %s" % default in dry.stdout
    demo = subprocess.run(["make", "-n", "-p", "-C", ROOT, "demo"], capture_output=True, text=True, check=False)
    assert re.search(r"^demo: .*\bup\b", demo.stdout, re.M) and not re.search(r"^demo: .*build-kind\b", demo.stdout,
                                                                              re.M)
    assert re.search(r"^up: build-kind-one$", demo.stdout, re.M)
    names = [item[0] for item in build.plan(versions, [default]) if item[0] not in build.NOT_IN_KIND_CLUSTERS]
    assert "kwok" not in names and "helm" not in names
    assert "etcd" in names and "kubernetes" in names and "dra-example-driver" in names
