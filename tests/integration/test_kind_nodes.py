"""Real nodes: one kind cluster on podman per pinned Kubernetes version.

The fixture brings up a kind cluster of its own (hack/cluster/kind-up: node images built
here, real kubelets and containerd with CDI) and deletes it afterwards
(hack/cluster/kind-down). The collection's driver role installs the dra-example-driver
image built here; a pod with a template claim then runs a real container, which must see
the device the driver injected through CDI.

Not part of `make integration` (it needs podman and the kind build): `make integration-kind`.
A host where kind cannot run fails these tests; nothing is skipped.
"""
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "hack", "cluster"))
import clusterlib  # noqa: E402
import kindlib  # noqa: E402
from dra_objects import DRIVER, claim_template  # noqa: E402
from kube import wait_for  # noqa: E402

VERSIONS = clusterlib.supported_k8s_versions()
DRIVER_NAMESPACE = "dra-system"


def wait_until(probe, timeout, what, interval=1.0):
    """kube.wait_for (the one wait helper of tests, bench and hack/); a failing probe fails at once."""
    return wait_for(probe, timeout, what, interval, retry_on=())


class KindCluster:
    def __init__(self, name, version, workers):
        self.name = name
        self.version = version
        self.versions = clusterlib.load_versions()
        st = clusterlib.cluster_state(name)
        self.kubeconfig = st["kubeconfig"]
        self.nodes = kindlib.node_names(name, workers)
        bin_dir = os.path.dirname(clusterlib.component_bin("kubernetes", version, "kubectl"))
        self.env = kindlib.podman_env(base=dict(
            os.environ, K8S_AUTH_KUBECONFIG=self.kubeconfig, KUBECONFIG=self.kubeconfig,
            PATH=os.pathsep.join([bin_dir, os.path.dirname(sys.executable), os.environ["PATH"]]),
            ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
            ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".tmp", "collections")))

    def kubectl(self, *args, stdin=None, check=True):
        res = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig] + list(args), env=self.env, input=stdin,
                             capture_output=True, text=True, check=False)
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {res.stderr}")
        return res

    def get_json(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, docs):
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def on_node(self, node, *cmd):
        """Run a command inside a node container (as `podman exec`)."""
        return subprocess.run(["podman", "exec", node] + list(cmd), env=self.env, capture_output=True, text=True,
                              check=False)

    @property
    def resource_version(self):
        group = json.loads(self.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
        return group["preferredVersion"]["version"]

    def fresh_namespace(self, name):
        """Create the namespace and wait for its default ServiceAccount (pods are admitted from then on)."""
        self.kubectl("create", "namespace", name)
        wait_until(lambda: self.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
                   60, f"the default ServiceAccount of {name}")

    def claim_pod(self, name, namespace, command, node=None):
        """A pod of the node images' busybox image using one device through the template claim "one-gpu"."""
        spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "ctr", "image": kindlib.cluster_images(self.versions, self.version)[
                    "local-path-helper"], "imagePullPolicy": "IfNotPresent", "command": command,
                    "resources": {"claims": [{"name": "gpu"}]}}]}
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}

    @staticmethod
    def local_inventory(tmp_path):
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
        return str(inventory)

    def run_module(self, module, args, tmp_path):
        """One module ad hoc on localhost against the cluster; its result dict."""
        env = dict(self.env, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
        res = subprocess.run(["ansible", "localhost", "-i", self.local_inventory(tmp_path), "-m", module,
                              "-a", json.dumps(args)], env=env, capture_output=True, text=True, cwd=ROOT, check=False)
        try:
            return json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
        except (ValueError, KeyError, IndexError):
            raise AssertionError(f"cannot read result of {module}: rc={res.returncode}\n{res.stdout}\n{res.stderr}")

    def role_command(self, role, tmp_path, extra_vars):
        """ansible-playbook argv running one role on localhost with extra_vars."""
        playbook = tmp_path / "role.yml"
        playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n  roles:\n    - {role}\n")
        vars_file = tmp_path / "vars.json"
        vars_file.write_text(json.dumps(extra_vars))
        return ["ansible-playbook", "-i", self.local_inventory(tmp_path), str(playbook), "-e", f"@{vars_file}"]

    def run_role(self, role, tmp_path, extra_vars):
        return subprocess.run(self.role_command(role, tmp_path, extra_vars), env=self.env, capture_output=True,
                              text=True, cwd=ROOT, check=False)


@pytest.fixture(scope="module", params=VERSIONS)
def kind_cluster(request):
    version = request.param
    name = "itk-%d-%d" % (int(version.split(".")[1]), os.getpid())
    workers = 2
    # DRA is switched on at creation here (on 1.33 it is off by default): these tests are about the
    # nodes, not about turning DRA on (playbooks/site.yml does that on `make demo`).
    up = [sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-up"), "--name", name, "--k8s-version", version,
          "--workers", str(workers), "--enable-dra"]
    started = time.time()
    res = subprocess.run(up, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                       capture_output=True, check=False)
        raise RuntimeError(f"kind cluster {version} did not come up:\n{res.stdout}\n{res.stderr}")
    print(f"\nkind cluster {name} up in {time.time() - started:.0f}s")
    try:
        yield KindCluster(name, version, workers)
    finally:
        down = subprocess.run([sys.executable, os.path.join(ROOT, "hack", "cluster", "kind-down"), "--name", name],
                              capture_output=True, text=True, check=False)
        assert down.returncode == 0, f"kind-down left something behind:\n{down.stdout}\n{down.stderr}"


@pytest.fixture(scope="module")
def driver(kind_cluster, tmp_path_factory):
    """The example driver installed by the collection's driver role (its own DaemonSet template)."""
    c = kind_cluster
    res = c.run_role("dra.admin.driver", tmp_path_factory.mktemp("driver"), {
        "dra_driver_name": DRIVER, "dra_driver_namespace": DRIVER_NAMESPACE,
        "dra_driver_image": kindlib.driver_image(c.versions), "dra_driver_command": ["dra-example-kubeletplugin"],
        "dra_driver_wait_timeout": 240})
    assert res.returncode == 0, f"driver role failed:\n{res.stdout[-6000:]}\n{res.stderr[-2000:]}"
    return DRIVER


def running_pod(c, namespace, name):
    current = c.get_json("pod", name, "-n", namespace)
    return current if current["status"].get("phase") == "Running" else None


def test_pod_with_template_claim_sees_its_cdi_device(kind_cluster, driver):
    c = kind_cluster
    ns = "itk-cdi"
    c.fresh_namespace(ns)
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu"),
             c.claim_pod("uses-gpu", ns, ["sh", "-c", "env | sort; sleep 3600"])])

    running = wait_until(lambda: running_pod(c, ns, "uses-gpu"), 180, "the pod to run")
    node = running["spec"]["nodeName"]
    assert node in c.nodes[1:], f"pod on {node}, expected a worker of {c.nodes}"
    claim_name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = c.get_json(f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns)
    uid = claim["metadata"]["uid"]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [r["driver"] for r in results] == [DRIVER]
    device = results[0]["device"]
    assert results[0]["pool"] == node

    # The container's environment comes from the CDI spec the driver wrote for this claim.
    env_key = "GPU_DEVICE_" + "".join(ch if ch.isalnum() else "_" for ch in device).upper()

    def environment():
        out = c.kubectl("logs", "uses-gpu", "-n", ns, check=False).stdout
        return out if "KUBERNETES_NODE_NAME" in out else None

    logs = wait_until(environment, 60, "the container's environment")
    env = dict(line.split("=", 1) for line in logs.splitlines() if "=" in line)
    assert env.get(f"{env_key}_RESOURCE_CLAIM") == uid, f"no {env_key}_RESOURCE_CLAIM={uid} in:\n{logs}"
    assert env.get("KUBERNETES_NODE_NAME") == node
    assert env.get("DRA_RESOURCE_DRIVER_NAME") == DRIVER

    specs = cdi_specs_naming(c, node, uid)
    assert specs, f"no CDI spec on {node} names claim {uid}"

    # Deleting the pod deletes its claim, and the driver removes the claim's CDI spec from the node.
    c.kubectl("delete", "pod", "uses-gpu", "-n", ns, "--wait=true", "--timeout=120s")
    wait_until(lambda: c.kubectl("get", f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns,
                                 check=False).returncode != 0, 120, f"claim {claim_name} to be deleted")
    wait_until(lambda: not cdi_specs_naming(c, node, uid), 60, f"the CDI spec of claim {uid} to leave {node}")
    c.kubectl("delete", "namespace", ns, "--wait=false")


