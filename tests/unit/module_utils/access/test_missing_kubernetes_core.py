"""Without kubernetes.core, every cluster-facing module says what to install (no TypeError traceback).

The modules run through Ansible with a collections path that holds dra.admin only, and without the
collections the `ansible` package puts on sys.path (ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false).
"""
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")

CLUSTER_MODULES = [
    ("dra_cluster_info", {}),
    ("dra_claims_info", {}),
    ("dra_slices_info", {}),
    ("dra_node_drain", {"node": "n1", "state": "drained"}),
    ("dra_driver_plan_info", {"driver": "gpu.example.com", "image": "x/y:1"}),
    ("dra_driver_status_info", {"driver": "gpu.example.com"}),
    ("dra_rbac_plan_info", {}),
]


@pytest.fixture(scope="module")
def lonely_collections(tmp_path_factory):
    path = tmp_path_factory.mktemp("collections")
    (path / "ansible_collections" / "dra").mkdir(parents=True)
    os.symlink(ROOT, str(path / "ansible_collections" / "dra" / "admin"))
    (path / "ansible.cfg").write_text("[defaults]\n")
    return str(path)


def run_through_ansible(collections, module, args):
    """The module's failure result, from the one-line output of an ad hoc run.

    Not module_harness's run_module: what is tested here is Ansible finding the module and its module_utils on a
    collections path without kubernetes.core, so the module goes through the `ansible` command, not main()."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_CONFIG=os.path.join(collections, "ansible.cfg"))
    env.pop("K8S_AUTH_KUBECONFIG", None)
    res = subprocess.run([ANSIBLE, "localhost", "-i", "localhost,", "-c", "local", "--one-line",
                          "-e", "ansible_python_interpreter=" + sys.executable,
                          "-m", "dra.admin." + module, "-a",
                          json.dumps(dict(args, kubeconfig="/nonexistent", context="other"))],
                         capture_output=True, text=True, env=env, cwd=collections, check=False)
    lines = [line for line in res.stdout.splitlines() if line.startswith("localhost | ")]
    assert res.returncode == 2 and len(lines) == 1, "rc=%s\n%s\n%s" % (res.returncode, res.stdout, res.stderr)
    status, result = lines[0][len("localhost | "):].split(" => ", 1)
    assert status == "FAILED!", lines[0]
    return json.loads(result)


def test_the_collection_path_really_lacks_kubernetes_core(lonely_collections):
    result = run_through_ansible(lonely_collections, "dra_cluster_info", {})
    assert "kubernetes.core cannot be imported here (No module named 'ansible_collections.kubernetes')" \
        in result["msg"], result


@pytest.mark.parametrize("module,args", CLUSTER_MODULES)
def test_module_says_what_to_install(lonely_collections, module, args):
    result = run_through_ansible(lonely_collections, module, args)
    assert result["msg"].startswith("this module needs the kubernetes.core collection (>=5.0.0,<7.0.0) and the "
                                    "kubernetes Python package"), result
    assert "ansible-galaxy collection install 'kubernetes.core:>=5.0.0,<7.0.0' and pip install kubernetes" in result["msg"]
    assert "TypeError" not in json.dumps(result) and "module_stderr" not in result, result


def test_versions_are_the_ones_galaxy_yml_declares():
    import yaml
    from ansible_collections.dra.admin.plugins.module_utils.access import api as dra_api
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        declared = yaml.safe_load(handle)["dependencies"]["kubernetes.core"]
    assert declared == dra_api.K8S_CORE_VERSIONS
