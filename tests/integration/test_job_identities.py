"""The jobs' identities on the real API server: each AWX job template's playbook runs with the identity its template
names, and that identity is refused what it must not do.

Role dra.admin.rbac (dra_rbac_jobs_namespace) makes the identities' ServiceAccounts, their token Secrets and their
ClusterRoles; the token controller fills each Secret. Each playbook then runs as AWX runs it with a Kubernetes
bearer token credential: only K8S_AUTH_HOST, K8S_AUTH_API_KEY (that Secret's token), K8S_AUTH_VERIFY_SSL and
K8S_AUTH_SSL_CA_CERT in the environment, an empty home, no kubeconfig anywhere, the template's extra_vars. The report
templates (health, upgrade_check, node_doctor: the reader) must succeed with no request refused but the kubelet's
/configz through nodes/proxy, which the reader is not given; then `kubectl auth can-i` with each token, and real
writes the reader and the canary must be refused (a DeviceTaintRule, its namespace's admin-access label).
"""
import base64
import json
import os
import re
import subprocess

import pytest
import yaml

from cluster_harness import recap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOBS_NS = "it-jobs"
CANARY_NS = "it-jobs-canary"
KWOK_TOLERATION = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
NODE_DOCTOR_INVENTORY = """
all:
  vars:
    dra_driver_name: gpu.example.com
  children:
    k8s_api:
      hosts:
        localhost: {ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}"}
    dra_nodes:
      hosts:
        %(node)s:
          ansible_connection: local
          ansible_python_interpreter: "{{ ansible_playbook_python }}"
          dra_node_doctor_node_name: %(node)s
          dra_node_doctor_kubelet_root_dir: %(root)s/kubelet
          dra_node_doctor_cdi_spec_dirs: [%(root)s/cdi]
          dra_node_doctor_crictl: ""
"""


def job_templates():
    play = yaml.safe_load(open(os.path.join(ROOT, "playbooks", "awx_configure.yml")))[0]
    task = next(t for t in play["tasks"] if "awx.awx.job_template" in t)
    return {t["name"]: t for t in task["vars"]["dra_awx_job_templates"]}


@pytest.fixture(scope="module")
def identities(cluster, tmp_path_factory):
    """Role rbac with the jobs' namespace (twice: the second run changes nothing); each identity's token."""
    tmp = tmp_path_factory.mktemp("jobs")
    settings = {"dra_rbac_jobs_namespace": JOBS_NS, "dra_canary_namespace": CANARY_NS}
    try:
        outputs = []
        for run in ("first", "second"):
            res = cluster.run_role("dra.admin.rbac", tmp, settings)
            assert res.returncode == 0, res.stdout[-4000:]
            counts = recap(res.stdout)
            assert counts["failed"] == 0 and (run == "first" or counts["changed"] == 0), (run, res.stdout[-3000:])
            outputs.append(res.stdout + res.stderr)

        def token(identity):
            secret = cluster.get_json("secret", "-n", JOBS_NS, "dra-job-%s-token" % identity)
            data = (secret.get("data") or {}).get("token")
            return base64.b64decode(data).decode() if data else None

        tokens = {}
        for identity in ("reader", "canary", "devices", "maintenance"):
            tokens[identity] = cluster.wait_until(lambda i=identity: token(i), 60, "the token of dra-job-" + identity)
        # The second run read the filled Secrets back: no token in what the role printed.
        assert not [i for i, t in tokens.items() if any(t in out for out in outputs)]
        yield {"tokens": tokens, "tmp": tmp}
    finally:
        cluster.kubectl("delete", "namespace", JOBS_NS, CANARY_NS, "--wait=false", "--ignore-not-found", check=False)
        cluster.kubectl("delete", "clusterrole,clusterrolebinding", "-l", "dra.admin/persona in "
                        "(job-reader,job-canary,job-devices,job-maintenance)", check=False)


def server_and_ca(cluster, directory):
    config = yaml.safe_load(open(cluster.kubeconfig))["clusters"][0]["cluster"]
    ca = directory / "ca.crt"
    if "certificate-authority-data" in config:
        ca.write_bytes(base64.b64decode(config["certificate-authority-data"]))
    else:
        ca.write_bytes(open(config["certificate-authority"], "rb").read())
    return config["server"], str(ca)