def live_driver_pods(c, node):
    pods = c.get_json("pods", "-n", DRIVER_NAMESPACE, "--field-selector", f"spec.nodeName={node}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def restart_count(pod):
    return sum(s.get("restartCount", 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])


def is_ready(pod):
    return any(cond.get("type") == "Ready" and cond.get("status") == "True"
               for cond in (pod.get("status") or {}).get("conditions") or [])


def node_slices(c, node):
    api = c.resource_version
    return [s for s in c.get_json(f"resourceslices.{api}.resource.k8s.io")["items"]
            if s["spec"].get("nodeName") == node and s["spec"].get("driver") == DRIVER]


def test_liveness_probe_restarts_a_plugin_that_stopped_answering(kind_cluster, driver):
    """SIGSTOP of the plugin process: its gRPC health service stops answering, the kubelet's liveness probe
    fails and the kubelet restarts the container; the restarted plugin publishes the node's slices again
    (they are deleted while it is stopped, so only the new process can have written them)."""
    c = kind_cluster
    node = c.nodes[-1]
    pod = wait_until(lambda: [p for p in live_driver_pods(c, node) if is_ready(p)], 120,
                     f"a ready driver pod on {node}")[0]
    uid, before = pod["metadata"]["uid"], restart_count(pod)
    stop = c.on_node(node, "sh", "-c", "kill -STOP $(crictl inspect -o go-template --template '{{.info.pid}}' "
                                       f"$(crictl ps -q --name '^plugin$' --label io.kubernetes.pod.uid={uid}))")
    assert stop.returncode == 0, f"could not stop the plugin: {stop.stdout}{stop.stderr}"
    api = c.resource_version
    for s in node_slices(c, node):
        c.kubectl("delete", f"resourceslices.{api}.resource.k8s.io", s["metadata"]["name"], "--wait=true")

    def restarted():
        same = [p for p in live_driver_pods(c, node) if p["metadata"]["uid"] == uid]
        return same[0] if same and restart_count(same[0]) > before and is_ready(same[0]) else None
    # The role's default probe: every 10 s, 3 failures, 5 s timeout.
    restarted_pod = wait_until(restarted, 240, f"the kubelet to restart the stopped plugin on {node}")
    events = c.get_json("events", "-n", DRIVER_NAMESPACE, "--field-selector", f"involvedObject.uid={uid}")["items"]
    assert any(e.get("reason") == "Unhealthy" and "Liveness probe failed" in e.get("message", "") for e in events), \
        [(e.get("reason"), e.get("message")) for e in events]
    assert restarted_pod["metadata"]["uid"] == uid
    wait_until(lambda: node_slices(c, node), 120, f"the restarted plugin to publish {node}'s slices")


def cdi_specs_naming(c, node, uid):
    out = c.on_node(node, "sh", "-c", f"grep -l {uid} /var/run/cdi/* 2>/dev/null || true")
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_drain_unprepares_claims_before_the_driver_leaves_then_returns_to_service(kind_cluster, driver, tmp_path):
    """dra_node_drain on a real node: the claim pod's container is stopped and its claim unprepared by the
    driver (its CDI spec leaves the node) while the driver still runs there; only then is the driver taken
    off; state=in_service brings the driver back, its slices published, and uncordons."""
    c = kind_cluster
    node = c.nodes[-1]
    ns = "itk-drain"
    c.fresh_namespace(ns)
    api = c.resource_version
    template = c.claim_pod("trainer", ns, ["sleep", "3600"], node=node)
    template["metadata"] = {"labels": {"app": "trainer"}}
    template["spec"]["restartPolicy"] = "Always"  # a Deployment's pods (an unmanaged pod is refused by the drain)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": ns},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer"}},
                           "template": {"metadata": template["metadata"], "spec": template["spec"]}}}
    c.apply([claim_template(api, ns, "one-gpu"), deployment])

    def running_trainer():
        pods = c.get_json("pods", "-n", ns, "-l", "app=trainer")["items"]
        return [p for p in pods if p["status"].get("phase") == "Running"]
    running = wait_until(running_trainer, 180, "the claim pod to run")[0]
    pod_name = running["metadata"]["name"]
    claim_name = running["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim_uid = c.get_json(f"resourceclaims.{api}.resource.k8s.io", claim_name, "-n", ns)["metadata"]["uid"]
    assert cdi_specs_naming(c, node, claim_uid), f"no CDI spec on {node} for claim {claim_uid}"
    driver_pods = [p["metadata"]["uid"] for p in live_driver_pods(c, node)]
    assert len(driver_pods) == 1

    driver_daemonsets = [f"{DRIVER_NAMESPACE}/gpu-example-com-kubeletplugin"]
    drained = c.run_module("dra.admin.dra_node_drain", {
        "node": node, "driver_daemonsets": driver_daemonsets, "timeout": 240}, tmp_path)
    assert not drained.get("failed"), json.dumps(drained, indent=1)[:4000]
    assert drained["claim_pods"] == [f"{ns}/{pod_name}"] and drained["driver_pods"], drained
    # The evicted pod and its template claim are gone; the driver unprepared the claim on the node (its CDI
    # spec is gone) before it was taken off. The replacement pod waits: the node is cordoned.
    assert c.kubectl("get", "pod", pod_name, "-n", ns, check=False).returncode != 0
    assert not cdi_specs_naming(c, node, claim_uid), f"claim {claim_uid} still prepared on {node}"
    assert live_driver_pods(c, node) == []
    state = c.get_json("node", node)
    assert state["spec"].get("unschedulable") is True

    back = c.run_module("dra.admin.dra_node_drain", {
        "node": node, "state": "in_service", "driver_daemonsets": driver_daemonsets, "drivers": [DRIVER],
        "timeout": 240}, tmp_path)
    assert not back.get("failed") and back["uncordon"] is True, json.dumps(back, indent=1)[:4000]
    assert [p for p in live_driver_pods(c, node) if is_ready(p)]
    assert node_slices(c, node)
    assert not c.get_json("node", node)["spec"].get("unschedulable")
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_seamless_upgrade_hands_over_while_a_new_claim_pod_starts(kind_cluster, driver, tmp_path):
    """The driver role moves the driver to a second tag built here. On kubelets >= 1.33 the role rolls out
    with maxSurge 1 / maxUnavailable 0: old and new plugin run side by side on a node, and a claim pod
    started during the rollout on that node is prepared (no FailedPrepareDynamicResources event)."""
    c = kind_cluster
    node = c.nodes[-1]
    ns = "itk-upgrade"
    c.fresh_namespace(ns)
    api = c.resource_version
    c.apply([claim_template(api, ns, "one-gpu")])
    old = [p["metadata"]["uid"] for p in live_driver_pods(c, node)]
    # As a user would: the new tag is loaded into the nodes (`kind load image-archive`), nothing is pulled.
    new_image = kindlib.load_driver_upgrade_image(c.versions, c.name)
    command = c.role_command("dra.admin.driver", tmp_path, {
        "dra_driver_name": DRIVER, "dra_driver_namespace": DRIVER_NAMESPACE, "dra_driver_image": new_image,
        "dra_driver_command": ["dra-example-kubeletplugin"], "dra_driver_wait_timeout": 240,
        "dra_driver_seamless_upgrade": "required"})
    role = subprocess.Popen(command, env=c.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        def both_plugins():
            pods = live_driver_pods(c, node)
            new = [p for p in pods if p["metadata"]["uid"] not in old]
            return (pods, new) if new and any(p["metadata"]["uid"] in old for p in pods) else None
        pods, new = wait_until(both_plugins, 240, f"a new driver pod beside the old one on {node}", interval=0.2)
        assert [ctr["image"] for ctr in new[0]["spec"]["containers"]] == [new_image]
        c.apply([c.claim_pod("during-upgrade", ns, ["sh", "-c", "env | sort; sleep 3600"], node=node)])
        out = role.communicate(timeout=600)[0]
    finally:
        if role.poll() is None:
            role.kill()
    assert role.returncode == 0, f"driver role failed:\n{out[-6000:]}"
    running = wait_until(lambda: running_pod(c, ns, "during-upgrade"), 180,
                         "the claim pod started during the upgrade to run")
    events = c.get_json("events", "-n", ns)["items"]
    failed = [e.get("message") for e in events if e.get("reason") in ("FailedPrepareDynamicResources",)]
    assert not failed, failed
    assert running["status"]["resourceClaimStatuses"], running["status"]
    after = live_driver_pods(c, node)
    assert [p["metadata"]["uid"] for p in after if p["metadata"]["uid"] in old] == []
    assert [ctr["image"] for p in after for ctr in p["spec"]["containers"]] == [new_image]
    c.kubectl("delete", "namespace", ns, "--wait=false")
