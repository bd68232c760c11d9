"""The README's "Using it on your cluster" as a user runs it, and the read-only AWX job templates as AWX runs them.

One kind cluster (the default release, two workers; hack/cluster/kind-up). The collection is built
(`ansible-galaxy collection build`) and installed into an empty home (`~/.ansible/collections`) the way
README.md's Install section says; kubernetes.core is the one of the `ansible` package this virtual
environment has (PyPI), as for a user who installed `ansible`. Then every command of the README section's
shell blocks runs as written, in a directory that is not the checkout, with HOME the empty home:

- the inventory is inventory/example.yml of the installed collection (the README's `cp`), changed only where
  the README's list says a user changes it (hosts and how Ansible reaches them, the driver, node labels,
  RBAC namespaces, Prometheus);
- the node the commands name (`gpu-node-1`, "use one of your nodes") is a worker of this cluster;
- `~/.kube/config` is the cluster's kubeconfig (the README exports K8S_AUTH_KUBECONFIG=~/.kube/config).

The AWX part runs health, upgrade_check and device_maintenance (its dry run) with ansible-runner: a private
data directory holding the project (the collection's playbooks), the inventory and the survey answers, and in
the environment only what AWX's Kubernetes credential injects (K8S_AUTH_HOST, K8S_AUTH_API_KEY of a service
account, K8S_AUTH_VERIFY_SSL, K8S_AUTH_SSL_CA_CERT) with an empty home: no kubeconfig file anywhere.

`make integration-kind` runs it. A host where kind cannot run fails it; nothing is skipped.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kindlib  # noqa: E402

BIN = os.path.dirname(sys.executable)
SECTION = "Using it on your cluster"
EXAMPLE_NODE = "gpu-node-1"
WORKERS = 2


# --- the README, read as a user reads it ---------------------------------------------------------

def readme_section(text, heading):
    """The text of one `## heading` section of a Markdown file."""
    match = re.search(r"^## %s\n(.*?)(?=^## |\Z)" % re.escape(heading), text, re.S | re.M)
    assert match, "README.md has no section %r" % heading
    return match.group(1)


def shell_blocks(section):
    """Each ```sh block of a section as its commands: continuation lines joined, comments and blanks dropped."""
    blocks = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        commands = []
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.append(line)
        blocks.append(commands)
    return blocks


def test_the_readme_section_has_the_commands_this_test_runs():
    blocks = shell_blocks(readme_section(open(os.path.join(ROOT, "README.md")).read(), SECTION))
    assert len(blocks) == 2 and blocks[0][0].startswith("cp ") and "example.yml my-cluster.yml" in blocks[0][0]
    playbooks = [re.search(r"dra\.admin\.(\w+)", c).group(1) for c in blocks[1] if c.startswith("ansible-playbook")]
    assert sorted(set(playbooks)) == ["device_maintenance", "device_remediation", "driver_upgrade", "health",
                                      "maintenance", "site", "upgrade_check"]
    assert blocks[1][0].startswith("export K8S_AUTH_KUBECONFIG=")


def user_inventory(example, cluster_nodes, driver_image, rules_dir):
    """inventory/example.yml with what README.md tells a user to change, for this kind cluster."""
    inventory = yaml.safe_load(example)
    control_plane, workers = cluster_nodes[0], cluster_nodes[1:]
    reach = {"ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3",
             "ansible_become": False}
    children = inventory["all"]["children"]
    children["control_plane"] = {"hosts": {control_plane: {}}, "vars": dict(reach)}
    children["dra_nodes"] = {"hosts": {name: {} for name in workers}, "vars": dict(reach)}
    inventory["all"]["vars"].update({
        # the driver: the example driver's image built here, by the role's own DaemonSet
        "dra_driver_method": "template", "dra_driver_image": driver_image,
        "dra_driver_command": ["dra-example-kubeletplugin"],
        # the nodes' labels and taints (kind's workers have neither), and their hardware (none)
        "dra_driver_node_selector": {}, "dra_driver_tolerations": [], "dra_preflight_node_selector": "",
        "dra_health_node_selector": "", "dra_discovery_drivers": [{"name": "{{ dra_driver_name }}"}],
        # who is who: the operators' namespace exists here
        "dra_rbac_operators": [{"namespaces": ["default"], "groups": ["ml-operators"]}],
        # no Prometheus here: rules as files, metrics not measured
        "dra_health_prometheus_url": "", "dra_monitoring_rules_dir": rules_dir,
    })
    return yaml.safe_dump(inventory, sort_keys=False)


# --- the cluster and the installed collection ----------------------------------------------------

@pytest.fixture(scope="module")
def kind_cluster():
    version = clusterlib.supported_k8s_versions()[0]
    name = "itr-%d" % os.getpid()
    started = time.time()
    res = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-up"), "--name", name,
                          "--k8s-version", version, "--workers", str(WORKERS)], capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                       capture_output=True, check=False)
        raise RuntimeError("kind cluster %s did not come up:\n%s\n%s" % (version, res.stdout, res.stderr))
    print("\nkind cluster %s up in %.0fs" % (name, time.time() - started))
    try:
        yield {"name": name, "version": version, "kubeconfig": clusterlib.cluster_state(name)["kubeconfig"],
               "nodes": kindlib.node_names(name, WORKERS), "versions": clusterlib.load_versions()}
    finally:
        down = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                              capture_output=True, text=True, check=False)
        assert down.returncode == 0, "kind-down left something behind:\n%s\n%s" % (down.stdout, down.stderr)


def user_env(home, cluster=None):
    """A user's environment: this venv's programs (ansible from PyPI) first, an empty home, no Ansible settings
    of the checkout (no ANSIBLE_CONFIG, no ANSIBLE_COLLECTIONS_PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_", "KUBECONFIG"))}
    env.update(HOME=str(home), PATH=os.pathsep.join([BIN, os.environ["PATH"]]), ANSIBLE_NOCOLOR="1")
    if cluster:
        kubectl_dir = os.path.dirname(clusterlib.component_bin("kubernetes", cluster["version"], "kubectl"))
        env = kindlib.podman_env(base=dict(env, PATH=os.pathsep.join([env["PATH"], kubectl_dir])))
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The built artifact installed into an empty home as README's Install section says."""
    work = tmp_path_factory.mktemp("user")
    home, build = work / "home", work / "build"
    home.mkdir()
    res = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(build),
                          ROOT], capture_output=True, text=True, check=False, env=user_env(home))
    assert res.returncode == 0, res.stdout + res.stderr
    (artifact,) = list(build.iterdir())
    res = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", str(artifact)],
                         capture_output=True, text=True, check=False, env=user_env(home), cwd=str(work))
    assert res.returncode == 0, res.stdout + res.stderr
    collection = home / ".ansible" / "collections" / "ansible_collections" / "dra" / "admin"
    assert (collection / "MANIFEST.json").exists() and (collection / "inventory" / "example.yml").exists()
    # kubernetes.core from the ansible package, not fetched (no network here) and not copied.
    assert "kubernetes.core" in res.stdout and not (collection.parent.parent / "kubernetes").exists()
    return {"home": home, "work": work, "collection": collection}


def run_logged(argv_or_script, env, cwd, results, label):
    started = time.time()
    res = subprocess.run(["bash", "-c", argv_or_script], env=env, cwd=str(cwd), capture_output=True, text=True,
                         check=False)
    results.append((label, res.returncode, round(time.time() - started, 1)))
    print("%-100s rc=%d %.1fs" % (label[:100], res.returncode, time.time() - started))
    assert res.returncode == 0, "%s failed (rc %d):\n%s\n%s" % (label, res.returncode, res.stdout[-8000:],
                                                                res.stderr[-3000:])
    return res


# --- the tests -----------------------------------------------------------------------------------

def test_readme_commands_run_as_written_on_the_installed_collection(kind_cluster, installed):
    home, work = installed["home"], installed["work"] / "site"
    work.mkdir()
    (home / ".kube").mkdir(exist_ok=True)
    shutil.copy(kind_cluster["kubeconfig"], str(home / ".kube" / "config"))
    env = user_env(home, kind_cluster)
    worker = kind_cluster["nodes"][1]
    copy_block, commands = shell_blocks(readme_section(open(os.path.join(ROOT, "README.md")).read(), SECTION))
    results = []
    for command in copy_block:
        run_logged(command, env, work, results, command)
    example = (work / "my-cluster.yml").read_text()
    assert example == (installed["collection"] / "inventory" / "example.yml").read_text()
    inventory = user_inventory(example, kind_cluster["nodes"], kindlib.driver_image(kind_cluster["versions"]),
                               str(work / "rules"))
    (work / "my-cluster.yml").write_text(inventory)
    exports = []
    for command in commands:
        if command.startswith("export "):
            exports.append(command)
            continue
        mine = command.replace(EXAMPLE_NODE, worker)
        # One line each, as a user types them: a trailing comment ends its own line only.
        res = run_logged("\n".join(["set -e"] + exports + [mine]), env, work, results, mine)
        if mine.startswith("ansible-playbook"):
            recap = res.stdout[res.stdout.rfind("PLAY RECAP"):]
            assert "PLAY RECAP" in res.stdout and not re.search(r"(failed|unreachable)=[1-9]", recap), \
                res.stdout[-4000:]
    print("\n".join("%s: rc=%d in %.1fs" % r for r in results))
    assert len(results) == len(copy_block) + len(commands) - len(exports)


def service_account_token(cluster, env):
    """A token of a cluster-admin ServiceAccount: what an AWX Kubernetes credential holds."""
    kubectl = ["kubectl", "--kubeconfig", cluster["kubeconfig"]]
    for args in (["create", "serviceaccount", "awx", "-n", "kube-system"],
                 ["create", "clusterrolebinding", "awx-admin", "--clusterrole=cluster-admin",
                  "--serviceaccount=kube-system:awx"]):
        res = subprocess.run(kubectl + args, env=env, capture_output=True, text=True, check=False)
        assert res.returncode == 0 or "already exists" in res.stderr, res.stderr
    res = subprocess.run(kubectl + ["create", "token", "awx", "-n", "kube-system", "--duration=1h"], env=env,
                         capture_output=True, text=True, check=True)
    return res.stdout.strip()


AWX_READ_ONLY = [
    ("health", "playbooks/health.yml", {}),
    ("upgrade_check", "playbooks/upgrade_check.yml", {"dra_upgrade_target": "v1.37", "dra_upgrade_fail_on": []}),
    ("device_maintenance", "playbooks/device_maintenance.yml",
     {"dra_device_maintenance_driver": "gpu.example.com", "dra_device_maintenance_state": "dry_run",
      "dra_device_maintenance_effect": "NoExecute"}),
]


def test_read_only_job_templates_run_as_awx_runs_them(kind_cluster, installed, tmp_path):
    env = user_env(installed["home"], kind_cluster)
    config = yaml.safe_load(open(kind_cluster["kubeconfig"]))
    cluster_entry = config["clusters"][0]["cluster"]
    token = service_account_token(kind_cluster, env)
    templates = yaml.safe_load(open(os.path.join(ROOT, "playbooks", "awx_configure.yml")))[0]
    task = next(t for t in templates["tasks"] if "awx.awx.job_template" in t)
    by_name = {t["name"]: t for t in task["vars"]["dra_awx_job_templates"]}
    timings = {}
    for name, playbook, answers in AWX_READ_ONLY:
        assert by_name[name]["playbook"] == playbook
        data = tmp_path / name
        project = data / "project"
        shutil.copytree(str(installed["collection"]), str(project))
        (data / "inventory").mkdir()
        (data / "inventory" / "hosts.yml").write_text(user_inventory(
            (project / "inventory" / "example.yml").read_text(), kind_cluster["nodes"],
            kindlib.driver_image(kind_cluster["versions"]), str(tmp_path / "rules")))
        (data / "env").mkdir()
        ca = data / "env" / "ca.crt"
        ca.write_bytes(base64.b64decode(cluster_entry["certificate-authority-data"]))
        home = tmp_path / ("home-" + name)
        home.mkdir()
        # The job's environment: the EE's collections, an empty home, the credential's injection; nothing else
        # (ansible-runner adds its own settings, as in AWX).
        envvars = {"ANSIBLE_COLLECTIONS_PATH": str(installed["home"] / ".ansible" / "collections"),
                   "K8S_AUTH_HOST": cluster_entry["server"], "K8S_AUTH_API_KEY": token,
                   "K8S_AUTH_VERIFY_SSL": "True", "K8S_AUTH_SSL_CA_CERT": str(ca)}
        (data / "env" / "envvars").write_text(yaml.safe_dump(envvars))
        (data / "env" / "extravars").write_text(yaml.safe_dump(answers))
        started = time.time()
        res = subprocess.run([os.path.join(BIN, "ansible-runner"), "run", str(data), "-p", playbook, "--ident", name],
                             env={"PATH": env["PATH"], "HOME": str(home), "LANG": "C.UTF-8"},
                             capture_output=True, text=True, check=False)
        timings[name] = round(time.time() - started, 1)
        artifacts = data / "artifacts" / name
        status = (artifacts / "status").read_text().strip() if (artifacts / "status").exists() else "none"
        stdout = (artifacts / "stdout").read_text() if (artifacts / "stdout").exists() else res.stdout
        assert res.returncode == 0 and status == "successful", "%s: %s rc=%d\n%s\n%s" % (
            name, status, res.returncode, stdout[-6000:], res.stderr[-2000:])
        assert "failed=0" in stdout and not (home / ".kube").exists()
    print("ansible-runner times: %s" % json.dumps(timings))