def run_as_awx(cluster, identities, identity, playbook, extra_vars, inventory=None):
    """The playbook as an AWX job with the identity's bearer token credential: no kubeconfig, an empty home."""
    tmp = identities["tmp"]
    server, ca = server_and_ca(cluster, tmp)
    home = tmp / ("home-%s-%s" % (identity, os.path.basename(playbook)))
    home.mkdir(exist_ok=True)
    env = dict((k, v) for k, v in cluster.env.items() if k not in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"))
    env.update(HOME=str(home), K8S_AUTH_HOST=server, K8S_AUTH_API_KEY=identities["tokens"][identity],
               K8S_AUTH_VERIFY_SSL="True", K8S_AUTH_SSL_CA_CERT=ca)
    answers = tmp / ("vars-%s.json" % os.path.basename(playbook))
    answers.write_text(json.dumps(extra_vars))
    cmd = ["ansible-playbook", "-i", inventory or os.path.join(ROOT, "inventory", "kwok.yml"),
           os.path.join(ROOT, playbook), "-e", "@%s" % answers]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    assert not (home / ".kube").exists()
    return res


def refused(output):
    """The requests the API server refused, as the messages name them."""
    return re.findall(r'cannot (\w+) resource "([^"]+)"', " ".join(output.split()))


def test_report_templates_run_with_the_reader(cluster, identities, tmp_path):
    templates = job_templates()
    reports = sorted(name for name, t in templates.items() if t["identity"] == "reader")
    assert reports == ["health", "node_doctor", "upgrade_check"]
    node = cluster.get_json("nodes")["items"][0]["metadata"]["name"]
    for directory in ("kubelet", "cdi"):
        (tmp_path / directory).mkdir()
    inventory = tmp_path / "node-doctor.yml"
    inventory.write_text(NODE_DOCTOR_INVENTORY % {"node": node, "root": tmp_path})
    answers = {"health": {}, "upgrade_check": {"dra_upgrade_target": "v1.%d" % min(cluster.minor + 1, 38)},
               "node_doctor": {}}
    for name in reports:
        template = templates[name]
        res = run_as_awx(cluster, identities, "reader", template["playbook"],
                         dict(template.get("extra_vars") or {}, **answers[name]),
                         str(inventory) if name == "node_doctor" else None)
        counts = recap(res.stdout, node if name == "node_doctor" else "localhost")
        assert res.returncode == 0 and counts["failed"] == 0 and counts["ok"] > 0, (name, res.stdout[-4000:])
        # Nothing refused but the kubelets' /configz through nodes/proxy (the upgrade check reports them unread).
        assert set(refused(res.stdout)) <= {("get", "nodes/proxy")}, (name, refused(res.stdout))
        print("%s as dra-job-reader: %s" % (name, counts))
    health = run_as_awx(cluster, identities, "reader", "playbooks/health.yml", {})
    assert "DRA health:" in health.stdout and "slices (" in health.stdout


def test_canary_and_device_templates_run_with_their_identities(cluster, identities):
    templates = job_templates()
    canary = templates["canary"]
    assert canary["identity"] == "canary"
    # The role made the canary's namespace (a privileged run); the template's job leaves it alone.
    res = run_as_awx(cluster, identities, "canary", canary["playbook"], dict(
        canary["extra_vars"], dra_canary_namespace=CANARY_NS, dra_canary_tolerations=KWOK_TOLERATION,
        dra_canary_prepare_timeout=5, dra_canary_fail=False))
    assert res.returncode == 0 and recap(res.stdout)["failed"] == 0, res.stdout[-4000:]
    assert refused(res.stdout) == [] and "allocation" in res.stdout, res.stdout[-3000:]
    # Every probe's objects are deleted again.
    assert cluster.wait_until(lambda: not cluster.get_json("pods,resourceclaimtemplates", "-n", CANARY_NS)["items"],
                              60, "the canary's objects gone")
    device = templates["device_maintenance"]
    assert device["identity"] == "devices"
    pool = cluster.get_json("nodes")["items"][0]["metadata"]["name"]
    for state in ("tainted", "absent"):
        res = run_as_awx(cluster, identities, "devices", device["playbook"], {
            "dra_device_maintenance_driver": "gpu.example.com", "dra_device_maintenance_pool": pool,
            "dra_device_maintenance_state": state, "dra_device_maintenance_effect": "NoSchedule"})
        assert res.returncode == 0 and recap(res.stdout)["failed"] == 0, (state, res.stdout[-4000:])
        assert refused(res.stdout) == [] and recap(res.stdout)["changed"] >= 1, (state, res.stdout[-3000:])


# (identity, verb, resource[/subresource], namespace or "", allowed); kubectl auth can-i reads "a/b" as resource a
# named b, so a subresource goes to --subresource.
CAN_I = [
    ("reader", "list", "resourceslices.resource.k8s.io", "", True),
    ("reader", "list", "pods", "", True),
    ("reader", "create", "devicetaintrules.resource.k8s.io", "", False),
    ("reader", "create", "pods", "default", False),
    ("reader", "create", "pods/eviction", "default", False),
    ("reader", "patch", "nodes", "", False),
    ("reader", "get", "secrets", "kube-system", False),
    ("reader", "list", "configmaps", "kube-system", False),
    ("reader", "get", "nodes/proxy", "", False),
    ("reader", "delete", "resourceclaims.resource.k8s.io", "default", False),
    ("canary", "create", "pods", CANARY_NS, True),
    ("canary", "create", "resourceclaimtemplates.resource.k8s.io", CANARY_NS, True),
    ("canary", "create", "pods", "default", False),
    ("canary", "delete", "resourceclaims.resource.k8s.io", "default", False),
    ("canary", "patch", "namespaces", CANARY_NS, False),
    ("canary", "update", "namespaces", CANARY_NS, False),
    ("canary", "create", "devicetaintrules.resource.k8s.io", "", False),
    ("devices", "create", "devicetaintrules.resource.k8s.io", "", True),
    ("devices", "create", "pods/eviction", "default", True),
    ("devices", "patch", "nodes", "", False),
    ("devices", "delete", "pods", "default", False),
    ("maintenance", "patch", "nodes", "", True),
    ("maintenance", "create", "pods/eviction", "default", True),
    ("maintenance", "create", "devicetaintrules.resource.k8s.io", "", False),
    ("maintenance", "delete", "nodes", "", False),
]


def as_identity(cluster, identities, identity):
    server, ca = server_and_ca(cluster, identities["tmp"])
    return ["kubectl", "--kubeconfig", os.devnull, "--server", server, "--certificate-authority", ca,
            "--token", identities["tokens"][identity]]


def test_each_identity_is_refused_what_it_must_not_do(cluster, identities):
    wrong = []
    for identity, verb, resource, namespace, allowed in CAN_I:
        kind, sub = (resource.split("/", 1) + [""])[:2]
        cmd = as_identity(cluster, identities, identity) + ["auth", "can-i", verb, kind] + (
            ["--subresource", sub] if sub else []) + (["-n", namespace] if namespace else [])
        res = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, check=False)
        answer = res.stdout.strip()
        assert answer in ("yes", "no"), (cmd[-4:], res.stdout, res.stderr)
        if (answer == "yes") != allowed:
            wrong.append((identity, verb, resource, namespace, answer))
        print("%-11s %-6s %-40s %-16s %s" % (identity, verb, resource, namespace or "(cluster)", answer))
    assert not wrong, wrong


def test_real_writes_are_refused(cluster, identities):
    # Authorization comes before the body is read: a refused create stores nothing, whatever its spec.
    claim = {"apiVersion": "resource.k8s.io/%s" % cluster.resource_version, "kind": "ResourceClaim",
             "metadata": {"name": "it-jobs-reader-write", "namespace": "default"}, "spec": {}}
    res = subprocess.run(as_identity(cluster, identities, "reader") + ["create", "-f", "-"],
                         input=json.dumps(claim), env=cluster.env, capture_output=True, text=True, check=False)
    assert res.returncode != 0 and "forbidden" in res.stderr.lower(), (res.stdout, res.stderr)
    assert cluster.kubectl("get", "resourceclaims", "-n", "default", "it-jobs-reader-write",
                           check=False).returncode != 0
    # The canary may not give its own namespace admin access to every device.
    for key in ("resource.kubernetes.io/admin-access", "resource.k8s.io/admin-access"):
        res = subprocess.run(as_identity(cluster, identities, "canary") + [
            "label", "namespace", CANARY_NS, "%s=true" % key], env=cluster.env, capture_output=True, text=True,
            check=False)
        assert res.returncode != 0 and "forbidden" in res.stderr.lower(), (key, res.stdout, res.stderr)
    labels = cluster.get_json("namespace", CANARY_NS)["metadata"].get("labels") or {}
    assert not [k for k in labels if k.endswith("/admin-access")], labels
